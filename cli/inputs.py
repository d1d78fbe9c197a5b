"""Input values on the command line, in the convention of IREE's tools:

    --input 2x3xf32=1,2,3,4,5,6   dimensions, element type, values (row-major)
    --input "2x3xf32=[1 2 3][4 5 6]"   the same, nested as IREE prints it (or [[1,2,3],[4,5,6]])
    --input 2x3xf32=0             one value fills the array (a splat)
    --input 2x3xf32=@x.bin        raw little-endian bytes, row-major
    --input f32=3.5               a scalar
    --input @x.npy                a numpy file
    --input x.npz                 every array of an .npz file, in order (or by parameter name)
Element types are XLA's names (f32, s32, pred, bf16, ...) or MLIR's (i32, i1, ui8, ...).
"""
from __future__ import annotations

import pathlib
import re

import numpy as np

import hlogen as hg
from hlogen.errors import InputError, ShapeError

_LITERAL = re.compile(r"^(?:(\d+(?:x\d+)*)x)?([A-Za-z][A-Za-z0-9]*)=(.*)$", re.S)


def element_type_named(name: str) -> hg.ElementType:
    """The element type `name` means on the API too (XLA's or MLIR's name)."""
    try:
        return hg.element_type(name)
    except ShapeError:
        raise InputError(f"unknown element type {name!r}: use one of {', '.join(hg.ELEMENT_TYPES)} "
                         f"or an MLIR name such as i32 or ui8") from None


def parse_literal(text: str) -> np.ndarray:
    m = _LITERAL.match(text.strip())
    if m is None:
        raise InputError(f"--input {text!r}: expected SHAPExTYPE=VALUES such as 2x3xf32=1,2,3,4,5,6, "
                         f"@file.npy or file.npz")
    dims = tuple(int(d) for d in m.group(1).split("x")) if m.group(1) else ()
    et = element_type_named(m.group(2))
    size = int(np.prod(dims, dtype=np.int64))
    if m.group(3).startswith("@"):
        return _raw_file(text, m.group(3)[1:], et, dims)
    raw = _values(text, m.group(3))
    if len(raw) not in (1, size):
        raise InputError(f"--input {text!r}: {hg.Shape(et, dims)} needs {size} values (or 1 to fill "
                         f"it), got {len(raw)}")
    try:
        values = [_number(v, et) for v in raw]
    except ValueError as e:
        raise InputError(f"--input {text!r}: {e}") from None
    try:
        array = hg.types.as_array(values, et, what=f"--input {text!r}")
    except ShapeError as e:  # its message starts with the --input already
        raise InputError(str(e)) from None
    return np.broadcast_to(array.reshape(()), dims).copy() if len(raw) == 1 else array.reshape(dims)


def _values(text: str, body: str) -> list[str]:
    """The values of a literal: separated by commas or blanks, optionally nested in
    brackets (which must balance)."""
    depth = 0
    for ch in body:
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth != 0:
        raise InputError(f"--input {text!r}: unbalanced brackets in the values")
    return re.split(r"[\s,\[\]]+", body.strip(" \t\n[],")) if body.strip(" \t\n[],") else []


def _raw_file(text: str, path: str, et, dims) -> np.ndarray:
    try:
        data = pathlib.Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"--input {text!r}: cannot read {path}: {e.strerror}") from None
    size = int(np.prod(dims, dtype=np.int64))
    if len(data) != size * et.dtype.itemsize:
        raise InputError(f"--input {text!r}: {hg.Shape(et, dims)} is {size * et.dtype.itemsize} "
                         f"bytes, {path} has {len(data)}")
    return np.frombuffer(data, et.dtype.newbyteorder("<")).reshape(dims).astype(et.dtype)


def _number(text: str, et):
    lowered = text.lower()
    if et.kind == "pred":
        if lowered in ("true", "false"):
            return lowered == "true"
        return bool(int(text))
    if et.is_integer:
        return int(text, 0)
    if et.kind == "complex":
        return complex(text.replace("i", "j"))
    return float(text)


def load_inputs(specs, names, option: str = "--input") -> list[np.ndarray]:
    """Arrays for the computation's parameters (`names`) from the --input options
    (or its results, for --expected-output)."""
    arrays: list = []
    for spec in specs:
        try:
            if spec.startswith("@"):
                arrays.append(_load_npy(spec[1:]))
            elif spec.endswith(".npz") and "=" not in spec:
                arrays.extend(_load_npz(spec, names))
            else:
                arrays.append(parse_literal(spec))
        except InputError as e:  # the messages say --input: name the option given
            if option != "--input" and str(e).startswith("--input"):
                raise InputError(option + str(e)[len("--input"):]) from None
            raise
    return arrays


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InputError(f"--input @{path}: cannot read a .npy file: {e}") from None


def _load_npz(path: str, names) -> list[np.ndarray]:
    if not pathlib.Path(path).is_file():
        raise InputError(f"--input {path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            if set(names) <= set(data.files):  # keyed by parameter name
                return [data[n] for n in names]
            return [data[k] for k in data.files]
    except (OSError, ValueError) as e:
        raise InputError(f"--input {path}: cannot read an .npz file: {e}") from None
