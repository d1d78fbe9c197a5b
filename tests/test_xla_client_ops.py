"""Every function of hlogen.xla_client.ops, built through the compat layer as old code
builds it (Parameters, sub-computations from other XlaBuilders, proto-like dimension
numbers), compiled by Client.compile and run, against numpy references written from
XLA's operation semantics (tests/spec_reference*.py, numpy, scipy; jax.lax for the bits
of RngBitGenerator, which XLA defines); refused ops refuse with UnsupportedError.
`test_every_op_is_covered` keeps the list whole."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
import scipy.special

import hlogen as hg
import hlogen.xla_client as xc
from hlogen.xla_client import ops as xops
from tests import spec_reference as ref
from tests import spec_reference_computations as cref
from tests import spec_reference_lapack as lapack_ref
from tests import spec_reference_linalg as lref

BACKEND = xc.get_local_backend("cpu")
COVERED: set[str] = set()


def covers(*names):
    COVERED.update(names)
    return lambda test: test


def shape(dtype, *dims):
    return xc.Shape.array_shape(np.dtype(dtype), dims)


def run(build, *args):
    """build(c, *parameters) on one parameter per argument, compiled and run: the results
    (one per element of a tuple root)."""
    c = xc.XlaBuilder("case")
    params = [xops.Parameter(c, i, xc.shape_from_pyval(a)) for i, a in enumerate(args)]
    build(c, *params)
    return xc.execute_with_python_values(BACKEND.compile(c.build()), args, BACKEND)


def computation(fn, *shapes, name="computation"):
    """An XlaComputation of fn(builder, *parameters) from another XlaBuilder."""
    c = xc.XlaBuilder(name)
    fn(c, *[xops.Parameter(c, i, s) for i, s in enumerate(shapes)])
    return c.build()


def scalar_computation(fn, dtype, arity=2):
    return computation(lambda c, *p: fn(*p), *[shape(dtype)] * arity)


def check(got, *expected, rtol=0.0, atol=0.0):
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype, (g.dtype, g.shape, e.dtype, e.shape)
        if rtol or atol:
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(g, e)


def refused(build, *args, match):
    c = xc.XlaBuilder("refused")
    params = [xops.Parameter(c, i, xc.shape_from_pyval(a)) for i, a in enumerate(args)]
    build(c, *params)
    with pytest.raises(hg.UnsupportedError, match=match):
        c.build()


X = np.array([1.5, -2.0, 3.0, 0.25, -0.0], np.float32)
Y = np.array([2.0, 3.0, -1.0, 0.5, 4.0], np.float32)
I32 = np.array([7, -7, 2**31 - 1, -(2**31), 5], np.int32)
J32 = np.array([2, 0, 33, -1, 3], np.int32)


# -- element-wise --------------------------------------------------------------------------

@covers("Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Pow", "Atan2", "Complex")
def test_binary_arithmetic_of_floats():
    with np.errstate(all="ignore"):
        expected = {"Add": X + Y, "Sub": X - Y, "Mul": X * Y, "Div": X / Y,
                    "Rem": np.fmod(X, Y), "Max": np.maximum(X, Y), "Min": np.minimum(X, Y),
                    "Pow": np.power(X.astype(np.float64), Y).astype(np.float32),
                    "Atan2": np.arctan2(X, Y)}
    for name, want in expected.items():
        check(run(lambda c, x, y: getattr(xops, name)(x, y), X, Y), want, rtol=1e-6, atol=1e-7)
    check(run(lambda c, x, y: xops.Complex(x, y), X, Y), X + 1j * Y.astype(np.complex64))


def _int32(values):
    """Python ints as int32, wrapped modulo 2**32."""
    return np.array([v & 0xFFFFFFFF for v in values], np.uint32).view(np.int32)


def _shifts(a, b):
    """XLA's shifts: a count outside [0, 32) shifts every bit out (the sign bit in, for
    the arithmetic right shift)."""
    pairs = [(int(x), int(n)) for x, n in zip(a, b)]
    return {"ShiftLeft": _int32([x << n if 0 <= n < 32 else 0 for x, n in pairs]),
            "ShiftRightArithmetic": _int32([x >> n if 0 <= n < 32 else -(x < 0) for x, n in pairs]),
            "ShiftRightLogical": _int32([(x & 0xFFFFFFFF) >> n if 0 <= n < 32 else 0
                                         for x, n in pairs])}


@covers("And", "Or", "Xor", "Not", "ShiftLeft", "ShiftRightArithmetic", "ShiftRightLogical")
def test_integer_and_logical_ops():
    cases = {"And": I32 & J32, "Or": I32 | J32, "Xor": I32 ^ J32, **_shifts(I32, J32)}
    for name, want in cases.items():
        check(run(lambda c, x, y: getattr(xops, name)(x, y), I32, J32), want)
    p, q = np.array([True, True, False]), np.array([True, False, False])
    check(run(lambda c, x, y: xops.And(x, y), p, q), p & q)
    check(run(lambda c, x: xops.Not(x), I32), ~I32)
    check(run(lambda c, x: xops.Not(x), p), ~p)


def test_integer_division_is_xlas():
    """XLA: x / 0 = -1, x % 0 = x, INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0."""
    a = np.array([7, -7, -(2**31), 9], np.int32)
    b = np.array([2, 0, -1, 0], np.int32)
    check(run(lambda c, x, y: xops.Div(x, y), a, b), np.array([3, -1, -(2**31), -1], np.int32))
    check(run(lambda c, x, y: xops.Rem(x, y), a, b), np.array([1, -7, 0, 9], np.int32))


@covers("Eq", "Ne", "Ge", "Gt", "Lt", "Le")
def test_comparisons():
    a = np.array([1.0, np.nan, 3.0, -0.0], np.float32)
    b = np.array([1.0, np.nan, 2.0, 0.0], np.float32)
    with np.errstate(invalid="ignore"):
        expected = {"Eq": a == b, "Ne": a != b, "Ge": a >= b, "Gt": a > b, "Lt": a < b, "Le": a <= b}
    for name, want in expected.items():
        check(run(lambda c, x, y: getattr(xops, name)(x, y), a, b), want)


def test_broadcasting_as_xlabuilder_does_it():
    """broadcast_dimensions maps the lower-rank operand's dimensions; scalars broadcast
    implicitly; a Python number takes the other operand's type (lenient: XLA wanted ops)."""
    m = np.arange(6, dtype=np.float32).reshape(2, 3)
    v = np.array([10, 20, 30], np.float32)
    w = np.array([100, 200], np.float32)
    check(run(lambda c, x, y: xops.Add(x, y, broadcast_dimensions=[1]), m, v), m + v)
    check(run(lambda c, x, y: xops.Add(x, y, [0]), m, w), m + w[:, None])
    check(run(lambda c, x, s: xops.Mul(x, s), m, np.float32(2)), m * 2)
    check(run(lambda c, x: xops.Sub(x, xops.Constant(c, np.float32(1))), m), m - 1)


