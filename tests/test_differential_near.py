"""XLA's comparison rule (hlogen.differential.near) against an independent statement of it.

The statement below is written from XLA's literal_comparison.cc as the notes give it, one
element at a time in plain Python (the errors in Python's floats, as hlogen says it
computes them: XLA subtracts in the element type; the types' values enumerated for
ULPs); the library's rule is vectorized numpy. They must agree on every
pair of the swept values of every element type, and on random pairs (hypothesis).
"""
from __future__ import annotations

import itertools
import json
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hlogen as hg
from hlogen.differential import Tolerance, compare_arrays
from hlogen.differential.near import judge
from tests import ulp

TOLERANCES = [Tolerance(), Tolerance(0, 0), Tolerance(0.1, 0), Tolerance(0, 0.1),
              Tolerance(1e-3, 0.5)]


# -- the independent statement -----------------------------------------------------------------

def xla_mismatch(a, e, tol: Tolerance, same_bits: bool) -> bool:
    """One real element, by the notes: bitwise equal matches; two NaNs match; one NaN is
    a mismatch; an infinity must equal the other value; else a mismatch only when
    |a-e| > abs and |a-e|/|e| > rel (infinite where e == 0)."""
    a, e = float(a), float(e)
    if same_bits:
        return False
    if math.isnan(a) or math.isnan(e):
        return math.isnan(a) != math.isnan(e)
    if math.isinf(a) or math.isinf(e):
        return True  # (equal infinities have equal bits)
    error = abs(a - e)
    relative = (math.inf if error else 0.0) if e == 0 else error / abs(e)
    return error > tol.abs and relative > tol.rel


def values_of(dtype) -> list:
    """Every finite value of a type of 16 bits or fewer, in order, -0 merged with +0."""
    bits = np.dtype(dtype).itemsize * 8
    every = np.arange(2 ** bits, dtype=np.uint16 if bits > 8 else np.uint8).view(dtype)
    with np.errstate(invalid="ignore"):  # (NaNs of the narrow types)
        wide = every.astype(np.float64)
    return sorted(set(wide[np.isfinite(wide)].tolist()))


def ulps_apart(a, e, dtype, table) -> int:
    """Units in the last place between two finite values: positions in the type's
    ordered values (a table for narrow types; nextafter steps for f32/f64)."""
    if table is not None:
        return abs(table.index(float(a)) - table.index(float(e)))
    lo, hi = sorted((dtype(a), dtype(e)))
    steps = 0
    while lo < hi and steps <= 4:
        lo = np.nextafter(lo, dtype(np.inf))
        steps += 1
    return steps


def real_mismatch(a, e, tol: Tolerance, dtype, table) -> bool:
    """One real float element by each mode's statement."""
    same_bits = np.array(a).tobytes() == np.array(e).tobytes()
    fa, fe = float(a), float(e)
    if tol.bitwise:
        return not same_bits
    if tol.exact:
        return not fa == fe  # -0 == +0; a NaN equals nothing
    if tol.ulp is not None:
        if math.isnan(fa) or math.isnan(fe):
            return not (math.isnan(fa) and math.isnan(fe)) or tol.min_ulp > 0
        if (math.isinf(fa) or math.isinf(fe)) and fa != fe:
            return True  # no number of ULPs reaches an infinity (StableHLO's ULPDifference)
        distance = 0 if same_bits else ulps_apart(a, e, dtype, table)
        return distance > tol.ulp or distance < tol.min_ulp
    return xla_mismatch(a, e, tol, same_bits)


def expected_mask(actual, expected, tol: Tolerance) -> list:
    et = hg.element_type(actual.dtype)
    out = []
    real = et.component if et.kind == "complex" else et
    table = values_of(real.dtype) if real.kind == "float" and real.bits <= 16 else None
    for a, e in zip(actual.reshape(-1), expected.reshape(-1)):
        if et.kind in ("pred", "signed", "unsigned"):
            out.append(bool(a != e))
        elif et.kind == "complex":
            out.append(any(real_mismatch(x, y, tol, real.dtype.type, table)
                           for x, y in ((a.real, e.real), (a.imag, e.imag))))
        else:
            out.append(real_mismatch(a, e, tol, actual.dtype.type, table))
    return out


