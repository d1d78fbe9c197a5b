"""Ops that move data without computing: Reshape, Collapse, Transpose, Rev, Slice,
SliceInDim, Concatenate, Pad, GetDimensionSize, SetDimensionSize.

Each op parses its attributes once, then calls its shape rule (a plain function of
shapes and parsed attributes, `*_shape`, that checks the spec's constraints and names
the one a call breaks), then emits one op. Shape rules are pure, so they are memoized:
programs repeat the same ops on the same shapes.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Op, same_builder
from hlogen.errors import ShapeError
from hlogen.mlir import i64_array, int_attr
from hlogen.ops._common import (array_operand, as_operands, check_dimension, dimension_list,
                                int_list, sizes)


def _where(op_name, shape, **attributes) -> str:
    listed = ", ".join(f"{k}={list(v) if isinstance(v, tuple) else v}" for k, v in attributes.items())
    return f"{op_name}: operand {shape}, {listed}"


# -- Reshape, Collapse, Transpose, Rev -------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def reshape_shape(shape: T.Shape, new: tuple) -> T.Shape:
    """Reshape: the same elements, read and written in row-major order."""
    if math.prod(new) != math.prod(shape.dimensions):
        raise ShapeError(f"{_where('reshape', shape, new_sizes=new)}: the element count must not "
                         f"change ({math.prod(shape.dimensions)} elements into "
                         f"{math.prod(new)})")
    return T.Shape(shape.element_type, new)


def reshape(operand, new_sizes):
    """Reshape(operand, new_sizes): the elements of operand in row-major order, in an array
    of dimensions `new_sizes` (the spec's `dimensions`); () makes a scalar of a one-element
    array, and a scalar reshapes to any one-element shape."""
    shape = reshape_shape(array_operand("reshape", "operand", operand),
                          sizes("reshape", "new_sizes", new_sizes))
    if shape == operand.shape:
        return operand
    return operand.builder.add_op("stablehlo.reshape", shape, [operand])


@functools.lru_cache(maxsize=1024)
def collapse_shape(shape: T.Shape, dims: tuple) -> T.Shape:
    """Collapse: in-order consecutive dimensions replaced by one of their product size."""
    if any(b != a + 1 for a, b in zip(dims, dims[1:])):
        raise ShapeError(f"{_where('collapse', shape, dimensions=dims)}: the dimensions must be "
                         f"consecutive and in increasing order (Collapse merges a run of adjacent "
                         f"dimensions; use transpose first to reorder)")
    if len(dims) <= 1:
        return shape
    d = shape.dimensions
    return T.Shape(shape.element_type, d[:dims[0]] + (math.prod(d[dims[0]:dims[-1] + 1]),)
                   + d[dims[-1] + 1:])


def collapse(operand, dimensions):
    """Collapse(operand, dimensions): the consecutive, in-order `dimensions` merged into one."""
    shape = array_operand("collapse", "operand", operand)
    shape = collapse_shape(shape, dimension_list("collapse", "dimensions", dimensions, shape))
    return reshape(operand, shape.dimensions)


@functools.lru_cache(maxsize=1024)
def transpose_shape(shape: T.Shape, perm: tuple) -> T.Shape:
    """Transpose: result dimension i is operand dimension perm[i]."""
    if len(perm) != shape.rank:
        raise ShapeError(f"{_where('transpose', shape, permutation=perm)}: the permutation must "
                         f"list each of the {shape.rank} dimensions once")
    return T.Shape(shape.element_type, tuple(shape.dimensions[p] for p in perm))


def transpose(operand, permutation):
    """Transpose(operand, permutation): result dimension i is operand dimension permutation[i]."""
    shape = array_operand("transpose", "operand", operand)
    perm = dimension_list("transpose", "permutation", permutation, shape)
    return operand.builder.add_op("stablehlo.transpose", transpose_shape(shape, perm), [operand],
                                  {"permutation": i64_array(perm)})


def rev(operand, dimensions):
    """Rev(operand, dimensions): the order of elements reversed along each of `dimensions`."""
    shape = array_operand("rev", "operand", operand)
    dims = dimension_list("rev", "dimensions", dimensions, shape)
    return operand.builder.add_op("stablehlo.reverse", shape, [operand],
                                  {"dimensions": i64_array(dims)})


# -- Slice, SliceInDim ------------------------------------------------------------------------

@functools.lru_cache(maxsize=1024)
def slice_shape(shape: T.Shape, start: tuple, limit: tuple, stride: tuple) -> T.Shape:
    """Slice: elements start <= i < limit with the given stride, per dimension."""
    def fail(rule):
        raise ShapeError(f"{_where('slice', shape, start_indices=start, limit_indices=limit, strides=stride)}: "
                         f"{rule}")
    if not len(start) == len(limit) == len(stride) == shape.rank:
        fail(f"start_indices, limit_indices and strides need one entry per dimension ({shape.rank})")
    for d, (s, e, k, n) in enumerate(zip(start, limit, stride, shape.dimensions)):
        if not 0 <= s <= e <= n:
            fail(f"dimension {d} needs 0 <= start <= limit <= {n} (its size), got start {s}, "
                 f"limit {e}")
        if k < 1:
            fail(f"dimension {d} has stride {k}; strides must be >= 1")
    return T.Shape(shape.element_type,
                   tuple(-(-(e - s) // k) for s, e, k in zip(start, limit, stride)))


def slice(operand, start_indices, limit_indices, strides=None):  # the spec's name
    """Slice(operand, start_indices, limit_indices, strides): the sub-array start <= i < limit
    (limit exclusive) taking every stride-th element; strides=None means 1."""
    shape = array_operand("slice", "operand", operand)
    start = int_list("slice", "start_indices", start_indices)
    limit = int_list("slice", "limit_indices", limit_indices)
    stride = (1,) * shape.rank if strides is None else int_list("slice", "strides", strides)
    return operand.builder.add_op("stablehlo.slice", slice_shape(shape, start, limit, stride),
                                  [operand], {"start_indices": i64_array(start),
                                              "limit_indices": i64_array(limit),
                                              "strides": i64_array(stride)})


def slice_in_dim(operand, start_index, limit_index, stride, dimno):
    """SliceInDim: Slice along dimension `dimno` only; the other dimensions are kept whole."""
    shape = array_operand("slice_in_dim", "operand", operand)
    check_dimension("slice_in_dim", "dimno", dimno, shape.rank)
    start, limit, strides = [0] * shape.rank, list(shape.dimensions), [1] * shape.rank
    start[dimno], limit[dimno], strides[dimno] = start_index, limit_index, stride
    return slice(operand, start, limit, strides)


# -- Concatenate, Pad --------------------------------------------------------------------------

def concatenate_shape(shapes, dimension) -> T.Shape:
    """ConcatInDim: equal ranks (>= 1) and element types, sizes equal except in `dimension`."""
    listed = ", ".join(map(str, shapes))
    where = f"concatenate: operands {listed}, dimension={dimension!r}"
    if not shapes:
        raise ShapeError("concatenate: needs at least one operand")
    first = shapes[0]
    if first.rank == 0:
        raise ShapeError(f"{where}: scalars cannot be concatenated; reshape them to [1] first")
    check_dimension("concatenate", "dimension", dimension, first.rank)
    for i, s in enumerate(shapes[1:], 1):
        if s.element_type != first.element_type:
            raise ShapeError(f"{where}: operand {i} has element type {s.element_type}, "
                             f"operand 0 has {first.element_type}; they must be equal")
        if s.rank != first.rank:
            raise ShapeError(f"{where}: operand {i} has rank {s.rank}, operand 0 has "
                             f"{first.rank}; ranks must be equal")
        for d, (a, b) in enumerate(zip(first.dimensions, s.dimensions)):
            if d != dimension and a != b:
                raise ShapeError(f"{where}: dimension {d} of operand {i} is {b}, of operand 0 "
                                 f"{a}; sizes must be equal except in dimension {dimension}")
    total = sum(s.dimensions[dimension] for s in shapes)
    dims = list(first.dimensions)
    dims[dimension] = total
    return T.Shape(first.element_type, tuple(dims))


def concatenate(operands, dimension):
    """Concatenate(operands, dimension): the operands joined along `dimension`, in order."""
    operands = list(operands) if isinstance(operands, (list, tuple)) else [operands]
    for i, o in enumerate(operands):
        array_operand("concatenate", f"operand {i}", o)
    builder = same_builder("concatenate", *operands) if operands else None
    shape = concatenate_shape([o.shape for o in operands], dimension)
    return builder.add_op("stablehlo.concatenate", shape, operands,
                          {"dimension": int_attr(dimension)})


def pad_config(shape: T.Shape, padding_config) -> tuple:
    """(low, high, interior) triples, one per dimension, checked as the spec says."""
    try:
        config = tuple(int_list("pad", "a padding_config entry", c) for c in padding_config)
    except TypeError:  # padding_config itself is no sequence
        config = None
    if config is None or any(len(c) != 3 for c in config):
        raise ShapeError(f"pad: operand {shape}, padding_config={padding_config!r}: "
                         f"padding_config is a sequence of (edge_padding_low, edge_padding_high, "
                         f"interior_padding), one per dimension")
    return config


@functools.lru_cache(maxsize=1024)
def pad_shape(shape: T.Shape, config: tuple) -> T.Shape:
    """Pad: interior padding between elements first, then edge padding (negative removes)."""
    def fail(rule):
        raise ShapeError(f"pad: operand {shape}, padding_config={list(config)}: {rule}")
    if len(config) != shape.rank:
        fail(f"needs one (low, high, interior) per dimension ({shape.rank}), got {len(config)}")
    dims = []
    for d, ((low, high, interior), n) in enumerate(zip(config, shape.dimensions)):
        if interior < 0:
            fail(f"dimension {d} has interior padding {interior}; it must be >= 0 (only edge "
                 f"padding may be negative)")
        size = low + high + n + max(n - 1, 0) * interior
        if size < 0:
            fail(f"dimension {d} would have size {size}; negative edge padding may remove at "
                 f"most the padded size")
        dims.append(size)
    return T.Shape(shape.element_type, tuple(dims))


def pad(operand, padding_value, padding_config):
    """Pad(operand, padding_value, padding_config): `interior` copies of padding_value between
    the elements of each dimension, then `low` before and `high` after (negative: removed).
    padding_value is a scalar Op of the operand's element type, or a Python number."""
    shape = array_operand("pad", "operand", operand)
    operand, value = as_operands("pad", operand, padding_value)
    if type(value.shape) is not T.Shape or value.shape.rank or value.dtype != shape.element_type:
        raise ShapeError(f"pad: padding_value must be a scalar {shape.element_type}[] like the "
                         f"operand {shape}, got {value.shape}")
    config = pad_config(shape, padding_config)
    low, high, interior = zip(*config) if config else ((), (), ())
    return operand.builder.add_op("stablehlo.pad", pad_shape(shape, config), [operand, value], {
        "edge_padding_low": i64_array(low), "edge_padding_high": i64_array(high),
        "interior_padding": i64_array(interior)})


# -- GetDimensionSize, SetDimensionSize --------------------------------------------------------

def get_dimension_size(operand, dimension):
    """GetDimensionSize(operand, dimension): the size of `dimension` as an s32 scalar."""
    shape = array_operand("get_dimension_size", "operand", operand)
    check_dimension("get_dimension_size", "dimension", dimension, shape.rank)
    return operand.builder.add_op("stablehlo.get_dimension_size", T.Shape(T.s32, ()), [operand],
                                  {"dimension": int_attr(dimension)})


def set_dimension_size(operand, size, dimension):
    """SetDimensionSize(operand, size, dimension): marks `dimension` as dynamic, of runtime
    size `size` (an s32 scalar Op), bounded by its static size.

    Emitted as stablehlo.set_dimension_size with the static (bound) type: hlogen's shapes
    hold the bound, and every backend runs it as XLA does (hlogen.dynamism): the ops after
    it see the first `size` elements, get_dimension_size gives `size`, and a result with a
    dynamic dimension comes back cut to its size. A constant size outside [0, bound] is a
    ShapeError here, a computed one an ExecutionError when it runs.
    """
    shape = array_operand("set_dimension_size", "operand", operand)
    check_dimension("set_dimension_size", "dimension", dimension, shape.rank)
    if not isinstance(size, Op) or size.shape != T.Shape(T.s32, ()):
        raise ShapeError(f"set_dimension_size: size must be an s32[] Op, got {size!r}")
    same_builder("set_dimension_size", operand, size)
    constant = mlir.defining_op(size.value, "stablehlo.constant")
    if constant is not None:
        value = int(np.array(ir.DenseElementsAttr(constant.attributes["value"])))
        if not 0 <= value <= shape.dimensions[dimension]:
            raise ShapeError(f"set_dimension_size: size {value} of dimension {dimension} of "
                             f"{shape} is outside [0, {shape.dimensions[dimension]}] (its bound)")
    return operand.builder.add_op("stablehlo.set_dimension_size", shape, [operand, size],
                                  {"dimension": int_attr(dimension)})
