"""Exact answers of one op's elements, and how far a computed value is from them in ULPs.

An exact value is a Python `int` (integers, predicates as 0/1), a `Fraction` (a finite
real number: every float is one, and sums and products of them stay exact), one of the
floats `inf`, `-inf`, `nan` (what IEEE 754 makes of it: an overflow is not one of them,
it is a Fraction the type rounds to an infinity), or a pair of those for a complex number.
Functions that are not rational (exp, tan, ...) are evaluated with mpmath at
`PRECISION` bits (more where an argument's size eats into it: the reduction of a
sine's argument modulo pi), and the mpmath value, a binary float, becomes a Fraction
exactly: its error is some 2^-200 relative, beyond any ULP of a type this judges.

`ulps(value, exact, dtype)` is the error of a computed value in units in the last
place of the type at the exact value: |value - exact| / ulp(exact), where ulp(x) is
the spacing of the type's values in the binade of |x| (the smallest subnormal's below
the normal range); 0 where a value is the rounding of an infinite exact value (an
overflow) to an infinity, `inf` where a NaN meets a number or an infinity a value it
is not the rounding of.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np

from hlogen import types as T

PRECISION = 256  # bits of mpmath's working precision (more for large trigonometric arguments)
NAN, INF = float("nan"), float("inf")


@dataclasses.dataclass(frozen=True)
class Format:
    """A binary float type: `digits` significant bits (the hidden one counted), the
    smallest normal exponent `emin` (normals are at least 2^emin), its largest finite
    value, and whether it has infinities (f8e4m3fn has none: it overflows to NaN)."""

    digits: int
    emin: int
    largest: Fraction
    infinities: bool

    @property
    def tiny(self) -> Fraction:
        """The smallest subnormal: the spacing of values below 2^emin."""
        return Fraction(2) ** (self.emin - self.digits + 1)


@functools.lru_cache(maxsize=None)
def float_format(dtype) -> Format:
    info = ml_dtypes.finfo(dtype)
    with np.errstate(over="ignore"):
        infinities = bool(np.isinf(np.array(float(info.max) * 4).astype(dtype).astype(np.float64)))
    return Format(int(info.nmant) + 1, int(info.minexp), Fraction(float(info.max)), infinities)


def reduced_format(exponent_bits: int, mantissa_bits: int) -> Format:
    """IEEE-like format of reduce_precision: `exponent_bits`, `mantissa_bits` explicit bits."""
    bias = 2 ** (exponent_bits - 1) - 1
    emax = bias
    largest = (2 - Fraction(1, 2 ** mantissa_bits)) * Fraction(2) ** emax
    return Format(mantissa_bits + 1, 1 - bias, largest, True)


def fraction(value) -> Fraction | float:
    """A float (numpy scalar, Python float or mpmath mpf) as an exact value."""
    if isinstance(value, mpmath.mpf):
        if not mpmath.isfinite(value):
            return float(value)
        sign, mantissa, exponent, _ = value._mpf_  # (man_exp drops the sign)
        if not mantissa:
            return Fraction(0)
        return (-1) ** sign * Fraction(int(mantissa)) * Fraction(2) ** int(exponent)
    number = float(value)
    return Fraction(number) if math.isfinite(number) else number


def mpf(value):
    """An exact value (a Fraction or a float) as an mpmath number, at the working precision."""
    if isinstance(value, Fraction):
        return mpmath.mpf(value.numerator) / value.denominator
    return mpmath.mpf(value)


def binade_ulp(x: Fraction, fmt: Format) -> Fraction:
    """The spacing of `fmt`'s values at |x| (the smallest subnormal's at 0)."""
    magnitude = abs(x)
    if magnitude == 0:
        return fmt.tiny
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if Fraction(2) ** exponent > magnitude:  # bit lengths overestimate by at most one
        exponent -= 1
    return Fraction(2) ** (max(exponent, fmt.emin) - fmt.digits + 1)


def round_to(x, fmt: Format):
    """The nearest value of `fmt` to the exact `x` (ties to even), as an exact value: an
    infinity (NaN for a type without them) past the overflow threshold."""
    if not isinstance(x, Fraction):
        return x
    ulp = binade_ulp(x, fmt)
    steps = x / ulp
    whole = math.floor(steps)
    rest = steps - whole
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and whole % 2):
        whole += 1
    rounded = whole * ulp
    if abs(rounded) > fmt.largest:
        return math.copysign(INF, x) if fmt.infinities else NAN
    return rounded


def ulps(value, exact, dtype) -> float:
    """Error of the computed float `value` (of `dtype`) from `exact`, in ULPs of `dtype`."""
    fmt = float_format(dtype)
    got = fraction(value)
    if isinstance(exact, float) and math.isnan(exact):
        return 0.0 if isinstance(got, float) and math.isnan(got) else INF
    if isinstance(got, float):  # NaN or an infinity
        if math.isnan(got):
            return INF
        if isinstance(exact, float):  # two infinities
            return 0.0 if exact == got else INF
        return 0.0 if round_to(exact, fmt) == got else INF
    if isinstance(exact, float):  # a finite value for an infinite exact one
        return INF
    if abs(exact) > fmt.largest:  # an overflow computed as a finite value: from the largest
        return _float(abs(got - exact) / binade_ulp(fmt.largest, fmt))
    return _float(abs(got - exact) / binade_ulp(exact, fmt))


def _float(x: Fraction) -> float:
    """A count of ULPs as a float (inf past float64's range)."""
    try:
        return float(x)
    except OverflowError:
        return INF


def complex_ulps(value, exact, dtype) -> float:
    """A complex value's error: the larger of its parts' errors, each in ULPs of the
    part type at the larger exact part (a normwise error: a tiny part of a large number
    is as free as the large part's last bits)."""
    part = np.real(np.zeros((), dtype)).dtype
    if any(isinstance(p, float) for p in exact):
        return max(ulps(np.real(value), exact[0], part), ulps(np.imag(value), exact[1], part))
    scale = max(abs(exact[0]), abs(exact[1]))
    worst = 0.0
    for got, want in ((np.real(value), exact[0]), (np.imag(value), exact[1])):
        got = fraction(got)
        if isinstance(got, float):
            return INF
        worst = max(worst, _float(abs(got - want) / binade_ulp(scale, float_format(part))))
    return worst


def show(exact) -> str:
    """An exact value for people: integers whole, others to 21 significant digits."""
    if isinstance(exact, tuple):
        return f"({show(exact[0])}, {show(exact[1])})"
    if isinstance(exact, (bool, int)):
        return str(int(exact))
    if isinstance(exact, float):
        return str(exact)
    if exact.denominator == 1 and abs(exact.numerator) < 10 ** 21:
        return str(exact.numerator)
    return mpmath.nstr(mpf(exact), 21, min_fixed=-4, max_fixed=6)


def kind(dtype) -> str:
    return T.element_type(np.dtype(dtype)).kind


# -- integers ---------------------------------------------------------------------------------

def bits_of(dtype) -> int:
    return T.element_type(np.dtype(dtype)).bits


def wrap(value: int, dtype) -> int:
    """`value` modulo 2^bits, as the integer type `dtype` holds it (two's complement)."""
    et = T.element_type(np.dtype(dtype))
    if et.kind == T.PRED:
        return int(bool(value & 1))
    value &= (1 << et.bits) - 1
    if et.kind == T.SIGNED and value >> (et.bits - 1):
        value -= 1 << et.bits
    return value


def pattern(value: int, dtype) -> int:
    """The bits of an integer of `dtype`, as a non-negative int."""
    return value & ((1 << bits_of(dtype)) - 1)


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_power(x: int, y: int, dtype) -> int | None:
    """x^y in `dtype` (wrapping); a negative exponent gives 0 but for bases 1 and -1
    (XLA's and the interpreter's choice, the only integer results near x^y); None for 0
    to a negative power (a division by zero)."""
    if y < 0:
        if x == 0:
            return None
        return 1 if x == 1 else (-1) ** (-y) if x == -1 else 0
    return wrap(pow(x, y, 1 << bits_of(dtype)), dtype)


def _shift(name: str, x: int, y: int, dtype) -> int:
    """Shifts by y (read as unsigned): by at least the width, 0 (a logical or left shift)
    or the sign (an arithmetic one), as the spec says."""
    bits = bits_of(dtype)
    count = pattern(y, dtype)
    if name == "stablehlo.shift_left":
        return 0 if count >= bits else wrap(x << count, dtype)
    if name == "stablehlo.shift_right_logical":
        return 0 if count >= bits else wrap(pattern(x, dtype) >> count, dtype)
    signed = pattern(x, dtype)
    if signed >> (bits - 1):
        signed -= 1 << bits
    return wrap(signed >> min(count, bits - 1), dtype)


class Open(Exception):
    """The spec leaves this element's value to the implementation: `kind` names it."""

    def __init__(self, kind: str, why: str):
        super().__init__(why)
        self.kind = kind


def integer(name: str, args: list[int], dtype) -> int:
    """The exact value of an element-wise integer op (of `dtype`) on integer arguments."""
    if name in ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply"):
        a, b = args
        return wrap(a + b if name.endswith("add") else a - b if name.endswith("subtract")
                    else a * b, dtype)
    if name in ("stablehlo.divide", "stablehlo.remainder"):
        a, b = args
        if b == 0:
            raise Open("integer-division", "an integer divided by zero: the spec gives no value")
        quotient = _trunc_div(a, b)
        if wrap(quotient, dtype) != quotient:
            raise Open("integer-division", "the quotient overflows the type (MIN / -1)")
        return quotient if name.endswith("divide") else a - b * quotient
    if name == "stablehlo.power":
        value = _int_power(args[0], args[1], dtype)
        if value is None:
            raise Open("integer-division", "0 to a negative power: the spec gives no value")
        return value
    if name.startswith("stablehlo.shift_"):
        return _shift(name, args[0], args[1], dtype)
    if name == "stablehlo.count_leading_zeros":
        return bits_of(dtype) - pattern(args[0], dtype).bit_length()
    if name == "stablehlo.popcnt":
        return bin(pattern(args[0], dtype)).count("1")
    if name in ("stablehlo.and", "stablehlo.or", "stablehlo.xor"):
        a, b = (pattern(v, dtype) for v in args)
        return wrap({"stablehlo.and": a & b, "stablehlo.or": a | b, "stablehlo.xor": a ^ b}[name],
                    dtype)
    if name == "stablehlo.not":
        return wrap(~args[0], dtype)
    if name == "stablehlo.negate":
        return wrap(-args[0], dtype)
    if name == "stablehlo.abs":
        return wrap(abs(args[0]), dtype)
    if name == "stablehlo.sign":
        return (args[0] > 0) - (args[0] < 0)
    if name == "stablehlo.maximum":
        return max(args)
    if name == "stablehlo.minimum":
        return min(args)
    if name == "stablehlo.clamp":
        low, x, high = args
        return min(max(x, low), high)
    raise KeyError(name)


INTEGER_OPS = {"stablehlo." + n for n in (
    "add", "subtract", "multiply", "divide", "remainder", "power", "shift_left",
    "shift_right_logical", "shift_right_arithmetic", "count_leading_zeros", "popcnt", "and",
    "or", "xor", "not", "negate", "abs", "sign", "maximum", "minimum", "clamp")}


# -- element-wise floats ------------------------------------------------------------------------

def _logistic(x):
    return 1 / (1 + mpmath.exp(-x))


# op -> its function of mpmath numbers (finite, nonzero arguments; special values are
# IEEE 754's, from float64 below)
MPMATH = {
    "stablehlo.exponential": mpmath.exp,
    "stablehlo.exponential_minus_one": mpmath.expm1,
    "stablehlo.log": mpmath.log,
    "stablehlo.log_plus_one": mpmath.log1p,
    "stablehlo.logistic": _logistic,
    "stablehlo.sine": mpmath.sin,
    "stablehlo.cosine": mpmath.cos,
    "stablehlo.tan": mpmath.tan,
    "stablehlo.tanh": mpmath.tanh,
    "stablehlo.sqrt": mpmath.sqrt,
    "stablehlo.rsqrt": lambda x: 1 / mpmath.sqrt(x),
    "stablehlo.cbrt": lambda x: mpmath.sign(x) * mpmath.cbrt(abs(x)),  # (the real root)
    "chlo.erf": mpmath.erf,
    "chlo.erfc": mpmath.erfc,
    "chlo.sinh": mpmath.sinh,
    "chlo.cosh": mpmath.cosh,
    "chlo.asin": mpmath.asin,
    "chlo.acos": mpmath.acos,
    "chlo.atan": mpmath.atan,
    "chlo.asinh": mpmath.asinh,
    "chlo.acosh": mpmath.acosh,
    "chlo.atanh": mpmath.atanh,
}

# the same functions on float64: IEEE 754's values at zeros, infinities and NaNs (all of
# them exact: 0, 1, -1, infinities, NaN), and where the argument is outside the domain
_F64 = {
    "stablehlo.exponential": np.exp, "stablehlo.exponential_minus_one": np.expm1,
    "stablehlo.log": np.log, "stablehlo.log_plus_one": np.log1p,
    "stablehlo.logistic": lambda x: 1 / (1 + np.exp(-x)), "stablehlo.sine": np.sin,
    "stablehlo.cosine": np.cos, "stablehlo.tan": np.tan, "stablehlo.tanh": np.tanh,
    "stablehlo.sqrt": np.sqrt, "stablehlo.rsqrt": lambda x: 1 / np.sqrt(x),
    "stablehlo.cbrt": np.cbrt, "chlo.erf": lambda x: math.erf(x) if not math.isnan(x) else x,
    "chlo.erfc": lambda x: math.erfc(x) if not math.isnan(x) else x, "chlo.sinh": np.sinh,
    "chlo.cosh": np.cosh, "chlo.asin": np.arcsin, "chlo.acos": np.arccos,
    "chlo.atan": np.arctan, "chlo.asinh": np.arcsinh, "chlo.acosh": np.arccosh,
    "chlo.atanh": np.arctanh,
    "stablehlo.add": np.add, "stablehlo.subtract": np.subtract,
    "stablehlo.multiply": np.multiply, "stablehlo.divide": np.divide,
    "stablehlo.remainder": np.fmod, "stablehlo.power": np.power,
    "stablehlo.atan2": np.arctan2, "stablehlo.negate": np.negative, "stablehlo.abs": np.abs,
    "stablehlo.floor": np.floor, "stablehlo.ceil": np.ceil, "stablehlo.sign": np.sign,
    "stablehlo.round_nearest_even": np.rint,
    "stablehlo.round_nearest_afz": lambda x: np.copysign(np.floor(np.abs(x) + 0.5), x),
}


def zero_sign(name: str, args: list) -> float | None:
    """IEEE 754's sign of a zero result (1.0 or -1.0) of an element-wise op, from float64
    (whose zeros carry the sign any binary type's do), or None without a float64 model."""
    function = _F64.get(name)
    if function is None:
        return None
    with np.errstate(all="ignore"):
        value = float(function(*(np.float64(float(a)) for a in args)))
    return math.copysign(1.0, value) if value == 0 else None


_TRIGONOMETRIC = {"stablehlo.sine", "stablehlo.cosine", "stablehlo.tan"}
# beyond every type's range: an exact value past 2^FAR rounds to an infinity in each, one
# below 2^-FAR (not zero) to a zero, and within half a ULP of it: such values are kept
# as +-2^+-FAR (exp(2^100) itself would not fit in memory as a fraction)
FAR = 1100


def _precision(name: str, args) -> int:
    """Working bits: PRECISION, plus for a trigonometric function its argument's binary
    exponent (an argument of 2^1000 needs 1000 more bits of pi)."""
    if name not in _TRIGONOMETRIC:
        return PRECISION
    exponents = [max(mpmath.frexp(a)[1], 0) for a in args if a]
    return PRECISION + max(exponents, default=0)


def _clamped(value):
    if not value or not mpmath.isfinite(value):
        return value
    magnitude = mpmath.mag(value)
    if magnitude > FAR:
        return mpmath.mpf(2) ** FAR * mpmath.sign(value)
    if magnitude < -FAR:
        return mpmath.mpf(2) ** -FAR * mpmath.sign(value)
    return value


def _special(name: str, args: list):
    with np.errstate(all="ignore"):
        return fraction(_F64[name](*(np.float64(float(a)) for a in args)))


def _atan2(y, x):
    if not (isinstance(y, Fraction) and isinstance(x, Fraction)) or y == 0 or x == 0:
        value = _special("stablehlo.atan2", [y, x])  # 0, NaN, or k pi / 4
        if not isinstance(value, Fraction) or value == 0:
            return value
        with mpmath.workprec(PRECISION):
            return fraction(round(float(value) / (math.pi / 4)) * mpmath.pi / 4)
    with mpmath.workprec(PRECISION):
        return fraction(mpmath.atan2(mpf(y), mpf(x)))


def _power(x, y):
    if not (isinstance(y, Fraction) and isinstance(x, Fraction)) or x == 0 or y == 0:
        return _special("stablehlo.power", [x, y])
    if x < 0 and y.denominator != 1:
        return NAN
    sign = -1 if x < 0 and y.numerator % 2 else 1
    with mpmath.workprec(PRECISION + 64):
        # (its size first: x^y of 2^1000 digits is not computed to be rounded to inf)
        size = float(y) * math.log2(float(abs(x))) if abs(float(x)) not in (0.0, math.inf) \
            else 0.0
        if abs(size) > 2 * FAR:
            return fraction(_clamped(sign * mpmath.mpf(2) ** (2 * FAR if size > 0 else -2 * FAR)))
        return fraction(_clamped(sign * mpmath.power(mpf(abs(x)), mpf(y))))


def _remainder(a, b):
    if not (isinstance(a, Fraction) and isinstance(b, Fraction)) or b == 0:
        return _special("stablehlo.remainder", [a, b])
    return a - b * math.trunc(a / b)


def _round(name, x):
    if not isinstance(x, Fraction):
        return x
    if name == "stablehlo.floor":
        return Fraction(math.floor(x))
    if name == "stablehlo.ceil":
        return Fraction(math.ceil(x))
    if name == "stablehlo.round_nearest_even":
        return Fraction(round(x))  # (Python rounds Fractions half to even)
    return Fraction(math.floor(abs(x) + Fraction(1, 2))) * (1 if x >= 0 else -1)


def real(name: str, args: list):
    """The exact value of an element-wise op on exact real arguments (Fractions and
    float specials), before any rounding; KeyError for an op without a model."""
    finite = all(isinstance(a, Fraction) for a in args)
    if name in MPMATH:
        x = args[0]
        if not finite or x == 0:
            return _special(name, args)
        with mpmath.workprec(_precision(name, [mpf(x)])):
            value = MPMATH[name](mpf(x))
        if isinstance(value, mpmath.mpc):  # outside the real domain (log of a negative)
            return NAN
        return fraction(_clamped(value))
    if name in ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
                "stablehlo.divide"):
        a, b = args
        if not finite or (name.endswith("divide") and b == 0):
            return _special(name, args)
        return a + b if name.endswith("add") else a - b if name.endswith("subtract") else \
            a * b if name.endswith("multiply") else a / b
    if name == "stablehlo.atan2":
        return _atan2(*args)
    if name == "stablehlo.power":
        return _power(*args)
    if name == "stablehlo.remainder":
        return _remainder(*args)
    if name in ("stablehlo.floor", "stablehlo.ceil", "stablehlo.round_nearest_even",
                "stablehlo.round_nearest_afz"):
        return _round(name, args[0])
    if name in ("stablehlo.negate", "stablehlo.abs", "stablehlo.sign"):
        x = args[0]
        if not finite:
            return _special(name, args)
        return -x if name.endswith("negate") else abs(x) if name.endswith("abs") else \
            Fraction((x > 0) - (x < 0))
    if name in ("stablehlo.maximum", "stablehlo.minimum", "stablehlo.clamp"):
        if any(isinstance(a, float) and math.isnan(a) for a in args):
            return NAN
        if name == "stablehlo.clamp":
            low, x, high = args
            return min(max(x, low), high)
        return max(args) if name.endswith("maximum") else min(args)
    raise KeyError(name)



