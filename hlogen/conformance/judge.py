"""StableHLO's judging rules for its check ops, on numpy arrays.

- `expect_eq`: exact (a NaN differs from everything, NaN included);
- `expect_close`: at most `max_ulp_difference` (default 3) units in the last place
  apart (and at least `min_ulp_difference`, default 0); two NaNs are equal;
- `@check.expect_almost_eq` (custom call, testdata): absolute difference <= 1e-3;
- `expect_almost_eq` / `expect_almost_eq_const` (check dialect): `tolerance`, default 1e-4;
- `@check.eq` (older testdata): exact for integers, 1e-4 for floats.
Complex values are judged per component.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from hlogen import types as T
from hlogen.differential.near import ulp_distance


@dataclasses.dataclass
class Verdict:
    ok: bool
    mismatches: int = 0
    total: int = 0
    max_abs: float = 0.0       # largest absolute difference among mismatches (floats)
    max_ulp: int = 0           # largest ULP distance among mismatches (floats)
    first: tuple | None = None  # index of the first mismatch
    got: str = ""
    want: str = ""
    mask: np.ndarray | None = dataclasses.field(default=None, repr=False)  # mismatch positions

    def describe(self) -> str:
        if self.ok:
            return "ok"
        where = f" first at {list(self.first)}" if self.first is not None else ""
        extra = f", max |diff| {self.max_abs:.3g}, max {self.max_ulp} ULP" if self.max_ulp else ""
        return (f"{self.mismatches} of {self.total} elements differ{where}: got {self.got}, "
                f"expected {self.want}{extra}")


def rule_of(call: str, params: dict, from_check_dialect: bool) -> tuple[str, dict]:
    """(kind, parameters) of a check: kind is "eq", "close" or "almost"."""
    if call == "expect_eq":
        return "eq", {}
    if call == "expect_close":
        return "close", {"max_ulp": int(params.get("max_ulp_difference", 3)),
                         "min_ulp": int(params.get("min_ulp_difference", 0))}
    if call == "expect_almost_eq":
        default = 1e-4 if from_check_dialect else 1e-3
        return "almost", {"tolerance": float(params.get("tolerance", default))}
    if call == "eq":
        return "eq_or_almost", {"tolerance": 1e-4}
    raise ValueError(f"unknown check @check.{call}")


def judge(kind: str, params: dict, got: np.ndarray, want: np.ndarray) -> Verdict:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return Verdict(False, int(max(got.size, want.size)), int(max(got.size, want.size)),
                       got=f"shape {got.shape}", want=f"shape {want.shape}")
    et = T.element_type(got.dtype)
    if kind == "eq_or_almost":
        kind = "almost" if et.kind in (T.FLOAT, T.COMPLEX) else "eq"
    if et.kind == T.COMPLEX:
        parts = [judge_mask(kind, params, g, w) for g, w in
                 ((got.real, want.real), (got.imag, want.imag))]
        bad = parts[0][0] | parts[1][0]
        ulp = max(parts[0][1], parts[1][1])
    else:
        bad, ulp = judge_mask(kind, params, got, want)
    return verdict(bad, got, want, ulp)


def verdict(bad: np.ndarray, got, want, ulp: int = 0) -> Verdict:
    n = int(np.count_nonzero(bad))
    if n == 0:
        return Verdict(True, 0, int(bad.size))
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.ndim else ()
    with np.errstate(all="ignore"):
        try:
            diff = np.abs(_as_float(got)[bad] - _as_float(want)[bad])
            max_abs = float(np.nanmax(diff)) if diff.size and not np.all(np.isnan(diff)) else float("nan")
        except (TypeError, ValueError):
            max_abs = float("nan")
    return Verdict(False, n, int(bad.size), max_abs, ulp, first,
                   repr(_item(got, first)), repr(_item(want, first)), bad)


def _item(a, index):
    v = a[index] if a.ndim else a[()]
    return v.item() if hasattr(v, "item") else v


def _as_float(a: np.ndarray) -> np.ndarray:
    et = T.element_type(a.dtype)
    if et.kind == T.COMPLEX:
        return a.astype(np.complex128)
    return a.astype(np.float64)


def judge_mask(kind: str, params: dict, got: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, int]:
    """(mismatch mask, largest ULP distance among mismatches) of real arrays."""
    et = T.element_type(got.dtype)
    if et.kind != T.FLOAT:
        return np.asarray(got != want), 0
    if kind == "eq":
        return np.asarray(got != want), _max_ulp(got, want, got != want)
    if kind == "close":
        distance = ulp_distance(got, want)
        bad = (distance > params["max_ulp"]) | (distance < params["min_ulp"])
        return bad, _max_ulp(got, want, bad, distance)
    # almost: |a - b| <= tolerance, two NaNs equal, infinities equal to themselves
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        close = (np.abs(g - w) <= params["tolerance"]) | (g == w) | (np.isnan(g) & np.isnan(w))
    bad = ~close
    return bad, _max_ulp(got, want, bad)


def _max_ulp(got, want, bad, distance=None) -> int:
    if not np.any(bad):
        return 0
    if distance is None:
        distance = ulp_distance(got, want)
    return int(np.max(distance[bad]))
