"""The tests' ULP yardstick (tests/ulp.py) on pairs whose distance is known, its two
methods against each other, and hlogen.differential.near.ulp_distance against it."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from hlogen.differential.near import ulp_distance
from tests import ulp

F32_TINY = np.float32(2.0 ** -149)  # the smallest subnormal
F64_TINY = 2.0 ** -1074

# (dtype, a, b, ULPs from a to b), each worked out from the type's definition
KNOWN = [
    (np.float32, 1.0, np.nextafter(np.float32(1), np.float32(2)), 1),
    (np.float32, 1.0, 1.0 + 3 * 2.0 ** -23, 3),
    (np.float32, 1.0, 1.0 - 2.0 ** -24, 1),          # below 1 the spacing halves
    (np.float32, -0.0, 0.0, 0),
    (np.float32, -F32_TINY, F32_TINY, 2),             # through the one zero
    (np.float32, 3.4028234663852886e38, np.inf, 1),   # the largest finite, then infinity
    (np.float32, -np.inf, np.inf, 2 * 0x7F800000),
    (np.float32, 2.0 ** -126, 2.0 ** -126 - F32_TINY, 1),  # normal to subnormal
    (np.float64, 1.0, np.nextafter(1.0, 2.0), 1),
    (np.float64, -F64_TINY, F64_TINY, 2),
    (np.float64, 1.0, 2.0, 2 ** 52),
    (np.float16, 1.0, 1.0 + 2.0 ** -10, 1),
    (np.float16, 65504.0, np.inf, 1),
    (np.float16, 0.0, 2.0 ** -24, 1),
    (ml_dtypes.bfloat16, 1.0, 1.0078125, 1),
    (ml_dtypes.float8_e4m3fn, 416.0, 448.0, 1),       # no infinity: 448 is the largest
    (ml_dtypes.float8_e4m3fn, -2.0 ** -9, 2.0 ** -9, 2),
    (ml_dtypes.float8_e4m3fn, 1.0, 2.0, 8),            # three mantissa bits
    (ml_dtypes.float8_e4m3fnuz, -2.0 ** -10, 2.0 ** -10, 2),  # no -0
    (ml_dtypes.float8_e5m2, 1.0, 2.0, 4),
    (ml_dtypes.float8_e8m0fnu, 1.0, 2.0, 1),           # powers of two only
    (ml_dtypes.float8_e8m0fnu, 2.0 ** -127, 2.0 ** 127, 254),
    (ml_dtypes.float4_e2m1fn, 1.0, 6.0, 5),            # 1, 1.5, 2, 3, 4, 6
    (ml_dtypes.float4_e2m1fn, -6.0, 6.0, 14),
    (ml_dtypes.float6_e2m3fn, 7.5, 7.0, 1),
]


@pytest.mark.parametrize("dtype,a,b,want", KNOWN, ids=lambda v: getattr(v, "__name__", None))
def test_known_distances(dtype, a, b, want):
    x, y = np.array([a, b], dtype), np.array([b, a], dtype)
    assert list(ulp.ulp_distance(x, y)) == [want, want]


@pytest.mark.parametrize("dtype", [np.float16, np.float32, ml_dtypes.float8_e4m3fn])
def test_nan(dtype):
    nan, one = np.array([np.nan], dtype), np.array([1.0], dtype)
    assert ulp.ulp_distance(nan, nan)[0] == 0
    assert ulp.ulp_distance(nan, one)[0] == np.inf == ulp.ulp_distance(one, nan)[0]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_the_two_methods_agree(dtype):
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 1 << 16, 4096, dtype=np.uint16).view(dtype) for _ in range(2))
    np.testing.assert_array_equal(ulp.by_values(a, b), ulp.by_layout(a, b))


FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64, ml_dtypes.float8_e3m4,
          ml_dtypes.float8_e4m3, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
          ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz,
          ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn,
          ml_dtypes.float6_e3m2fn]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_the_judges_ulp_distance_agrees(dtype):
    """Every pair of values of the narrow types, random bit patterns of the wider ones;
    the judge counts NaN and a number, an infinity and another value (StableHLO's
    ULPDifference), and opposite signs past 2**62 as far apart as it can, so those pairs
    are compared apart."""
    size = np.dtype(dtype).itemsize
    if ml_dtypes.finfo(dtype).bits <= 8:
        every = np.arange(1 << ml_dtypes.finfo(dtype).bits, dtype=np.uint8).view(dtype)
        a, b = np.repeat(every, len(every)), np.tile(every, len(every))
    else:
        rng = np.random.default_rng(1)
        unsigned = {2: np.uint16, 4: np.uint32, 8: np.uint64}[size]
        a, b = (rng.integers(0, np.iinfo(unsigned).max, 2048, dtype=unsigned,
                             endpoint=True).view(dtype) for _ in range(2))
        near = (a.view(unsigned) + rng.integers(0, 4, 2048).astype(unsigned)).view(dtype)
        a, b = np.concatenate([a, a]), np.concatenate([b, near])
    want = ulp.ulp_distance(a, b)
    got = ulp_distance(a, b)
    with np.errstate(invalid="ignore"):
        wa, wb = a.astype(np.float64), b.astype(np.float64)
    to_infinity = (np.isinf(wa) | np.isinf(wb)) & (wa != wb)
    exact = np.isfinite(want) & (want < 2 ** 53) & ~to_infinity
    assert exact.any()
    np.testing.assert_array_equal(got[exact], want[exact])
    assert (got[~exact] >= 2 ** 53).all()
