"""Dot, DotGeneral, Cholesky, TriangularSolve, Fft, BatchNorm*: the spec's examples, numpy
(einsum, linalg, fft, the batch-norm formulas), the interpreter where it runs the op, and
the errors that name the rule."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests.helpers import BACKENDS, run
from tests.test_indexing import build, on

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_dot_general_contracting_example(backend):
    lhs = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    rhs = np.array([[1, 1, 1], [2, 2, 2]], np.float32)
    got = on(backend, lambda a, b: ops.dot_general(a, b, hg.DotDimensionNumbers([1], [1])), lhs, rhs)
    np.testing.assert_array_equal(got, [[6, 12], [15, 30]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_dot_general_batch_example(backend):
    lhs = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.float32)
    rhs = np.array([[[1, 0], [0, 1]], [[1, 0], [0, 1]]], np.float32)
    numbers = dict(lhs_contracting_dimensions=[2], rhs_contracting_dimensions=[1],
                   lhs_batch_dimensions=[0], rhs_batch_dimensions=[0])
    got = on(backend, lambda a, b: ops.dot_general(a, b, numbers), lhs, rhs)
    np.testing.assert_array_equal(got, lhs)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("lhs_dims,rhs_dims,numbers,subscripts", [
    ((2, 3, 4, 5), (2, 3, 5, 6), ([3], [2], [0, 1], [0, 1]), "abmk,abkn->abmn"),
    ((4, 2, 3), (3, 5, 2), ([2, 1], [0, 2], [], []), "ikj,jlk->il"),
    ((3, 2, 4), (4, 3, 5), ([2], [0], [0], [1]), "bik,kbj->bij"),
    ((5,), (5,), ([0], [0], [], []), "i,i->"),
    ((2, 3), (4,), ([], [], [], []), "ij,k->ijk"),
])
def test_dot_general_against_einsum(lhs_dims, rhs_dims, numbers, subscripts, backend):
    lhs = RNG.integers(-5, 6, lhs_dims).astype(np.float32)
    rhs = RNG.integers(-5, 6, rhs_dims).astype(np.float32)
    got = on(backend, lambda a, b: ops.dot_general(a, b, hg.DotDimensionNumbers(*numbers)), lhs, rhs)
    np.testing.assert_array_equal(got, np.einsum(subscripts, lhs, rhs))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("operand,preferred", [("s8", "s32"), ("bf16", "f32"), ("u8", "u32"),
                                               ("f16", "f32"), ("s32", None), ("c64", "c128")])
def test_dot_mixed_precision(operand, preferred, backend):
    et = hg.element_type(operand)
    lhs = RNG.integers(-100 if et.kind == "signed" else 0, 100, (3, 40)).astype(et.dtype)
    rhs = RNG.integers(-100 if et.kind == "signed" else 0, 100, (40, 2)).astype(et.dtype)
    got = on(backend, lambda a, b: ops.dot(a, b, preferred_element_type=preferred), lhs, rhs)
    wide = np.complex128 if et.kind == "complex" else np.float64 if et.kind == "float" else np.int64
    expected = lhs.astype(wide) @ rhs.astype(wide)
    assert got.dtype == hg.element_type(preferred or operand).dtype
    np.testing.assert_array_equal(got.astype(wide), expected)  # sums of small integers: exact


@pytest.mark.parametrize("backend", BACKENDS)
def test_dot_rank_table(backend):
    v, m = np.arange(3, dtype=np.float32), np.arange(6, dtype=np.float32).reshape(2, 3)
    assert on(backend, ops.dot, v, v) == np.float32(5)
    np.testing.assert_array_equal(on(backend, ops.dot, m, v), m @ v)
    np.testing.assert_array_equal(on(backend, ops.dot, m, m.T.copy()), m @ m.T)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dot_precision_config(backend):
    m = RNG.standard_normal((4, 4)).astype(np.float32)
    for precision in ("DEFAULT", "HIGHEST", ("HIGH", "HIGHEST")):
        comp = build(lambda a, b: ops.dot(a, b, precision_config=precision), m, m)
        assert "precision" in comp.as_text()
        np.testing.assert_allclose(run(comp, backend, m, m), m @ m, rtol=1e-5, atol=1e-5)


# -- Cholesky and TriangularSolve (the interpreter runs them rewritten: hlogen/decompositions.py) --

def _spd(n, batch=(), dtype=np.float64):
    a = RNG.standard_normal(batch + (n, n))
    if np.dtype(dtype).kind == "c":
        a = a + 1j * RNG.standard_normal(batch + (n, n))
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_reads_one_triangle(lower, dtype, backend):
    a = _spd(4, (2,), dtype)
    garbage = a.copy()
    other = np.triu_indices(4, 1) if lower else np.tril_indices(4, -1)
    garbage[(slice(None),) + other] = 1e6  # the triangle Cholesky must not read
    got = on(backend, lambda x: ops.cholesky(x, lower), garbage)
    expected = np.linalg.cholesky(a)
    if not lower:
        expected = np.conj(np.swapaxes(expected, -1, -2))
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    assert not got[(slice(None),) + other].any()  # the other triangle is zero


@pytest.mark.parametrize("backend", BACKENDS)
def test_cholesky_of_a_matrix_that_is_not_positive_definite_gives_nan_as_on_xla_cpu(backend):
    """The spec leaves the result to the implementation; XLA CPU fills the factor with NaN
    (no error), and hlogen keeps the other triangle zero."""
    a = np.array([[1.0, 2.0], [2.0, 1.0]])  # eigenvalues 3 and -1
    got = on(backend, ops.cholesky, a)
    assert np.isnan(got[1, 1]) and got[0, 1] == 0


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex128])
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a", ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve(dtype, left_side, lower, transpose_a, unit_diagonal, backend):
    n, k = 4, 3
    a = (RNG.standard_normal((2, n, n)) + (1j * RNG.standard_normal((2, n, n))
                                          if np.dtype(dtype).kind == "c" else 0)).astype(dtype)
    a += (4 * np.eye(n)).astype(dtype)
    b = RNG.standard_normal((2, n, k) if left_side else (2, k, n)).astype(dtype)
    got = on(backend, lambda x, y: ops.triangular_solve(x, y, left_side, lower, unit_diagonal,
                                                        transpose_a), a, b)
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        t = t - np.einsum("bii->bi", t)[..., None] * np.eye(n) + np.eye(n)
    op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2),
          "ADJOINT": np.conj(np.swapaxes(t, -1, -2))}[transpose_a]
    check = op @ got if left_side else got @ op
    tol = 1e-4 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(check, b, rtol=tol, atol=tol)


# -- Fft -----------------------------------------------------------------------------------------------

FFT_CASES = [  # fft_type, operand dims, fft_length, numpy
    ("FFT", (3, 8), [8], np.fft.fft),
    ("IFFT", (2, 4, 6), [4, 6], np.fft.ifft2),
    ("FFT", (2, 3, 4, 5), [3, 4, 5], lambda x: np.fft.fftn(x, axes=(1, 2, 3))),
    ("RFFT", (2, 8), [8], np.fft.rfft),
    ("RFFT", (3, 4, 6), [4, 6], np.fft.rfft2),
    ("IRFFT", (2, 5), [8], lambda x: np.fft.irfft(x, 8)),
    ("IRFFT", (2, 4), [7], lambda x: np.fft.irfft(x, 7)),
    ("IRFFT", (2, 4, 4), [4, 7], lambda x: np.fft.irfft2(x, (4, 7))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("fft_type,dims,length,reference", FFT_CASES,
                         ids=[f"{c[0]}{len(c[2])}d" for c in FFT_CASES])
def test_fft_against_numpy(fft_type, dims, length, reference, wide, backend):
    real = fft_type == "RFFT"
    dtype = (np.float64 if wide else np.float32) if real else (np.complex128 if wide else np.complex64)
    x = RNG.standard_normal(dims) + (0 if real else 1j * RNG.standard_normal(dims))
    if fft_type == "IRFFT":  # the spectrum of a real signal: IRFFT's result is defined by it
        axes = tuple(range(len(dims) - len(length), len(dims)))
        x = np.fft.rfftn(RNG.standard_normal(dims[:-1] + (length[-1],)), axes=axes)
    x = x.astype(dtype)
    comp = build(lambda a: ops.fft(a, fft_type, length), x)
    got = run(comp, backend, x)  # the interpreter's c64 and odd IRFFTs: rewritten
    expected = reference(x.astype(np.complex128 if not real else np.float64))
    np.testing.assert_allclose(got, expected, rtol=1e-12 if wide else 2e-5, atol=1e-12 if wide else 2e-5)


# -- BatchNorm ---------------------------------------------------------------------------------------

def _moments(x, feature_index):
    axes = tuple(d for d in range(x.ndim) if d != feature_index)
    shape = [1] * x.ndim
    shape[feature_index] = -1
    return axes, shape


@pytest.mark.parametrize("backend", BACKENDS)  # the interpreter runs them by their formulas
@pytest.mark.parametrize("feature_index", [0, 1, 3])
def test_batch_norm_training_and_inference(feature_index, backend):
    x = RNG.standard_normal((2, 3, 4, 5)) * 3 + 1
    c = x.shape[feature_index]
    scale, offset = RNG.standard_normal(c), RNG.standard_normal(c)
    eps = 1e-3
    axes, shape = _moments(x, feature_index)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    normalized = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    expected = scale.reshape(shape) * normalized + offset.reshape(shape)
    got = on(backend, lambda a, s, o: ops.batch_norm_training(a, s, o, eps, feature_index), x, scale,
             offset)
    for g, e in zip(got, (expected, mean, var)):
        np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-10)
    got = on(backend, lambda a, s, o, m, v: ops.batch_norm_inference(a, s, o, m, v, eps,
                                                                     feature_index),
             x, scale, offset, mean, var)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("feature_index", [0, 2])
def test_batch_norm_grad(feature_index, backend):
    x = RNG.standard_normal((3, 4, 5))
    c = x.shape[feature_index]
    scale = RNG.standard_normal(c)
    grad_out = RNG.standard_normal(x.shape)
    eps = 1e-2
    axes, shape = _moments(x, feature_index)
    mean, var = x.mean(axis=axes), x.var(axis=axes)
    n = x.size // c
    inv = 1 / np.sqrt(var.reshape(shape) + eps)
    centered = x - mean.reshape(shape)
    grad_offset = grad_out.sum(axis=axes)
    grad_scale = (grad_out * centered * inv).sum(axis=axes)
    grad_x = scale.reshape(shape) * inv / n * (
        n * grad_out - grad_offset.reshape(shape) - centered * inv ** 2 * (grad_out * centered).sum(
            axis=axes).reshape(shape))
    got = on(backend, lambda a, s, m, v, g: ops.batch_norm_grad(a, s, m, v, g, eps, feature_index),
             x, scale, mean, var, grad_out)
    for g, e in zip(got, (grad_x, grad_scale, grad_offset)):
        np.testing.assert_allclose(g, e, rtol=1e-9, atol=1e-9)


# -- errors ------------------------------------------------------------------------------------------

def _b():
    b = hg.Builder("e")
    return b.parameter(hg.f32[2, 3, 4]), b.parameter(hg.f32[2, 4, 5]), b.parameter(hg.f32[3, 3])


ERRORS = [
    (lambda x, y, m: ops.dot(x, y), "vector . vector, matrix . vector or matrix . matrix"),
    (lambda x, y, m: ops.dot(m, ops.slice(m, [0, 0], [2, 3])), "the last dimension of lhs and the first of rhs"),
    (lambda x, y, m: ops.dot(m, ops.convert_element_type(m, hg.f64)), "same element type"),
    (lambda x, y, m: ops.dot_general(x, y, hg.DotDimensionNumbers([2], [2])),
     r"contracting dimension 2 of lhs \(size 4\) and 2 of rhs \(size 5\) must have the same size"),
    (lambda x, y, m: ops.dot_general(x, y, hg.DotDimensionNumbers([2], [1, 2])), "as many contracting"),
    (lambda x, y, m: ops.dot_general(x, y, hg.DotDimensionNumbers([3], [1])), r"must be in \[0, 3\)"),
    (lambda x, y, m: ops.dot_general(x, y, hg.DotDimensionNumbers([2], [1], [2], [0])), "must all differ"),
    (lambda x, y, m: ops.dot_general(x, y, {"lhs_contracting": [2]}), "unknown keys"),
    (lambda x, y, m: ops.dot_general(x, y, [[2], [1]]), "DotDimensionNumbers or a dict"),
    (lambda x, y, m: ops.dot(m, m, precision_config="FAST"), "precision_config='FAST'"),
    (lambda x, y, m: ops.dot(m, m, preferred_element_type=hg.f16), "at least as wide"),
    (lambda x, y, m: ops.dot(m, m, preferred_element_type=hg.s32), "must be an float type|must be a"),
    (lambda x, y, m: ops.cholesky(x), "must be a square matrix"),
    (lambda x, y, m: ops.cholesky(ops.convert_element_type(m, hg.s32)), "floating-point, complex"),
    (lambda x, y, m: ops.triangular_solve(m, x, True, True, False, "NO_TRANSPOSE"),
     "must have a's rank and batch dimensions"),
    (lambda x, y, m: ops.triangular_solve(m, ops.slice(m, [0, 0], [2, 3]), True, True, False,
                                          "NO_TRANSPOSE"), "b's rows must number 3"),
    (lambda x, y, m: ops.triangular_solve(m, m, True, True, False, "CONJ"), "transpose_a='CONJ'"),
    (lambda x, y, m: ops.triangular_solve(m, m, 1, True, False, "TRANSPOSE"), "left_side must be True or False"),
    (lambda x, y, m: ops.fft(x, "FFT", [4]), "FFT takes c64 or c128"),
    (lambda x, y, m: ops.fft(x, "RFFT", [5]), r"innermost dimensions \[4\] must be fft_length"),
    (lambda x, y, m: ops.fft(x, "RFFT", [2, 3, 4, 1]), "1 to 3"),
    (lambda x, y, m: ops.fft(ops.convert_element_type(x, hg.c64), "IRFFT", [4]),
     r"must be fft_length with its last size halved: \[3\]"),
    (lambda x, y, m: ops.fft(x, "DCT", [4]), "fft_type must be one of"),
    (lambda x, y, m: ops.batch_norm_training(x, m, m, 0.1, 1), r"scale must be f32\[3\]"),
    (lambda x, y, m: ops.batch_norm_training(x, ops.slice(m, [0, 0], [1, 3]), m, 0.1, 3), "feature_index=3"),
    (lambda x, y, m: ops.batch_norm_inference(x, *[ops.reshape(ops.slice(m, [0, 0], [1, 3]), [3])] * 4,
                                              "0.1", 1), "epsilon='0.1' must be a number"),
]


@pytest.mark.parametrize("call,message", ERRORS, ids=[m for _, m in ERRORS])
def test_errors(call, message):
    with pytest.raises(hg.ShapeError, match=message):
        call(*_b())