# -- the sweep ---------------------------------------------------------------------------------

def sweep_values(et) -> np.ndarray:
    """Signed zeros, subnormals, normals near 1 and 0 (around the bounds), extremes,
    infinities and NaN, as far as the type holds them."""
    if et.kind == "pred":
        return np.array([False, True])
    if et.kind in ("signed", "unsigned"):
        info = ml_dtypes.iinfo(et.dtype)
        return np.array(sorted({info.min, info.min + 1, 0, 1, info.max - 1, info.max}), et.dtype)
    info = ml_dtypes.finfo(et.component.dtype)
    candidates = [0.0, -0.0, float(info.smallest_subnormal), -float(info.smallest_subnormal),
                  float(info.smallest_normal), 1.0, -1.0, 1.0009, 1.0011, 1.5, 0.0009, 0.0011,
                  float(info.max), -float(info.max), np.inf, -np.inf, np.nan]
    with np.errstate(all="ignore"):
        return np.array(candidates).astype(et.component.dtype)


@pytest.mark.parametrize("name", list(hg.ELEMENT_TYPES))
def test_every_pair_of_special_values_is_judged_as_xla_does(name):
    et = hg.ELEMENT_TYPES[name]
    values = sweep_values(et)
    pairs = list(itertools.product(values, repeat=2))
    if et.kind == "complex":  # real and imaginary parts from the sweep, crosswise
        parts = values[[0, 1, 3, 5, 8, 14, 16]]
        numbers = np.array([complex(r, i) for r, i in itertools.product(parts, repeat=2)], et.dtype)
        pairs = list(itertools.product(numbers, repeat=2))
    actual = np.array([p[0] for p in pairs], et.dtype)
    expected = np.array([p[1] for p in pairs], et.dtype)
    modes = TOLERANCES + [Tolerance(exact=True)] + \
        ([Tolerance(ulp=0), Tolerance(ulp=1), Tolerance(ulp=3, min_ulp=1), Tolerance(bitwise=True)]
         if et.kind == "float" else [])
    for tol in modes:
        bad, _, _ = judge(actual, expected, tol)
        assert bad.tolist() == expected_mask(actual, expected, tol), (name, tol)


def test_the_rules_named_cases():
    near = Tolerance()
    f = np.float32
    cases = [  # (actual, expected, mismatch?)
        (f(np.nan), f(-np.nan), False),       # two NaNs, any payload
        (f(np.nan), f(1), True), (f(1), f(np.nan), True),
        (f(np.inf), f(np.inf), False), (f(np.inf), f(3e38), True), (f(-np.inf), f(np.inf), True),
        (f(-0.0), f(0.0), False),              # -0 matches +0
        (f(1e-40), f(0), False),               # a subnormal within abs of 0
        (f(1.0005), f(1), False), (f(1.01), f(1), True),
        (f(0.0011), f(0), True), (f(0.0009), f(0), False),  # rel is infinite at e == 0
        (f(1000.5), f(1000), False),           # abs 0.5 but rel 5e-4: within
    ]
    for a, e, wrong in cases:
        assert judge(np.array([a]), np.array([e]), near)[0][0] == wrong, (a, e)
    assert not judge(np.array([-0.0], f), np.array([0.0], f), Tolerance(ulp=0))[0][0]
    assert judge(np.array([-0.0], f), np.array([0.0], f), Tolerance(bitwise=True))[0][0]
    c = np.complex64
    assert judge(np.array([c(1 + 1j)]), np.array([c(1 + 2j)]), near)[0][0]  # the imaginary part
    assert not judge(np.array([c(complex(np.nan, 1))]), np.array([c(complex(np.nan, 1))]), near)[0][0]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(width=32), st.floats(width=32)), min_size=1, max_size=20),
       st.floats(0, 1), st.floats(0, 1), st.sampled_from(["f32", "f64", "bf16", "f16", "f8e4m3fn"]))