# -- conversions and comparisons --------------------------------------------------------------

def value_of(scalar):
    """A numpy element as an exact value: int (integers, predicates), Fraction or a float
    special (floats), a pair of those (complex numbers)."""
    k = kind(np.asarray(scalar).dtype)
    if k in (T.SIGNED, T.UNSIGNED, T.PRED):
        return int(scalar)
    if k == T.COMPLEX:
        return (fraction(np.real(scalar)), fraction(np.imag(scalar)))
    return fraction(scalar)


def convert(x, source, target):
    """convert of the exact value `x` (an element of `source`) to `target`: rounded to
    nearest even into floats, wrapped into integers, toward zero from floats."""
    into = kind(target)
    if kind(source) == T.COMPLEX and into != T.COMPLEX:
        x = x[0]  # the real part
    if into == T.COMPLEX:
        part = float_format(np.real(np.zeros((), target)).dtype)
        re, im = x if isinstance(x, tuple) else (x, Fraction(0))
        return (round_to(Fraction(re) if isinstance(re, int) else re, part),
                round_to(Fraction(im) if isinstance(im, int) else im, part))
    if into == T.PRED:
        return int(x != 0)  # (a NaN is not zero)
    if into == T.FLOAT:
        return round_to(Fraction(x) if isinstance(x, int) else x, float_format(target))
    if isinstance(x, float):
        raise Open("convert-out-of-range", f"convert of {x} to {np.dtype(target).name}: the "
                   "spec gives no value")
    whole = math.trunc(x)
    if kind(source) in (T.SIGNED, T.UNSIGNED, T.PRED):
        return wrap(whole, target)
    if wrap(whole, target) != whole:
        raise Open("convert-out-of-range", f"convert of {show(x)} to {np.dtype(target).name}: "
                   "out of its range, the spec gives no value")
    return whole


