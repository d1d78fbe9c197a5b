"""The arbiter (hlogen.differential.arbiter) on the cases of issue 35, each side's value
made by a real backend where the case is real (XLA CPU and the StableHLO interpreter),
and every exact answer computed here, outside the arbiter: Python integers, fractions,
mpmath."""
from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from hlogen.differential.arbiter import Verdict, arbitrate
from tests.helpers import run, single_op

INTEGERS = [(hg.s8, np.int8, 8), (hg.s16, np.int16, 16), (hg.s32, np.int32, 32),
            (hg.s64, np.int64, 64), (hg.u8, np.uint8, 8), (hg.u16, np.uint16, 16),
            (hg.u32, np.uint32, 32), (hg.u64, np.uint64, 64)]


def ulps_of(value, exact: mpmath.mpf, dtype) -> float:
    """|value - exact| in ULPs of `dtype` at `exact` (the test's own statement)."""
    info = ml_dtypes.finfo(dtype)
    _, exponent = mpmath.frexp(exact)  # exact = m 2^exponent, 0.5 <= |m| < 1
    ulp = mpmath.mpf(2) ** (max(int(exponent) - 1, int(info.minexp)) - int(info.nmant))
    return float(abs(mpmath.mpf(float(value)) - exact) / ulp)


@pytest.mark.parametrize("t,dtype,bits", INTEGERS[:3])
def test_count_leading_zeros_of_negative_constants_is_zero(t, dtype, bits):
    """XLA's constant folder gives 64 - bits more than 0 for a negative constant (-56, -48,
    -32): the test side is wrong, exact 0 (the top bit of a negative number is set)."""
    values = np.array([-1, -100, 5], dtype)
    b = hg.Builder()
    folded = b.build(ops.clz(b.constant(values)))
    test, reference = run(folded, "cpu"), hg.interpret(folded)
    exact = [bits - (int(v) & (2 ** bits - 1)).bit_length() for v in values]
    assert exact == [0, 0, bits - 3]
    assert reference.tolist() == exact
    assert test.tolist() != exact  # the constant folder's answer, as jaxlib 0.10.2 gives it
    judgement = arbitrate(single_op(ops.clz, t[3]), [values], test, reference)
    assert judgement.verdict is Verdict.TEST_WRONG
    assert judgement.exact[0] == "0"
    assert judgement.ulps == {"test": 64 - bits, "reference": 0}


@pytest.mark.parametrize("t,dtype,bits", INTEGERS)
def test_integer_power_zero_to_64_is_zero(t, dtype, bits):
    """XLA's integer power reads 6 bits of the exponent: 0**64 = 1; exact 0."""
    base = np.array([0, 3, 0], dtype)
    exponent = np.array([64, 2, 127 if bits == 8 else 192], dtype)  # (127: XLA reads 63)
    alone = single_op(ops.pow, t[3], t[3])
    test, reference = run(alone, "cpu", base, exponent), hg.interpret(alone, base, exponent)
    exact = [int(x) ** int(y) % 2 ** bits for x, y in zip(base, exponent)]
    assert exact == [0, 9, 0] and reference.tolist() == exact and test[0] == 1
    judgement = arbitrate(alone, [base, exponent], test, reference)
    assert judgement.verdict is Verdict.TEST_WRONG, judgement.reason
    assert judgement.exact[0] == "0" and judgement.elements[0] == (0,)


def test_bf16_logistic_names_the_interpreter():
    """bf16 logistic: XLA within 0.5 ULP, the interpreter (bf16 steps) 1.5 ULP and more."""
    x = (np.random.default_rng(0).standard_normal(512) * 4).astype(ml_dtypes.bfloat16)
    alone = single_op(ops.logistic, hg.bf16[512])
    test, reference = run(alone, "cpu", x), hg.interpret(alone, x)
    mpmath.mp.prec = 200
    exact = [1 / (1 + mpmath.exp(-mpmath.mpf(float(v)))) for v in x]
    test_errors = [ulps_of(v, e, ml_dtypes.bfloat16) for v, e in zip(test, exact)]
    reference_errors = [ulps_of(v, e, ml_dtypes.bfloat16) for v, e in zip(reference, exact)]
    assert max(test_errors) <= 0.5 < 1.5 <= max(reference_errors)
    judgement = arbitrate(alone, [x], test, reference, limit=512)
    assert judgement.verdict is Verdict.REFERENCE_WRONG, judgement.reason
    assert judgement.ulps["test"] == pytest.approx(max(test_errors), abs=1e-9)
    assert judgement.ulps["reference"] == pytest.approx(max(reference_errors), abs=1e-9)