def test_random_pairs_are_judged_as_xla_does(pairs, abs_bound, rel_bound, name):
    et = hg.ELEMENT_TYPES[name]
    with np.errstate(all="ignore"):
        actual = np.array([p[0] for p in pairs]).astype(et.dtype)
        expected = np.array([p[1] for p in pairs]).astype(et.dtype)
    tol = Tolerance(abs_bound, rel_bound)
    assert judge(actual, expected, tol)[0].tolist() == expected_mask(actual, expected, tol)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.integers(-2**63, 2**63 - 1)),
                min_size=1, max_size=10))
def test_integers_are_judged_exactly(pairs):
    actual = np.array([p[0] for p in pairs], np.int64)
    expected = np.array([p[1] for p in pairs], np.int64)
    # a tolerance that would forgive any float difference does not forgive integers
    assert judge(actual, expected, Tolerance(1e30, 1e30))[0].tolist() == \
        [a != e for a, e in pairs]


# -- the report --------------------------------------------------------------------------------

def test_errors_of_integers_beyond_float64s_integers_are_not_zero():
    """|a - e| of 64-bit integers from Python's integers (float64 holds them to 2**53)."""
    for dtype, pairs in [(np.int64, [(2**63 - 1, 2**63 - 2), (-2**63, 2**63 - 1), (5, 5)]),
                         (np.uint64, [(2**64 - 1, 2**64 - 2), (0, 2**64 - 1), (7, 7)])]:
        actual = np.array([a for a, _ in pairs], dtype)
        expected = np.array([e for _, e in pairs], dtype)
        _, abs_error, rel_error = judge(actual, expected, Tolerance())
        assert abs_error.tolist() == [float(abs(a - e)) for a, e in pairs], dtype
        assert rel_error.tolist() == pytest.approx([abs(a - e) / abs(e) for a, e in pairs])
        report = compare_arrays(actual, expected)
        assert report.differing == 2 and report.first[0].abs_error == 1.0
        assert sum(report.histogram.values()) == 2, report.histogram


def test_a_report_counts_shows_the_first_differences_with_the_inputs_there():
    x = np.array([[1, 100], [3, 50]], np.float32)
    actual = np.array([[1, 100], [3, 50]], np.float32)
    expected = np.array([[1.0000001, np.inf], [3, 51]], np.float32)
    report = compare_arrays(actual, expected, inputs={"x": x, "other": np.zeros(3)}, shown=1,
                            name="result 0")
    assert (report.elements, report.differing, report.ok) == (4, 2, False)
    assert report.max_abs_error == math.inf and report.max_rel_error == math.inf
    first = report.first[0]
    assert first.index == (0, 1) and first.actual == 100 and first.expected == math.inf
    assert first.inputs == {"x": 100}  # the input of another shape is not shown
    assert report.histogram == {"[1e-07, 1e-06)": 1, "[0.01, 0.1)": 1, "inf": 1}
    text = report.text("cpu", "interpret")
    assert "2 of 4 elements differ" in text and "at [0, 1]: cpu 100, interpret inf" in text
    assert "x=100" in text and "... and 1 more" in text
    as_json = json.loads(json.dumps(report.to_json(), allow_nan=False))  # strings for inf
    assert as_json["max_abs_error"] == "inf" and as_json["first"][0]["expected"] == "inf"
    assert as_json["first"][0]["inputs"] == {"x": 100.0}


def test_matching_results_report_their_largest_errors():
    report = compare_arrays(np.array([1.0, 2.0]), np.array([1.0, 2.000001]))
    assert report.ok and report.differing == 0 and report.first == []
    assert report.max_abs_error == pytest.approx(1e-6) and report.max_rel_error == pytest.approx(5e-7)
    assert "all 2 elements match" in report.text()
    same = compare_arrays(np.array([np.nan, -0.0]), np.array([np.nan, -0.0]))
    assert same.ok and same.histogram == {} and same.max_abs_error == 0