_UNARY = {
    "Abs": np.abs, "Exp": np.exp, "Expm1": np.expm1, "Floor": np.floor, "Ceil": np.ceil,
    "Round": lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5), "Log": np.log,
    "Log1p": np.log1p, "Sign": np.sign, "Cos": np.cos, "Sin": np.sin, "Tan": np.tan,
    "Tanh": np.tanh, "Neg": np.negative, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x),
    "Cbrt": np.cbrt, "Erf": np.vectorize(math.erf), "Square": np.square,
    "Reciprocal": lambda x: 1 / x, "OptimizationBarrier": lambda x: x,
    "Erfc": np.vectorize(math.erfc), "ErfInv": scipy.special.erfinv,
    "Lgamma": np.vectorize(math.lgamma), "Digamma": scipy.special.digamma,
    "BesselI1e": scipy.special.i1e, "Acos": np.arccos, "Asin": np.arcsin, "Atan": np.arctan,
    "Acosh": lambda x: np.arccosh(x + 1), "Asinh": np.arcsinh, "Atanh": np.arctanh,
    "Cosh": np.cosh, "Sinh": np.sinh, "Logistic": scipy.special.expit,
}
_UNARY_INPUT = {"Acosh": lambda x: x + 1}  # its domain starts at 1


@covers(*_UNARY)
@pytest.mark.parametrize("name", sorted(_UNARY))
def test_unary_functions(name):
    x = np.array([0.5, 0.25, 0.9, 0.1, 2.5 if name not in ("Acos", "Asin", "Atanh", "ErfInv") else 0.7],
                 np.float32)
    arg = _UNARY_INPUT.get(name, lambda v: v)(x)
    with np.errstate(all="ignore"):
        want = _UNARY[name](x.astype(np.float64)).astype(np.float32)
    check(run(lambda c, v: getattr(xops, name)(v), arg), want, rtol=2e-6, atol=1e-6)
    if name == "Round":  # halves away from zero
        h = np.array([0.5, 1.5, -0.5, 2.5, -2.5], np.float32)
        check(run(lambda c, v: xops.Round(v), h), np.array([1, 2, -1, 3, -3], np.float32))


@covers("Acos", "Cosh")
def test_complex_arguments_of_the_chlo_functions():
    z = np.array([0.3 + 0.2j, -0.5 + 1j], np.complex64)
    check(run(lambda c, v: xops.Acos(v), z), np.arccos(z.astype(np.complex128)).astype(np.complex64),
          rtol=1e-5)
    check(run(lambda c, v: xops.Cosh(v), z), np.cosh(z.astype(np.complex128)).astype(np.complex64),
          rtol=1e-5)


@covers("NextAfter", "Zeta")
def test_binary_functions_of_xlas_math_library():
    a = np.array([1.0, 2.0, -1.0, 0.0], np.float32)
    b = np.array([2.0, 1.0, -1.0, -1.0], np.float32)
    check(run(lambda c, x, y: xops.NextAfter(x, y), a, b), np.nextafter(a, b))
    x, q = np.array([2.0, 3.0, 4.5], np.float32), np.array([1.0, 2.0, 0.5], np.float32)
    check(run(lambda c, u, v: xops.Zeta(u, v), x, q),
          scipy.special.zeta(x.astype(np.float64), q).astype(np.float32), rtol=1e-5)


@covers("PopulationCount", "Clz", "IsFinite", "Real", "Imag", "Conj")
def test_bits_predicates_and_complex_parts():
    check(run(lambda c, x: xops.PopulationCount(x), I32),
          np.array([bin(int(v) & 0xFFFFFFFF).count("1") for v in I32], np.int32))
    check(run(lambda c, x: xops.Clz(x), I32),
          np.array([32 - (int(v) & 0xFFFFFFFF).bit_length() for v in I32], np.int32))
    f = np.array([1.0, np.inf, -np.inf, np.nan], np.float32)
    check(run(lambda c, x: xops.IsFinite(x), f), np.isfinite(f))
    z = np.array([1 + 2j, -3 - 0.5j], np.complex64)
    check(run(lambda c, x: xops.Real(x), z), z.real)
    check(run(lambda c, x: xops.Imag(x), z), z.imag)
    check(run(lambda c, x: xops.Conj(x), z), np.conj(z))


@covers("BesselI0e", "Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad")
def test_functions_without_a_stablehlo_form_are_refused():
    for name in ("BesselI0e",):
        refused(lambda c, x: getattr(xops, name)(x), X, match=f"{name}: XLA computes it")
    for name in ("Igamma", "Igammac", "IgammaGradA", "RandomGammaGrad"):
        refused(lambda c, a, x: getattr(xops, name)(a, x), X, Y, match=name)


# -- result accuracy (jaxlib 0.5-0.6: ops.Exp(x, result_accuracy)) ---------------------------

# XLA's name -> (numpy's function in float64, inputs in its domain)
ACCURATE = {
    "Exp": (np.exp, X), "Expm1": (np.expm1, X), "Log": (np.log, np.abs(Y)),
    "Log1p": (np.log1p, np.abs(Y)), "Rsqrt": (lambda v: 1 / np.sqrt(v), np.abs(Y)),
    "Sqrt": (np.sqrt, np.abs(Y)), "Cbrt": (np.cbrt, Y), "Tanh": (np.tanh, X),
    "Logistic": (scipy.special.expit, X), "Sin": (np.sin, X), "Cos": (np.cos, X),
    "Tan": (np.tan, X), "Erf": (scipy.special.erf, X),
}


def accuracy(mode, **tolerances):
    a = xc.ResultAccuracy()
    a.mode = getattr(xc.ResultAccuracyMode, mode)
    for key, value in tolerances.items():
        setattr(a, key, value)
    return a


def built(name, accuracy_, values):
    c = xc.XlaBuilder(name)
    getattr(xops, name)(xops.Parameter(c, 0, xc.shape_from_pyval(values)), accuracy_)
    return c.build()


@pytest.mark.parametrize("name", sorted(ACCURATE))
def test_result_accuracy_is_emitted_and_highest_runs_the_backends_one_implementation(name):
    numpy_fn, values = ACCURATE[name]
    default = built(name, None, values)
    highest = built(name, accuracy("HIGHEST"), values)
    text = highest.computation.as_text()
    if name == "Erf":  # CHLO's erf, decomposed on every backend: nothing to choose from
        assert "result_accuracy" not in text
    else:
        assert "result_accuracy = #stablehlo.result_accuracy<mode = " \
               "#stablehlo.result_accuracy_mode<HIGHEST>>" in text, text
        assert "result_accuracy={mode=highest}" in highest.as_hlo_text()
    assert "result_accuracy" not in built(name, accuracy("DEFAULT"), values).computation.as_text()
    expected = numpy_fn(values.astype(np.float64)).astype(np.float32)
    for backend in ("cpu", "interpret"):
        got = hg.compile(highest.computation, backend=backend)(values)
        np.testing.assert_allclose(got, expected, rtol=4e-6, atol=1e-7)
        # the one implementation each backend has: DEFAULT's, bit for bit
        np.testing.assert_array_equal(got, hg.compile(default.computation, backend=backend)(values))


