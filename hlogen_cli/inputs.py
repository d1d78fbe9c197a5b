"""Input values on the command line, in the convention of IREE's tools:

    --input 2x3xf32=1,2,3,4,5,6   dimensions, element type, values (row-major)
    --input "2x3xf32=[1 2 3][4 5 6]"   the same, nested as IREE prints it (or [[1,2,3],[4,5,6]])
    --input 2x3xf32=0             one value fills the array (a splat)
    --input 2x3xf32=@x.bin        raw little-endian bytes, row-major
    --input f32=3.5               a scalar
    --input @x.npy                a numpy file
    --input x.npz                 the arrays of an .npz file: keyed by parameter names
                                  (each goes to its parameter), or arg0, arg1, ... for order
Element types are XLA's names (f32, s32, pred, bf16, ...) or MLIR's (i32, i1, ui8, ...).
Files may be pipes (`--input @<(cat x.npy)`): they are read once, whole.

numpy saves the element types of ml_dtypes (bf16, the f4, f6 and f8 types, int2, int4) as
raw bytes (`|V2`, `|V1`); such an array is read as the element type of the parameter it
goes to, when that type has the same width.
"""
from __future__ import annotations

import io
import pathlib
import re

import click
import ml_dtypes
import numpy as np

import hlogen as hg
from hlogen import differential, preflight, types as T
from hlogen.types import shape_text
from hlogen.errors import InputError, ShapeError
from hlogen_cli import outputs

_LITERAL = re.compile(r"^(?:(\d+(?:x\d+)*)x)?([A-Za-z][A-Za-z0-9]*)=(.*)$", re.S)
_ZIP_MAGIC = b"PK\x03\x04"  # an .npz is a zip file
_NPY_MAGIC = b"\x93NUMPY"
# names that mean "in order": arg0, arg1, ... (jax's and IREE's), arr_0, arr_1, ...
# (what np.savez names arrays given without names)
_ORDER_KEY = re.compile(r"(arg|arr_)(\d+)")


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
    size = _size(text, et, dims)
    if m.group(3).startswith("@"):
        return _raw_file(text, m.group(3)[1:], et, dims, size)
    raw = _values(text, m.group(3))
    try:  # each value is read first: a typo is named, not counted
        values = [_number(v, et) for v in raw]
    except ValueError as e:
        raise InputError(f"--input {text!r}: {e}") from None
    if len(raw) not in (1, size):
        needs = "holds 1 value" if size == 1 else f"needs {size} values (or 1 to fill it)"
        raise InputError(f"--input {text!r}: {hg.Shape(et, dims)} {needs}, got {len(raw)}")
    try:
        array = hg.types.as_array(values, et, what=f"--input {text!r}")
    except ShapeError as e:  # its message starts with the --input already
        raise InputError(str(e)) from None
    return np.broadcast_to(array.reshape(()), dims).copy() if len(raw) == 1 else array.reshape(dims)


def _size(text: str, et, dims: tuple) -> int:
    """The number of elements of a literal's shape, refused before anything is allocated
    when it does not fit in 64 bits or in this machine's memory."""
    try:
        shape = hg.Shape(et, dims)
    except ShapeError as e:
        raise InputError(f"--input {text!r}: {e}") from None
    too_large = preflight.memory_refusal(shape)
    if too_large:
        raise InputError(f"--input {text!r}: {too_large}")
    return shape.size


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


def _read(path: str, what: str) -> bytes:
    """A file's bytes, read once (a pipe such as /dev/fd/63 cannot be read twice)."""
    try:
        return pathlib.Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"{what}: cannot read {path}: {e.strerror}") from None


def _raw_file(text: str, path: str, et, dims, size: int) -> np.ndarray:
    data = _read(path, f"--input {text!r}")
    if len(data) != size * et.dtype.itemsize:
        raise InputError(f"--input {text!r}: {hg.Shape(et, dims)} is {size * et.dtype.itemsize} "
                         f"bytes, {path} has {len(data)}")
    return np.frombuffer(data, et.dtype.newbyteorder("<")).reshape(dims).astype(et.dtype)


_INTEGER_HINT = "a whole number such as 3, -3 or 0x10"