def total_order_key(x, dtype) -> int:
    """An int that orders floats as IEEE 754's totalOrder: -NaN < -inf < ... < -0 < +0 <
    ... < +inf < +NaN."""
    size = np.dtype(dtype).itemsize
    bits = int(np.ascontiguousarray(np.asarray(x, dtype)).view({1: np.uint8, 2: np.uint16,
                                                                 4: np.uint32, 8: np.uint64}[size]))
    top = 1 << (8 * size - 1)
    return bits if not bits & top else -(bits & (top - 1)) - 1


def compare(x, y, direction: str, compare_type: str | None, dtype) -> int:
    """compare of two elements: FLOAT is IEEE's partial order (a NaN is unordered: only
    NE holds), TOTALORDER IEEE's totalOrder, integers by value, complex numbers EQ/NE."""
    k = kind(dtype)
    if compare_type == "TOTALORDER" and k == T.FLOAT:
        a, b = total_order_key(x, dtype), total_order_key(y, dtype)
    elif k == T.COMPLEX:
        a, b = value_of(x), value_of(y)
        if any(isinstance(p, float) and math.isnan(p) for p in a + b):
            return int(direction == "NE")
    else:
        a, b = value_of(x), value_of(y)
        if compare_type == "UNSIGNED" and k == T.SIGNED:
            a, b = pattern(a, dtype), pattern(b, dtype)
        if isinstance(a, float) and math.isnan(a) or isinstance(b, float) and math.isnan(b):
            return int(direction == "NE")
    return int({"EQ": a == b, "NE": a != b, "LT": a < b, "LE": a <= b, "GT": a > b,
                "GE": a >= b}[direction])