@pytest.mark.parametrize("name", sorted(ACCURATE))
def test_a_tolerance_is_emitted_and_refused_where_no_backend_checks_it(name):
    _, values = ACCURATE[name]
    tolerance = accuracy("TOLERANCE", atol=1e-6, rtol=0.0, ulps=2)
    if name == "Erf":
        c = xc.XlaBuilder(name)
        xops.Erf(xops.Parameter(c, 0, xc.shape_from_pyval(values)), tolerance)
        with pytest.raises(hg.UnsupportedError, match="erf: result_accuracy in TOLERANCE mode: "
                                                      "erf is CHLO's decomposition"):
            c.build()
        return
    comp = built(name, tolerance, values)
    assert "#stablehlo.result_accuracy<atol = 9.999999" in comp.computation.as_text()
    assert "ulps = 2, mode = #stablehlo.result_accuracy_mode<TOLERANCE>" in comp.computation.as_text()
    for backend, words in (("cpu", "XLA CPU"), ("interpret", "the reference interpreter")):
        with pytest.raises(hg.UnsupportedError, match=f"result_accuracy in TOLERANCE mode: {words} "
                                                      f"has one implementation"):
            hg.compile(comp.computation, backend=backend)
    with pytest.raises(hg.UnsupportedError, match="TOLERANCE mode"):
        BACKEND.compile(comp)


def test_result_accuracy_that_means_nothing_is_refused_where_it_is_built():
    for bad, match in ((accuracy("TOLERANCE"), "needs atol, rtol or ulps set"),
                       (accuracy("HIGHEST", atol=1e-3), "they count only in TOLERANCE mode"),
                       (accuracy("TOLERANCE", rtol=-1.0), "rtol must be a non-negative number"),
                       (accuracy("TOLERANCE", ulps=1.5), "ulps must be a non-negative integer")):
        c = xc.XlaBuilder("bad")
        xops.Exp(xops.Parameter(c, 0, xc.shape_from_pyval(X)), bad)
        with pytest.raises(hg.ShapeError, match=match):
            c.build()
    c = xc.XlaBuilder("bad")
    x = xops.Parameter(c, 0, xc.shape_from_pyval(X))
    xops.Exp(x, accuracy("DEFAULT"))
    xops.Exp(x, xc.ResultAccuracy(mode=7))
    with pytest.raises(hg.ShapeError, match="result_accuracy.mode must be one of DEFAULT, HIGHEST, "
                                             "TOLERANCE, got 7"):
        c.build()


def test_optimization_barrier_of_a_tuple_barriers_its_leaves():
    x = np.array([1.0, 2.0], np.float32)
    y = np.array([3, 4, 5], np.int32)
    c = xc.XlaBuilder("barrier")
    p, q = (xops.Parameter(c, i, xc.shape_from_pyval(v)) for i, v in enumerate((x, y)))
    t = xops.OptimizationBarrier(xops.Tuple(c, [p, xops.Tuple(c, [q, xops.Neg(p)])]))
    xops.Tuple(c, [xops.GetTupleElement(xops.GetTupleElement(t, 1), 1),
                   xops.GetTupleElement(xops.GetTupleElement(t, 1), 0), xops.GetTupleElement(t, 0)])
    comp = c.build()
    text = comp.computation.as_text()
    assert text.count("stablehlo.optimization_barrier") == 1
    assert "tuple<" not in text.split("stablehlo.optimization_barrier")[1].split("\n")[0]
    assert "opt-barrier" in comp.as_hlo_text()
    for backend in ("cpu", "interpret"):
        got = hg.compile(comp.computation, backend=backend)(x, y)
        check(list(got), -x, y, x)


def _next_after_reference(x, y, dtype):
    """The neighbour of x toward y among every value of the 8-bit type (0 for no -0)."""
    values = np.unique(np.arange(256, dtype=np.uint8).view(dtype).astype(np.float64))
    values = values[~np.isnan(values)]
    out = []
    for a, b in zip(x.astype(np.float64), y.astype(np.float64)):
        out.append(np.nan if np.isnan(a) or np.isnan(b) else b if a == b else
                   values[values > a].min() if b > a else values[values < a].max())
    return np.array(out)


@pytest.mark.parametrize("dtype", [ml_dtypes.float8_e3m4, ml_dtypes.float8_e4m3,
                                   ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz,
                                   ml_dtypes.float8_e4m3b11fnuz, ml_dtypes.float8_e5m2,
                                   ml_dtypes.float8_e5m2fnuz])
def test_next_after_of_8_bit_floats_steps_to_the_neighbouring_value(dtype):
    every = np.arange(256, dtype=np.uint8).view(dtype)
    finite = every[np.isfinite(every.astype(np.float32))]
    big = float(ml_dtypes.finfo(dtype).max)
    x = np.repeat(finite, 2)
    y = np.tile(np.array([big, -big], np.float32), len(finite)).astype(dtype)
    c = xc.XlaBuilder("next_after")
    xops.NextAfter(*[xops.Parameter(c, i, xc.shape_from_pyval(v)) for i, v in enumerate((x, y))])
    comp = c.build()
    expected = _next_after_reference(x, y, dtype)
    for backend in ("cpu", "interpret"):
        got = hg.compile(comp.computation, backend=backend)(x, y)
        np.testing.assert_array_equal(got.astype(np.float64), expected)


# -- RegularizedIncompleteBeta, from hlogen ops --------------------------------------------

@covers("RegularizedIncompleteBeta")
@pytest.mark.parametrize("dtype,rtol", [(ml_dtypes.bfloat16, 2e-2), (np.float32, 5e-4),
                                        (np.float64, 1e-12)])
def test_regularized_incomplete_beta_against_scipy(dtype, rtol):
    rng = np.random.default_rng(3)
    # both sides of the symmetry, a and b from 0.01 to 60, the ends of x, XLA's test's values
    a = np.concatenate([np.exp(rng.uniform(np.log(0.01), np.log(60), 40)),
                        [0.00753073, 0.34813385, 1.29298632, 2.0, 0.5]])
    b = np.concatenate([np.exp(rng.uniform(np.log(0.01), np.log(60), 40)),
                        [0.55688389, 0.59794214, 1.59748339, 3.0, 0.5]])
    x = np.concatenate([rng.uniform(0, 1, 40), [0.53787335, 0.24015466, 0.13567594, 0.0, 1.0]])
    a, b, x = (v.astype(dtype) for v in (a, b, x))
    c = xc.XlaBuilder("betainc")
    xops.RegularizedIncompleteBeta(*[xops.Parameter(c, i, xc.shape_from_pyval(v))
                                     for i, v in enumerate((a, b, x))])
    comp = c.build()
    expected = scipy.special.betainc(*(v.astype(np.float64) for v in (a, b, x)))
    for backend in ("cpu", "interpret"):
        got = hg.compile(comp.computation, backend=backend)(a, b, x)
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_allclose(got.astype(np.float64), expected, rtol=rtol,
                                   atol=rtol * 1e-2)


def test_regularized_incomplete_beta_outside_its_domain_is_nan_and_scalars_broadcast():
    a = np.array([-1.0, 0.0, 2.0, 2.0, 2.0, 2.0], np.float32)
    b = np.array([1.0, 1.0, -0.5, 0.0, 1.0, 1.0], np.float32)
    x = np.array([0.5, 0.5, 0.5, 0.5, -0.1, 1.5], np.float32)
    got = run(lambda c, a, b, x: xops.RegularizedIncompleteBeta(a, b, x), a, b, x)[0]
    assert np.isnan(got).all(), got
    # I_x(2, 3) with a scalar a and b
    xs = np.array([0.1, 0.5, 0.9], np.float32)
    got = run(lambda c, x: xops.RegularizedIncompleteBeta(
        xops.Constant(c, np.float32(2)), xops.Constant(c, np.float32(3)), x), xs)[0]
    np.testing.assert_allclose(got, scipy.special.betainc(2, 3, xs.astype(np.float64)), rtol=1e-6)
    refused_shape = xc.XlaBuilder("shapes")
    xops.RegularizedIncompleteBeta(xops.Constant(refused_shape, np.ones(2, np.float32)),
                                   xops.Constant(refused_shape, np.ones(3, np.float32)),
                                   xops.Constant(refused_shape, np.ones(2, np.float32)))
    with pytest.raises(hg.ShapeError, match="a, b and x must have one shape"):
        refused_shape.build()


