"""Element types and shapes as the removed xla_client had them: jaxlib's PrimitiveType,
Shape and ProgramShape (still in jaxlib), the dtype tables, shape_from_pyval; and the
conversions between them and hlogen's types (one direction each, cached)."""
from __future__ import annotations

import numpy as np

from hlogen import types as T
from hlogen.errors import ShapeError, UnsupportedError
from hlogen.runtime._jaxlib import xla_client as _xc

PrimitiveType = _xc.PrimitiveType
Shape = _xc.Shape
ProgramShape = _xc.ProgramShape

# PrimitiveType <-> hlogen's element type: XLA's names are the enum's, in lower case.
_ET_OF_PRIMITIVE = {p: T.ELEMENT_TYPES[name.lower()] for name, p in PrimitiveType.__members__.items()
                    if name.lower() in T.ELEMENT_TYPES}
_PRIMITIVE_OF_ET = {et: p for p, et in _ET_OF_PRIMITIVE.items()}

XLA_ELEMENT_TYPE_TO_DTYPE = {p: et.dtype for p, et in _ET_OF_PRIMITIVE.items()}
XLA_ELEMENT_TYPE_TO_DTYPE[PrimitiveType.TUPLE] = np.dtype(np.object_)
XLA_ELEMENT_TYPE_TO_DTYPE[PrimitiveType.TOKEN] = np.dtype(np.object_)
# keyed by str(dtype), as the original: numpy dtypes of one type may hash differently
DTYPE_TO_XLA_ELEMENT_TYPE = {str(et.dtype): p for p, et in _ET_OF_PRIMITIVE.items()}


def dtype_to_etype(dtype) -> PrimitiveType:
    """The PrimitiveType of a numpy dtype (np.float32 -> PrimitiveType.F32)."""
    try:
        return DTYPE_TO_XLA_ELEMENT_TYPE[str(np.dtype(dtype))]
    except (KeyError, TypeError):
        raise ShapeError(f"dtype_to_etype: {dtype!r} is not a dtype of an XLA element type; "
                         f"the dtypes are {', '.join(DTYPE_TO_XLA_ELEMENT_TYPE)}") from None


def element_type(value, what: str = "element type") -> T.ElementType:
    """hlogen's element type of a PrimitiveType (or anything hg.element_type takes)."""
    found = _ET_OF_PRIMITIVE.get(value) if isinstance(value, PrimitiveType) else None
    if found is not None:
        return found
    try:
        return T.element_type(value)
    except ShapeError:
        raise ShapeError(f"{what} {value!r} is not an XLA element type: give a PrimitiveType "
                         f"(xla_client.PrimitiveType.F32) or a numpy dtype") from None


def primitive_type(et: T.ElementType) -> PrimitiveType:
    try:
        return _PRIMITIVE_OF_ET[et]
    except KeyError:
        raise UnsupportedError(f"{et.name} has no XLA PrimitiveType in this jaxlib") from None


_hg_shapes: dict = {}
_xla_shapes: dict = {}


def hg_shape(shape, what: str = "shape"):
    """hlogen's shape of an xla_client.Shape (an hlogen shape passes through). Layouts are
    not kept: hlogen's arrays are row-major, and XLA chooses layouts itself."""
    if isinstance(shape, (T.Shape, T.TupleShape, T.TokenShape)):
        return shape
    if not isinstance(shape, Shape):
        raise ShapeError(f"{what} must be an xla_client.Shape (Shape.array_shape(...)), got "
                         f"{type(shape).__name__} {shape!r}")
    found = _hg_shapes.get(shape)
    if found is None:
        if shape.is_tuple():
            found = T.TupleShape(tuple(hg_shape(s, what) for s in shape.tuple_shapes()))
        elif shape.is_token():
            found = T.token
        elif shape.is_dynamic():
            raise UnsupportedError(f"{what} {shape} has dynamic dimensions: hlogen's shapes are "
                                   f"static")
        else:
            found = T.Shape(element_type(shape.xla_element_type()), tuple(shape.dimensions()))
        _hg_shapes[shape] = found
    return found


def xla_shape(shape) -> Shape:
    """The xla_client.Shape of an hlogen shape (with XLA's default layout)."""
    found = _xla_shapes.get(shape)
    if found is None:
        if isinstance(shape, T.TupleShape):
            found = Shape.tuple_shape([xla_shape(s) for s in shape.elements])
        elif isinstance(shape, T.TokenShape):
            found = Shape.token_shape()
        else:
            found = Shape.array_shape(primitive_type(shape.element_type), shape.dimensions)
        _xla_shapes[shape] = found
    return found


def shape_from_pyval(pyval, layout=None) -> Shape:
    """The Shape of a value: a tuple (nested) of arrays makes a tuple shape. `layout`,
    an array's minor-to-major order, as XLA's Shape.array_shape takes it."""
    if isinstance(pyval, tuple):
        if layout is not None:
            raise UnsupportedError(f"shape_from_pyval: layout={layout!r} is for an array; XLA's "
                                   f"shape_from_pyval takes none for a tuple either")
        return Shape.tuple_shape([shape_from_pyval(v) for v in pyval])
    array = np.asarray(pyval)
    try:
        return Shape.array_shape(dtype_to_etype(array.dtype), array.shape, layout)
    except _xc.XlaRuntimeError as e:
        raise ShapeError(f"shape_from_pyval: layout={layout!r}: {e}") from None