def bitcast(operand: np.ndarray, target) -> np.ndarray:
    """bitcast_convert of a whole array: the operand's bits read as `target`, an element
    of a wider type made of the last dimension's narrower ones, least significant first
    (the order of a little-endian machine's memory: XLA's and the interpreter's)."""
    source_bits, target_bits = bits_of(operand.dtype), bits_of(target)
    words = np.ascontiguousarray(operand).reshape(-1)
    unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    raw = [int(b) & ((1 << source_bits) - 1)
           for b in words.view(unsigned[operand.dtype.itemsize])]
    if source_bits > target_bits:
        ratio = source_bits // target_bits
        raw = [(b >> (k * target_bits)) & ((1 << target_bits) - 1) for b in raw
               for k in range(ratio)]
        shape = operand.shape + (ratio,)
    elif source_bits < target_bits:
        ratio = target_bits // source_bits
        raw = [sum(raw[i + k] << (k * source_bits) for k in range(ratio))
               for i in range(0, len(raw), ratio)]
        shape = operand.shape[:-1]
    else:
        shape = operand.shape
    target = np.dtype(target)
    if kind(target) in (T.SIGNED, T.UNSIGNED, T.PRED):
        values = [wrap(b, target) for b in raw]
        return np.array(values, dtype=target).reshape(shape)
    stored = np.array(raw, dtype=unsigned[target.itemsize])
    return stored.view(target).reshape(shape)