def test_results_of_other_shapes_are_incomparable():
    report = compare_arrays(np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32))
    assert not report.ok and "f32[2,3] against f32[3,2]" in report.problem
    other = compare_arrays(np.zeros(3, np.float32), np.zeros(3, np.float64))
    assert not other.ok and "f32[3] against f64[3]" in other.text()


@pytest.mark.parametrize("name", ["bf16", "f8e5m2", "s4", "u2", "c128", "pred", "f4e2m1fn"])
def test_reports_of_every_kind_of_type_are_json(name):
    et = hg.ELEMENT_TYPES[name]
    values = sweep_values(et)
    report = compare_arrays(values, values[::-1].copy(), Tolerance(0, 0), shown=100)
    assert report.differing == len(report.first) > 0
    json.dumps(report.to_json(), allow_nan=False)
    report.text()


def test_bad_tolerances_are_refused():
    for bad in ({"abs": -1}, {"rel": float("nan")}, {"abs": "1"}, {"ulp": -2}, {"ulp": 1.5},
                {"ulp": 1, "bitwise": True}):
        with pytest.raises(hg.InputError):
            Tolerance(**bad)


def test_a_report_keeps_its_mask_and_the_largest_ulp_of_what_differs():
    one = np.float32(1)
    actual = np.array([one, np.nextafter(one, np.float32(2)), 2.0, np.nan, -0.0], np.float32)
    expected = np.array([one, one, 1.0, np.nan, 0.0], np.float32)
    exact = compare_arrays(actual, expected, Tolerance(exact=True), mask=True)
    assert exact.mask.tolist() == [False, True, True, True, False]  # NaN equals nothing
    differing = exact.mask
    assert exact.max_ulp == int(ulp.ulp_distance(actual[differing], expected[differing]).max())
    ranged = compare_arrays(actual, expected, Tolerance(ulp=3, min_ulp=1), mask=True)
    assert ranged.mask.tolist() == [True, False, True, True, True]  # 0 apart: below min_ulp
    # `also`: an element differs only where both rules say so (2.0 against 1.0 only)
    both = compare_arrays(actual, expected, Tolerance(ulp=0), also=Tolerance(0, 0.5), mask=True)
    assert both.mask.tolist() == [False, False, True, False, False] and both.differing == 1
    assert Tolerance(ulp=3, min_ulp=1).describe() == "within 1..3 ULP"
    for bad in ({"ulp": 1, "exact": True}, {"min_ulp": 2}, {"ulp": 1, "min_ulp": 2}):
        with pytest.raises(hg.InputError):
            Tolerance(**bad)


def test_subnormals_and_flushing_them_by_the_ieee_bounds():
    """Subnormal: nonzero and below 2**(1 - bias) (f32 2**-126, f16 2**-14, f64 2**-1022),
    in either part of a complex number; flushing makes them zeros and keeps the rest,
    infinities and NaNs included."""
    from hlogen.differential.near import flushed_to_zero, subnormal
    f32 = np.array([2.0 ** -126, 2.0 ** -127, -2.0 ** -149, 0.0, np.inf, np.nan], np.float32)
    assert subnormal(f32).tolist() == [False, True, True, False, False, False]
    f16 = np.array([2.0 ** -14, 2.0 ** -15], np.float16)
    assert subnormal(f16).tolist() == [False, True]
    assert subnormal(np.array([2.0 ** -1023], np.float64)).tolist() == [True]
    assert not subnormal(np.array([1, 0], np.int32)).any()
    flushed = flushed_to_zero(f32)
    assert flushed[1] == 0 and flushed[2] == 0 and flushed[0] == 2.0 ** -126
    assert np.isinf(flushed[4]) and np.isnan(flushed[5])
    c = np.array([complex(2.0 ** -1030, np.inf), complex(1, 2.0 ** -1030)], np.complex128)
    assert subnormal(c).tolist() == [True, True]
    assert flushed_to_zero(c).tolist() == [complex(0, np.inf), complex(1, 0)]