def test_tan_of_each_sides_own_input_is_allowed():
    """tan(rsqrt(x)): the rsqrts differ in their last bit, the tans by tens of ULPs; each
    side's tan is within 0.25 ULP of exact for its own input. The tan alone, given one
    input, is allowed: it magnifies the rsqrt's difference, it is not wrong."""
    x = np.random.default_rng(1).uniform(0.3, 3, 4096).astype(np.float32)
    chain = single_op(lambda a: ops.tan(ops.rsqrt(a)), hg.f32[4096])
    inner = single_op(ops.rsqrt, hg.f32[4096])
    roots = run(inner, "cpu", x), hg.interpret(inner, x)
    tans = run(chain, "cpu", x), hg.interpret(chain, x)
    mpmath.mp.prec = 300
    own = [[ulps_of(tans[s][i], mpmath.tan(mpmath.mpf(float(roots[s][i]))), np.float32)
            for i in range(x.size)] for s in (0, 1)]
    apart = np.abs(tans[0].astype(np.float64) - tans[1]) / np.spacing(np.abs(tans[1]))
    i = max((i for i in range(x.size) if own[0][i] <= 0.25 and own[1][i] <= 0.25),
            key=lambda i: apart[i])
    assert apart[i] > 10 and roots[0][i] != roots[1][i]
    alone = single_op(ops.tan, hg.f32[1])
    given = roots[1][i:i + 1]  # the reference's input, given to both sides
    judgement = arbitrate(alone, [given], run(alone, "cpu", given), hg.interpret(alone, given))
    assert judgement.verdict is Verdict.ALLOWED, judgement.reason
    # judged against one input while its value came from the other, it would look wrong
    misjudged = arbitrate(alone, [given], tans[0][i:i + 1], tans[1][i:i + 1])
    assert misjudged.verdict is Verdict.TEST_WRONG and misjudged.ulps["test"] > 10


def test_nan_sign_through_a_bitcast_is_allowed():
    """0/0 is a NaN: XLA CPU's has the sign bit set (x86's default NaN), the interpreter's
    not; a bitcast shows it. The divide's NaNs differ only where IEEE 754 leaves them."""
    zeros = np.zeros(2, np.float32)
    shown = single_op(lambda a, b: ops.bitcast_convert_type(ops.div(a, b), hg.s32),
                      hg.f32[2], hg.f32[2])
    test, reference = run(shown, "cpu", zeros, zeros), hg.interpret(shown, zeros, zeros)
    assert (test != reference).all() and ((test ^ reference).view(np.uint32) == 0x80000000).all()
    alone = single_op(ops.div, hg.f32[2], hg.f32[2])
    judgement = arbitrate(alone, [zeros, zeros], run(alone, "cpu", zeros, zeros),
                          hg.interpret(alone, zeros, zeros))
    assert (judgement.verdict, judgement.allowed_class) == (Verdict.ALLOWED, "nan-sign-payload")
    strict = arbitrate(alone, [zeros, zeros], run(alone, "cpu", zeros, zeros),
                       hg.interpret(alone, zeros, zeros), strict=True)
    assert strict.verdict is Verdict.UNDETERMINED and strict.allowed_class == "nan-sign-payload"
    # the bitcast itself, given each side's NaN: the bits it shows are the NaN's
    nan = np.array([np.float32(np.nan), -np.float32(np.nan)])
    cast = single_op(lambda a: ops.bitcast_convert_type(a, hg.s32), hg.f32[2])
    revealed = arbitrate(cast, [nan], nan.view(np.int32)[::-1], nan.view(np.int32))
    assert (revealed.verdict, revealed.allowed_class) == (Verdict.ALLOWED, "nan-sign-payload")


def test_correctly_rounded_ops_take_only_the_rounding():
    """f32 add: the rounding of the exact sum (fractions here) is right, its neighbor wrong,
    even at 0.5 ULP (a tie rounds to even)."""
    a = np.array([1.0, 1.0], np.float32)
    b = np.array([2.0 ** -24, 3 * 2.0 ** -24], np.float32)  # ties: 0.5 and 1.5 ULP of 1
    exact = [Fraction(float(x)) + Fraction(float(y)) for x, y in zip(a, b)]
    right = np.array([1.0, 1.0 + 2.0 ** -22], np.float32)
    assert [Fraction(float(v)) for v in right] != exact  # (ties: neither side exact)
    wrong = np.array([1.0 + 2.0 ** -23, 1.0 + 2.0 ** -23], np.float32)  # the odd neighbors
    alone = single_op(ops.add, hg.f32[2], hg.f32[2])
    assert (run(alone, "cpu", a, b) == right).all() and (hg.interpret(alone, a, b) == right).all()
    judgement = arbitrate(alone, [a, b], wrong, right)
    assert judgement.verdict is Verdict.TEST_WRONG
    assert judgement.ulps == {"test": 0.5, "reference": 0.5}