@covers("Select", "Clamp", "ConvertElementType", "BitcastConvertType", "ReducePrecision")
def test_select_clamp_and_conversions():
    p = np.array([True, False, True, False, True])
    check(run(lambda c, q, x, y: xops.Select(q, x, y), p, X, Y), np.where(p, X, Y))
    check(run(lambda c, x: xops.Clamp(xops.Constant(c, np.float32(-1)), x,
                                      xops.Constant(c, np.float32(2))), X), np.clip(X, -1, 2))
    v = np.array([1.7, -1.7, 2.5, -0.2], np.float32)
    check(run(lambda c, x: xops.ConvertElementType(x, xc.PrimitiveType.S32), v),
          np.trunc(v).astype(np.int32))
    check(run(lambda c, x: xops.BitcastConvertType(x, xc.PrimitiveType.U32), v), v.view(np.uint32))
    w = np.array([1.00390625, 3.1415927, -2.7182817, 1e-3], np.float32)
    check(run(lambda c, x: xops.ReducePrecision(x, 8, 7), w),
          w.astype(ml_dtypes.bfloat16).astype(np.float32))


# -- builder-first ops -----------------------------------------------------------------------

@covers("Parameter", "Constant", "ConstantLiteral", "Iota", "Tuple", "GetTupleElement")
def test_constants_iota_and_tuples():
    got = run(lambda c: xops.Tuple(c, [xops.Constant(c, 1.5), xops.ConstantLiteral(c, np.int8(3)),
                                       xops.Iota(c, shape(np.int32, 2, 3), 1),
                                       xops.Iota(c, xc.PrimitiveType.F32, 4),
                                       xops.Iota(c, type=xc.PrimitiveType.U8, size=2)]))
    check(got, np.float64(1.5), np.int8(3), np.tile(np.arange(3, dtype=np.int32), (2, 1)),
          np.arange(4, dtype=np.float32), np.arange(2, dtype=np.uint8))
    check(run(lambda c: xops.GetTupleElement(xops.Constant(c, (np.int32(1), np.float32(2))), 1)),
          np.float32(2))
    check(run(lambda c, x, y: xops.GetTupleElement(xops.Tuple(c, [x, y]), 0), X, Y), X)


@covers("CreateToken", "AfterAll", "ReplicaId")
def test_tokens_and_replica_id():
    def build(c, x):
        t = xops.CreateToken(c)
        xops.AfterAll(c, [t, xops.CreateToken(c)])
        xops.Tuple(c, [x, xops.ReplicaId(c)])
    check(run(build, X), X, np.uint32(0))


@covers("ConcatInDim", "Broadcast", "BroadcastInDim", "Collapse", "Reshape", "DynamicReshape",
        "Transpose", "Rev", "Slice", "SliceInDim")
def test_shapes_and_data_movement():
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    check(run(lambda c, x, y: xops.ConcatInDim(c, [x, y], 0), X, Y), np.concatenate([X, Y]))
    check(run(lambda c, x: xops.Broadcast(x, [2]), X), np.broadcast_to(X, (2, 5)))
    check(run(lambda c, x: xops.BroadcastInDim(x, [5, 3], [0]), X), np.repeat(X[:, None], 3, 1))
    check(run(lambda c, x: xops.Collapse(x, [1, 2]), a), ref.collapse(a, [1, 2]))
    check(run(lambda c, x: xops.Reshape(x, [6, 4]), a), a.reshape(6, 4))
    check(run(lambda c, x: xops.Reshape(x, [2, 1, 0], [4, 6]), a), a.transpose(2, 1, 0).reshape(4, 6))
    check(run(lambda c, x: xops.Reshape(operand=x, new_sizes=[24]), a), a.reshape(24))
    check(run(lambda c, x: xops.DynamicReshape(x, [], [3, 8], [False, False]), a), a.reshape(3, 8))
    check(run(lambda c, x: xops.Transpose(x, [1, 2, 0]), a), a.transpose(1, 2, 0))
    check(run(lambda c, x: xops.Rev(x, [0, 2]), a), a[::-1, :, ::-1])
    check(run(lambda c, x: xops.Slice(x, [0, 1, 0], [2, 3, 4], [1, 1, 2]), a), a[:, 1:3, ::2])
    check(run(lambda c, x: xops.SliceInDim(x, 1, 4, 2, 2), a), a[:, :, 1:4:2])


@covers("DynamicSlice", "DynamicUpdateSlice", "Pad", "GetDimensionSize", "RemoveDynamicDimension")
def test_dynamic_slices_padding_and_dimension_sizes():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    i, j = np.int32(2), np.int32(7)  # clamped: the slice must fit
    check(run(lambda c, x, p, q: xops.DynamicSlice(x, [p, q], [2, 2]), a, i, j),
          ref.dynamic_slice(a, [2, 7], [2, 2]))
    u = np.full((2, 2), -1, np.float32)
    check(run(lambda c, x, y, p, q: xops.DynamicUpdateSlice(x, y, [p, q]), a, u, i, j),
          ref.dynamic_update_slice(a, u, [2, 7]))
    config = xc.make_padding_config([(1, 0, 1), (-1, 2, 0)])
    check(run(lambda c, x: xops.Pad(x, xops.Constant(c, np.float32(9)), config), a),
          ref.pad(a, np.float32(9), [(1, 0, 1), (-1, 2, 0)]))
    check(run(lambda c, x: xops.GetDimensionSize(x, 1), a), np.int32(4))
    check(run(lambda c, x: xops.RemoveDynamicDimension(x, 0), a), a)


@covers("SetDimensionSize", "DynamicReshape")
def test_set_dimension_size_runs_and_dynamic_reshape_is_refused():
    a = np.arange(4, dtype=np.float32)
    refused(lambda c, x: xops.DynamicReshape(x, [], [2, 2], [True, False]), a,
            match="dynamic dimensions")
    add = scalar_computation(lambda p, q: xops.Add(p, q), np.float32)

    def build(c, x, n):
        d = xops.SetDimensionSize(x, n, 0)
        xops.Tuple(c, [xops.Reduce(c, [d], [xops.Constant(c, np.float32(0))], add, [0]),
                       xops.GetDimensionSize(d, 0), d])
    check(run(build, a + 1, np.int32(3)), np.float32(6), np.int32(3), a[:3] + 1)


