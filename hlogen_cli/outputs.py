"""Where `hlogen run` saves results (--output) and arguments (--save-inputs): .npz and .npy
files that numpy reads back, and --input reads back bit for bit."""
from __future__ import annotations

import io

import click
import numpy as np

from hlogen.errors import InputError
from hlogen.files import Output


def output_plan(specs, read: list):
    """('npz', Output) or ('npy', [Output or None per result]) or None, checked before
    anything is read (hlogen.files' rules; never one of the files `read`)."""
    if not specs:
        return None
    if len(specs) == 1 and specs[0].endswith(".npz") and not specs[0].startswith("@"):
        return ("npz", Output(specs[0], "--output", inputs=read))
    paths = []
    for spec in specs:
        if spec == "-":
            paths.append(None)
        elif spec == "@-":
            raise InputError("--output @-: the results are printed on standard output already; "
                             "save them to files (@out.npy, out.npz), or give - to skip one")
        elif spec.startswith("@") and len(spec) > 1:
            paths.append(Output(spec[1:], "--output", inputs=read))
        else:
            raise InputError(f"--output {spec!r}: use out.npz (every result), or one @out.npy per "
                             f"result (- skips one)")
    return ("npy", paths)


def check_output_count(plan, n_results: int) -> None:
    if plan and plan[0] == "npy" and len(plan[1]) > n_results:
        raise InputError(f"--output: {len(plan[1])} given, the computation has {n_results} "
                         f"result(s)")


def save_outputs(plan, flat, replicas: list[int] | None = None) -> None:
    """Writes the results as `plan` says; `replicas`: the replicas whose results lie
    along the leading dimension of each (None for one replica)."""
    if plan is None:
        return
    kind, where = plan
    of = (f" of replica{'s' if len(replicas) > 1 else ''} {', '.join(map(str, replicas))} "
          f"(along the first dimension)" if replicas else "")
    if kind == "npz":
        save_npz(where, {f"result_{i}": a for i, a in enumerate(flat)})
        click.echo(f"saved {len(flat)} result(s){of} to {where}", err=True)
        return
    for i, path in enumerate(where):
        if path is not None:
            buffer = io.BytesIO()
            np.save(buffer, _savable(flat[i]))
            path.write(buffer.getvalue())
            click.echo(f"saved result[{i}]{of} to {path}", err=True)


def save_npz(output: Output, arrays: dict) -> None:
    """Writes `arrays` (name -> array) as one .npz, each as numpy reads it back."""
    buffer = io.BytesIO()
    np.savez(buffer, **{name: _savable(np.asarray(a)) for name, a in arrays.items()})
    output.write(buffer.getvalue())


def _savable(array: np.ndarray) -> np.ndarray:
    """`array` as numpy can read it back: an ml_dtypes type as raw bytes of its width
    (what np.save does for most of them; float8_e5m2 it would save as '<f1', which
    np.load refuses). ml_dtypes reads it: np.load(f).view(ml_dtypes.bfloat16)."""
    if array.dtype.type.__module__ == "ml_dtypes":
        return array.view(np.dtype(f"V{array.dtype.itemsize}"))
    return array
