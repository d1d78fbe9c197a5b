"""Emission speed: a 2000-op element-wise chain built by hlogen, by the raw MLIR
Python bindings, and by jax.jit(f).lower, in one process.

Each candidate produces a verified module of the same chain of add/mul/sub/max on
f32[16,16] parameters. Targets: hlogen within 2x of the raw bindings, and at least
5x faster than jax lowering.
"""
from __future__ import annotations

import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))

import jax  # noqa: E402
from jax import lax  # noqa: E402
from jaxlib.mlir import ir  # noqa: E402
from jaxlib.mlir.dialects import func, stablehlo  # noqa: E402

import hlogen as hg  # noqa: E402
from hlogen import mlir, ops  # noqa: E402
from _timing import interleaved_medians, machine  # noqa: E402

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


def raw_bindings_chain():
    ctx = mlir.context()
    with ctx, ir.Location.unknown():
        module = ir.Module.create()
        t = ir.RankedTensorType.get(SHAPE, ir.F32Type.get())
        with ir.InsertionPoint(module.body):
            f = func.FuncOp("main", ir.FunctionType.get([t, t], [t]))
            block = f.add_entry_block()
            with ir.InsertionPoint(block):
                x, y = block.arguments
                steps = (stablehlo.add, stablehlo.multiply, stablehlo.subtract, stablehlo.maximum)
                acc = x
                for i in range(N_OPS):
                    acc = steps[i % 4](acc, y)
                func.ReturnOp([acc])
        module.operation.verify()
    return module


def jax_lower_chain():
    steps = (lax.add, lax.mul, lax.sub, lax.max)

    def f(x, y):  # a new function each time: jax caches traces per function
        acc = x
        for i in range(N_OPS):
            acc = steps[i % 4](acc, y)
        return acc
    spec = jax.ShapeDtypeStruct(SHAPE, "float32")
    return jax.jit(f).lower(spec, spec)


def main():
    # the same chain, checked once: hlogen and the raw bindings print the same ops
    assert hlogen_chain().as_text().count("stablehlo.maximum") == N_OPS // 4
    medians = interleaved_medians({"hlogen": hlogen_chain, "raw MLIR bindings": raw_bindings_chain,
                                   "jax.jit(f).lower": jax_lower_chain}, repeats=7)
    h, r, j = medians["hlogen"], medians["raw MLIR bindings"], medians["jax.jit(f).lower"]
    print(f"## emit: a {N_OPS}-op element-wise chain ({machine()})\n")
    print("| builder | median | per op |")
    print("| --- | --- | --- |")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds * 1e3:.1f} ms | {seconds / N_OPS * 1e6:.2f} us |")
    print(f"\nhlogen / raw bindings: {h / r:.2f}x (target <= 2x); "
          f"jax lowering / hlogen: {j / h:.1f}x (target >= 5x)")


if __name__ == "__main__":
    main()