@covers("Gather", "Scatter")
def test_gather_and_scatter():
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    rows = np.array([[1], [4], [9]], np.int32)  # 9 is clamped to the last row
    numbers = xc.GatherDimensionNumbers()
    numbers.offset_dims.extend([1])
    numbers.collapsed_slice_dims.append(0)
    numbers.start_index_map = [0]
    numbers.index_vector_dim = 1
    check(run(lambda c, t, r: xops.Gather(t, r, numbers, [1, 3]), table, rows),
          ref.gather(table, rows, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                     index_vector_dim=1, slice_sizes=[1, 3]))
    scatter = xc.ScatterDimensionNumbers()
    scatter.update_window_dims = []
    scatter.inserted_window_dims.append(0)
    scatter.scatter_dims_to_operand_dims.append(0)
    scatter.index_vector_dim = 1
    base = np.zeros(5, np.float32)
    where = np.array([[1], [3], [1]], np.int32)
    updates = np.array([1, 2, 3], np.float32)
    add = scalar_computation(lambda p, q: xops.Add(p, q), np.float32)
    check(run(lambda c, o, i, u: xops.Scatter(o, i, u, add, scatter), base, where, updates),
          np.array([0, 4, 0, 2, 0], np.float32))
    pair = computation(lambda c, a, b, p, q: xops.Tuple(c, [xops.Add(a, p), xops.Max(b, q)]),
                       *[shape(np.float32)] * 4)
    check(run(lambda c, o, p, i, u, v: xops.Scatter(
        inputs=[o, p], scatter_indices=i, updates=[u, v], update_computation=pair,
        dimension_numbers=scatter), base, base + 0, where, updates, updates + 0),
          np.array([0, 4, 0, 2, 0], np.float32), np.array([0, 3, 0, 2, 0], np.float32))


# -- computations passed to ops -------------------------------------------------------------

@covers("Call", "Map", "Reduce")
def test_call_map_and_reduce():
    f32 = shape(np.float32)
    affine = computation(lambda c, a, b: xops.Add(xops.Mul(a, b), a), shape(np.float32, 5),
                         shape(np.float32, 5))
    check(run(lambda c, x, y: xops.Call(c, affine, [x, y]), X, Y), X * Y + X)
    both = computation(lambda c, a: xops.Tuple(c, [a, xops.Neg(a)]), shape(np.float32, 5))
    check(run(lambda c, x: xops.GetTupleElement(xops.Call(c, both, [x]), 1), X), -X)
    maximum = scalar_computation(lambda a, b: xops.Max(a, b), np.float32)
    check(run(lambda c, x, y: xops.Map(c, [x, y], maximum, [0]), X, Y), np.maximum(X, Y))
    a = np.array([[3, 1, 4, 1], [5, 9, 2, 6]], np.float32)
    add = scalar_computation(lambda p, q: xops.Add(p, q), np.float32)
    check(run(lambda c, x: xops.Reduce(c, [x], [xops.Constant(c, np.float32(0))], add, [1]), a),
          a.sum(1))

    def argmax(c, av, ai, bv, bi):  # the larger value; the lower index on ties
        take_b = xops.Or(xops.Gt(bv, av), xops.And(xops.Eq(bv, av), xops.Lt(bi, ai)))
        xops.Tuple(c, [xops.Select(take_b, bv, av), xops.Select(take_b, bi, ai)])
    reducer = computation(argmax, f32, shape(np.int32), f32, shape(np.int32))

    def build(c, x):
        index = xops.Iota(c, shape(np.int32, 2, 4), 1)
        xops.Reduce(c, [x, index], [xops.Constant(c, np.float32(-np.inf)),
                                    xops.Constant(c, np.int32(0))], reducer, [1])
    check(run(build, a), a.max(1), a.argmax(1).astype(np.int32))


@covers("Sort", "TopK")
def test_sort_and_top_k():
    keys = np.array([3, -0.0, np.nan, 0.0, -np.inf, 3], np.float32)
    values = np.arange(6, dtype=np.int32)
    check(run(lambda c, k: xops.Sort(c, [k]), keys), ref.sort([keys])[0])
    check(run(lambda c, k, v: xops.Sort(c, [k, v], is_stable=True), keys, values),
          *ref.sort([keys, values], is_stable=True))
    descending = computation(lambda c, a, b, i, j: xops.Gt(a, b), *[shape(np.float32)] * 2,
                             *[shape(np.int32)] * 2)
    finite, idx = np.array([2, 7, 1, 7, 5], np.float32), np.arange(5, dtype=np.int32)
    check(run(lambda c, k, v: xops.Sort(c, [k, v], descending, 0, True), finite, idx),
          *ref.sort([finite, idx], lambda a, b, i, j: a > b, is_stable=True))
    check(run(lambda c, k: xops.TopK(k, 3), finite), *ref.top_k(finite, 3))


@covers("ApproxTopK", "ApproxTopKFallback", "ApproxTopKReductionOutputSize")
def test_approximate_top_k():
    x = np.array([[3, 9, 1, 7, 5, 2], [0, -1, 4, 4, 8, 6]], np.float32)
    greater = computation(lambda c, a, b, i, j: xops.Gt(a, b), *[shape(np.float32)] * 2,
                          *[shape(np.int32)] * 2)

    def build(fn, k, aggregate):
        def emit(c, v):
            index = xops.Iota(c, shape(np.int32, 2, 6), 1)
            fn(c, [v, index], [xops.Constant(c, np.float32(-np.inf)), xops.Constant(c, np.int32(0))],
               k, 1, greater, 0.95, aggregate)
        return emit
    order = np.argsort(-x, axis=1, kind="stable")
    check(run(build(xops.ApproxTopK, 2, True), x), np.take_along_axis(x, order, 1)[:, :2],
          order[:, :2].astype(np.int32))
    # a dimension of at most 128 is not reduced: the fallback sorts all of it (XLA's
    # AggregateToTopK of that size), ApproxTopK gives the operands as they are
    check(run(build(xops.ApproxTopKFallback, 2, False), x), np.take_along_axis(x, order, 1),
          order.astype(np.int32))
    check(run(build(xops.ApproxTopK, 2, False), x), x,
          np.tile(np.arange(6, dtype=np.int32), (2, 1)))
    # XLA's formula, evaluated by hand: m = max(int(-9 / ln 0.95), 128) = 175,
    # log2(1000 // 175) = 2 (at most log2 ceil(1000 // 128) = 3), ceil(ceil(1000 / 128) / 4) * 128
    assert xops.ApproxTopKReductionOutputSize(1000, 2, 10, 0.95, False) == (256, 2)
    assert xops.ApproxTopKReductionOutputSize(1000, 2, 10, 0.95) == (10, -1)
    assert xops.ApproxTopKReductionOutputSize(100, 2, 10, 0.95, False) == (100, 0)
    assert xops.ApproxTopKReductionOutputSize(1000, 2, 1, 0.95, False) == (128, 3)
    assert xops.ApproxTopKReductionOutputSize(1000, 2, 10, 1.0, False) == (1000, 0)
    with pytest.raises(hg.ShapeError, match="recall_target"):
        xops.ApproxTopKReductionOutputSize(1000, 2, 10, 1.5, False)


