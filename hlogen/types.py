"""Element types and shapes.

`ELEMENT_TYPES` is the one table that maps an XLA primitive type to its MLIR
type, its numpy (or ml_dtypes) dtype and its name. Shapes follow XLA: an array
shape is an element type plus dimensions (`hg.f32[2, 3]`, `hg.s32[()]`), and
there are tuple shapes and the token shape.
"""
from __future__ import annotations

import dataclasses
import functools
import math

import ml_dtypes
import numpy as np

from hlogen.errors import ShapeError

# Kinds group element types the way the spec's rules talk about them.
PRED, SIGNED, UNSIGNED, FLOAT, COMPLEX = "pred", "signed", "unsigned", "float", "complex"
INTEGER = frozenset({SIGNED, UNSIGNED})


@dataclasses.dataclass(frozen=True, eq=False)
class ElementType:
    """An XLA primitive type. `hg.f32[2, 3]` makes the shape f32[2,3]."""

    name: str          # XLA's name: f32, s32, pred, ...
    kind: str          # pred, signed, unsigned, float, complex
    bits: int          # storage width of one element
    mlir: str          # the MLIR element type, as MLIR prints it
    dtype: np.dtype    # the numpy / ml_dtypes dtype of host arrays
    # (which backend cannot run values of which type is each backend's declaration:
    # hlogen.backends' `refuses_types`)

    def __getitem__(self, dims) -> "Shape":
        if dims == ():
            return Shape(self, ())
        if not isinstance(dims, tuple):
            dims = (dims,)
        return Shape(self, dims)

    # not iterable: with __getitem__ alone, tuple(hg.f32) would make shapes forever
    __iter__ = None

    def __repr__(self) -> str:
        return f"hg.{self.name}"

    def __str__(self) -> str:
        return self.name

    @property
    def is_integer(self) -> bool:
        return self.kind in INTEGER

    @functools.cached_property
    def has_sign(self) -> bool:
        """Whether it holds negative numbers (not pred, unsigned types, f8e8m0fnu)."""
        if self.kind != FLOAT:
            return self.kind in (SIGNED, COMPLEX)
        with np.errstate(invalid="ignore"):
            return not np.isnan(np.array(-1.0).astype(self.dtype).astype(np.float32))

    @functools.cached_property
    def has_negative_zero(self) -> bool:
        """Whether a float has -0 (not the fnuz types, whose NaN has -0's bits)."""
        return self.kind in (FLOAT, COMPLEX) and self.has_sign and \
            any(np.array(-0.0).astype(self.component.dtype).tobytes())

    @property
    def is_narrow_float(self) -> bool:
        """A float narrower than 16 bits (f4, f6, f8): XLA computes with it in f32."""
        return self.kind == FLOAT and self.bits < 16

    @property
    def component(self) -> "ElementType":
        """The real type of a complex type (c64 -> f32); the type itself otherwise."""
        return _COMPLEX_COMPONENT.get(self.name, self)


def _et(name, kind, bits, mlir, dtype):
    return ElementType(name, kind, bits, mlir, np.dtype(dtype))


