"""Property tests: random element-wise programs agree on PJRT and the interpreter;
XLA broadcasting agrees with numpy once the lower-rank operand is aligned."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import hlogen as hg
from hlogen import broadcasting as B
from hlogen import ops
from tests.helpers import run_both
from tests.references import numpy_aligned

SETTINGS = settings(max_examples=25, deadline=None)

INT_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "and_", "or_", "xor",
              "shift_left", "shift_right_arithmetic", "shift_right_logical"]
INT_UNARY = ["neg", "not_", "abs", "sign", "clz", "population_count"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "max", "min", "rem", "atan2"]
FLOAT_UNARY = ["neg", "abs", "sign", "floor", "ceil", "round", "tanh", "sin", "cos", "logistic",
               "exp", "log1p", "sqrt", "cbrt", "erf"]


def _program(ints: bool):
    binary, unary = (INT_BINARY, INT_UNARY) if ints else (FLOAT_BINARY, FLOAT_UNARY)
    step = st.one_of(st.tuples(st.just("binary"), st.sampled_from(binary), st.integers(0, 3)),
                     st.tuples(st.just("unary"), st.sampled_from(unary), st.just(0)))
    return st.lists(step, min_size=1, max_size=8)


def _build(program, et, n):
    b = hg.Builder("program")
    values = [b.parameter(hg.Shape(et, (n,)), f"x{i}") for i in range(2)]
    for kind, name, pick in program:
        if kind == "unary":
            values.append(getattr(ops, name)(values[-1]))
        else:
            values.append(getattr(ops, name)(values[-1], values[pick % len(values)]))
    return b.build(values[-1])


@SETTINGS
@given(program=_program(ints=True), data=st.data())
def test_integer_programs_agree_exactly(program, data):
    n = 6
    ints = st.integers(-2**31, 2**31 - 1)
    x0, x1 = (np.array(data.draw(st.lists(ints, min_size=n, max_size=n)), np.int32) for _ in range(2))
    cpu, interpreted = run_both(_build(program, hg.s32, n), x0, x1)
    np.testing.assert_array_equal(cpu, interpreted)


@SETTINGS
@given(program=_program(ints=False), data=st.data())
def test_float_programs_agree_closely(program, data):
    n = 6
    # normal numbers only: XLA CPU treats subnormal inputs as zero (test_subnormals.py)
    floats = st.floats(-1e3, 1e3, width=32).filter(lambda v: v == 0 or abs(v) > 1e-30)
    x0, x1 = (np.array(data.draw(st.lists(floats, min_size=n, max_size=n)), np.float32) for _ in range(2))
    cpu, interpreted = run_both(_build(program, hg.f32, n), x0, x1)
    tiny = np.finfo(np.float32).tiny
    flushed = (np.abs(interpreted) < tiny) & (interpreted != 0)  # subnormal results may flush
    # XLA's algebraic simplifier rewrites some expressions (exp(a) / exp(b) as exp(a - b)),
    # so that where the program as written overflows (inf, then NaN: the interpreter's
    # result) XLA CPU may compute a number (exp(89) / exp(89) is 1 there)
    rewritten = ~np.isfinite(interpreted) & np.isfinite(cpu)
    kept = ~flushed & ~rewritten
    np.testing.assert_allclose(cpu[kept], interpreted[kept], rtol=2e-4, atol=1e-6)


def test_xla_cpu_simplifies_away_an_overflow_the_interpreter_keeps():
    # the case the rule above excuses, shown on its own
    b = hg.Builder("ratio")
    e = ops.exp(b.parameter(hg.f32[2], "x"))
    x = np.array([1, 89], np.float32)  # exp(89) overflows f32
    cpu, interpreted = run_both(b.build(ops.div(e, e)), x)
    np.testing.assert_array_equal(interpreted, [1, np.nan])
    np.testing.assert_array_equal(cpu, [1, 1])


@st.composite
def _broadcastable(draw):
    """Two shapes and broadcast_dimensions that XLA's rules accept."""
    large = draw(st.lists(st.integers(1, 4), min_size=0, max_size=4))
    rank = draw(st.integers(0, len(large)))
    dims = sorted(draw(st.permutations(range(len(large))))[:rank])
    small = [draw(st.sampled_from([large[d], 1])) for d in dims]
    large = [draw(st.sampled_from([s, 1])) if i in dims and small[dims.index(i)] != 1 else s
             for i, s in enumerate(large)]
    swap = draw(st.booleans())
    return (small, large, dims) if swap else (large, small, dims)


@settings(max_examples=200, deadline=None)
@given(case=_broadcastable())
def test_broadcast_plan_matches_numpy(case):
    lhs, rhs, dims = case
    bdims = dims if len(lhs) != len(rhs) and min(len(lhs), len(rhs)) else ()
    plan = B.binary_broadcast("add", hg.Shape(hg.f32, lhs), hg.Shape(hg.f32, rhs), bdims)
    assert plan.dimensions == np.broadcast_shapes(*numpy_aligned(lhs, rhs, bdims))
