"""Ops that create or grow arrays: Iota, Broadcast, BroadcastInDim."""
from __future__ import annotations

from hlogen import types as T
from hlogen.builder import Builder
from hlogen.errors import ShapeError
from hlogen.mlir import int_attr
from hlogen.ops._common import (ARITHMETIC, array_operand, broadcast_in_dim as _emit_broadcast,
                                check_dimension, describe_kinds, int_list)


def iota(builder, shape, iota_dimension):
    """Iota(shape, iota_dimension): values 0, 1, 2, ... along `iota_dimension`."""
    if not isinstance(builder, Builder):
        raise ShapeError(f"iota: builder must be a Builder, got {type(builder).__name__}")
    shape = T.as_shape(shape)
    if not isinstance(shape, T.Shape) or shape.rank == 0:
        raise ShapeError(f"iota: shape must be an array of rank >= 1, got {shape}")
    if shape.element_type.kind not in ARITHMETIC:
        raise ShapeError(f"iota: element type {shape.element_type} is not one of "
                         f"{describe_kinds(ARITHMETIC)}")
    check_dimension("iota", "iota_dimension", iota_dimension, shape.rank)
    return builder.add_op("stablehlo.iota", shape, [], {"iota_dimension": int_attr(iota_dimension)})


def broadcast_in_dim_shape(shape: T.Shape, out_dim_size, broadcast_dimensions) -> T.Shape:
    """The result shape of BroadcastInDim; checks the spec's rules."""
    out = int_list("broadcast_in_dim", "out_dim_size", out_dim_size)
    dims = int_list("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
    where = (f"broadcast_in_dim: operand {shape}, out_dim_size={list(out)}, "
             f"broadcast_dimensions={list(dims)}")
    if any(d < 0 for d in out):
        raise ShapeError(f"{where}: sizes must be non-negative")
    if len(dims) != shape.rank:
        raise ShapeError(f"{where}: broadcast_dimensions needs one entry per operand dimension "
                         f"({shape.rank})")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{where}: broadcast_dimensions must not repeat a dimension")
    for i, d in enumerate(dims):
        if not 0 <= d < len(out):
            raise ShapeError(f"{where}: dimension {d} is out of range for rank {len(out)}")
        if shape.dimensions[i] not in (1, out[d]):
            raise ShapeError(f"{where}: operand dimension {i} (size {shape.dimensions[i]}) must be "
                             f"1 or equal to output dimension {d} (size {out[d]})")
    return T.Shape(shape.element_type, out)


def broadcast_in_dim(operand, out_dim_size, broadcast_dimensions):
    """BroadcastInDim: operand dimension i becomes output dimension broadcast_dimensions[i]
    (its size must be 1 or the output's); the other output dimensions replicate it."""
    shape = array_operand("broadcast_in_dim", "operand", operand)
    dims = int_list("broadcast_in_dim", "broadcast_dimensions", broadcast_dimensions)
    result = broadcast_in_dim_shape(shape, out_dim_size, dims)
    return _emit_broadcast(operand, result.dimensions, dims)


def broadcast(operand, broadcast_sizes):
    """Broadcast: adds dimensions `broadcast_sizes` on the left (major side) of operand."""
    shape = array_operand("broadcast", "operand", operand)
    sizes = int_list("broadcast", "broadcast_sizes", broadcast_sizes)
    if any(s < 0 for s in sizes):
        raise ShapeError(f"broadcast: broadcast_sizes={list(sizes)} must be non-negative "
                         f"(operand {shape})")
    n = len(sizes)
    return _emit_broadcast(operand, sizes + shape.dimensions, range(n, n + shape.rank))
