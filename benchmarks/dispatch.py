"""Dispatch cost: a tiny computation (f32[8] + f32[8]) called from numpy through an
hlogen executable and through jax.jit, numpy arrays in and numpy arrays out, in one
process, both on jax's default device. Target: hlogen no slower than jax.jit.

Two more rows explain the ratio: the same C++ dispatch call with hlogen's executable
and with jax.jit's, each returning a jax array (no numpy conversion, no checks).
"""
from __future__ import annotations

import sys

sys.path.insert(0, __import__("os").path.dirname(__file__))

import jax
import numpy as np

import hlogen as hg
from hlogen import ops
from hlogen.runtime import _jaxlib
from _timing import interleaved_medians, print_table

CALLS = 2000


def main():
    b = hg.Builder("tiny")
    comp = b.build(ops.add(b.parameter(hg.f32[8], "x"), b.parameter(hg.f32[8], "y")))
    exe = hg.compile(comp)  # both on jax's default device
    jitted = jax.jit(lambda x, y: x + y)
    x = np.arange(8, dtype=np.float32)
    y = np.ones(8, np.float32)
    np.testing.assert_array_equal(exe(x, y), np.asarray(jitted(x, y)))

    # hlogen's executable in jax's C++ dispatch, without what hlogen's __call__ adds
    cpp_only = _jaxlib.fast_path("tiny", exe._run_and_describe)
    medians = interleaved_medians({
        "hlogen executable": lambda: exe(x, y),
        "jax.jit": lambda: np.asarray(jitted(x, y)),
        "C++ dispatch alone, hlogen's executable (jax array out)": lambda: cpp_only(x, y),
        "C++ dispatch alone, jax.jit (jax array out)": lambda: jitted(x, y),
    }, repeats=15, inner=CALLS)
    h, j = medians["hlogen executable"], medians["jax.jit"]
    print_table("dispatch: f32[8] + f32[8] from numpy to numpy", medians)
    print(f"\nhlogen / jax.jit: {h / j:.2f}x (target <= 1.0x)")


if __name__ == "__main__":
    main()
