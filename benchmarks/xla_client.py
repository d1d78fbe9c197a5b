"""hlogen.xla_client, the removed XlaBuilder API over hlogen, in one process:
- building: the same computations through xla_client.ops and through hlogen.ops, each to a
  verified module: a 2000-op element-wise chain (the emit benchmark's), and a 200-step
  program of mixed ops (dot, broadcasting, a reduction with its computation built by a
  second builder, transpose, slices, concatenation, select). Target: the compat layer
  within 1.5x of hlogen.ops (each build's module is freed in its own timing: an XlaBuilder
  once held itself in a reference cycle, which left its module to the garbage collector,
  outside the compat layer's timing);
- XlaComputation to XLA's HLO module: hlogen's path (the built module's bytecode, then
  XLA's converter) against jaxlib's mlir_module_to_xla_computation given the bytecode
  already, for both computations. Target: within 1.1x.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np
from jax._src.lib import _jax  # the baseline: jaxlib's own converter

import hlogen as hg
import hlogen.xla_client as xc
from hlogen import ops
from hlogen.xla_client import ops as xops
from _timing import interleaved_medians, machine

N_CHAIN, N_STEPS = 2000, 200
SHAPE = (16, 16)
F32 = xc.Shape.array_shape(np.dtype(np.float32), SHAPE)
VECTOR = xc.Shape.array_shape(np.dtype(np.float32), SHAPE[1:])
SCALAR = xc.Shape.array_shape(np.dtype(np.float32), ())


def chain_compat():
    c = xc.XlaBuilder("chain")
    x, y = xops.Parameter(c, 0, F32), xops.Parameter(c, 1, F32)
    steps = (xops.Add, xops.Mul, xops.Sub, xops.Max)
    acc = x
    for i in range(N_CHAIN):
        acc = steps[i % 4](acc, y)
    return c.build(acc)


def chain_hlogen():
    b = hg.Builder("chain")
    x, y = b.parameter(hg.f32[SHAPE]), b.parameter(hg.f32[SHAPE])
    steps = (ops.add, ops.mul, ops.sub, ops.max)
    acc = x
    for i in range(N_CHAIN):
        acc = steps[i % 4](acc, y)
    return b.build(acc)


def program_compat():
    c = xc.XlaBuilder("program")
    x, v = xops.Parameter(c, 0, F32), xops.Parameter(c, 1, VECTOR)
    add = xc.XlaBuilder("add")
    xops.Add(xops.Parameter(add, 0, SCALAR), xops.Parameter(add, 1, SCALAR))
    add = add.build()
    zero = xops.Constant(c, np.float32(0))
    acc = x
    for _ in range(N_STEPS // 5):
        acc = xops.Add(xops.Dot(acc, x), v, broadcast_dimensions=[1])
        row = xops.Reduce(c, [acc], [zero], add, [0])
        acc = xops.Mul(xops.Transpose(acc, [1, 0]), row, broadcast_dimensions=[0])
        halves = [xops.Slice(acc, [0, 0], [8, 16], [1, 1]), xops.Slice(acc, [8, 0], [16, 16], [1, 1])]
        acc = xops.Select(xops.Gt(acc, x), xops.ConcatInDim(c, halves[::-1], 0), acc)
    return c.build(acc)


def program_hlogen():
    b = hg.Builder("program")
    x, v = b.parameter(hg.f32[SHAPE]), b.parameter(hg.f32[SHAPE[1:]])
    zero = b.constant(np.float32(0))
    acc = x
    for _ in range(N_STEPS // 5):
        acc = ops.add(ops.dot(acc, x), v, broadcast_dimensions=[1])
        row = ops.reduce(acc, zero, lambda p, q: ops.add(p, q), [0])
        acc = ops.mul(ops.transpose(acc, [1, 0]), row, broadcast_dimensions=[0])
        halves = [ops.slice(acc, [0, 0], [8, 16]), ops.slice(acc, [8, 0], [16, 16])]
        acc = ops.select(ops.gt(acc, x), ops.concatenate(halves[::-1], 0), acc)
    return b.build(acc)


def same_values(compat, hlogen_comp):
    """Both builds compute the same function (checked once, before timing)."""
    backend = xc.get_local_backend("cpu")
    rng = np.random.default_rng(0)
    args = [rng.uniform(-0.1, 0.1, s.dimensions).astype(np.float32)
            for s in hlogen_comp.parameter_shapes]
    got = xc.execute_with_python_values(backend.compile(compat), args, backend)[0]
    np.testing.assert_array_equal(got, hg.compile(hlogen_comp)(*args))


def main():
    print(f"## xla_client: the removed XlaBuilder API over hlogen ({machine()})\n")
    print("| work | hlogen.xla_client | reference | ratio |")
    print("| --- | --- | --- | --- |")
    for name, compat, native in ((f"build a {N_CHAIN}-op element-wise chain", chain_compat,
                                  chain_hlogen),
                                 (f"build a {N_STEPS}-step mixed program", program_compat,
                                  program_hlogen)):
        same_values(compat(), native())
        medians = interleaved_medians({"compat": compat, "hlogen": native}, repeats=9)
        ratio = medians["compat"] / medians["hlogen"]
        print(f"| {name} | {medians['compat'] * 1e3:.2f} ms | {medians['hlogen'] * 1e3:.2f} ms "
              f"(hlogen.ops) | {ratio:.2f}x (target <= 1.5x) |")
    for name, build in (("chain", chain_compat), ("program", program_compat)):
        built = build()
        bytecode = built.computation.to_bytecode()

        def hlogen_path():
            return xc.XlaComputation._of(built.computation, built.tupled).hlo()

        def jaxlib_path():
            return _jax.mlir.mlir_module_to_xla_computation(bytecode, return_tuple=built.tupled)
        assert hlogen_path().as_hlo_text() == jaxlib_path().as_hlo_text()
        medians = interleaved_medians({"hlogen": hlogen_path, "jaxlib": jaxlib_path}, repeats=9)
        ratio = medians["hlogen"] / medians["jaxlib"]
        print(f"| XlaComputation -> HLO module, the {name} | {medians['hlogen'] * 1e3:.2f} ms | "
              f"{medians['jaxlib'] * 1e3:.2f} ms (mlir_module_to_xla_computation) | "
              f"{ratio:.3f}x (target <= 1.1x) |")


if __name__ == "__main__":
    main()