@covers("ReduceWindowWithGeneralPadding", "SelectAndScatterWithGeneralPadding")
def test_windows_with_general_padding():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) % 5
    maximum = scalar_computation(lambda p, q: xops.Max(p, q), np.float32)
    add = scalar_computation(lambda p, q: xops.Add(p, q), np.float32)
    ge = scalar_computation(lambda p, q: xops.Ge(p, q), np.float32)

    def pool(c, x):
        xops.ReduceWindowWithGeneralPadding(x, xops.Constant(c, np.float32(-np.inf)), maximum,
                                            [2, 2], [1, 2], [1, 1], [1, 1], [(0, 1), (1, 0)])
    check(run(pool, a), *cref.reduce_window([a], [-np.inf], max, [2, 2], [1, 2],
                                            [(0, 1), (1, 0)]))

    def dilated(c, x):
        xops.ReduceWindowWithGeneralPadding(
            operands=[x], init_values=[xops.Constant(c, np.float32(0))], computation=add,
            window_dimensions=[2, 2], window_strides=[1, 1], base_dilations=[2, 1],
            window_dilations=[1, 2], padding=[(0, 0), (0, 0)])
    check(run(dilated, a), *cref.reduce_window([a], [0], lambda p, q: p + q, [2, 2], [1, 1],
                                               [(0, 0), (0, 0)], [2, 1], [1, 2]))

    def defaults(c, x):  # XLA's window: an empty list means strides 1, no padding, no dilation
        xops.ReduceWindowWithGeneralPadding(x, xops.Constant(c, np.float32(0)), add, [2, 3], [],
                                            [], [], [])
    check(run(defaults, a), *cref.reduce_window([a], [0], lambda p, q: p + q, [2, 3], [1, 1],
                                                [(0, 0), (0, 0)]))
    source = np.arange(1, 5, dtype=np.float32).reshape(2, 2)

    def scatter(c, x, s):
        xops.SelectAndScatterWithGeneralPadding(x, ge, [2, 2], [1, 2], [(0, 0), (0, 0)], s,
                                                xops.Constant(c, np.float32(0)), add)
    check(run(scatter, a, source), cref.select_and_scatter(
        a, lambda p, q: p >= q, [2, 2], [1, 2], [(0, 0), (0, 0)], source, 0, lambda p, q: p + q))
    every = np.arange(1, 7, dtype=np.float32).reshape(2, 3)  # one per window: strides 1

    def scatter_defaults(c, x, s):
        xops.SelectAndScatterWithGeneralPadding(x, ge, [2, 2], [], [], s,
                                                xops.Constant(c, np.float32(0)), add)
    check(run(scatter_defaults, a, every), cref.select_and_scatter(
        a, lambda p, q: p >= q, [2, 2], [1, 1], [(0, 0), (0, 0)], every, 0, lambda p, q: p + q))


# -- control flow -------------------------------------------------------------------------------

@covers("While", "Conditional")
def test_while_and_conditional():
    state = xc.Shape.tuple_shape([shape(np.int32)] * 3)

    def condition(c, s):
        xops.Lt(xops.GetTupleElement(s, 0), xops.Constant(c, np.int32(10)))

    def body(c, s):  # (i, a, b) -> (i + 1, b, a + b): Fibonacci
        i, a, b = (xops.GetTupleElement(s, k) for k in range(3))
        xops.Tuple(c, [xops.Add(i, xops.Constant(c, np.int32(1))), b, xops.Add(a, b)])
    loop = (computation(condition, state, name="cond"), computation(body, state, name="body"))

    def fib(c, n):
        init = xops.Tuple(c, [n, xops.Constant(c, np.int32(0)), xops.Constant(c, np.int32(1))])
        xops.GetTupleElement(xops.While(*loop, init), 1)
    check(run(fib, np.int32(0)), np.int32(55))

    f32 = shape(np.float32, 5)
    double = computation(lambda c, x: xops.Add(x, x), f32)
    negate = computation(lambda c, x: xops.Neg(x), f32)
    for p in (True, False):
        check(run(lambda c, q, x: xops.Conditional(q, x, double, x, negate), np.bool_(p), X),
              X + X if p else -X)
        check(run(lambda c, q, x: xops.Conditional(q, true_operand=x, true_computation=double,
                                                   false_operand=x, false_computation=negate),
                  np.bool_(p), X), X + X if p else -X)
    square = computation(lambda c, x: xops.Mul(x, x), f32)
    for index, want in ((0, X + X), (2, X * X), (7, X * X), (-1, X * X)):  # out of range: last
        check(run(lambda c, i, x: xops.Conditional(branch_index=i, branch_computations=[
            double, negate, square], branch_operands=[x, x, x]), np.int32(index), X), want)


# -- linear algebra, convolution, FFT ----------------------------------------------------------

A = np.array([[4, 1, 2], [1, 5, 3], [2, 3, 6], [1, 0, 1]], np.float32)
SPD = A.T @ A


@covers("Dot", "DotGeneral")
def test_dot_and_dot_general():
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    check(run(lambda c, x, y: xops.Dot(x, y), A, b), A @ b, rtol=1e-6)
    s8 = np.array([[100, -100], [50, 127]], np.int8)
    check(run(lambda c, x, y: xops.Dot(x, y, preferred_element_type=xc.PrimitiveType.S32), s8, s8),
          (s8.astype(np.int64) @ s8).astype(np.int32))
    batch = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    other = np.arange(16, dtype=np.float32).reshape(2, 4, 2)
    numbers = xc.make_dot_dimension_numbers((([2], [1]), ([0], [0])))
    precision = xc.PrecisionConfig()
    precision.operand_precision.extend([xc.PrecisionConfig.Precision.HIGHEST] * 2)
    check(run(lambda c, x, y: xops.DotGeneral(x, y, numbers, precision), batch, other),
          lref.dot_general(batch, other, [2], [1], [0], [0]), rtol=1e-6)


@covers("ConvGeneralDilated")
def test_convolution():
    rng = np.random.default_rng(1)
    lhs = rng.standard_normal((1, 5, 6, 2)).astype(np.float32)
    rhs = rng.standard_normal((3, 2, 2, 4)).astype(np.float32)
    layout = ("NHWC", "HWIO", "NHWC")
    numbers = xc.make_convolution_dimension_numbers(layout, 2)
    padding = [(1, 1), (0, 2)]

    def conv(c, x, k, reversal=None):
        xops.ConvGeneralDilated(x, k, [1, 2], padding, [1, 1], [2, 1], numbers,
                                window_reversal=reversal)
    want = lref.conv_general_dilated(lhs, rhs, [1, 2], padding, [1, 1], [2, 1], layout)
    check(run(conv, lhs, rhs), want, rtol=1e-5, atol=1e-5)
    reversed_want = lref.conv_general_dilated(lhs, rhs[:, ::-1], [1, 2], padding, [1, 1], [2, 1],
                                              layout)
    check(run(lambda c, x, k: conv(c, x, k, [False, True]), lhs, rhs), reversed_want,
          rtol=1e-5, atol=1e-5)
    # XLA's window: empty strides, padding and dilations mean 1, none and 1
    check(run(lambda c, x, k: xops.ConvGeneralDilated(x, k, [], [], [], [], numbers), lhs, rhs),
          lref.conv_general_dilated(lhs, rhs, [1, 1], [(0, 0), (0, 0)], [1, 1], [1, 1], layout),
          rtol=1e-5, atol=1e-5)
    s8 = (rng.integers(-100, 100, (1, 3, 3, 1))).astype(np.int8)
    kernel = np.full((2, 2, 1, 1), 100, np.int8)
    fixed = xc.make_convolution_dimension_numbers(None, 2)
    check(run(lambda c, x, k: xops.ConvGeneralDilated(
        xops.Transpose(x, [0, 3, 1, 2]), xops.Transpose(k, [3, 2, 0, 1]), [1, 1], [(0, 0), (0, 0)],
        [1, 1], [1, 1], fixed, preferred_element_type=xc.PrimitiveType.S32), s8, kernel),
        lref.conv_general_dilated(s8.astype(np.int32), kernel.astype(np.int32), [1, 1],
                                  [(0, 0), (0, 0)], None, None, layout).transpose(0, 3, 1, 2))


