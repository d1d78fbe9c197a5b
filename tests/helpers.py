"""Shared test helpers: run on both backends, compare with references."""
from __future__ import annotations

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
