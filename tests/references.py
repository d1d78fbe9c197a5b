"""Independent numpy / Python references for the element-wise ops (XLA semantics).

Integers are computed with Python integers and wrapped to the type's width;
floats in float64 (complex128) and rounded once to the result type, which is
the correctly rounded result for +, -, *, /, fmod and sqrt of the narrower types.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import hlogen as hg

# -- inputs ---------------------------------------------------------------------------

FLOAT_VALUES = [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 2.5, 3.75, -7.0, 100.0,
                np.inf, -np.inf, np.nan]
COMPLEX_VALUES = [0j, 1 + 2j, -0.5 + 0.25j, 3 - 4j, -2 - 1j, 0.75j]


def values(et: hg.ElementType) -> np.ndarray:
    """Edge-case values of `et`: zeros of both signs, infinities, NaN, extremes."""
    if et.kind == "pred":
        return np.array([False, True])
    if et.is_integer:
        info = ml_dtypes.iinfo(et.dtype)
        candidates = [0, 1, 2, 3, 7, 100, -1, -7, info.min, info.max, info.max - 1, info.min + 1]
        kept = sorted({v for v in candidates if info.min <= v <= info.max})
        return np.array(kept, dtype=np.uint64 if et.name == "u64" else np.int64).astype(et.dtype)
    if et.kind == "complex":
        return np.array(COMPLEX_VALUES, dtype=et.dtype)
    with np.errstate(over="ignore"):
        return np.array(FLOAT_VALUES, dtype=np.float64).astype(et.dtype)


def pairs(et):
    """Every pair of edge-case values, as two flat arrays."""
    v = values(et)
    return np.repeat(v, len(v)), np.tile(v, len(v))


# -- helpers ----------------------------------------------------------------------------

def numpy_aligned(lhs_dims, rhs_dims, broadcast_dimensions):
    """Operand dimensions for which numpy broadcasting computes what XLA's does: the
    lower-rank operand's dimension i moves to broadcast_dimensions[i], the others are 1
    (spec/broadcasting.md, "Broadcast composition")."""
    lhs_dims, rhs_dims = tuple(lhs_dims), tuple(rhs_dims)
    if len(lhs_dims) == len(rhs_dims):
        return lhs_dims, rhs_dims
    small, large = (lhs_dims, rhs_dims) if len(lhs_dims) < len(rhs_dims) else (rhs_dims, lhs_dims)
    grown = [1] * len(large)
    for i, d in enumerate(broadcast_dimensions):
        grown[d] = small[i]
    return (tuple(grown), large) if small is lhs_dims else (large, tuple(grown))


def _ints(a):
    a = np.asarray(a).reshape(-1)
    if a.dtype.itemsize == 1 and a.dtype.kind not in "iu":  # int4 types: no Python ints of their own
        a = a.astype(np.int64)
    return a.tolist()


def wrap(values_, et: hg.ElementType) -> np.ndarray:
    """Python integers wrapped to `et`'s width (two's complement)."""
    bits, out = et.bits, []
    for v in values_:
        v %= 1 << bits
        if et.kind == "signed" and v >= 1 << (bits - 1):
            v -= 1 << bits
        out.append(v)
    wide = np.uint64 if et.name == "u64" else np.int64
    return np.array(out, dtype=wide).astype(et.dtype)


def per_int(fn):
    """An integer reference from a function of Python ints (a, b, et) -> int."""
    def ref(a, b, et):
        return wrap([fn(x, y, et) for x, y in zip(_ints(a), _ints(b))], et).reshape(np.shape(a))
    return ref


def per_int1(fn):
    def ref(a, et):
        return wrap([fn(x, et) for x in _ints(a)], et).reshape(np.shape(a))
    return ref


def wide(a):
    a = np.asarray(a)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def per_float(fn):
    """A float reference: computed in float64/complex128, rounded once to the type."""
    def ref(*args):
        *arrays, et = args
        with np.errstate(all="ignore"):
            return np.asarray(fn(*[wide(a) for a in arrays])).astype(et.dtype)
    return ref


def _unsigned(x, et):
    return x % (1 << et.bits)


def _signed(x, et):
    x %= 1 << et.bits
    return x - (1 << et.bits) if x >= 1 << (et.bits - 1) else x


# -- integer semantics as XLA defines them -----------------------------------------------

def int_div(a, b, et):
    if b == 0:
        return -1  # all ones, for signed and unsigned
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q  # truncates toward zero; INT_MIN/-1 wraps


def int_rem(a, b, et):
    if b == 0:
        return a
    return a - int_div(a, b, et) * b  # takes the dividend's sign


def int_pow(a, b, et):
    if b < 0:
        return {1: 1, -1: -1 if b % 2 else 1}.get(a, 0)
    return pow(a, b, 1 << et.bits)


def shift_left(a, b, et):
    s = _unsigned(b, et)
    return a << s if s < et.bits else 0


def shift_right_arithmetic(a, b, et):
    s, x = _unsigned(b, et), _signed(a, et)
    return x >> s if s < et.bits else (-1 if x < 0 else 0)


def shift_right_logical(a, b, et):
    s = _unsigned(b, et)
    return _unsigned(a, et) >> s if s < et.bits else 0


def _float_complex(a, b):
    out = np.empty(np.shape(a), np.complex128)
    out.real, out.imag = a, b
    return out


def total_order_key(x: float):
    """Position in -NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""
    if math.isnan(x):
        return (-2,) if math.copysign(1, x) < 0 else (2,)
    return (0, x, math.copysign(1, x))  # -0 before +0