def _number(text: str, et):
    """One value of a literal as `et` holds it; ValueError names the value."""
    lowered = text.lower()
    if et.kind == T.PRED:
        if lowered in ("true", "false", "1", "0"):
            return lowered in ("true", "1")
        raise ValueError(f"{text!r} is not a pred value: true, false, 1 or 0")
    if et.is_integer:
        try:
            return int(text, 0)
        except ValueError:
            raise ValueError(f"{text!r} is not {_INTEGER_HINT} ({et.name})") from None
    try:
        value = complex(text.replace("i", "j")) if et.kind == T.COMPLEX else float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number ({et.name})") from None
    # 1e40 and 1e400 both overflow f32: both are refused alike (float() makes the
    # second inf before any check could see it); inf itself is a value. A value the type
    # cannot hold for another reason (0 in f8e8m0fnu) is left to the type's own check.
    real = ml_dtypes.finfo(et.dtype).dtype  # f32 for c64; bf16 for bf16
    largest = float(ml_dtypes.finfo(real).max)
    with np.errstate(all="ignore"):
        wide = np.asarray((value.real, value.imag) if et.kind == T.COMPLEX else (value,))
        kept = wide.astype(real)
    if (~np.isfinite(kept) & (np.abs(wide) > largest)).any() and "inf" not in lowered:
        raise ValueError(f"{text!r} is out of range of {et.name} (its largest finite value is "
                         f"{largest:g})")
    return value


def files_named(specs) -> list[str]:
    """The files that --input (and --expected-output) values read, in the forms above."""
    found = []
    for spec in specs:
        m = _LITERAL.match(spec.strip())
        if spec.startswith("@") or (spec.endswith(".npz") and "=" not in spec):
            found.append(spec.removeprefix("@"))
        elif m and m.group(3).startswith("@"):
            found.append(m.group(3)[1:])
    return found


def load_inputs(specs, names, shapes, option: str = "--input") -> list[np.ndarray]:
    """Arrays for the computation's parameters (`names`, `shapes`) from the --input
    options (or its results, for --expected-output): value i goes to parameter
    i mod len(shapes) (the forms of replicas.py); an .npz's array keyed by a name must
    land on the parameter of that name."""
    given: list = []  # (spec, the name it was keyed by or None, array)
    for spec in specs:
        try:
            if spec.startswith("@"):
                given += [(spec, *pair) for pair in _load_numpy(spec[1:], spec, names, option)]
            elif spec.endswith(".npz") and "=" not in spec:
                given += [(spec, *pair) for pair in _load_numpy(spec, spec, names, option)]
            else:
                given.append((spec, None, parse_literal(spec)))
        except InputError as e:  # the messages say --input: name the option given
            if option != "--input" and str(e).startswith("--input"):
                raise InputError(option + str(e)[len("--input"):]) from None
            raise
    for i, (spec, name, _) in enumerate(given):
        if name is not None and name != names[i % len(names)]:
            raise InputError(f"{option} {spec}: its array {name!r} comes as value {i}, for "
                             f"parameter {i % len(names)} {names[i % len(names)]!r}: give the "
                             f"values in parameter order ({', '.join(names)}), or every one "
                             f"in the .npz")
    return [_typed(a, i, names, shapes, option) for i, (_, _, a) in enumerate(given)]


def _load_numpy(path: str, spec: str, names, option: str) -> list[tuple]:
    """(None, the array) of an .npy file, or (name or None, array) for each array of
    an .npz file (by content: `@x.npz` is `x.npz`), matched to `names`."""
    data = _read(path, f"{option} {spec}")
    if not data.startswith((_ZIP_MAGIC, _NPY_MAGIC)):  # (np.load would call it pickled)
        raise InputError(f"{option} {spec}: not a numpy file: an .npy begins with "
                         f"{_NPY_MAGIC!r} and an .npz is a zip file; this begins with "
                         f"{data[:16]!r}")
    try:
        if not data.startswith(_ZIP_MAGIC):
            return [(None, np.load(io.BytesIO(data), allow_pickle=False))]
        with np.load(io.BytesIO(data), allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, EOFError) as e:
        hint = (" (np.save writes float8_e5m2 arrays so, and np.load refuses them: save "
                "x.view('V1') instead)" if "'<f1'" in str(e) else "")
        raise InputError(f"{option} {spec}: cannot read a numpy (.npy or .npz) file: {e}"
                         f"{hint}") from None
    return _by_name(arrays, names, f"{option} {spec}")


