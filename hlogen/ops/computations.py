"""Ops that apply a computation over arrays: Reduce, ReduceWindow, SelectAndScatter, Map.

Each traces its computation with `builder.trace` (scalar parameters of the element
types the spec prescribes), after the shape rules.
"""
from __future__ import annotations

from hlogen import types as T
from hlogen.builder import Op, same_builder, trace
from hlogen.errors import ShapeError
from hlogen.mlir import i64_array
from hlogen.ops._common import array_operand, as_operand_list, dimension_list
from hlogen.ops.windows import window


def _scalars(operands) -> list[T.Shape]:
    return [T.Shape(o.dtype, ()) for o in operands]


def _same_dimensions(op_name: str, arg: str, operands) -> tuple:
    dims = operands[0].shape.dimensions
    if any(o.shape.dimensions != dims for o in operands):
        raise ShapeError(f"{op_name}: {arg} must have the same dimensions, got "
                         f"{', '.join(str(o.shape) for o in operands)}")
    return dims


def _init_values(op_name: str, operands, init_values) -> list[Op]:
    """One scalar per operand, of its element type; Python numbers become constants."""
    values = list(init_values) if isinstance(init_values, (list, tuple)) else [init_values]
    if len(values) != len(operands):
        raise ShapeError(f"{op_name}: {len(operands)} operand(s) need as many init_values, got "
                         f"{len(values)}")
    result = []
    for i, (v, o) in enumerate(zip(values, operands)):
        if not isinstance(v, Op):
            try:
                v = o.builder.constant(v, o.dtype)
            except ShapeError as e:
                raise ShapeError(f"{op_name}: init_values[{i}]: {e}") from None
        if v.shape != T.Shape(o.dtype, ()):
            raise ShapeError(f"{op_name}: init_values[{i}] must be a scalar {o.dtype}[] like "
                             f"operand {i} ({o.shape}), got {v.shape}")
        result.append(v)
    return result


def _bare_or_tuple(single: bool, results: list[Op]):
    return results[0] if single else tuple(results)


def reduce(operands, init_values, computation, dimensions):
    """Reduce(operands, init_values, computation, dimensions): `computation` folds the
    elements along `dimensions` (unordered) into each init value; the other dimensions
    stay, in order. With N operands the computation takes the N running values, then the
    N input values, and returns N values."""
    single = isinstance(operands, Op)
    operands = as_operand_list("reduce", "operands", operands)
    dims = _same_dimensions("reduce", "operands", operands)
    inits = _init_values("reduce", operands, init_values)
    builder = same_builder("reduce", *operands, *inits)
    reduced = dimension_list("reduce", "dimensions", dimensions, operands[0].shape)
    kept = tuple(n for d, n in enumerate(dims) if d not in reduced)
    scalars = _scalars(operands)
    region = trace(builder, "reduce", "computation", computation, scalars + scalars, scalars)
    return _bare_or_tuple(single, builder.add_op_with_regions(
        "stablehlo.reduce", [T.Shape(o.dtype, kept) for o in operands], operands + inits,
        {"dimensions": i64_array(sorted(reduced))}, [region]))


def reduce_window(operands, init_values, computation, window_dimensions, window_strides=None,
                  padding="VALID", base_dilations=None, window_dilations=None):
    """ReduceWindow: Reduce over each window of the (padded, dilated) operands; padding
    elements take the init value. `padding` is "SAME", "VALID" or [(low, high), ...]."""
    single = isinstance(operands, Op)
    operands = as_operand_list("reduce_window", "operands", operands)
    dims = _same_dimensions("reduce_window", "operands", operands)
    inits = _init_values("reduce_window", operands, init_values)
    builder = same_builder("reduce_window", *operands, *inits)
    w = window("reduce_window", dims, window_dimensions, window_strides, padding, base_dilations,
               window_dilations)
    out = w.output_dimensions(dims)
    scalars = _scalars(operands)
    region = trace(builder, "reduce_window", "computation", computation, scalars + scalars, scalars)
    return _bare_or_tuple(single, builder.add_op_with_regions(
        "stablehlo.reduce_window", [T.Shape(o.dtype, out) for o in operands], operands + inits,
        w.attributes(), [region]))


def select_and_scatter(operand, select, window_dimensions, window_strides, padding, source,
                       init_value, scatter):
    """SelectAndScatter: in each window of operand, `select` (T, T -> pred) picks one
    element; the source value of that window is combined by `scatter` (T, T -> T) into
    the result (init_value elsewhere) at the picked position. Overlapping windows
    accumulate."""
    shape = array_operand("select_and_scatter", "operand", operand)
    source_shape = array_operand("select_and_scatter", "source", source)
    (init,) = _init_values("select_and_scatter", [operand], [init_value])
    builder = same_builder("select_and_scatter", operand, source, init)
    w = window("select_and_scatter", shape.dimensions, window_dimensions, window_strides, padding)
    expected = T.Shape(shape.element_type, w.output_dimensions(shape.dimensions))
    if source_shape != expected:
        raise ShapeError(f"select_and_scatter: source must have one element per window of "
                         f"operand {shape}: {expected}, got {source_shape}")
    scalar = T.Shape(shape.element_type, ())
    select_region = trace(builder, "select_and_scatter", "select", select, [scalar, scalar],
                          [T.Shape(T.pred, ())])
    scatter_region = trace(builder, "select_and_scatter", "scatter", scatter, [scalar, scalar],
                           [scalar])
    (result,) = builder.add_op_with_regions(
        "stablehlo.select_and_scatter", [shape], [operand, source, init],
        w.attributes(dilations=False), [select_region, scatter_region])
    return result


def map(operands, computation, dimensions=None):  # the spec's name
    """Map(operands, computation): `computation` of N scalars applied at every index of
    the N operands (of equal dimensions); its scalar result type is the result's element
    type. `dimensions`, if given, must be every dimension in order (as XLA requires)."""
    operands = as_operand_list("map", "operands", operands)
    dims = _same_dimensions("map", "operands", operands)
    builder = same_builder("map", *operands)
    every = tuple(range(len(dims)))
    if dimensions is not None and tuple(dimension_list("map", "dimensions", dimensions,
                                                       operands[0].shape)) != every:
        raise ShapeError(f"map: dimensions={list(dimensions)} must be every dimension of "
                         f"{operands[0].shape} in order, {list(every)}")
    region = trace(builder, "map", "computation", computation, _scalars(operands))
    if len(region.result_shapes) != 1 or not isinstance(region.result_shapes[0], T.Shape) or \
            region.result_shapes[0].rank != 0:
        got = ", ".join(str(s) for s in region.result_shapes)
        raise ShapeError(f"map: the computation must return one scalar; it returns ({got})")
    (result,) = builder.add_op_with_regions(
        "stablehlo.map", [T.Shape(region.result_shapes[0].element_type, dims)], operands,
        {"dimensions": i64_array(every)}, [region])
    return result
