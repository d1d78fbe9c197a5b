"""Emission speed, in one process:
- a 2000-op element-wise chain built by hlogen, by the raw MLIR Python bindings, and
  by jax.jit(f).lower: the same chain of add/mul/sub/max on f32[16,16] parameters.
  Targets: hlogen within 2x of the raw bindings, and at least 5x faster than jax lowering;
- a 500-op data-movement chain (transpose, slice, pad, gather) built by hlogen and by
  the raw bindings. Target: hlogen within 2x of the raw bindings.
Every candidate produces a verified module.
"""
from __future__ import annotations

import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))

import jax
from jax import lax
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, stablehlo

import hlogen as hg
from hlogen import mlir, ops
from _timing import interleaved_medians, print_table

N_OPS = 2000
SHAPE = (16, 16)


def hlogen_chain():
    b = hg.Builder("chain")
    x = b.parameter(hg.f32[SHAPE], "x")
    y = b.parameter(hg.f32[SHAPE], "y")
    steps = (ops.add, ops.mul, ops.sub, ops.max)
    acc = x
    for i in range(N_OPS):
        acc = steps[i % 4](acc, y)
    return b.build(acc)


def raw_module(parameter_types, body):
    """A verified module whose main takes `parameter_types()` (made in the context) and
    returns body(*arguments), built with the generated op builders of the bindings."""
    ctx = mlir.context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        types = parameter_types()
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("main", ir.FunctionType.get(types, [types[0]]))
            block = f.add_entry_block()
            with ir.InsertionPoint(block):
                func.ReturnOp([body(*block.arguments)])
        module.operation.verify()
    return module


def f32_matrix():
    return ir.RankedTensorType.get(SHAPE, ir.F32Type.get())


def raw_bindings_chain():
    def chain(x, y):
        steps = (stablehlo.add, stablehlo.multiply, stablehlo.subtract, stablehlo.maximum)
        acc = x
        for i in range(N_OPS):
            acc = steps[i % 4](acc, y)
        return acc
    return raw_module(lambda: [f32_matrix(), f32_matrix()], chain)


def jax_lower_chain():
    steps = (lax.add, lax.mul, lax.sub, lax.max)

    def f(x, y):  # a new function each time: jax caches traces per function
        acc = x
        for i in range(N_OPS):
            acc = steps[i % 4](acc, y)
        return acc
    spec = jax.ShapeDtypeStruct(SHAPE, "float32")
    return jax.jit(f).lower(spec, spec)


N_MOVES = 500  # transpose, slice, pad, gather: 4 ops a round


def hlogen_movement():
    b = hg.Builder("movement")
    acc = b.parameter(hg.f32[SHAPE], "x")
    start = b.parameter(hg.s32[2], "start")
    zero = b.constant(0.0)
    for _ in range(N_MOVES // 4):
        acc = ops.transpose(acc, [1, 0])
        acc = ops.slice(acc, [1, 1], [15, 15])
        acc = ops.pad(acc, zero, [(1, 1, 0), (1, 1, 0)])
        acc = ops.gather(acc, start, offset_dims=[0, 1], collapsed_slice_dims=[],
                         start_index_map=[0, 1], index_vector_dim=0, slice_sizes=SHAPE)
    return b.build(acc)


def raw_bindings_movement():
    def chain(acc, start):
        zero = stablehlo.constant(ir.DenseElementsAttr.get_splat(
            ir.RankedTensorType.get((), ir.F32Type.get()), ir.FloatAttr.get_f32(0.0)))
        numbers = stablehlo.GatherDimensionNumbers.get([0, 1], [], [], [], [0, 1], 0)
        for _ in range(N_MOVES // 4):
            acc = stablehlo.transpose(acc, [1, 0])
            acc = stablehlo.slice(acc, [1, 1], [15, 15], [1, 1])
            acc = stablehlo.pad(acc, zero, [1, 1], [1, 1], [0, 0])
            acc = stablehlo.gather(acc, start, numbers, list(SHAPE), indices_are_sorted=False)
        return acc
    return raw_module(lambda: [f32_matrix(), ir.RankedTensorType.get(
        (2,), ir.IntegerType.get_signless(32))], chain)


def main():
    # the same chain, checked once: hlogen and the raw bindings print the same ops
    assert hlogen_chain().as_text().count("stablehlo.maximum") == N_OPS // 4
    medians = interleaved_medians({"hlogen": hlogen_chain, "raw MLIR bindings": raw_bindings_chain,
                                   "jax.jit(f).lower": jax_lower_chain}, repeats=7)
    h, r, j = medians["hlogen"], medians["raw MLIR bindings"], medians["jax.jit(f).lower"]
    print_table(f"emit: a {N_OPS}-op element-wise chain", medians, "builder", N_OPS)
    print(f"\nhlogen / raw bindings: {h / r:.2f}x (target <= 2x); "
          f"jax lowering / hlogen: {j / h:.1f}x (target >= 5x)")

    assert hlogen_movement().as_text().count("\"stablehlo.gather\"(") == N_MOVES // 4
    medians = interleaved_medians({"hlogen": hlogen_movement,
                                   "raw MLIR bindings": raw_bindings_movement}, repeats=7)
    h, r = medians["hlogen"], medians["raw MLIR bindings"]
    print()
    print_table(f"emit: a {N_MOVES}-op data-movement chain: transpose, slice, pad, gather",
                medians, "builder", N_MOVES)
    print(f"\nhlogen / raw bindings: {h / r:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
