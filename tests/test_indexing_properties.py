"""Property tests for the data-movement ops: random valid cases (tests/strategies_indexing.py,
written from the StableHLO constraints) run on PJRT and the interpreter, each result equal,
bit for bit, to the independent reference (tests/spec_reference.py)."""
from __future__ import annotations

import os

import ml_dtypes
import numpy as np
from hypothesis import HealthCheck, given, settings

import hlogen as hg
from hlogen import ops
from tests import spec_reference as ref
from tests import strategies_indexing as cases
from tests.helpers import BACKENDS, run

# HLOGEN_EXAMPLES=500 for a longer search than make test's.
SETTINGS = settings(max_examples=int(os.environ.get("HLOGEN_EXAMPLES", 30)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _shape(value):
    value = np.asarray(value)
    return hg.Shape(hg.element_type(value.dtype), value.shape)


def check(fn, values, expected, computed=False, backends=BACKENDS):
    """`fn` over one parameter per value, on `backends`, equal bit for bit to `expected`
    (moved data keeps its bits); `computed` values may differ in the sign and payload of
    NaNs, which arithmetic leaves to the implementation."""
    b = hg.Builder("case")
    result = fn(*[b.parameter(_shape(v), f"p{i}") for i, v in enumerate(values)])
    comp = b.build(*result) if isinstance(result, tuple) else b.build(result)
    expected = expected if isinstance(expected, (list, tuple)) else [expected]
    for backend in backends:
        got = run(comp, backend, *values)
        got = got if isinstance(got, tuple) else (got,)
        for g, e in zip(got, expected):
            e = np.asarray(e)
            assert g.dtype == e.dtype and g.shape == e.shape, (backend, g.dtype, e.dtype, g.shape, e.shape)
            if computed and e.dtype.kind == "c":  # sums of duplicates: any order is valid
                np.testing.assert_allclose(g, e, rtol=1e-5 if e.dtype == np.complex64 else 1e-12,
                                           err_msg=backend)
            elif computed and e.dtype.kind in "fV":
                np.testing.assert_array_equal(g.astype(np.complex128), e.astype(np.complex128),
                                              err_msg=backend)
            else:
                assert g.tobytes() == e.tobytes(), f"{backend}:\n{g}\n!=\n{e}"


@SETTINGS
@given(cases.gather_cases())
def test_gather(case):
    case = dict(case)
    operand, indices = case.pop("operand"), case.pop("start_indices")
    check(lambda o, i: ops.gather(o, i, **case), [operand, indices], ref.gather(operand, indices, **case))


def _combiners(dtypes):
    """An update computation for each operand (max; add for complex: XLA CPU's complex max
    is a known deviation, and the order of additions is the backend's) and its numpy twin."""
    hl = [ops.add if np.dtype(d).kind == "c" else ops.max for d in dtypes]
    py = [np.add if np.dtype(d).kind == "c" else np.maximum for d in dtypes]

    def update(*values):
        n = len(values) // 2
        return tuple(f(a, u) for f, a, u in zip(hl, values[:n], values[n:]))

    def reference(*values):
        n = len(values) // 2
        out = tuple(f(a, u) for f, a, u in zip(py, values[:n], values[n:]))
        return out if n > 1 else out[0]
    return update, reference


@SETTINGS
@given(cases.scatter_cases())
def test_scatter(case):
    case = dict(case)
    operands, indices, updates = case.pop("operands"), case.pop("scatter_indices"), case.pop("updates")
    n = len(operands)
    update, reference = _combiners([o.dtype for o in operands])
    with np.errstate(all="ignore"):
        expected = ref.scatter(operands, indices, updates, reference, **case)
    floats = {o.dtype for o in operands if o.dtype.kind == "f" or o.dtype == ml_dtypes.bfloat16}
    # XLA's HLO verifier refuses a scatter over floats of different widths (tested apart)
    backends = ["interpret"] if len(floats) > 1 else BACKENDS
    check(lambda *p: ops.scatter(list(p[:n]), p[n], list(p[n + 1:]), update, **case),
          [*operands, indices, *updates], expected, computed=True, backends=backends)


@SETTINGS
@given(cases.pad_cases())
def test_pad(case):
    x, value, config = case["operand"], case["padding_value"], case["padding_config"]
    check(lambda o, v: ops.pad(o, v, config), [x, value], ref.pad(x, value, config))


@SETTINGS
@given(cases.slice_cases())
def test_slice(case):
    x, start, limit, strides = (case[k] for k in ("operand", "start_indices", "limit_indices", "strides"))
    check(lambda o: ops.slice(o, start, limit, strides), [x], ref.slice(x, start, limit, strides))


@SETTINGS
@given(cases.dynamic_slice_cases())
def test_dynamic_slice(case):
    x, starts, sizes = case["operand"], case["start_indices"], case["size_indices"]
    check(lambda o, *s: ops.dynamic_slice(o, list(s), sizes), [x, *starts],
          ref.dynamic_slice(x, starts, sizes))


@SETTINGS
@given(cases.dynamic_update_slice_cases())
def test_dynamic_update_slice(case):
    x, update, starts = case["operand"], case["update"], case["start_indices"]
    check(lambda o, u, *s: ops.dynamic_update_slice(o, u, list(s)), [x, update, *starts],
          ref.dynamic_update_slice(x, update, starts))


@SETTINGS
@given(cases.sort_cases())
def test_sort(case):
    operands, dimension = case["operands"], case["dimension"]
    check(lambda *p: ops.sort(list(p), dimension=dimension, is_stable=True), operands,
          ref.sort(operands, dimension=dimension, is_stable=True))