def test_dot_whose_exact_sum_overflows_is_allowed():
    """1e20 * -1e19 + 5e19 * 1e19 = -5e38, past f32's largest: it rounds to -inf (XLA's
    fused multiply-add gets there); the interpreter's products overflow to -inf and +inf,
    and their sum is NaN. One order of the sum overflows: allowed by the spec."""
    a, b = np.array([1e20, 5e19], np.float32), np.array([-1e19, 1e19], np.float32)
    exact = sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b))
    assert exact < -Fraction(float(np.finfo(np.float32).max))
    alone = single_op(ops.dot, hg.f32[2], hg.f32[2])
    test, reference = run(alone, "cpu", a, b), hg.interpret(alone, a, b)
    assert np.isneginf(test) and np.isnan(reference)
    judgement = arbitrate(alone, [a, b], test, reference)
    assert (judgement.verdict, judgement.allowed_class) == (Verdict.ALLOWED, "summation-order")
    assert float(judgement.exact[0]) == pytest.approx(float(exact), rel=1e-15)


def test_f32_dot_in_another_order_is_allowed():
    """A 64-term f32 dot: XLA's blocked sums and the interpreter's sequential one differ by
    tens of ULPs, both within the bound of a sum in any order (gamma_n sum |t_i|)."""
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((8, 64)).astype(np.float32),
            rng.standard_normal((64, 8)).astype(np.float32))
    alone = single_op(ops.dot, hg.f32[8, 64], hg.f32[64, 8])
    test, reference = run(alone, "cpu", x, w), hg.interpret(alone, x, w)
    assert (test != reference).any()
    u = 2.0 ** -24
    for i, j in zip(*np.nonzero(test != reference)):
        terms = [Fraction(float(p)) * Fraction(float(q)) for p, q in zip(x[i], w[:, j])]
        exact, bound = sum(terms), 64 * u / (1 - 64 * u) * float(sum(abs(t) for t in terms))
        for side in (test, reference):
            assert abs(float(Fraction(float(side[i, j])) - exact)) <= bound
    judgement = arbitrate(alone, [x, w], test, reference)
    assert (judgement.verdict, judgement.allowed_class) == (Verdict.ALLOWED, "summation-order")


def test_f16_convolution_names_the_interpreter():
    """An f16 convolution: XLA accumulates in f32 and rounds once (within 0.5 ULP and a
    little), the interpreter rounds every step to f16 (tens of ULPs): reference wrong."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float16)
    w = rng.standard_normal((2, 8, 3, 3)).astype(np.float16)
    alone = single_op(lambda a, b: ops.conv(a, b, [1, 1], "VALID"),
                      hg.f16[1, 8, 5, 5], hg.f16[2, 8, 3, 3])
    test, reference = run(alone, "cpu", x, w), hg.interpret(alone, x, w)
    spacing = lambda v: Fraction(float(np.spacing(np.float16(abs(v)))))
    worst = {"test": 0, "reference": 0}
    for o in range(2):
        for r in range(3):
            for c in range(3):
                exact = sum(Fraction(float(x[0, i, r + p, c + q])) * Fraction(float(w[o, i, p, q]))
                            for i in range(8) for p in range(3) for q in range(3))
                for name, side in (("test", test), ("reference", reference)):
                    error = abs(Fraction(float(side[0, o, r, c])) - exact) / spacing(exact)
                    worst[name] = max(worst[name], float(error))
    assert worst["test"] <= 0.51 and worst["reference"] > 4
    judgement = arbitrate(alone, [x, w], test, reference)
    assert judgement.verdict is Verdict.REFERENCE_WRONG, judgement.reason
    assert judgement.ulps["reference"] == pytest.approx(worst["reference"], rel=1e-6)


def test_zero_sign_from_an_init_value_is_allowed():
    """A sum of zeros with init -0: whether the result is -0 or +0 depends on the order
    of the init and the terms; the spec leaves it open."""
    b = hg.Builder()
    x = b.parameter(hg.f32[2, 3])
    alone = b.build(ops.reduce(x, b.parameter(hg.f32[()]), lambda p, q: ops.add(p, q), [1]))
    zeros, init = np.full((2, 3), -0.0, np.float32), np.float32(-0.0)
    judgement = arbitrate(alone, [zeros, init], np.array([0.0, -0.0], np.float32),
                          np.array([-0.0, -0.0], np.float32))
    assert (judgement.verdict, judgement.allowed_class) == (Verdict.ALLOWED, "zero-sign")
    assert judgement.exact == ["0"] and judgement.elements == [(0,)]
    assert arbitrate(alone, [zeros, init], np.array([0.0, -0.0], np.float32),
                     np.array([-0.0, -0.0], np.float32), strict=True).verdict is \
        Verdict.UNDETERMINED
    # an add's zero is IEEE 754's: -0 + -0 is -0 (a side with +0 is wrong)
    add = single_op(ops.add, hg.f32[1], hg.f32[1])
    minus = np.array([-0.0], np.float32)
    assert arbitrate(add, [minus, minus], -minus, minus).verdict is Verdict.TEST_WRONG