# The one table of element types: XLA name, kind, bits, MLIR type, numpy dtype.
ELEMENT_TYPES: dict[str, ElementType] = {t.name: t for t in [
    _et("pred", PRED, 1, "i1", np.bool_),
    _et("s2", SIGNED, 2, "i2", ml_dtypes.int2),
    _et("s4", SIGNED, 4, "i4", ml_dtypes.int4),
    _et("s8", SIGNED, 8, "i8", np.int8),
    _et("s16", SIGNED, 16, "i16", np.int16),
    _et("s32", SIGNED, 32, "i32", np.int32),
    _et("s64", SIGNED, 64, "i64", np.int64),
    _et("u2", UNSIGNED, 2, "ui2", ml_dtypes.uint2),
    _et("u4", UNSIGNED, 4, "ui4", ml_dtypes.uint4),
    _et("u8", UNSIGNED, 8, "ui8", np.uint8),
    _et("u16", UNSIGNED, 16, "ui16", np.uint16),
    _et("u32", UNSIGNED, 32, "ui32", np.uint32),
    _et("u64", UNSIGNED, 64, "ui64", np.uint64),
    _et("f4e2m1fn", FLOAT, 4, "f4E2M1FN", ml_dtypes.float4_e2m1fn),
    _et("f6e2m3fn", FLOAT, 6, "f6E2M3FN", ml_dtypes.float6_e2m3fn),
    _et("f6e3m2fn", FLOAT, 6, "f6E3M2FN", ml_dtypes.float6_e3m2fn),
    _et("f8e3m4", FLOAT, 8, "f8E3M4", ml_dtypes.float8_e3m4),
    _et("f8e4m3", FLOAT, 8, "f8E4M3", ml_dtypes.float8_e4m3),
    _et("f8e4m3fn", FLOAT, 8, "f8E4M3FN", ml_dtypes.float8_e4m3fn),
    _et("f8e4m3fnuz", FLOAT, 8, "f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz),
    _et("f8e4m3b11fnuz", FLOAT, 8, "f8E4M3B11FNUZ", ml_dtypes.float8_e4m3b11fnuz),
    _et("f8e5m2", FLOAT, 8, "f8E5M2", ml_dtypes.float8_e5m2),
    _et("f8e5m2fnuz", FLOAT, 8, "f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz),
    _et("f8e8m0fnu", FLOAT, 8, "f8E8M0FNU", ml_dtypes.float8_e8m0fnu),
    _et("f16", FLOAT, 16, "f16", np.float16),
    _et("bf16", FLOAT, 16, "bf16", ml_dtypes.bfloat16),
    _et("f32", FLOAT, 32, "f32", np.float32),
    _et("f64", FLOAT, 64, "f64", np.float64),
    _et("c64", COMPLEX, 64, "complex<f32>", np.complex64),
    _et("c128", COMPLEX, 128, "complex<f64>", np.complex128),
]}

# hg.f32, hg.s32, ...: the table's entries as module attributes.
globals().update(ELEMENT_TYPES)

SIGNED_OF_WIDTH = {t.bits: t for t in ELEMENT_TYPES.values() if t.kind == SIGNED}
UNSIGNED_OF_WIDTH = {t.bits: t for t in ELEMENT_TYPES.values() if t.kind == UNSIGNED}
_COMPLEX_COMPONENT = {"c64": ELEMENT_TYPES["f32"], "c128": ELEMENT_TYPES["f64"]}
_BY_DTYPE = {t.dtype: t for t in ELEMENT_TYPES.values()}
_BY_MLIR = {t.mlir: t for t in ELEMENT_TYPES.values()}


def element_type(value) -> ElementType:
    """An ElementType from an ElementType, an XLA name ("f32", "s8"), an MLIR name
    ("i8", "ui32", "f8E4M3FN"), a numpy dtype name ("float32") or a numpy dtype/type.

    A string means the same everywhere (the API and the command line): numpy's
    one-letter codes are not accepted ("i8" is MLIR's 8-bit integer, not numpy's int64).
    """
    if isinstance(value, ElementType):
        return value
    if isinstance(value, str):
        found = ELEMENT_TYPES.get(value) or _BY_MLIR.get(value)
        if found is None and value.isidentifier():
            try:  # numpy's full names only: "float32", "bfloat16", "bool"
                dtype = np.dtype(value)
                found = _BY_DTYPE.get(dtype) if dtype.name == value else None
            except Exception:
                found = None
    elif value is None:
        found = None
    else:
        try:
            found = _BY_DTYPE.get(np.dtype(value))
        except Exception:  # numpy raises TypeError, ValueError, ... for non-dtypes
            found = None
    if found is None:
        raise ShapeError(
            f"{value!r} is not an element type hlogen supports; use one of "
            f"{', '.join(ELEMENT_TYPES)}, an MLIR name such as i32 or ui8, or a numpy dtype")
    return found


def element_type_of_mlir(mlir_name: str) -> ElementType:
    """The ElementType whose MLIR type prints as `mlir_name` (e.g. "ui32")."""
    try:
        return _BY_MLIR[mlir_name]
    except KeyError:
        raise ShapeError(f"MLIR element type {mlir_name} has no XLA counterpart in hlogen") from None


# Sizes and byte counts are 64-bit signed integers in XLA and the interpreter: larger
# ones end the process there (an overflowed extent product), so they are refused here.
MAX_SIZE = 2**63


def check_size(et: ElementType, dims: tuple) -> None:
    """Refuses arrays whose byte size does not fit in a signed 64-bit integer."""
    if math.prod(dims) * ((et.bits + 7) // 8) >= MAX_SIZE:
        raise ShapeError(f"{et.name}[{','.join(map(str, dims))}] has {math.prod(dims)} elements: "
                         f"its size in bytes does not fit in 64 bits (2**63)")


@dataclasses.dataclass(frozen=True)
class Shape:
    """An array shape: element type and dimension sizes (XLA's `f32[2,3]`)."""

    element_type: ElementType
    dimensions: tuple[int, ...]

    def __post_init__(self):
        if type(self.element_type) is not ElementType:
            object.__setattr__(self, "element_type", element_type(self.element_type))
        dims = self.dimensions
        if type(dims) is not tuple:
            try:
                dims = tuple(dims)
            except TypeError:
                raise ShapeError(f"shape dimensions must be a sequence of integers, got "
                                 f"{dims!r}") from None
            object.__setattr__(self, "dimensions", dims)
        for d in dims:
            if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or not 0 <= d < MAX_SIZE:
                raise ShapeError(f"shape dimensions must be non-negative integers below 2**63, got {dims}")
        if any(type(d) is not int for d in dims):
            dims = tuple(int(d) for d in dims)
            object.__setattr__(self, "dimensions", dims)
        check_size(self.element_type, dims)

    @property
    def rank(self) -> int:
        return len(self.dimensions)

    @property
    def size(self) -> int:
        return int(np.prod(self.dimensions, dtype=np.int64))

    @property
    def dtype(self) -> np.dtype:
        return self.element_type.dtype

    def with_element_type(self, et) -> "Shape":
        return Shape(element_type(et), self.dimensions)

    def __str__(self) -> str:
        return f"{self.element_type.name}[{','.join(map(str, self.dimensions))}]"

    __repr__ = __str__


def shape_text(array) -> str:
    """An array's shape as XLA writes it (`s8[8]`), for messages (numpy's words for a
    dtype hlogen has no element type for)."""
    array = np.asarray(array)
    try:
        return str(Shape(element_type(array.dtype), array.shape))
    except Exception:  # a dtype hlogen has no element type for
        return f"{array.dtype}{list(array.shape)}"


@dataclasses.dataclass(frozen=True)
class TupleShape:
    """A tuple of shapes (XLA's `(f32[10], s32[])`)."""

    elements: tuple

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elements)) + ")"

    __repr__ = __str__


class TokenShape:
    """The token shape: orders side-effecting ops; carries no data."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __str__(self) -> str:
        return "token[]"

    __repr__ = __str__


token = TokenShape()


def tuple_shape(*shapes) -> TupleShape:
    """The tuple shape of `shapes` (each a Shape, TupleShape or token)."""
    for s in shapes:
        if not isinstance(s, (Shape, TupleShape, TokenShape)):
            raise ShapeError(f"tuple_shape takes shapes, got {s!r}")
    return TupleShape(tuple(shapes))


# -- trees: values shaped by tuple shapes ----------------------------------------------------
# The one place tuples are taken apart and put together, for any kind of value: shapes,
# Ops (elements by get_tuple_element, tuples by ops.tuple), host arrays (Python tuples).

def flatten(shapes, values, elements=lambda value, shape: value) -> list:
    """The leaves of `values` (one value per shape of `shapes`), depth-first:
    `elements(value, shape)` gives the elements of a value of tuple shape `shape`."""
    out: list = []
    for shape, value in zip(shapes, values):
        _flatten_into(out, shape, value, elements)
    return out


# (module-level recursion, not a nested function: a function that calls itself through its
# closure is a reference cycle, which keeps MLIR values alive past their context)
def _flatten_into(out: list, shape, value, elements) -> None:
    if isinstance(shape, TupleShape):
        for s, v in zip(shape.elements, elements(value, shape)):
            _flatten_into(out, s, v, elements)
    else:
        out.append(value)


def rebuild(shapes, leaves, make_tuple=tuple) -> list:
    """Values of `shapes` from their `leaves` in order (the inverse of flatten):
    `make_tuple(elements)` makes a value of tuple shape."""
    it = iter(leaves)
    return [_build(shape, it, make_tuple) for shape in shapes]


def _build(shape, it, make_tuple):
    if isinstance(shape, TupleShape):
        return make_tuple([_build(s, it, make_tuple) for s in shape.elements])
    return next(it)


def leaf_shapes(shapes) -> list:
    """The array and token shapes of `shapes`, tuples flattened depth-first."""
    return flatten(shapes, shapes, lambda shape, _: shape.elements)


def leaves(shape) -> list:
    """The array and token shapes of `shape`, tuples flattened depth-first."""
    return leaf_shapes([shape])


def as_shape(value) -> Shape | TupleShape | TokenShape:
    """Accepts a shape, or (element type, dims) as a convenience."""
    if isinstance(value, (Shape, TupleShape, TokenShape)):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        return Shape(element_type(value[0]), tuple(value[1]))
    raise ShapeError(f"expected a shape such as hg.f32[2, 3], got {value!r}")


def _overflow_bound(et: ElementType) -> float:
    """The magnitude beyond which a float rounds past `et`'s largest finite value."""
    info = ml_dtypes.finfo(et.dtype)
    ulp = 2.0 ** math.floor(math.log2(float(info.max))) * float(info.eps)
    return float(info.max) + ulp / 2


# float types without Inf (f4, f6, f8e4m3fn, ...) -> the magnitude that overflows them:
# ml_dtypes saturates such values to the largest finite one (or makes NaN)
with np.errstate(all="ignore"):
    _SATURATING = {t.name: _overflow_bound(t) for t in ELEMENT_TYPES.values() if t.kind == FLOAT
                   and not np.isinf(np.array(np.inf).astype(t.dtype).astype(np.float64))}

# Python values without a dtype become these, as in XLA literals (and jax without x64).
_PYTHON_DEFAULTS = {bool: "pred", int: "s32", float: "f32", complex: "c64"}


def as_array(value, et=None, what="value") -> np.ndarray:
    """`value` as a numpy array of element type `et`.

    Without `et`, numpy arrays keep their dtype and Python values take XLA's
    defaults (s32, f32, c64, pred). With `et`, values (numpy ones too) must be
    representable in it: floats may round, but nothing may overflow or be truncated.
    """
    if et is not None:
        et = element_type(et)
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype not in _BY_DTYPE:
            raise ShapeError(f"{what}: numpy dtype {value.dtype} is not an XLA element type")
        raw = np.asarray(value)
        if et is None or raw.dtype == et.dtype:
            return raw
    else:
        try:
            raw = np.asarray(value)
        except (ValueError, TypeError) as e:
            raise ShapeError(f"{what}: cannot make an array of {value!r}: {e}") from None
        if raw.dtype == object and et is not None and et.kind in INTEGER:
            return _exact_integers(value, et, what)  # Python ints beyond 64 bits
        if raw.dtype == object or raw.dtype.kind not in "biufc":
            raise ShapeError(f"{what}: {value!r} is not a number or a (nested) list of numbers")
        if et is None:
            kind = {"b": bool, "i": int, "u": int, "f": float, "c": complex}[raw.dtype.kind]
            et = ELEMENT_TYPES[_PYTHON_DEFAULTS[kind]]
        elif et.kind in INTEGER and raw.dtype.kind == "f":
            return _exact_integers(value, et, what)
    if et.kind != COMPLEX and raw.dtype.kind == "c":
        raise ShapeError(f"{what}: complex {value!r} cannot be {et.name}")
    with np.errstate(all="ignore"):
        converted = raw.astype(et.dtype)
    if et.kind in (FLOAT, COMPLEX):  # rounding is expected; overflow is not, nor a NaN for
        # a number (f8e8m0fnu has no 0 and no negative numbers), nor a number for NaN (f4, f6)
        wide = converted.astype(np.complex128 if et.kind == COMPLEX else np.float64)
        lost = (np.isfinite(raw) & ~np.isfinite(wide)) | (np.isnan(raw) != np.isnan(wide))
        if et.name in _SATURATING:  # Inf too
            lost |= np.abs(raw) > _SATURATING[et.name]
    else:
        with np.errstate(all="ignore"):
            lost = converted.astype(raw.dtype) != raw
    if np.any(lost):
        raise ShapeError(f"{what}: {value!r} is not representable as {et.name}")
    return converted


def _exact_integers(value, et: ElementType, what: str) -> np.ndarray:
    """Python numbers to an integer type without passing through float64 (numpy's
    choice for ints beyond int64, which would round 2**63 + 1 to 2**63)."""
    try:
        objects = np.asarray(value, dtype=object)
        if not all(isinstance(v, (bool, int, float, np.number)) and not isinstance(v, complex)
                   for v in objects.flat):
            raise TypeError
        info = ml_dtypes.iinfo(et.dtype)
        if not all(v == int(v) and info.min <= int(v) <= info.max for v in objects.flat):
            raise OverflowError
        return np.array([int(v) for v in objects.flat], dtype=et.dtype).reshape(objects.shape)
    except (TypeError, ValueError, OverflowError):  # ragged, non-numbers, inf/nan, out of range
        raise ShapeError(f"{what}: {value!r} is not representable as {et.name}") from None
