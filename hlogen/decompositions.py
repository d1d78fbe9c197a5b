"""Ops the reference interpreter has no implementation of, written with ops it has.

Only the interpreter's module is rewritten (PJRT compiles the ops as they are): so the
interpreter stays an oracle for them. Each decomposition is the formula the StableHLO
spec gives for the op, emitted with hlogen's own ops before the op it replaces.
"""
from __future__ import annotations

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen.builder import InsertingBuilder, Op


def _batch_norm(name: str, b: InsertingBuilder, operands: list[Op], epsilon: float,
                feature_index: int) -> list[Op]:
    from hlogen import ops
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


_BATCH_NORM = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference",
               "stablehlo.batch_norm_grad")


def decompose_for_interpreter(module: ir.Module) -> int:
    """Replaces the batch norm ops of `module` by their formulas; returns how many."""
    count = 0
    for op in mlir.walk(module):
        if op.name not in _BATCH_NORM:
            continue
        b = InsertingBuilder(module, op, f"the decomposition of {op.name}")
        operands = [Op(b, v, mlir.shape_of_type(v.type)) for v in op.operands]
        epsilon = ir.FloatAttr(op.attributes["epsilon"]).value
        feature_index = ir.IntegerAttr(op.attributes["feature_index"]).value
        for old, new in zip(op.results, _batch_norm(op.name, b, operands, epsilon, feature_index)):
            old.replace_all_uses_with(new.value)
        op.erase()
        count += 1
    return count


__all__ = ["decompose_for_interpreter"]
