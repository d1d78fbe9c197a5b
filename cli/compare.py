"""What `hlogen run` checks around a run: inputs against parameters, results against
expected outputs or the interpreter (--rtol/--atol), and where results are saved."""
from __future__ import annotations

import dataclasses
import io

import click
import numpy as np

import hlogen as hg
from hlogen import types as T
from hlogen.errors import InputError
from hlogen.files import Output


def shape_of(array) -> str:
    return str(hg.Shape(hg.element_type(array.dtype), array.shape))


def check_count(comp, args) -> None:
    """Missing and extra --input values, named by parameter (arg0, arg1, ... when the
    module has no names) with what each expects."""
    names, shapes = comp.parameter_names, comp.parameter_shapes
    if len(args) < len(shapes):
        missing = [f"{i} '{n}' ({s})" for i, (n, s) in enumerate(zip(names, shapes))][len(args):]
        raise InputError(f"{comp.name} takes {len(shapes)} argument(s), got {len(args)}: missing "
                         f"--input for parameter {', '.join(missing[:8])}"
                         f"{f' and {len(missing) - 8} more' if len(missing) > 8 else ''}"
                         f"{_filled_by_jax(comp)}")
    if len(args) > len(shapes):
        raise InputError(f"{comp.name} takes {len(shapes)} argument(s), got {len(args)}: "
                         f"{len(args) - len(shapes)} --input value(s) too many (the first extra "
                         f"one is {shape_of(np.asarray(args[len(shapes)]))})")


def _filled_by_jax(comp) -> str:
    """What the message of missing inputs adds about a parameter jax's own callers fill
    (`jax.global_constant`): the platform index of a multi-platform export."""
    said = ""
    for i, value in enumerate(comp.parameter_attribute("jax.global_constant")):
        if value == "_platform_index":
            said += (f"; parameter {i} '{comp.parameter_names[i]}' ({comp.parameter_shapes[i]}) "
                     f"is jax's platform index, which a multi-platform export takes first: "
                     f"the position of the platform to run as in the export's platforms (0 "
                     f"for the first), e.g. --input {comp.parameter_shapes[i].element_type.name}=0")
    return said


def check_expected_count(expected, result_leaves) -> None:
    if expected and len(expected) != len(result_leaves):
        raise InputError(f"--expected-output: the computation has {len(result_leaves)} result(s) "
                         f"({', '.join(map(str, result_leaves))}), got {len(expected)} expected "
                         f"value(s)")


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
    flat = [_savable(a) for a in flat]
    buffer = io.BytesIO()
    if kind == "npz":
        np.savez(buffer, **{f"result_{i}": a for i, a in enumerate(flat)})
        where.write(buffer.getvalue())
        click.echo(f"saved {len(flat)} result(s){of} to {where}", err=True)
        return
    for i, path in enumerate(where):
        if path is not None:
            buffer = io.BytesIO()
            np.save(buffer, flat[i])
            path.write(buffer.getvalue())
            click.echo(f"saved result[{i}]{of} to {path}", err=True)


def _savable(array: np.ndarray) -> np.ndarray:
    """`array` as numpy can read it back: an ml_dtypes type as raw bytes of its width
    (what np.save does for most of them; float8_e5m2 it would save as '<f1', which
    np.load refuses). ml_dtypes reads it: np.load(f).view(ml_dtypes.bfloat16)."""
    if array.dtype.type.__module__ == "ml_dtypes":
        return array.view(np.dtype(f"V{array.dtype.itemsize}"))
    return array


@dataclasses.dataclass
class Verdict:
    ok: bool
    max_abs: float
    max_rel: float
    mismatches: int
    total: int
    first: tuple | None = None
    got: object = None
    want: object = None
    shape_problem: str | None = None
    rtol: float = 0.0
    atol: float = 0.0

    def describe(self, other: str) -> str:
        if self.shape_problem:
            return self.shape_problem
        stats = f"max abs diff {self.max_abs:.3g}, max rel diff {self.max_rel:.3g}"
        if self.ok:
            return f"{stats}: within rtol={self.rtol:g}, atol={self.atol:g}"
        return (f"{stats}: {self.mismatches} of {self.total} element(s) differ beyond "
                f"rtol={self.rtol:g}, atol={self.atol:g}; first at {list(self.first)}: "
                f"got {self.got}, {other} {self.want}")


def compare_all(got: list, want: list, rtol: float, atol: float) -> list[Verdict]:
    return [compare(g, w, rtol, atol) for g, w in zip(got, want)]


def compare(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> Verdict:
    """Floats (and complex) within atol + rtol * |want|, NaN matching NaN; integers and
    predicates exactly."""
    got, want = np.asarray(got), np.asarray(want)
    if got.dtype != want.dtype or got.shape != want.shape:
        return Verdict(False, float("nan"), float("nan"), got.size, got.size,
                       shape_problem=f"the result is {shape_of(got)}, expected {shape_of(want)}")
    kind = T.element_type(got.dtype).kind
    if kind in (T.FLOAT, T.COMPLEX):
        g = got.astype(np.complex128 if kind == T.COMPLEX else np.float64)
        w = want.astype(g.dtype)
        with np.errstate(all="ignore"):
            diff = np.abs(g - w)
            both_nan = np.isnan(g) & np.isnan(w) if kind == T.FLOAT else \
                (np.isnan(g.real) | np.isnan(g.imag)) & (np.isnan(w.real) | np.isnan(w.imag))
            same = (g == w) | both_nan
            bad = ~same & ~(diff <= atol + rtol * np.abs(w))
            finite = np.isfinite(diff) & ~same
            max_abs = float(diff[finite].max()) if finite.any() else 0.0
            nonzero = finite & (np.abs(w) > 0)
            max_rel = float((diff[nonzero] / np.abs(w[nonzero])).max()) if nonzero.any() else 0.0
            if (finite & (w == 0)).any():  # a difference from an expected 0 is no fraction of it
                max_rel = float("inf")
            if (~same & ~np.isfinite(diff)).any():
                max_abs = max_rel = float("inf")
    else:
        bad = got != want
        wide = got.astype(np.float64) - want.astype(np.float64)
        max_abs = float(np.abs(wide).max()) if got.size else 0.0
        with np.errstate(all="ignore"):
            rel = np.abs(wide) / np.abs(want.astype(np.float64))
        max_rel = float(rel[bad & (want != 0)].max()) if (bad & (want != 0)).any() else 0.0
        if (bad & (want == 0)).any():  # (as for floats)
            max_rel = float("inf")
    verdict = Verdict(not bad.any(), max_abs, max_rel, int(bad.sum()), int(got.size),
                      rtol=rtol, atol=atol)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        verdict.first, verdict.got, verdict.want = index, got[index], want[index]
    return verdict