def total_order(cmp):
    def ref(a, b, et):
        keys = lambda arr: [total_order_key(float(v)) for v in wide(arr).reshape(-1)]
        return np.array([cmp(x, y) for x, y in zip(keys(a), keys(b))]).reshape(np.shape(a))
    return ref


# op: (reference for integers, reference for floats/complex, reference for pred, exact)
BINARY = {
    "add": (per_int(lambda a, b, et: a + b), per_float(np.add), np.logical_or, True),
    "sub": (per_int(lambda a, b, et: a - b), per_float(np.subtract), None, True),
    "mul": (per_int(lambda a, b, et: a * b), per_float(np.multiply), np.logical_and, True),
    "div": (per_int(int_div), per_float(np.divide), None, True),
    "pow": (per_int(int_pow), per_float(np.power), None, False),
    "rem": (per_int(int_rem), per_float(np.fmod), None, True),
    "max": (per_int(lambda a, b, et: max(a, b)), per_float(np.maximum), np.logical_or, True),
    "min": (per_int(lambda a, b, et: min(a, b)), per_float(np.minimum), np.logical_and, True),
    "and_": (per_int(lambda a, b, et: a & b), None, np.logical_and, True),
    "or_": (per_int(lambda a, b, et: a | b), None, np.logical_or, True),
    "xor": (per_int(lambda a, b, et: a ^ b), None, np.logical_xor, True),
    "shift_left": (per_int(shift_left), None, None, True),
    "shift_right_arithmetic": (per_int(shift_right_arithmetic), None, None, True),
    "shift_right_logical": (per_int(shift_right_logical), None, None, True),
    "atan2": (None, per_float(np.arctan2), None, False),
}

COMPARE = {"eq": np.equal, "ne": np.not_equal, "ge": np.greater_equal,
           "gt": np.greater, "le": np.less_equal, "lt": np.less}
COMPARE_KEYS = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "ge": lambda x, y: x >= y,
                "gt": lambda x, y: x > y, "le": lambda x, y: x <= y, "lt": lambda x, y: x < y}


def _round_half_away(x):
    r = np.trunc(x)
    return r + np.sign(x) * (np.abs(x - r) >= 0.5)


def _clz(x, et):
    return et.bits - _unsigned(x, et).bit_length()


def _popcount(x, et):
    return bin(_unsigned(x, et)).count("1")


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _sign(x):
    if x.dtype.kind == "c":
        with np.errstate(all="ignore"):
            return np.where(x == 0, x, x / np.abs(x))
    return np.where(x > 0, 1.0, np.where(x < 0, -1.0, x))  # keeps -0, +0 and NaN


def _logistic(x):
    return 1 / (1 + np.exp(-x))


# op: (integer reference, float/complex reference, exact for floats)
UNARY = {
    "abs": (per_int1(lambda x, et: abs(x)), per_float(np.abs), True),
    "cbrt": (None, per_float(np.cbrt), False),
    "ceil": (None, per_float(np.ceil), True),
    "clz": (per_int1(_clz), None, True),
    "cos": (None, per_float(np.cos), False),
    "erf": (None, per_float(_erf), False),
    "exp": (None, per_float(np.exp), False),
    "expm1": (None, per_float(np.expm1), False),
    "floor": (None, per_float(np.floor), True),
    "imag": (None, per_float(lambda x: np.imag(x) if x.dtype.kind == "c" else np.zeros_like(x)), True),
    "is_finite": (None, lambda x, et: np.isfinite(wide(x)), True),
    "log": (None, per_float(np.log), False),
    "log1p": (None, per_float(np.log1p), False),
    "logistic": (None, per_float(_logistic), False),
    "neg": (per_int1(lambda x, et: -x), per_float(np.negative), True),
    "not_": (per_int1(lambda x, et: ~x), None, True),
    "population_count": (per_int1(_popcount), None, True),
    "real": (None, per_float(np.real), True),
    "round": (None, per_float(_round_half_away), True),
    "round_nearest_even": (None, per_float(np.rint), True),
    "rsqrt": (None, per_float(lambda x: 1 / np.sqrt(x)), False),
    "sign": (per_int1(lambda x, et: (x > 0) - (x < 0)), per_float(_sign), True),
    "sin": (None, per_float(np.sin), False),
    "sqrt": (None, per_float(np.sqrt), True),
    "tan": (None, per_float(np.tan), False),
    "tanh": (None, per_float(np.tanh), False),
}
