"""StableHLO's check ops as comparison rules of hlogen.differential.near, the one
array comparison of hlogen (this module is only the table from a check to its rule):

- `expect_eq`: exact (-0 == +0; a NaN differs from everything, NaN included);
- `expect_close`: between `min_ulp_difference` (default 0) and `max_ulp_difference`
  (default 3) units in the last place apart; two NaNs are equal;
- `@check.expect_almost_eq` (custom call, testdata): absolute difference <= 1e-3, i.e.
  XLA's Near with rel 0 (two NaNs equal, an infinity equal to itself only);
- `expect_almost_eq` / `expect_almost_eq_const` (check dialect): `tolerance`, default 1e-4;
- `@check.eq` (older testdata): exact for integers, 1e-4 for floats (Near compares
  integers exactly whatever its bounds).
Complex values are judged per component; integers and predicates exactly in every rule.
StableHLO's `expect_almost_eq` (and `eq`) also fails two values of opposite signs within
the tolerance (its areApproximatelyEqual); hlogen does not: noise around zero is no
failure here (on StableHLO's files that rule would fail a triangular_solve module on cpu
and six fft modules on the interpreter, by -3e-8 and -1e-15 against 0).
"""
from __future__ import annotations

import numpy as np

from hlogen.differential.near import ResultReport, Tolerance, compare_arrays


def rule_of(call: str, params: dict, from_check_dialect: bool) -> Tolerance:
    """The rule of a check (`call`: the name after @check.) with its parameters."""
    if call == "expect_eq":
        return Tolerance(exact=True)
    if call == "expect_close":
        return Tolerance(ulp=int(params.get("max_ulp_difference", 3)),
                         min_ulp=int(params.get("min_ulp_difference", 0)))
    if call == "expect_almost_eq":
        default = 1e-4 if from_check_dialect else 1e-3
        return Tolerance(abs=float(params.get("tolerance", default)), rel=0)
    if call == "eq":
        return Tolerance(abs=1e-4, rel=0)
    raise ValueError(f"unknown check @check.{call}")


def judge(rule: Tolerance, got: np.ndarray, want: np.ndarray) -> ResultReport:
    """The report of `got` against `want` by `rule`, with its mask of differing elements."""
    return compare_arrays(got, want, rule, name="check", mask=True, shown=1)


def describe(report: ResultReport) -> str:
    """A report in one line, as conformance records say it."""
    if report.ok:
        return "ok"
    if report.problem:
        return report.problem
    first = report.first[0] if report.first else None
    where = f" first at {list(first.index)}: got {first.actual.item()!r}, expected " \
            f"{first.expected.item()!r}" if first else ""
    extra = f", max |diff| {report.max_abs_error:.3g}, max {report.max_ulp} ULP" \
        if report.max_ulp else ""
    return f"{report.differing} of {report.elements} elements differ{where}{extra}"