def _by_name(arrays: dict, names, what: str) -> list[tuple]:
    """An .npz's arrays as (name, array) in parameter order when its keys are parameter
    names, or as (None, array) in the order of their keys arg0, arg1, ... (np.savez's
    arr_0, arr_1, ... too); other keys are an error naming both sides."""
    keys = list(arrays)
    if keys and all(k in names for k in keys):
        return [(n, arrays[n]) for n in names if n in arrays]
    places = {}
    for k in keys:
        m = _ORDER_KEY.fullmatch(k)
        if m:
            places[int(m.group(2))] = arrays[k]
    if keys and len(places) == len(keys) and sorted(places) == list(range(len(keys))):
        return [(None, places[i]) for i in range(len(keys))]
    unknown = [k for k in keys if k not in names]
    raise InputError(f"{what}: its arrays are named {', '.join(keys) or '(none)'}; the names "
                     f"wanted are {', '.join(names)} ({', '.join(unknown) or 'none'} "
                     f"name{'s' if len(unknown) == 1 else ''} none of them): key the arrays by "
                     f"these names, or arg0, arg1, ... for order (np.savez's arr_0, arr_1, ... "
                     f"too)")


def _typed(array, i: int, names, shapes, option: str):
    """`array` as parameter i mod len(shapes) takes it: raw bytes (numpy's form of
    ml_dtypes types, `|V2` for bf16) read as its element type when the widths agree."""
    if not (isinstance(array, np.ndarray) and array.dtype.type is np.void and
            array.dtype.fields is None):  # (an ml_dtypes type, e.g. of a literal, is of kind V too)
        return array
    k = i % len(shapes) if shapes else 0
    shape = shapes[k] if shapes else None
    width = array.dtype.itemsize
    if isinstance(shape, T.Shape) and np.dtype(shape.dtype).itemsize == width:
        return array.view(shape.dtype)
    wanted = f"'{names[k]}' is {shape}" if shape is not None else "there is no such value"
    raise InputError(f"{option} value {i}: raw {width}-byte data ({array.dtype.str}: how numpy "
                     f"saves bf16, f4, f6, f8, int2 and int4 arrays) is read as the element "
                     f"type of the value it goes to, when that type is {width} byte(s) wide; "
                     f"{wanted}")


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
                         f"one is {shape_text(np.asarray(args[len(shapes)]))})")


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


def arguments(comp, choice, recorded=None, option: str = "--input") -> list:
    """The arguments of `comp` as an InputChoice (hlogen_cli.options) says: --input values
    (replicas.py's forms), random ones, zeros, or else the arguments IN recorded (an
    HloSnapshot's)."""
    if choice.random:
        return differential.random_inputs(comp, seed=choice.seed or 0,
                                          large_range=choice.large_range)
    if choice.zero:
        return differential.zero_inputs(comp)
    if not choice.specs and recorded is not None:
        return recorded
    return load_inputs(choice.specs, comp.parameter_names, comp.parameter_shapes, option)


def refined(comp, specs, replicas: int = 1):
    """`comp` itself, or where it has dimensions with no bound, `comp` refined from the
    --input values (their shapes, and jax's dimension variables their values:
    hlogen.passes.refine); an InputError naming the dimension without them."""
    left = hg.passes.unbounded(comp.module, cached=True, source=comp.source)
    if left is None:
        return comp
    if not specs or replicas != 1:
        raise InputError(f"{comp.source or comp.name}: {left} is dynamic with no bound: give "
                         f"one --input per parameter (one replica), whose shapes refine it")
    return hg.passes.refine(comp, load_inputs(specs, comp.parameter_names, [], "--input"))


def save_arguments(output, comp, args) -> None:
    """Writes the arguments of `comp` to `output` (an hlogen.files.Output) as an .npz keyed
    by parameter name (arg0, arg1, ... where names repeat), bit for bit: what --input
    FILE.npz reads back."""
    names = comp.parameter_names
    if len(set(names)) != len(names) or not all(names):
        names = [f"arg{i}" for i in range(len(args))]
    for name, shape in zip(names, comp.parameter_shapes):
        if isinstance(shape, T.TupleShape):
            raise InputError(f"--save-inputs: parameter {name!r} is a tuple ({shape}); an .npz "
                             f"holds arrays")
    outputs.save_npz(output, dict(zip(names, args)))
    click.echo(f"saved {len(args)} argument(s) to {output}: --input {output} replays them",
               err=True)
