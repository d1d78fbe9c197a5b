"""Units in the last place between floats: the tests' yardstick, independent of
hlogen.differential.near.ulp_distance (which tests/test_ulp.py checks against it).

Two ways, each from a definition rather than from hlogen:
- `by_values` (types of at most 16 bits): every value of the type, sorted (ml_dtypes
  turns each bit pattern into a float64); the distance is how far apart two values are
  in that list. -0 and +0 are one value; NaN is none.
- `by_layout` (the IEEE 754 layouts: f16, bf16, f32, f64): a sign bit above the
  magnitude, whose bits count up with the value, so that the magnitude (sign clear) or
  minus the magnitude (sign set) orders the floats, -0 and +0 alike.
NaN and NaN are 0 apart, NaN and a number infinitely far (the distances are float64:
exact below 2**53).
"""
from __future__ import annotations

import functools

import ml_dtypes
import numpy as np

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(dtype) -> int:
    return ml_dtypes.finfo(dtype).bits


def _wide(x) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # signaling NaNs
        return x.astype(np.float64)


@functools.lru_cache(maxsize=None)
def _sorted_values(dtype) -> np.ndarray:
    patterns = np.arange(1 << _bits(dtype), dtype=_UINT[np.dtype(dtype).itemsize])
    values = _wide(patterns.view(dtype))
    return np.unique(values[~np.isnan(values)])  # -0.0 == 0.0: one entry


def by_values(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and _bits(a.dtype) <= 16, (a.dtype, b.dtype)
    values = _sorted_values(a.dtype)

    def rank(x):
        wide = _wide(x)
        found = np.searchsorted(values, np.where(np.isnan(wide), 0.0, wide))
        assert np.all(np.isnan(wide) | (values[np.minimum(found, len(values) - 1)] == wide))
        return found
    return _with_nan(a, b, np.abs(rank(a) - rank(b)).astype(np.float64))


def by_layout(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    size = a.dtype.itemsize
    assert a.dtype == b.dtype and _bits(a.dtype) == 8 * size, (a.dtype, b.dtype)
    sign = 1 << (8 * size - 1)

    def keys(x):
        return [-(k ^ sign) if k & sign else k
                for k in map(int, np.ascontiguousarray(x).view(_UINT[size]).reshape(-1))]
    distance = [abs(p - q) for p, q in zip(keys(a), keys(b))]
    return _with_nan(a, b, np.array(distance, np.float64).reshape(a.shape))


def _with_nan(a, b, distance):
    na, nb = np.isnan(_wide(a)), np.isnan(_wide(b))
    return np.where(na & nb, 0.0, np.where(na | nb, np.inf, distance))


def ulp_distance(a, b) -> np.ndarray:
    """ULPs between `a` and `b` (floats of one type), as float64."""
    a = np.asarray(a)
    return by_values(a, b) if _bits(a.dtype) <= 16 else by_layout(a, b)