@covers("Fft")
def test_fft():
    rng = np.random.default_rng(2)
    z = (rng.standard_normal((2, 8)) + 1j * rng.standard_normal((2, 8))).astype(np.complex64)
    r = rng.standard_normal((2, 8)).astype(np.float32)
    for kind, arg, length in ((xc.FftType.FFT, z, [8]), (xc.FftType.IFFT, z, [8]),
                              (xc.FftType.RFFT, r, [8]), (xc.FftType.FFT, z, [2, 8])):
        check(run(lambda c, x: xops.Fft(x, kind, length), arg),
              lref.fft(arg, kind.name, length), rtol=1e-5, atol=1e-5)
    spectrum = np.fft.rfft(r).astype(np.complex64)
    check(run(lambda c, x: xops.Fft(x, xc.FftType.IRFFT, [8]), spectrum),
          lref.fft(spectrum, "IRFFT", [8]), rtol=1e-5, atol=1e-5)


@covers("Cholesky", "TriangularSolve")
def test_cholesky_and_triangular_solve():
    for lower in (True, False):
        check(run(lambda c, x: xops.Cholesky(x, lower), SPD), lref.cholesky(SPD, lower), rtol=1e-5)
    lower_t = np.tril(SPD) + np.eye(3, dtype=np.float32)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    T_ = xc.ops.TriangularSolveOptions_Transpose
    for left, transpose, rhs in ((True, T_.NO_TRANSPOSE, b), (True, T_.TRANSPOSE, b),
                                 (False, T_.ADJOINT, b.T)):
        check(run(lambda c, a, y: xops.TriangularSolve(a, y, left, True, False, transpose),
                  lower_t, rhs),
              lref.triangular_solve(lower_t, rhs, left, True, False, transpose.name), rtol=1e-5,
              atol=1e-6)


def _orthonormal_columns(q):
    np.testing.assert_allclose(q.conj().T @ q, np.eye(q.shape[1]), atol=2e-6)


@covers("QR", "QrDecomposition", "ProductOfElementaryHouseholderReflectors")
def test_qr():
    for full in (True, False):
        q, r = run(lambda c, x: xops.Tuple(c, list(xops.QR(x, full))), A)
        k = 4 if full else 3
        assert q.shape == (4, k) and r.shape == (k, 3)
        _orthonormal_columns(q)
        np.testing.assert_array_equal(r, np.triu(r))
        np.testing.assert_allclose(q @ r, A, atol=2e-6)
        # R is unique up to the signs of its rows
        np.testing.assert_allclose(np.abs(r[:3]), np.abs(np.linalg.qr(A)[1]), rtol=1e-5)
    wide = A.T.copy()  # 3 x 4: m < n
    q, r = run(lambda c, x: xops.Tuple(c, list(xops.QR(x, True))), wide)
    assert q.shape == (3, 3) and r.shape == (3, 4)
    np.testing.assert_allclose(q @ r, wide, atol=2e-6)

    def householder(c, x):
        packed, taus = xops.QrDecomposition(x)
        xops.Tuple(c, [packed, xops.ProductOfElementaryHouseholderReflectors(packed, taus)])
    packed, q = run(householder, A)
    np.testing.assert_allclose(q @ np.triu(packed)[:3], A, atol=2e-6)


@covers("Eigh")
def test_eigh():
    v, w = run(lambda c, x: xops.Tuple(c, list(xops.Eigh(x))), SPD)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(SPD.astype(np.float64)), rtol=1e-5)
    np.testing.assert_allclose(SPD @ v, v * w, atol=2e-4)
    _orthonormal_columns(v)
    garbage_below = np.triu(SPD) + np.tril(np.full((3, 3), 1e3, np.float32), -1)
    _, w_upper = run(lambda c, x: xops.Tuple(c, list(xops.Eigh(x, lower=False))), garbage_below)
    np.testing.assert_allclose(w_upper, w, rtol=1e-5)  # only the upper triangle was read
    h = np.array([[2, 1 - 1j], [1 + 1j, 3]], np.complex64)
    v, w = run(lambda c, x: xops.Tuple(c, list(xops.Eigh(x))), np.stack([h, h.conj()]))
    assert w.dtype == np.float32
    np.testing.assert_allclose(w[0], np.linalg.eigvalsh(h.astype(np.complex128)), rtol=1e-5)
    np.testing.assert_allclose(h @ v[0], v[0] * w[0], atol=1e-5)


@covers("SVD")
def test_svd():
    for a in (A, A.T.copy(), np.stack([A, 2 * A])):
        u, d, v = run(lambda c, x: xops.Tuple(c, list(xops.SVD(x))), a)
        m, n = a.shape[-2:]
        k = min(m, n)
        assert u.shape[-2:] == (m, m) and v.shape[-2:] == (n, n) and d.shape[-1] == k
        np.testing.assert_allclose(d, np.linalg.svd(a.astype(np.float64), compute_uv=False),
                                   rtol=1e-5)
        np.testing.assert_allclose(u[..., :k] @ (d[..., :, None] * np.swapaxes(v[..., :k], -1, -2)),
                                   a, atol=1e-5)
        for q in (u, v):
            np.testing.assert_allclose(np.swapaxes(q, -1, -2) @ q,
                                       np.broadcast_to(np.eye(q.shape[-1]), q.shape), atol=2e-6)


