"""Comparing two results the way XLA's `run_hlo_module` does, and a report per result.

The default rule is `literal_comparison::Near` with `ErrorSpec(abs, rel)` (XLA's
xla/literal_comparison.cc), per element of arrays of one element type and shape:
- integers and predicates match exactly;
- floats: bitwise equal values match; two NaNs match (any payload); one NaN is a
  mismatch; an infinity must equal the other value; otherwise a mismatch only when
  |a - e| > abs AND |a - e| / |e| > rel (the relative error is infinite where e == 0),
  so -0 matches +0;
- complex numbers: the real and the imaginary parts each by the float rule.
(XLA subtracts in the element type: below f64 the difference is rounded, and it can
overflow to infinity, or be NaN in f8e8m0fnu, which has no negative values, and then
never mismatch; hlogen subtracts in float64: a decision can differ only where XLA's
rounded or overflowing difference crosses a bound, and in f8e8m0fnu.)
Other modes: `ulp=N` (floats at most N units in the last place apart in the order of
the type's values, -0 and +0 none; two NaNs match, a NaN and a number do not, an
infinity matches only itself; with `min_ulp=M`, also at least M apart), `exact` (equal
as numbers: -0 == +0, a NaN equal to nothing) and `bitwise` (every element's bits).
StableHLO's check ops are three of these (hlogen.conformance.judge): `expect_eq` is
`exact`, `expect_close` is `ulp` with `min_ulp`, `expect_almost_eq` is Near with rel 0
(but for signs: see judge).
"""
from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np

