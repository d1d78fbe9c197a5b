"""Tuple and GetTupleElement; tuple-shaped values taken apart and put together."""
from __future__ import annotations

import builtins

from hlogen import types as T
from hlogen.builder import Builder, Op, same_builder
from hlogen.errors import ShapeError
from hlogen.mlir import int_attr


def tuple(elements, builder=None):  # the spec's name
    """Tuple(elements): one value holding `elements` (Ops); `builder` only for the empty tuple."""
    if isinstance(elements, Op):
        elements = (elements,)
    try:
        elements = builtins.tuple(elements)
    except TypeError:
        raise ShapeError(f"tuple: elements must be a sequence of Ops, got "
                         f"{type(elements).__name__} {elements!r}") from None
    if builder is not None and not isinstance(builder, Builder):
        raise ShapeError(f"tuple: builder must be a Builder, got {type(builder).__name__} {builder!r}")
    if not elements:
        if builder is None:
            raise ShapeError("tuple: an empty tuple needs builder=")
    else:
        owner = same_builder("tuple", *elements)
        if builder is not None and builder is not owner:
            raise ShapeError(f"tuple: elements belong to {owner!r}, not to builder={builder!r}")
        builder = owner
    shape = T.TupleShape(builtins.tuple(e.shape for e in elements))
    return builder.add_op("stablehlo.tuple", shape, list(elements))


def get_tuple_element(tuple_data, index):
    """GetTupleElement(tuple_data, index): element `index` (a constant) of a tuple."""
    same_builder("get_tuple_element", tuple_data)
    shape = tuple_data.shape
    if not isinstance(shape, T.TupleShape):
        raise ShapeError(f"get_tuple_element: tuple_data must be a tuple, got {shape}")
    n = len(shape.elements)
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
        raise ShapeError(f"get_tuple_element: index={index!r} must be in [0, {n}) for {shape}")
    return tuple_data.builder.add_op("stablehlo.get_tuple_element", shape.elements[index],
                                     [tuple_data], {"index": int_attr(index, 32)})


# -- tuple-shaped Ops taken apart and put together (hlogen.types' flatten and rebuild) ------

def _elements(value, shape) -> list:
    return [get_tuple_element(value, i) for i in range(len(shape.elements))]


def leaves(values) -> list:
    """The array and token Ops of `values` (Ops; tuples taken apart), depth-first."""
    return T.flatten([v.shape for v in values], values, _elements)


def rebuild(shapes, leaves, builder) -> list:
    """Ops of `shapes` from their leaves (Ops of `builder`), in order."""
    return T.rebuild(shapes, leaves, lambda elements: tuple(elements, builder=builder))
