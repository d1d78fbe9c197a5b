"""The reference interpreter's rewrites: ops it lacks or gets wrong, written with ops it has.

Each is an entry of hlogen.rewrites' table for the "interpret" backend; PJRT compiles
the ops as they are, so the interpreter stays an independent oracle for them. Each
rewrite is the op's definition (the StableHLO spec's formula, or what XLA computes
where the spec leaves it open), emitted with hlogen's own ops before the op it replaces.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir._mlir_libs import _jax_mlir_ext

from hlogen import mlir, ops, random_bits  # noqa: F401 - random_bits registers its rewrites
from hlogen import types as T
from hlogen.builder import InsertingBuilder, Op
from hlogen.rewrites import register, rewrite_module

INTERPRET = "interpret"


def _attr_int(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _attr_ints(op: ir.Operation, name: str) -> list[int]:
    if name not in op.attributes:
        return []
    attr = op.attributes[name]
    try:
        return list(ir.DenseI64ArrayAttr(attr))
    except ValueError:  # a DenseIntElementsAttr (padding, older forms)
        return [int(x) for x in np.array(ir.DenseIntElementsAttr(attr)).reshape(-1)]


def _region_callable(op: ir.Operation, index: int):
    """Region `index` of `op` as a callable of Ops (for hlogen's ops that take a
    computation); the region's block is moved out of `op`, which is about to be erased."""
    block = op.regions[index].blocks[0]
    arguments = [a.type for a in block.arguments]
    terminator = list(block.operations)[-1]
    results = [v.type for v in terminator.operands]
    holder = ir.Module.create(op.location)
    with ir.InsertionPoint(holder.body), op.location:
        function = func.FuncOp("region", ir.FunctionType.get(arguments, results))
    block.append_to(function.regions[0])
    func.ReturnOp(list(terminator.operands), loc=terminator.location,
                  ip=ir.InsertionPoint(terminator))
    terminator.erase()

    def call(*args: Op) -> list[Op]:
        b = args[0].builder
        with b._ip, op.location:
            values = _jax_mlir_ext.inlined_func_call(function.operation, [a.value for a in args])
        return [Op(b, v, mlir.shape_of_type(v.type)) for v in values]
    call.holder = holder  # keeps the function alive while the callable is
    return call


# -- batch norm: the interpreter has none of the three ---------------------------------------

_BATCH_NORM = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference",
               "stablehlo.batch_norm_grad")


def _batch_norm(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    name = op.name
    epsilon = ir.FloatAttr(op.attributes["epsilon"]).value
    feature_index = _attr_int(op, "feature_index")
    x = operands[0]
    shape, et = x.shape, x.dtype
    axes = [d for d in range(shape.rank) if d != feature_index]
    count = shape.size // shape.dimensions[feature_index] if shape.dimensions[feature_index] else 0

    def spread(vector):  # a per-feature vector laid out like x
        return ops.broadcast_in_dim(vector, shape.dimensions, [feature_index])

    def total(value):  # the sum over everything but the feature dimension
        return ops.reduce(value, 0.0, ops.add, axes)

    def mean_of(value):
        return ops.div(total(value), b.constant(count, et))

    if name == "stablehlo.batch_norm_training":
        _, scale, offset = operands
        mean = mean_of(x)
        centered = ops.sub(x, spread(mean))
        variance = mean_of(ops.mul(centered, centered))
    elif name == "stablehlo.batch_norm_inference":
        _, scale, offset, mean, variance = operands
        centered = ops.sub(x, spread(mean))
    else:  # batch_norm_grad
        _, scale, mean, variance, grad_output = operands
        centered = ops.sub(x, spread(mean))
    inverse = ops.rsqrt(ops.add(variance, b.constant(epsilon, et)))
    normalized = ops.mul(centered, spread(inverse))
    if name != "stablehlo.batch_norm_grad":
        output = ops.add(ops.mul(normalized, spread(scale)), spread(offset))
        return [output, mean, variance] if name.endswith("training") else [output]
    grad_offset = total(grad_output)
    grad_scale = total(ops.mul(grad_output, normalized))
    # scale / stddev / N * (N dy - sum(dy) - normalized * sum(dy * normalized))
    inner = ops.sub(ops.sub(ops.mul(grad_output, b.constant(count, et)), spread(grad_offset)),
                    ops.mul(normalized, spread(grad_scale)))
    factor = ops.div(ops.mul(scale, inverse), b.constant(count, et))
    return [ops.mul(spread(factor), inner), grad_scale, grad_offset]



for _name in _BATCH_NORM:
    register(INTERPRET, _name, "the interpreter has no implementation of it")(_batch_norm)


# -- select_and_scatter: the interpreter applies the init value twice where it scatters ------

@register(INTERPRET, "stablehlo.select_and_scatter",
          "the interpreter combines the init value twice into every selected element")
def _select_and_scatter(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """XLA's definition: in each window (padding never selected) the element `select`
    prefers to every later one, in row-major order, is picked; each source value is then
    combined by `scatter` into init_value at its window's pick, windows in row-major order.
    Written as a reduce_window of (valid, value, flat index) and a scatter."""
    operand, source, init = operands
    shape = operand.shape
    select, scatter = _region_callable(op, 0), _region_callable(op, 1)
    window = _attr_ints(op, "window_dimensions")
    strides = _attr_ints(op, "window_strides") or [1] * shape.rank
    flat = _attr_ints(op, "padding")
    padding = [(flat[2 * i], flat[2 * i + 1]) for i in range(shape.rank)] if flat else \
        [(0, 0)] * shape.rank
    index_type = T.s64
    valid = ops.broadcast(b.constant(True), shape.dimensions)
    position = ops.reshape(ops.iota(b, T.Shape(index_type, (shape.size,)), 0), shape.dimensions)

    def pick(valid_a, value_a, index_a, valid_b, value_b, index_b):
        (prefers_a,) = select(value_a, value_b)
        keep = ops.and_(valid_a, ops.or_(ops.not_(valid_b), prefers_a))
        return (ops.select(keep, valid_a, valid_b), ops.select(keep, value_a, value_b),
                ops.select(keep, index_a, index_b))

    # padding takes the init values: never valid, so never picked
    _, _, picked = ops.reduce_window(
        [valid, operand, position],
        [b.constant(False), b.constant(0, shape.dtype),
         b.constant(-1, index_type)],
        pick, window, strides, padding)
    count = source.shape.size
    result = ops.scatter(
        ops.broadcast(init, (shape.size,)), ops.reshape(picked, (count, 1)),
        ops.reshape(source, (count,)), lambda current, update: scatter(current, update)[0],
        update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1)
    return [ops.reshape(result, shape.dimensions)]


def decompose_for_interpreter(module: ir.Module) -> int:
    """Rewrites the ops the interpreter lacks or gets wrong (the "interpret" entries of
    hlogen.rewrites' table); returns how many."""
    return rewrite_module(module, INTERPRET)


__all__ = ["decompose_for_interpreter"]