# -- complex numbers ------------------------------------------------------------------------------

_MPC = {
    "stablehlo.exponential": mpmath.exp, "stablehlo.log": mpmath.log,
    "stablehlo.sqrt": mpmath.sqrt, "stablehlo.sine": mpmath.sin, "stablehlo.cosine": mpmath.cos,
    "stablehlo.tanh": mpmath.tanh, "stablehlo.tan": mpmath.tan,
    "stablehlo.rsqrt": lambda z: 1 / mpmath.sqrt(z),
    "stablehlo.exponential_minus_one": mpmath.expm1,
    "stablehlo.log_plus_one": mpmath.log1p,
}


def _lexicographic(z) -> tuple:
    return (z[0], z[1])


def complex_op(name: str, args: list):
    """The exact value of an element-wise op on complex arguments (pairs of exact parts):
    a pair, or a real number (abs); Open where a part is an infinity or a NaN (complex
    arithmetic with them is not the spec's, nor C99's Annex G's in every backend)."""
    if any(isinstance(p, float) for z in args for p in z):
        raise Open("complex-infinity", "complex arithmetic with an infinity or a NaN")
    if name in ("stablehlo.maximum", "stablehlo.minimum"):  # the spec's lexicographic order
        return (max if name.endswith("maximum") else min)(args, key=_lexicographic)
    if name in ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply", "stablehlo.divide"):
        (a, b), (c, d) = args
        if name.endswith("add"):
            return (a + c, b + d)
        if name.endswith("subtract"):
            return (a - c, b - d)
        if name.endswith("multiply"):
            return (a * c - b * d, a * d + b * c)
        norm = c * c + d * d
        if norm == 0:
            raise Open("complex-infinity", "a complex number divided by zero")
        return ((a * c + b * d) / norm, (b * c - a * d) / norm)
    if name == "stablehlo.negate":
        return (-args[0][0], -args[0][1])
    z = args[0]
    if name == "stablehlo.real":
        return z[0]
    if name == "stablehlo.imag":
        return z[1]
    with mpmath.workprec(PRECISION):
        w = mpmath.mpc(mpf(z[0]), mpf(z[1]))
        if name == "stablehlo.abs":
            return fraction(_clamped(mpmath.fabs(w)))
        value = _MPC[name](w)
        value = mpmath.mpc(value)
        return (fraction(_clamped(value.real)), fraction(_clamped(value.imag)))


COMPLEX_OPS = set(_MPC) | {"stablehlo." + n for n in (
    "maximum", "minimum", "add", "subtract", "multiply", "divide", "negate", "real", "imag",
    "abs")}


# -- sums of floats, exactly and fast ---------------------------------------------------------------

def dyadic_sum(products: list) -> tuple[Fraction, Fraction]:
    """(the exact sum, the sum of magnitudes) of finite floats or of products of pairs of
    them (tuples): every float is n / 2^k, so the sum is integers shifted to one power of
    two (one division at the end, not a Fraction's gcd per term)."""
    terms = []
    for term in products:
        numerator, shift = 1, 0
        for factor in (term if isinstance(term, tuple) else (term,)):
            n, d = float(factor).as_integer_ratio()
            numerator *= n
            shift += d.bit_length() - 1
        terms.append((numerator, shift))
    if not terms:
        return Fraction(0), Fraction(0)
    top = max(shift for _, shift in terms)
    total = sum(n << (top - shift) for n, shift in terms)
    magnitude = sum(abs(n) << (top - shift) for n, shift in terms)
    return Fraction(total, 1 << top), Fraction(magnitude, 1 << top)
