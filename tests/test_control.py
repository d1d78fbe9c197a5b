"""While, Conditional, Call, CompositeCall, OptimizationBarrier and tokens, on PJRT and the
interpreter; the errors of bad computations."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests.helpers import BACKENDS, run
from tests.test_indexing import build, on

X = np.array([[1, 2, 3], [4, 5, 6]], np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_while_counter_and_vector_accumulator(backend):
    """init = {0, zero_vector[10]}; while result(0) < 1000: add 1 and a constant vector."""
    def condition(i, v):
        return ops.lt(i, 1000)

    def body(i, v):
        return ops.add(i, 1), ops.add(v, ops.broadcast(v.builder.constant(0.5), [10]))

    b = hg.Builder("loop")
    zero = ops.broadcast(b.constant(0.0), [10])
    count, vector = ops.while_loop(condition, body, (b.constant(0), zero))
    comp = b.build(count, vector)
    got = run(comp, backend)
    assert got[0] == 1000 and got[0].dtype == np.int32
    np.testing.assert_array_equal(got[1], np.full(10, 500.0, np.float32))


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_over_a_tuple_shaped_value(backend):
    """XLA's own form: one tuple-shaped loop value, taken apart with get_tuple_element."""
    def condition(state):
        return ops.lt(ops.get_tuple_element(state, 0), 5)

    def body(state):
        i, v = ops.get_tuple_element(state, 0), ops.get_tuple_element(state, 1)
        return ops.tuple([ops.add(i, 1), ops.mul(v, 2.0)])

    comp = build(lambda v: ops.get_tuple_element(
        ops.while_loop(condition, body, ops.tuple([v.builder.constant(0), v])), 1), X)
    np.testing.assert_array_equal(run(comp, backend, X), X * 32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_while_that_never_runs_its_body(backend):
    got = on(backend, lambda v: ops.while_loop(
        lambda v: ops.gt(ops.reduce(v, 0.0, ops.add, [0, 1]), 100.0), ops.neg, v), X)
    np.testing.assert_array_equal(got, X)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("pred", [True, False])
def test_conditional_with_pred(pred, backend):
    """Each branch takes its own operand: true gets X, false gets the tuple (X, X)."""
    got = on(backend, lambda p, x: ops.conditional(p, x, ops.neg, (x, x), ops.add), np.bool_(pred), X)
    np.testing.assert_array_equal(got, -X if pred else X + X)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index", [0, 1, 2, -1, 3, 2**31 - 1, -2**31])
def test_conditional_with_branch_index_runs_the_last_branch_when_out_of_range(index, backend):
    branches = [ops.neg,
                lambda a, b: ops.mul(a, b),
                lambda *, builder: ops.broadcast(builder.constant(7.0), [2, 3])]  # no operand
    got = on(backend, lambda i, x: ops.conditional(i, branches, [x, (x, x), ()]), np.int32(index), X)
    expected = {0: -X, 1: X * X}.get(index, np.full((2, 3), 7.0, np.float32))
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conditional_with_several_results_and_computations(backend):
    b = hg.Builder("swap")
    p, q = b.parameter(hg.s32[()]), b.parameter(hg.s32[()])
    swap = b.build(q, p)
    b = hg.Builder("keep")
    p, q = b.parameter(hg.s32[()]), b.parameter(hg.s32[()])
    keep = b.build(p, q)
    for pred in (True, False):
        got = on(backend, lambda c, x, y: ops.conditional(c, (x, y), swap, (x, y), keep),
                 np.bool_(pred), np.int32(1), np.int32(2))
        assert got == ((2, 1) if pred else (1, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_call_and_composite_call(backend):
    b = hg.Builder("axpy")
    a, x, y = b.parameter(hg.f32[()]), b.parameter(hg.f32[2, 3]), b.parameter(hg.f32[2, 3])
    axpy = b.build(ops.add(ops.mul(x, a, broadcast_dimensions=[]), y))

    def program(x):
        two = x.builder.constant(2.0)
        once = ops.call(axpy, two, x, x)                              # 3x
        twice = ops.call(axpy, two, once, x)                          # 7x, the same callee
        named = ops.composite_call(axpy, two, twice, x, name="hlogen.axpy",
                                   composite_attributes={"alpha": 2.0, "note": "test"}, version=3)
        return ops.call(lambda v: ops.neg(v), named)                  # a callable: -15x

    comp = build(program, X)
    text = comp.as_text()
    assert text.count("func.func private @axpy") == 1 and "stablehlo.composite \"hlogen.axpy\"" in text
    assert "version = 3" in text and 'note = "test"' in text
    np.testing.assert_array_equal(run(comp, backend, X), -15 * X)


@pytest.mark.parametrize("backend", BACKENDS)
def test_optimization_barrier_and_tokens(backend):
    def program(x):
        t = ops.after_all([ops.create_token(x.builder), ops.create_token(x.builder)])
        y, token = ops.optimization_barrier((ops.add(x, x), t))
        assert isinstance(token.shape, hg.TokenShape)
        return ops.optimization_barrier(ops.mul(y, 3.0))

    np.testing.assert_array_equal(on(backend, program, X), X * 6)


def test_tokens_cannot_be_results():
    b = hg.Builder("t")
    comp = b.build(ops.create_token(b))
    with pytest.raises(hg.UnsupportedError, match="token"):
        hg.compile(comp)


# -- errors ------------------------------------------------------------------------------------------

def _xb():
    b = hg.Builder("e")
    return b.parameter(hg.f32[2, 3]), b.parameter(hg.pred[()]), b.parameter(hg.s32[()])


ERRORS = [
    (lambda x, p, i: ops.while_loop(lambda v: v, lambda v: v, x),
     r"while_loop: result 0 of the condition must be pred\[\]; it returns f32\[2,3\]"),
    (lambda x, p, i: ops.while_loop(lambda v: p, lambda v: v, x), "returns .* from Builder"),
    (lambda x, p, i: ops.while_loop(lambda a, b: ops.lt(b, 5), lambda a, b: (a, a), (x, i)),
     r"result 1 of the body must be s32\[\]; it returns f32\[2,3\]"),
    (lambda x, p, i: ops.while_loop(lambda t: ops.lt(ops.get_tuple_element(t, 1), 5),
                                    lambda t: ops.get_tuple_element(t, 1), ops.tuple([x, i])),
     r"the body must return \(\(f32\[2,3\], s32\[\]\)\); it returns \(s32\[\]\)"),
    (lambda x, p, i: ops.while_loop(lambda v: p, lambda v: v, [1, 2]), "init must be an Op or a tuple"),
    (lambda x, p, i: ops.conditional(i, x, ops.neg, x, ops.neg), r"pred must be a pred\[\] Op"),
    (lambda x, p, i: ops.conditional(p, [ops.neg], [x]), r"branch_index must be a s32\[\] Op"),
    (lambda x, p, i: ops.conditional(p, x, ops.neg, i, ops.neg),
     r"false_computation returns \(s32\[\]\), true_computation returns \(f32\[2,3\]\)"),
    (lambda x, p, i: ops.conditional(i, [ops.neg, ops.neg], [x]), "one operand per branch"),
    (lambda x, p, i: ops.conditional(i, [], []), "non-empty list"),
    (lambda x, p, i: ops.conditional(p, x, ops.neg, x), "takes \\(pred, true_operand"),
    (lambda x, p, i: ops.conditional(p, x, lambda a, b: a, x, ops.neg), "is called with 1 parameters"),
    (lambda x, p, i: ops.call(ops.neg), "cannot tell which builder"),
    (lambda x, p, i: ops.call(5, x), "must be a Python callable or an hg.Computation"),
    (lambda x, p, i: ops.composite_call(ops.neg, x, name=""), "name must be a non-empty string"),
    (lambda x, p, i: ops.composite_call(ops.neg, x, name="a.b", version=-1), "version=-1"),
    (lambda x, p, i: ops.composite_call(ops.neg, x, name="a.b", composite_attributes="{n = }"),
     "not an MLIR attribute"),
    (lambda x, p, i: ops.composite_call(ops.neg, x, name="a.b", composite_attributes={"n": object()}),
     "has no MLIR attribute"),
    (lambda x, p, i: ops.after_all([]), "non-empty list of token Ops"),
    (lambda x, p, i: ops.after_all([x]), r"tokens\[0\] must be a token"),
    (lambda x, p, i: ops.create_token(x), "builder must be a Builder"),
    (lambda x, p, i: ops.optimization_barrier(5), "must be an Op or a tuple of Ops"),
]


@pytest.mark.parametrize("call,message", ERRORS, ids=[m for _, m in ERRORS])
def test_errors(call, message):
    with pytest.raises(hg.ShapeError, match=message):
        call(*_xb())


def test_call_checks_the_arguments_against_the_computation():
    b = hg.Builder("square")
    p = b.parameter(hg.f32[3])
    square = b.build(ops.mul(p, p))
    x, _, _ = _xb()
    with pytest.raises(hg.ShapeError, match=r"call: computation 'square' takes \(f32\[3\]\), called "
                                            r"with \(f32\[2,3\]\)"):
        ops.call(square, x)


def test_call_of_a_callable_with_the_wrong_arity_or_a_bad_result():
    x, _, _ = _xb()
    with pytest.raises(hg.ShapeError, match=r"call: the computation is called with 1 parameters"):
        ops.call(lambda a, b: a, x)
    with pytest.raises(hg.ShapeError, match="call: the computation must return Ops"):
        ops.call(lambda a: "a", x)
    with pytest.raises(hg.ShapeError, match=r"call: in the computation \(.*test_control.py:\d+\)"):
        ops.call(lambda a: ops.add(a, ops.convert_element_type(a, hg.s32)), x)