from hlogen import types as T
from hlogen.errors import InputError
from hlogen.types import shape_text


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How close two results must be: XLA's `ErrorSpec(abs, rel)`, or `ulp=N` (with
    `min_ulp=M`: between M and N units apart), or `exact`, or `bitwise`."""

    abs: float = 1e-3
    rel: float = 1e-3
    ulp: int | None = None
    bitwise: bool = False
    min_ulp: int = 0
    exact: bool = False
    # Near (`abs`, `rel`) with a floor per element type: values at most TYPE_ULPS[type]
    # ULPs apart always match (Near's 1e-3 is less than one bf16 ULP)
    per_type: bool = False

    def __post_init__(self):
        for name in ("abs", "rel"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not value >= 0:
                raise InputError(f"the {name} error bound must be a number >= 0, got {value!r}")
        for name in ("ulp", "min_ulp"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise InputError(f"{name} must be a whole number of units >= 0, got {value!r}")
        if sum((self.ulp is not None, bool(self.bitwise), bool(self.exact))) > 1:
            raise InputError("choose one of ulp, exact and bitwise: exact compares numbers "
                             "(-0 == +0, a NaN equal to nothing), bitwise their bits, ulp "
                             "their distance")
        if self.min_ulp and (self.ulp is None or self.min_ulp > self.ulp):
            raise InputError(f"min_ulp={self.min_ulp} needs ulp=N with N >= it (a range of "
                             f"distances), got ulp={self.ulp!r}")

    @property
    def mode(self) -> str:
        return ("bitwise" if self.bitwise else "exact" if self.exact else
                "near" if self.ulp is None else "ulp")

    @property
    def equal_bits_match(self) -> bool:
        """Whether elements of equal bits always match (not so for `exact`, where a NaN
        equals nothing, nor with a `min_ulp`)."""
        return not self.exact and not self.min_ulp

    def describe(self, element_type: str | None = None) -> str:
        """The rule in words; of a result of `element_type` (a type name, "bf16"), the
        per-type floor where it can matter (the types narrower than f32; to_json says it
        always)."""
        if self.bitwise or self.exact:
            return self.mode + (" (a NaN equals nothing)" if self.exact else "")
        if self.ulp is not None:
            return f"within {self.min_ulp}..{self.ulp} ULP" if self.min_ulp else \
                f"within {self.ulp} ULP"
        floor = ", or within the type's ULPs (TYPE_ULPS)" if self.per_type and \
            element_type is not None and element_type not in _WIDE else ""
        return f"XLA's Near, abs {self.abs:g} and rel {self.rel:g}{floor}"

    @classmethod
    def chosen(cls, abs: float | None = None, rel: float | None = None, ulp: int | None = None,
               bitwise: bool = False) -> "Tolerance":
        """The rule compare, bisect, reduce and fuzz take from their arguments: `bitwise`,
        `ulp`, XLA's Near at `abs` and `rel` (1e-3 each where one is not given), and where
        neither bound is given the default by element type (`default`: one bf16 ULP is
        more than Near's 1e-3)."""
        if abs is None and rel is None and ulp is None and not bitwise:
            return cls.default()
        return cls(1e-3 if abs is None else abs, 1e-3 if rel is None else rel, ulp, bitwise)

    @classmethod
    def default(cls) -> "Tolerance":
        """The default by element type: XLA's Near at 1e-3, and never fewer ULPs than
        TYPE_ULPS (f32 and f64 as Near alone; bf16, f16 and the 8-bit types 2 ULPs)."""
        return cls(per_type=True)

    def to_json(self) -> dict:
        found = {"mode": self.mode, "abs": self.abs, "rel": self.rel, "ulp": self.ulp,
                 "min_ulp": self.min_ulp}
        if self.per_type:  # (only then: reports of the plain rule stay as they were)
            found["per_type"] = True
        return found


# the fewest ULPs apart two floats of a type may be and still match under Tolerance's
# `per_type`: two values of a function each within 1 ULP of its exact value (faithful
# rounding, the bound of most of hlogen.differential.allowed.ACCURACY) are 2 ULPs apart
# at most, in any type. Against Near's 1e-3 (relative, where values are not tiny) that
# is a floor that matters only for the narrow types: one ULP is 2^-8..2^-7 relative in
# bf16 (7.8 Near tolerances), 2^-11..2^-10 in f16 (about one), 2^-24..2^-23 in f32
# (1/8400 of one), 2^-53..2^-52 in f64.
_WIDE = {"f64", "f32", "c64", "c128", "pred"} | {f"{s}{n}" for s in "su" for n in (2, 4, 8, 16, 32, 64)}
TYPE_ULPS = {"f64": 2, "f32": 2, "f16": 2, "bf16": 2, "f8e4m3fn": 2, "f8e5m2": 2,
             "f8e4m3": 2, "f8e3m4": 2, "f8e4m3fnuz": 2, "f8e5m2fnuz": 2, "f8e4m3b11fnuz": 2,
             "f8e8m0fnu": 2, "f4e2m1fn": 2, "f6e2m3fn": 2, "f6e3m2fn": 2}


# -- the rule, vectorized --------------------------------------------------------------------

def judge(actual: np.ndarray, expected: np.ndarray, tolerance: Tolerance):
    """(mismatch mask, absolute errors, relative errors) of two arrays of one dtype and
    shape; the errors are float64 (0 where the values match bitwise or are two NaNs,
    infinite where one is NaN or an infinity differs)."""
    et = T.element_type(actual.dtype)
    if et.kind == T.COMPLEX:
        parts = [_judge_real(np.ascontiguousarray(part(actual)), np.ascontiguousarray(part(expected)),
                             tolerance) for part in (np.real, np.imag)]
        return (parts[0][0] | parts[1][0], np.maximum(parts[0][1], parts[1][1]),
                np.maximum(parts[0][2], parts[1][2]))
    return _judge_real(actual, expected, tolerance)


def _judge_real(actual, expected, tolerance: Tolerance):
    shape = actual.shape
    actual, expected = actual.reshape(-1), expected.reshape(-1)  # 0-d arrays too
    bad, abs_error, rel_error = _judge_flat(actual, expected, tolerance)
    return bad.reshape(shape), abs_error.reshape(shape), rel_error.reshape(shape)


def _judge_flat(actual, expected, tolerance: Tolerance):
    et = T.element_type(actual.dtype)
    e = expected.astype(np.float64)
    with np.errstate(all="ignore"):
        if et.kind == T.FLOAT:
            abs_error = actual.astype(np.float64)
            np.abs(np.subtract(abs_error, e, out=abs_error), out=abs_error)
        else:
            abs_error = _integer_distance(actual, expected)
        rel_error = np.abs(e, out=e)
        np.divide(abs_error, rel_error, out=rel_error)
    rel_error[abs_error == 0] = 0.0  # (0 / 0: equal values)
    if et.kind != T.FLOAT:  # integers and predicates: exactly
        return actual != expected, abs_error, rel_error
    # where |a - e| is not finite, a NaN or an infinity is involved: exact where the bits
    # are equal or both are NaN, infinitely wrong otherwise
    odd = np.flatnonzero(~np.isfinite(abs_error))
    if odd.size:
        x, y = actual[odd], expected[odd]
        exact = (_bits(x) == _bits(y)) | (_isnan(x) & _isnan(y))
        for error in (abs_error, rel_error):
            error[odd] = np.where(exact, 0.0, np.inf)
    if tolerance.bitwise:
        bad = _bits(actual) != _bits(expected)
    elif tolerance.exact:
        with np.errstate(invalid="ignore"):
            bad = ~(actual.astype(np.float64) == expected.astype(np.float64))
    elif tolerance.ulp is not None:
        distance = ulp_distance(actual, expected)
        bad = (distance > tolerance.ulp) | (distance < tolerance.min_ulp)
    else:
        bad = (abs_error > tolerance.abs) & (rel_error > tolerance.rel)
        if tolerance.per_type and bad.any():
            where = np.flatnonzero(bad)
            bad[where] = ulp_distance(actual[where], expected[where]) > TYPE_ULPS.get(et.name, 0)
    return bad, abs_error, rel_error


def _integer_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| of integers (or predicates) as float64: exact in uint64, then rounded, so
    never 0 where they differ (float64 itself holds 64-bit integers only to 2**53)."""
    wide = np.uint64 if a.dtype == np.uint64 else np.int64
    a, b = a.astype(wide), b.astype(wide)
    high, low = np.maximum(a, b).astype(np.uint64), np.minimum(a, b).astype(np.uint64)
    return (high - low).astype(np.float64)  # (mod 2**64: the difference itself)


def _isnan(a: np.ndarray) -> np.ndarray:
    return np.isnan(a.astype(np.float32) if a.dtype.itemsize < 4 else a)


def _nan_anywhere(a: np.ndarray) -> np.ndarray:
    """Where a float (or a part of a complex number) is NaN."""
    return _isnan(a.real) | _isnan(a.imag) if np.iscomplexobj(a) else _isnan(a)


def _isinf(a: np.ndarray) -> np.ndarray:
    return np.isinf(a.astype(np.float32) if a.dtype.itemsize < 4 else a)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_HUGE = np.iinfo(np.int64).max


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(_UINT[a.dtype.itemsize])


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Units in the last place between floats of the same type (int64; -0 and +0 are 0
    apart; NaN and NaN 0 apart; NaN and a number, or an infinity and another value, as far
    as possible: StableHLO's ULPDifference, which counts no ULPs to an infinity)."""
    ka, kb = _ordered(a), _ordered(b)
    opposite = (ka < 0) != (kb < 0)
    with np.errstate(over="ignore"):
        d = np.abs(ka - kb)
    if np.any(opposite):  # |ka| + |kb| can overflow int64: counted in floats, clipped
        wide = np.abs(ka).astype(np.float64) + np.abs(kb).astype(np.float64)
        d = np.where(opposite, np.minimum(wide, float(2 ** 62)).astype(np.int64), d)
    na, nb = _isnan(a), _isnan(b)
    far = na | nb | ((_isinf(a) | _isinf(b)) & (ka != kb))
    return np.where(na & nb, 0, np.where(far, _HUGE, d))


def _ordered(a: np.ndarray) -> np.ndarray:
    """Signed integers that order like the floats `a`, with -0 and +0 equal."""
    size = a.dtype.itemsize
    bits = _bits(a).astype(np.int64)
    sign = np.int64(1) << (8 * size - 1)
    if size == 8:  # the sign bit is int64's own
        bits = np.ascontiguousarray(a).view(np.int64)
        magnitude = bits & np.int64(_HUGE)
        return np.where(bits < 0, -magnitude, magnitude)
    et = T.element_type(a.dtype)
    if et.bits < 8 * size:  # f4, f6: the bits a byte holds; their sign is the top one
        bits &= (1 << et.bits) - 1
        sign = np.int64(1) << (et.bits - 1)
    if not et.has_sign:  # f8e8m0fnu: its bits order as its values
        return bits
    magnitude = bits & (sign - 1)
    return np.where(bits & sign, -magnitude, magnitude)


# -- the report ------------------------------------------------------------------------------

# relative errors are counted by decade, from below 1e-8 to 10 and above, and infinite
_DECADES = range(-8, 2)


@dataclasses.dataclass
class Difference:
    """One differing element: its index, both values, the errors, and the inputs there."""

    index: tuple
    actual: object
    expected: object
    abs_error: float
    rel_error: float
    inputs: dict = dataclasses.field(default_factory=dict)  # name -> value at `index`

    def to_json(self) -> dict:
        return {"index": list(self.index), "actual": json_value(self.actual),
                "expected": json_value(self.expected), "abs_error": json_value(self.abs_error),
                "rel_error": json_value(self.rel_error),
                "inputs": {k: json_value(v) for k, v in self.inputs.items()}}

    def text(self, actual: str = "actual", expected: str = "expected") -> str:
        inputs = "".join(f", {k}={_show(v)}" for k, v in self.inputs.items())
        return (f"at {list(self.index)}: {actual} {_show(self.actual)}, {expected} "
                f"{_show(self.expected)} (abs error {_show(self.abs_error)}, rel error "
                f"{_show(self.rel_error)}{inputs})")


@dataclasses.dataclass
class ResultReport:
    """How one result compares: counts, largest errors, the first differences, and a
    histogram of relative errors by decade (of the elements whose values are not equal);
    `mask`, where compare_arrays was asked for it: which elements differ."""

    name: str
    shape: str
    tolerance: Tolerance
    elements: int
    differing: int
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    first: list = dataclasses.field(default_factory=list)       # Difference, in index order
    histogram: dict = dataclasses.field(default_factory=dict)   # decade label -> count
    problem: str | None = None  # what makes the results incomparable (their shapes)
    max_ulp: int = 0  # the largest distance in ULP of the differing elements (floats)
    both_nan: int = 0  # elements NaN on both sides (they match, and say nothing)
    mask: np.ndarray | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.problem is None and self.differing == 0

    @property
    def all_nan(self) -> bool:
        """Every element NaN on both sides: a match that compares nothing."""
        return self.problem is None and 0 < self.elements == self.both_nan

    def to_json(self) -> dict:
        return {"name": self.name, "shape": self.shape, "ok": self.ok,
                "tolerance": self.tolerance.to_json(), "elements": self.elements,
                "differing": self.differing, "max_abs_error": json_value(self.max_abs_error),
                "max_rel_error": json_value(self.max_rel_error),
                "first": [d.to_json() for d in self.first], "histogram": dict(self.histogram),
                "max_ulp": self.max_ulp, "both_nan": self.both_nan, "problem": self.problem}

    def text(self, actual: str = "actual", expected: str = "expected",
             head: str | None = None) -> str:
        """The report for people; `head` begins its first line (default "NAME SHAPE: ")."""
        head = f"{self.name} {self.shape}: " if head is None else head
        if self.problem:
            return head + self.problem
        verdict = (f"all {self.elements} elements match" if self.ok else
                   f"{self.differing} of {self.elements} elements differ")
        nan = (f"; all {self.both_nan} NaN on both sides" if self.all_nan else
               f"; {self.both_nan} of them NaN on both sides" if self.both_nan else "")
        lines = [f"{head}{verdict} ({self.tolerance.describe(self.shape.split('[')[0])}); "
                 f"largest errors: abs "
                 f"{_show(self.max_abs_error)}, rel {_show(self.max_rel_error)}{nan}"]
        lines += ["  " + d.text(actual, expected) for d in self.first]
        if self.differing > len(self.first):
            lines.append(f"  ... and {self.differing - len(self.first)} more")
        if self.histogram:  # of the elements whose values are not equal, by the rule or not
            decades = ", ".join(f"{k}: {n}" for k, n in self.histogram.items())
            unequal = sum(self.histogram.values())
            within = unequal - self.differing
            lines.append(
                f"  bitwise differences within the tolerance, by relative error: {decades}"
                if self.ok else
                f"  relative errors of the {unequal} unequal elements, {within} within the "
                f"tolerance: {decades}" if within > 0 else
                f"  relative errors of unequal elements: {decades}")
        return "\n".join(lines)


def compare_arrays(actual, expected, tolerance: Tolerance | None = None, *, name: str = "result",
                   inputs: dict | None = None, shown: int = 5, also: Tolerance | None = None,
                   mask: bool = False) -> ResultReport:
    """The report of `actual` against `expected` by `tolerance` (XLA's Near, abs = rel =
    1e-3, when None). `inputs` (name -> array): the inputs whose shape is the result's are
    shown at each of the first `shown` differing indices. `also`: an element differs only
    where it differs by this rule too (within 3 ULP or 1e-5 relative: `ulp=3` also
    `Tolerance(0, 1e-5)`). `mask`: keep which elements differ (`report.mask`)."""
    tolerance = tolerance or Tolerance()
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.dtype != expected.dtype or actual.shape != expected.shape:
        return ResultReport(name, shape_text(expected), tolerance, int(expected.size),
                            int(max(actual.size, expected.size)),
                            problem=f"the results' shapes differ: {shape_text(actual)} against "
                                    f"{shape_text(expected)}")
    report = ResultReport(name, shape_text(expected), tolerance, int(expected.size), 0)
    if _kind(actual.dtype) in (T.FLOAT, T.COMPLEX):
        report.both_nan = int(np.count_nonzero(_nan_anywhere(actual) & _nan_anywhere(expected)))
    if mask:
        report.mask = np.zeros(actual.shape, bool)
    # only the elements whose bits differ need the rule (where equal bits match): one pass
    # finds them (where they are many, the rule runs on every element rather than on
    # copies of them)
    a, e = np.ascontiguousarray(actual).reshape(-1), np.ascontiguousarray(expected).reshape(-1)
    unequal = _unequal_bits(a, e) if tolerance.equal_bits_match else np.ones(a.shape, bool)
    count = int(np.count_nonzero(unequal))
    if not count:
        return report
    where = None
    if count < a.size // 4:
        where = np.flatnonzero(unequal)
        a, e = a[where], e[where]
    bad, abs_error, rel_error = judge(a, e, tolerance)
    if also is not None:
        bad &= judge(a, e, also)[0]
    if mask:
        marks = report.mask.reshape(-1)  # (a view: the array is new)
        marks[slice(None) if where is None else where] = bad
    report.differing = int(np.count_nonzero(bad))
    report.max_ulp = _max_ulp(a[bad], e[bad]) if report.differing else 0
    report.max_abs_error = float(abs_error.max())
    report.max_rel_error = float(rel_error.max())
    report.histogram = _histogram(rel_error, int(np.count_nonzero(abs_error == 0)))
    alongside = {k: np.asarray(v) for k, v in (inputs or {}).items()
                 if np.shape(v) == actual.shape}
    for k in np.flatnonzero(bad)[:shown]:
        flat = k if where is None else where[k]
        index = tuple(int(i) for i in np.unravel_index(flat, actual.shape))
        report.first.append(Difference(index, actual[index], expected[index],
                                       float(abs_error[k]), float(rel_error[k]),
                                       {key: v[index] for key, v in alongside.items()}))
    return report


def _max_ulp(a: np.ndarray, e: np.ndarray) -> int:
    """The largest ULP distance of float (or complex, part by part) elements; 0 for others."""
    kind = T.element_type(a.dtype).kind
    if kind == T.COMPLEX:
        return max(_max_ulp(np.ascontiguousarray(a.real), np.ascontiguousarray(e.real)),
                   _max_ulp(np.ascontiguousarray(a.imag), np.ascontiguousarray(e.imag)))
    return int(ulp_distance(a, e).max()) if kind == T.FLOAT and a.size else 0


def _unequal_bits(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per element of two flat arrays of one dtype: whether their bits differ."""
    if a.dtype.itemsize in _UINT:
        return _bits(a) != _bits(b)
    words = a.dtype.itemsize // 8  # c128: two 64-bit words
    return (a.view(np.uint64).reshape(-1, words) != b.view(np.uint64).reshape(-1, words)).any(1)


def _histogram(rel: np.ndarray, exact: int = 0) -> dict:
    """Counts of relative errors by decade ("<1e-08", "[1e-08, 1e-07)", ..., ">=10",
    "inf"), of the elements whose values differ: `exact` of them (their errors are 0) do
    not count."""
    # how many reach each edge (a pass per edge: cheaper than sorting or searching)
    reaching = [rel.size - exact] + [int(np.count_nonzero(rel >= 10.0 ** k)) for k in _DECADES] \
        + [int(np.count_nonzero(np.isinf(rel))), 0]
    labels = ([f"<{10.0 ** _DECADES[0]:g}"] +
              [f"[{10.0 ** k:g}, {10.0 ** (k + 1):g})" for k in _DECADES[:-1]] +
              [f">={10.0 ** _DECADES[-1]:g}", "inf"])
    return {label: reaching[i] - reaching[i + 1] for i, label in enumerate(labels)
            if reaching[i] > reaching[i + 1]}


# -- subnormals ------------------------------------------------------------------------------

def subnormal(a) -> np.ndarray:
    """Where `a` (any array) holds a subnormal float (in a part of a complex number)."""
    a = np.asarray(a)
    kind = _kind(a.dtype)
    if kind == T.COMPLEX:
        return subnormal(a.real) | subnormal(a.imag)
    if kind != T.FLOAT:
        return np.zeros(a.shape, bool)
    with np.errstate(invalid="ignore"):  # (NaNs of narrow types)
        x = np.abs(a.astype(np.float64))
    return (x > 0) & (x < float(ml_dtypes.finfo(a.dtype).smallest_normal))


def flushed_to_zero(a) -> np.ndarray:
    """`a` with its subnormals made zeros, as a backend that flushes them reads it."""
    a = np.asarray(a)
    if _kind(a.dtype) == T.COMPLEX:
        flushed = np.empty_like(a)  # (not real + 1j * imag: 1j * inf has a NaN real part)
        flushed.real, flushed.imag = flushed_to_zero(a.real), flushed_to_zero(a.imag)
        return flushed
    return np.where(subnormal(a), np.zeros_like(a), a)


# -- values for JSON and for people ---------------------------------------------------------

def json_value(value):
    """A number (or array) as JSON holds it: NaN and infinities as strings, complex
    numbers as [real, imaginary], arrays as nested lists."""
    array = np.asarray(value)
    if array.ndim:
        return [json_value(v) for v in array]
    kind = _kind(array.dtype)
    if kind == T.PRED:
        return bool(array)
    if kind in T.INTEGER:
        return int(array)
    if kind == T.COMPLEX:
        return [json_value(array.real), json_value(array.imag)]
    number = float(array)
    return number if math.isfinite(number) else str(number)


def _kind(dtype: np.dtype) -> str:
    if dtype.kind in "biufc":  # numpy's own (Python numbers become these)
        return {"b": T.PRED, "i": T.SIGNED, "u": T.UNSIGNED, "f": T.FLOAT, "c": T.COMPLEX}[dtype.kind]
    return T.element_type(dtype).kind  # ml_dtypes' types


def _show(value) -> str:
    array = np.asarray(value)
    kind = _kind(array.dtype)
    if kind == T.COMPLEX:
        return f"({_show(array.real)}, {_show(array.imag)})"
    if kind == T.FLOAT:
        return f"{float(array):.9g}"
    return str(bool(array) if kind == T.PRED else int(array))
