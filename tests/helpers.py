"""Shared test helpers: run on both backends, compare with references."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import ml_dtypes
import numpy as np

import hlogen as hg

BACKENDS = ("cpu", "interpret")

# The narrow types that tests/test_element_types_narrow.py covers (every value, both
# backends, and what a backend refuses); the tests that run every type take the others.
NARROW_TYPES = ("f8e4m3", "f8e3m4", "f8e4m3fnuz", "f8e5m2fnuz", "f8e4m3b11fnuz", "f8e8m0fnu",
                "f4e2m1fn", "f6e2m3fn", "f6e3m2fn", "s2", "u2")
EVERY_TYPE = [t for t in hg.ELEMENT_TYPES.values() if t.name not in NARROW_TYPES]

# The element types each backend gets wrong, as seen on jaxlib 0.10.2 (stated here, not
# read from hlogen.backends, which must refuse exactly these): XLA CPU fails to compile
# f6 and ends the process on an f6 constant; the interpreter rounds the largest finite
# f4/f6 value to 0 and gives f8e8m0fnu numbers where it has NaN.
WRONG_TYPES = {"cpu": {"f6e2m3fn", "f6e3m2fn"},
               "interpret": {"f4e2m1fn", "f6e2m3fn", "f6e3m2fn", "f8e8m0fnu"}}


def run(comp, backend, *args):
    return hg.compile(comp, backend=backend)(*args)


def run_both(comp, *args):
    """Results on PJRT (CPU) and on the reference interpreter."""
    return [run(comp, b, *args) for b in BACKENDS]


def single_op(fn, *shapes):
    """A computation applying `fn` to one parameter per shape."""
    b = hg.Builder("case")
    params = [b.parameter(s, f"p{i}") for i, s in enumerate(shapes)]
    result = fn(*params)
    return b.build(*result) if isinstance(result, tuple) else b.build(result)


# Tolerances for ops that are not exact (transcendental functions), by element type:
# relative, absolute.
TOLERANCE = {
    "f64": (1e-12, 1e-300), "f32": (2e-6, 1e-37), "f16": (2e-3, 1e-7), "bf16": (1.6e-2, 1e-30),
    "f8e4m3fn": (1.3e-1, 2e-3), "f8e5m2": (2.6e-1, 2e-5), "c64": (2e-6, 1e-6), "c128": (1e-12, 1e-14),
}


def assert_close(actual, expected, et, exact=True, context=""):
    """Exact comparison (NaN equals NaN, -0 equals +0), or within TOLERANCE[et]."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{context}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{context}: dtype {actual.dtype} != {expected.dtype}"
    wide = np.complex128 if actual.dtype.kind == "c" else np.float64
    if actual.dtype.kind in "biu" or actual.dtype in (ml_dtypes.int4, ml_dtypes.uint4):
        np.testing.assert_array_equal(actual.astype(np.int64), expected.astype(np.int64), err_msg=context)
    elif exact:
        np.testing.assert_array_equal(actual.astype(wide), expected.astype(wide), err_msg=context)
    else:
        rtol, atol = TOLERANCE[et]
        np.testing.assert_allclose(actual.astype(wide), expected.astype(wide), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=context)


def bits_equal(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same(actual, expected, dtype=None):
    """Equal bit for bit, with the same shape and dtype (`expected` made of `dtype`, or of
    actual's dtype)."""
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=dtype if dtype is not None else actual.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    assert actual.tobytes() == expected.tobytes(), (actual, expected)


# -- test scaffolding for the reducer (tests/test_reduce.py, benchmarks/reduce.py) -------------
# Not the comparison library (XLA's Near rule and run_hlo_module's random inputs live in
# hlogen.differential's compare, on their own branch): a fixed input per parameter and an
# np.allclose-style check are enough to say "the two backends still disagree".

def fixed_inputs(comp, value=100.0) -> list:
    """One array per parameter: floats all `value`, integers 1, predicates True."""
    inputs = []
    for shape in comp.parameter_shapes:
        kind = shape.element_type.kind
        fill = value if kind in ("float", "complex") else True if kind == "pred" else 1
        inputs.append(np.full(shape.dimensions, fill, shape.dtype))
    return inputs


def results_differ(comp, value=100.0, tolerance=1e-3) -> bool:
    """Whether PJRT CPU and the interpreter give results that differ by more than
    `tolerance` (absolute and relative, NaN equal to NaN) on fixed_inputs(comp, value)."""
    args = fixed_inputs(comp, value)
    cpu, interpreted = (r if isinstance(r, tuple) else (r,) for r in run_both(comp, *args))
    for a, b in zip(cpu, interpreted):
        wide = np.complex128 if a.dtype.kind == "c" else np.float64
        if not np.allclose(a.astype(wide), b.astype(wide), rtol=tolerance, atol=tolerance,
                           equal_nan=True):
            return True
    return False


# what residual_stack adds at its middle layer, by name (jax.numpy functions of x)
REWRITTEN = {
    "log(exp(x))": lambda x: _jnp().log(_jnp().exp(x)),
    "round to integer": lambda x: (x + 12582912.0) - 12582912.0,
}


def _jnp():
    import jax.numpy  # here: only the tests and benchmarks that make jax programs need it
    return jax.numpy


def residual_stack(layers: int, width: int = 8, hidden: int = 16,
                   rewrite: str = "log(exp(x))") -> hg.Computation:
    """A jax program as jax lowers it: `layers` residual blocks (each a call of a jitted
    function: matmul, bias, tanh, matmul, residual add) with an RMS norm after each, and
    `log(exp(x))` of the input added at the middle layer: about 15 ops per layer. On
    inputs of 100, XLA CPU rewrites log(exp(x)) to x (algsimp) while the interpreter
    overflows to inf, so the results differ. `rewrite="round to integer"` adds
    `(x + 12582912) - 12582912` instead, which XLA CPU rewrites to x and the interpreter
    rounds to an integer: the results differ on the random inputs of
    hlogen.differential (in [-0.1, 0.2))."""
    import jax  # here: only the tests and benchmarks that make jax programs need it
    import jax.numpy as jnp

    @jax.jit
    def block(h, w1, b1, w2):
        return h + 0.5 * (jnp.tanh(h @ w1 + b1) @ w2)

    def stack(x, params):
        h = x
        for i, (w1, b1, w2) in enumerate(params):
            h = block(h, w1, b1, w2)
            h = h * jax.lax.rsqrt((h * h).mean(-1, keepdims=True) + 1e-5)
            if i == len(params) // 2:
                h = h + REWRITTEN[rewrite](x)
        return h, h.sum()

    x = np.zeros((4, width), np.float32)
    params = [(np.zeros((width, hidden), np.float32), np.zeros(hidden, np.float32),
               np.zeros((hidden, width), np.float32)) for _ in range(layers)]
    return hg.load(jax.jit(stack).lower(x, params).as_text())


HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")  # the installed command


def hlogen_in(folder, *args):
    """The installed `hlogen` run in `folder` (its executable cache there): the process as
    a user starts it, its output captured."""
    env = {**os.environ, "HLOGEN_CACHE_DIR": str(folder / "cache")}
    return subprocess.run([str(HLOGEN), *map(str, args)], cwd=folder, capture_output=True,
                          text=True, env=env, timeout=300)
