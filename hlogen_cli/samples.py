"""`hlogen samples`: the sample files (samples/*.py of a clone, shipped in the package as
hlogen_cli/sample_files, or $HLOGEN_SAMPLES: completion.samples_directory), their
functions, and default inputs to run them on."""
from __future__ import annotations

import pathlib

import numpy as np

import hlogen as hg
from hlogen import types as T
from hlogen.errors import InputError
from hlogen_cli import completion, sources


def _files() -> list[pathlib.Path]:
    files = completion.sample_files()
    if not files:
        raise InputError(f"{completion.samples_directory()}: no samples here (set "
                         f"HLOGEN_SAMPLES to a folder of .py files)")
    return files


def listing() -> list[tuple[str, str]]:
    """(FILE.FUNCTION, the first line of its docstring) for every sample function."""
    rows = []
    for path in _files():
        for name, fn in sources.functions_in(str(path)).items():
            doc = (fn.__doc__ or "").strip().splitlines()
            rows.append((f"{path.stem}.{name}", doc[0] if doc else str(fn.computation.signature())))
    return rows


def find(name: str):
    """(path, function name, hg.Function) for FILE.FUNCTION, or FUNCTION when only one
    file defines it."""
    stem, _, function = name.rpartition(".")
    files = _files()
    candidates = [p for p in files if p.stem == stem] if stem else files
    if stem and not candidates:
        raise InputError(f"no sample file {stem}.py in {completion.samples_directory()}: "
                         f"hlogen samples lists them")
    found = []
    for path in candidates:
        functions = sources.functions_in(str(path))
        if function in functions:
            found.append((path, function, functions[function]))
    if not found:
        raise InputError(f"no sample named {name!r}: hlogen samples lists them")
    if len(found) > 1:
        raise InputError(f"{name!r} is in several sample files: say which, e.g. "
                         f"{found[0][0].stem}.{function}")
    return found[0]


def default_inputs(comp) -> list:
    """Small deterministic values per parameter: floats spread over [-2, 2], integers
    cycling over 0..4 (valid indices for the samples' small arrays), predicates alternating."""
    arrays = []
    for shape in comp.parameter_shapes:
        if not isinstance(shape, T.Shape):
            raise InputError(f"{comp.name}: default inputs are made for array parameters only")
        size = int(np.prod(shape.dimensions, dtype=np.int64))
        et = shape.element_type
        if et.kind == T.PRED:
            values = np.arange(size) % 2 == 0
        elif et.is_integer:
            values = np.arange(size) % 5
        else:
            values = np.linspace(-2, 2, size) if size > 1 else np.full(size, 0.5)
        arrays.append(np.asarray(values).astype(shape.dtype).reshape(shape.dimensions))
    return arrays


def literal(array: np.ndarray) -> str:
    """`array` as a --input literal that reproduces it."""
    et = hg.element_type(array.dtype)
    dims = "x".join(map(str, array.shape))
    values = ",".join(_value(v) for v in array.reshape(-1).tolist())
    return f"{dims + 'x' if dims else ''}{et.name}={values}"


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(round(v, 6))
    return str(v)
