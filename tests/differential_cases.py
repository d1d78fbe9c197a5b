"""Modules the differential tests share: XLA's rewrites that the StableHLO interpreter
does not make, inside a small network, made with jax."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import hlogen as hg
from hlogen.runtime import pjrt


def jax_module(f, *args) -> hg.Computation:
    """`f` as jax lowers it for `args`. hlogen's backend starts first: jax's lowering
    would start it with one CPU device, and later tests of this process run replicas."""
    pjrt.client("cpu")
    return hg.load(jax.jit(f).lower(*args).as_text())


W = np.full((4, 4), 0.01, np.float32)

# XLA's algebraic simplifier rewrites each (DIFFERENTIAL_NOTES): the input where CPU and
# the interpreter disagree, CPU's value there and the interpreter's
REWRITES = {
    "log(exp(x))": (lambda x: jnp.log(jnp.exp(x)), [1, 100, 3, 50], 100, np.inf),
    "round to integer": (lambda x: (x + 12582912.0) - 12582912.0, [0.3, 1.7, 2.5, -3.25],
                         1.7, 2.0),
    "sqrt(x*x)": (lambda x: jnp.sqrt(x * x), [2, 3e19, 1, 4], 3e19, np.inf),
    "(x*c)/c": (lambda x: (x * 1e10) / 1e10, [2, 3e30, 1, 4], 3e30, np.inf),
}


def program(rewrite):
    """A small network with `rewrite` inside: a layer, the rewrite, a ReLU."""
    def f(x, w):
        hidden = jnp.tanh(w @ x)
        y = rewrite(x) + hidden.sum()
        return jnp.maximum(y, 0.0) * 0.5, hidden
    return f


def rewritten(name) -> tuple[hg.Computation, list]:
    rewrite, x, _, _ = REWRITES[name]
    comp = jax_module(program(rewrite), np.zeros(4, np.float32), W)
    return comp, [np.array(x, np.float32), W]
