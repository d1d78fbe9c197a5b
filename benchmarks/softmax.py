"""Running a real computation: softmax over the rows of an f32[1024, 1024] array, built
with hlogen (samples/computations.py's Reduce max / Reduce add form) and the same
operations through jax.jit, numpy in and numpy out, in one process on jax's default
device. Target: hlogen's executable no slower than jax's (ratio <= 1.03).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "samples"))

import jax
import jax.numpy as jnp
import numpy as np

import hlogen as hg
from _timing import interleaved_medians, print_table
from computations import _softmax

SHAPE = (1024, 1024)


def main():
    b = hg.Builder("softmax")
    exe = hg.compile(b.build(_softmax(b.parameter(hg.f32[SHAPE], "x"), 1)))

    @jax.jit
    def jax_softmax(x):
        shifted = jnp.exp(x - jnp.max(x, axis=1, keepdims=True))
        return shifted / jnp.sum(shifted, axis=1, keepdims=True)

    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    np.testing.assert_allclose(exe(x), np.asarray(jax_softmax(x)), rtol=1e-6, atol=1e-9)
    medians = interleaved_medians({"hlogen executable": lambda: exe(x),
                                   "jax.jit": lambda: np.asarray(jax_softmax(x))},
                                  repeats=15, inner=20)
    h, j = medians["hlogen executable"], medians["jax.jit"]
    print_table(f"softmax over f32[{SHAPE[0]},{SHAPE[1]}] from numpy to numpy", medians)
    print(f"\nhlogen / jax.jit: {h / j:.3f}x (target <= 1.03x)")


if __name__ == "__main__":
    main()
