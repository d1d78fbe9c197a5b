"""Sort and TopK: the spec's examples, the default total order, comparators over N
operands, TopK's ties, on PJRT and the interpreter against the reference."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests import spec_reference as ref
from tests.helpers import BACKENDS
from tests.test_indexing import on

FLOATS = np.array([3.0, -0.0, np.nan, 1.0, -np.inf, 0.0, -np.nan, np.inf, 1.0, -2.5], np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_three_operand_example(backend):
    """operand0 = [3, 1], operand1 = [42, 50], operand2 = [-3.0, 1.1], comparing operand0 with
    less-than -> ([1, 3], [50, 42], [1.1, -3.0])."""
    got = on(backend, lambda a, b, c: ops.sort([a, b, c], lambda p0, p1, *_: ops.lt(p0, p1)),
             np.array([3, 1], np.int32), np.array([42, 50], np.int32), np.array([-3.0, 1.1], np.float32))
    assert isinstance(got, tuple) and len(got) == 3
    np.testing.assert_array_equal(got[0], [1, 3])
    np.testing.assert_array_equal(got[1], [50, 42])
    np.testing.assert_array_equal(got[2], np.array([1.1, -3.0], np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_order_is_total(backend):
    """No comparator: ascending, -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN."""
    got = on(backend, ops.sort, FLOATS)
    expected = ref.sort([FLOATS])[0]
    assert got.tobytes() == expected.tobytes()  # bit for bit: signs of zeros and NaNs
    assert np.signbit(got[0]) and np.isnan(got[0]) and np.isnan(got[-1]) and not np.signbit(got[-1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("et", ["pred", "s8", "u32", "s64", "bf16", "f16", "f64", "c64"])
def test_default_order_every_type(et, backend):
    rng = np.random.default_rng(1)
    x = rng.integers(-4, 5, size=(3, 7))
    et = hg.element_type(et)
    x = ((x > 0) if et.kind == "pred" else np.abs(x) if et.kind == "unsigned" else
         x + 1j * rng.integers(-2, 3, size=x.shape) if et.kind == "complex" else x).astype(et.dtype)
    for dimension in (0, 1, -1, -2):
        got = on(backend, lambda a: ops.sort(a, dimension=dimension), x)
        np.testing.assert_array_equal(got, ref.sort([x], dimension=dimension)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_stable_sort_with_a_key_comparator(backend):
    keys = np.array([2, 1, 2, 1, 0, 2], np.int32)
    payload = np.arange(6, dtype=np.float32)
    got = on(backend, lambda k, p: ops.sort([k, p], lambda a, b, c, d: ops.lt(a, b), is_stable=True),
             keys, payload)
    np.testing.assert_array_equal(got[0], [0, 1, 1, 2, 2, 2])
    np.testing.assert_array_equal(got[1], [4, 1, 3, 0, 2, 5])


@pytest.mark.parametrize("backend", BACKENDS)
def test_descending_with_tie_break_on_the_second_operand(backend):
    """The comparator may look at every operand: descending by key, then ascending by value."""
    keys = np.array([1, 3, 1, 3, 2], np.int32)
    vals = np.array([5, 9, 4, 8, 7], np.int32)

    def comparator(k1, k2, v1, v2):
        return ops.or_(ops.gt(k1, k2), ops.and_(ops.eq(k1, k2), ops.lt(v1, v2)))

    got = on(backend, lambda k, v: ops.sort([k, v], comparator), keys, vals)
    expected = ref.sort([keys, vals], lambda k1, k2, v1, v2: k1 > k2 or (k1 == k2 and v1 < v2))
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(got[1], [8, 9, 7, 4, 5])


@pytest.mark.parametrize("backend", BACKENDS)
def test_comparator_as_a_computation(backend):
    b = hg.Builder("greater")
    comp = b.build(ops.gt(b.parameter(hg.s32[()]), b.parameter(hg.s32[()])))
    got = on(backend, lambda x: ops.sort(x, comp), np.array([3, 9, -1, 4], np.int32))
    np.testing.assert_array_equal(got, [9, 4, 3, -1])


# -- TopK -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("largest", [True, False])
def test_top_k_ties_keep_the_lower_index(largest, backend):
    x = np.array([[1, 5, 3, 5, 1, 3], [0, 0, 0, 0, 0, 0]], np.int32)
    values, indices = on(backend, lambda a: ops.top_k(a, 4, largest), x)
    exp_values, exp_indices = ref.top_k(x, 4, largest)
    np.testing.assert_array_equal(values, exp_values)
    np.testing.assert_array_equal(indices, exp_indices)
    assert indices.dtype == np.int32
    np.testing.assert_array_equal(indices[1], [0, 1, 2, 3])
    np.testing.assert_array_equal(indices[0], [1, 3, 2, 5] if largest else [0, 4, 2, 5])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [0, 1, 3, 10])
def test_top_k_floats(k, backend):
    for largest in (True, False):
        values, indices = on(backend, lambda a: ops.top_k(a, k, largest), FLOATS)
        exp_values, exp_indices = ref.top_k(FLOATS, k, largest)
        assert values.tobytes() == exp_values.tobytes()
        np.testing.assert_array_equal(indices, exp_indices)


# -- errors -----------------------------------------------------------------------------------------

def _operands():
    b = hg.Builder("e")
    return b.parameter(hg.f32[4, 3]), b.parameter(hg.s32[4, 3])


SORT_ERRORS = [
    (lambda x, i: ops.sort([x, i], lambda a, b: ops.lt(a, b)),
     r"called with 4 parameters \(f32\[\], f32\[\], s32\[\], s32\[\]\)"),
    (lambda x, i: ops.sort(x, lambda a, b: a + b), r"result 0 of the comparator must be pred\[\]"),
    (lambda x, i: ops.sort(x, lambda a, b: (ops.lt(a, b), ops.lt(a, b))), r"must return 1 value"),
    (lambda x, i: ops.sort(x, lambda a, b: "yes"), "must return Ops"),
    (lambda x, i: ops.sort(x, lambda a, b: ops.lt(x, x)), "returns .* from Builder"),
    (lambda x, i: ops.sort(x, lambda a, b: ops.lt(a, ops.reshape(ops.slice(x, [0, 0], [1, 1]), []))),
     "sees only its own parameters"),
    (lambda x, i: ops.sort([x, ops.slice(i, [0, 0], [4, 2])]), "same dimensions"),
    (lambda x, i: ops.sort(x, dimension=2), r"dimension=2 must be an integer in \[-2, 2\)"),
    (lambda x, i: ops.sort(ops.reshape(ops.slice(x, [0, 0], [1, 1]), [])), "rank >= 1"),
    (lambda x, i: ops.top_k(x, 4), r"k=4 must be an integer in \[0, 3\]"),
    (lambda x, i: ops.top_k(ops.convert_element_type(x, hg.c64), 1), "not ordered"),
    (lambda x, i: ops.top_k(x, 1, largest="no"), "largest must be True or False"),
    (lambda x, i: ops.sort(x, is_stable=1), "is_stable must be True or False"),
]


@pytest.mark.parametrize("call,message", SORT_ERRORS, ids=[m for _, m in SORT_ERRORS])
def test_sort_errors(call, message):
    with pytest.raises(hg.ShapeError, match=message):
        call(*_operands())


def test_comparator_computation_with_the_wrong_signature():
    b = hg.Builder("f64_less")
    comp = b.build(ops.lt(b.parameter(hg.f64[()]), b.parameter(hg.f64[()])))
    x, _ = _operands()
    with pytest.raises(hg.ShapeError, match=r"parameter 0 of the comparator must be f32\[\]; "
                                            r"computation 'f64_less' has f64\[\]"):
        ops.sort(x, comp)