@covers("LU")
def test_lu():
    for a in (A, np.stack([A.T, -A.T])):
        lu, pivots, permutation = run(lambda c, x: xops.Tuple(c, list(xops.LU(x))), a)
        want_lu, ipiv, _ = lapack_ref.getrf(a)
        np.testing.assert_allclose(lu, want_lu, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(pivots, ipiv - 1)
        m = a.shape[-2]
        for index in np.ndindex(*a.shape[:-2]):
            rows = list(range(m))  # the swaps, applied in turn
            for i, p in enumerate(ipiv[index] - 1):
                rows[i], rows[p] = rows[p], rows[i]
            np.testing.assert_array_equal(permutation[index], rows)


# -- random numbers ----------------------------------------------------------------------------

@covers("RngUniform", "RngNormal")
def test_rng_uniform_and_normal():
    (u,) = run(lambda c: xops.RngUniform(xops.Constant(c, np.float32(2)),
                                         xops.Constant(c, np.float32(5)), shape(np.float32, 4000)))
    assert u.dtype == np.float32 and ((2 <= u) & (u < 5)).all() and abs(u.mean() - 3.5) < 0.1
    (n,) = run(lambda c: xops.RngNormal(xops.Constant(c, np.float32(1)),
                                        xops.Constant(c, np.float32(2)), shape(np.float32, 4000)))
    assert abs(n.mean() - 1) < 0.15 and abs(n.std() - 2) < 0.15


@covers("RngBitGenerator")
def test_rng_bit_generator_gives_xlas_bits():
    """The bits are XLA's to define: jax.lax.rng_bit_generator, which lowers to the same XLA
    op, is the reference."""
    import jax
    state = np.array([7, 2**40 + 3], np.uint64)
    for algorithm, jax_algorithm in ((xops.RandomAlgorithm.RNG_THREE_FRY,
                                      jax.lax.RandomAlgorithm.RNG_THREE_FRY),
                                     (xops.RandomAlgorithm.RNG_PHILOX,
                                      jax.lax.RandomAlgorithm.RNG_PHILOX)):
        new_state, bits = run(lambda c, s: xops.RngBitGenerator(algorithm, s, shape(np.uint32, 3, 5)),
                              state)
        key, want = jax.lax.rng_bit_generator(state.view(np.uint32), (3, 5), np.uint32, jax_algorithm)
        np.testing.assert_array_equal(bits, np.asarray(want))
        np.testing.assert_array_equal(new_state.view(np.uint32), np.asarray(key))


# -- collectives (their values on replicas: tests/test_xla_client_runtime.py) --------------------

@covers("AllReduce", "CrossReplicaSum", "AllGather", "ReduceScatter", "AllToAll",
        "CollectivePermute", "MultiCollectivePermute")
def test_collectives_on_one_replica():
    add = scalar_computation(lambda p, q: xops.Add(p, q), np.float32)
    x = np.arange(4, dtype=np.float32)
    check(run(lambda c, v: xops.Tuple(c, [
        xops.AllReduce(v, add), xops.CrossReplicaSum(v), xops.AllGather(v, 0, 1),
        xops.ReduceScatter(v, add, 0, 1), xops.AllToAll(v, 0, 0, 1),
        xops.CollectivePermute(v, [(0, 0)])]), x), x, x, x, x, x, x)
    check(run(lambda c, v: xops.MultiCollectivePermute([v, v], [(0, 0)]), x), x, x)


def test_collectives_across_partitions_need_a_channel_and_their_partitions():
    add = scalar_computation(lambda p, q: xops.Add(p, q), np.float32)
    x = np.arange(4, dtype=np.float32)
    # global device ids run (tests/test_partitions.py); without a channel the spec has no mode
    c = xc.XlaBuilder("no_channel")
    v = xops.Parameter(c, 0, xc.shape_from_pyval(x))
    with pytest.raises(hg.HlogenError, match="use_global_device_ids=True needs a channel_id > 0"):
        xops.AllReduce(v, add, [], None, None, True)
        c.build()
    # a channel makes AllToAll and CollectivePermute cross-partition (the spec): on one
    # device, a permute to partition 1 is refused before XLA (which aborts on it)
    with pytest.raises(hg.ShapeError, match=r"channel_handle makes it cross_partition .* \[1\] "
                                            r"are not among the 1 partition"):
        run(lambda c, v: xops.CollectivePermute(v, [(0, 1)], BACKEND.create_channel_handle()), x)
    check(run(lambda c, v: xops.AllToAll(v, 0, 0, 1, channel_id=BACKEND.create_channel_handle()),
              x), x)


# -- host transfers and custom calls --------------------------------------------------------------

@covers("InfeedWithToken", "OutfeedWithToken", "SendToHost", "RecvFromHost")
def test_host_transfers():
    c = xc.XlaBuilder("infeed")
    data = xops.GetTupleElement(xops.InfeedWithToken(xops.CreateToken(c), shape(np.float32, 2)), 0)
    xops.Neg(data)
    with pytest.raises(hg.UnsupportedError, match="infeed"):
        BACKEND.compile(c.build())  # PJRT cannot fill an infeed queue
    handle = BACKEND.create_host_to_device_channel_handle()
    refused(lambda c, x: xops.OutfeedWithToken(x, xops.CreateToken(c), shape(np.float32, 5)), X,
            match="OutfeedWithToken")
    refused(lambda c, x: xops.SendToHost(x, xops.CreateToken(c), shape(np.float32, 5), handle), X,
            match="SendToHost")
    refused(lambda c: xops.RecvFromHost(xops.CreateToken(c), shape(np.float32, 5), handle),
            match="RecvFromHost")


GETRF = "lapack_sgetrf_ffi"  # a target jaxlib registers with XLA


def _getrf_shapes():
    return xc.Shape.tuple_shape([shape(np.float32, 3, 3), shape(np.int32, 3), shape(np.int32)])


@covers("CustomCall", "CustomCallWithLayout", "CustomCallWithAliasing", "CustomCallWithComputation")
def test_custom_calls():
    """jaxlib's LAPACK getrf, a registered typed-FFI target, reads column-major matrices:
    given a row-major a, it factors a.T."""
    a = SPD + np.diag([1, 2, 3]).astype(np.float32)
    want_lu, ipiv, info = lapack_ref.getrf(a.T)
    typed = xops.CustomCallApiVersion.API_VERSION_TYPED_FFI
    for build in (
            lambda c, x: xops.CustomCall(c, GETRF.encode(), [x], _getrf_shapes(), api_version=typed),
            lambda c, x: xops.CustomCallWithLayout(
                c, GETRF, [x], _getrf_shapes(), [xc.Shape.array_shape(np.dtype(np.float32), (3, 3),
                                                                      (1, 0))], api_version=typed),
            lambda c, x: xops.CustomCallWithAliasing(
                c, GETRF, [x], _getrf_shapes(), [shape(np.float32, 3, 3)], b"", False, [], None,
                api_version=typed)):
        lu, pivots, status = run(build, a)
        np.testing.assert_allclose(lu.T, want_lu, rtol=1e-5, atol=1e-6)
        check([pivots, status], ipiv, info[()])
    column_major = xc.Shape.array_shape(np.dtype(np.float32), (3, 3), (0, 1))
    lu, pivots, status = run(lambda c, x: xops.CustomCallWithLayout(
        c, GETRF, [x], xc.Shape.tuple_shape([column_major, shape(np.int32, 3), shape(np.int32)]),
        [column_major], api_version=typed), a)  # as jax calls it: the kernel factors a itself
    want_lu, ipiv, info = lapack_ref.getrf(a)
    np.testing.assert_allclose(lu, want_lu, rtol=1e-5, atol=1e-6)
    check([pivots, status], ipiv, info[()])
    refused(lambda c, x: xops.CustomCallWithAliasing(
        c, GETRF, [x], _getrf_shapes(), [shape(np.float32, 3, 3)], b"", False,
        [((0,), (0, ()))], None, api_version=typed), a, match="aliasing")
    refused(lambda c, x: xops.CustomCallWithComputation(
        c, b"f", [x], computation(lambda c, y: y, shape(np.float32, 3, 3)), shape(np.float32, 3, 3),
        b"", False, [], None), a, match="calls no computation")
    c = xc.XlaBuilder("unregistered")  # api_version ORIGINAL, XLA's default
    xops.CustomCall(c, b"no_such_target", [xops.Parameter(c, 0, shape(np.float32, 2))],
                    shape(np.float32, 2))
    with pytest.raises(xc.XlaRuntimeError, match="no_such_target"):
        BACKEND.compile(c.build())


# -- the whole list ------------------------------------------------------------------------------

ENUMS = {"TriangularSolveOptions_Transpose", "RandomAlgorithm", "CustomCallSchedule",
         "CustomCallApiVersion"}


def test_every_op_is_covered():
    ops = set(xops.__all__) - ENUMS
    assert ops - COVERED == set(), "ops without a test here"
    assert COVERED - ops == set(), "tests of ops that do not exist"
    for name in ENUMS:
        assert issubclass(getattr(xops, name), int)
