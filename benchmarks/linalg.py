"""Where real programs spend their time: a 512x512 f32 matmul and a 3x3 convolution of a
1x64x56x56 input (64 output features, "SAME"), built with hlogen and the same computation
through jax.jit, numpy in and numpy out, in one process on jax's default device.
Target: hlogen / jax.jit <= 1.03 (hlogen adds nothing to XLA's time).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import jax
import numpy as np

import hlogen as hg
from hlogen import ops
from _timing import interleaved_medians, machine


def matmul_case():
    n = 512
    b = hg.Builder("matmul")
    exe = hg.compile(b.build(ops.dot(b.parameter(hg.f32[n, n]), b.parameter(hg.f32[n, n]))))
    jitted = jax.jit(lambda x, y: x @ y)
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    return "matmul f32[512,512] x f32[512,512]", 2 * n ** 3, exe, jitted, (x, y)


def conv_case():
    lhs, rhs = (1, 64, 56, 56), (64, 64, 3, 3)
    b = hg.Builder("conv")
    exe = hg.compile(b.build(ops.conv(b.parameter(hg.f32[lhs]), b.parameter(hg.f32[rhs]), [1, 1],
                                      "SAME")))
    jitted = jax.jit(lambda x, k: jax.lax.conv_general_dilated(x, k, (1, 1), "SAME"))
    rng = np.random.default_rng(1)
    x, k = rng.standard_normal(lhs).astype(np.float32), rng.standard_normal(rhs).astype(np.float32)
    flops = 2 * 56 * 56 * 64 * 64 * 3 * 3
    return "conv 3x3 f32[1,64,56,56] (64 features, SAME)", flops, exe, jitted, (x, k)


def main():
    print(f"## linalg: hlogen vs jax.jit, numpy in and out ({machine()})\n")
    print("| computation | hlogen | jax.jit | hlogen / jax.jit | hlogen GFLOP/s |")
    print("| --- | --- | --- | --- | --- |")
    for name, flops, exe, jitted, args in (matmul_case(), conv_case()):
        np.testing.assert_allclose(exe(*args), np.asarray(jitted(*args)), rtol=1e-3, atol=1e-3)
        medians = interleaved_medians({"hlogen": lambda: exe(*args),
                                       "jax.jit": lambda: np.asarray(jitted(*args))},
                                      repeats=15, inner=10)
        h, j = medians["hlogen"], medians["jax.jit"]
        print(f"| {name} | {h * 1e3:.3f} ms | {j * 1e3:.3f} ms | {h / j:.3f}x (target <= 1.03x) | "
              f"{flops / h / 1e9:.1f} |")


if __name__ == "__main__":
    main()
