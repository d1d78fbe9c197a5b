"""The LAPACK custom calls jax exports for linear algebra on the CPU (lapack_?potrf_ffi,
lapack_?trsm_ffi, lapack_?getrf_ffi) run on the reference interpreter through hlogen's
rewrites: modules jax exports in the test, run on both backends, against jax itself and
an independent reference (tests/spec_reference_lapack.py, tests/spec_reference_linalg.py).
The routines without a formulation (eigen, SVD, QR) are an hg.UnsupportedError that says so.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hlogen as hg
from tests import spec_reference_lapack as lapack
from tests import spec_reference_linalg as ref
from tests.helpers import BACKENDS, run

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402 - after importorskip: skipped without jax
from jax import export  # noqa: E402 - after importorskip: skipped without jax

SETTINGS = settings(max_examples=int(os.environ.get("HLOGEN_EXAMPLES", 8)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
_TYPES = [np.float32, np.float64, np.complex64, np.complex128]
_TOLERANCE = {np.float32: 2e-4, np.complex64: 2e-4, np.float64: 1e-10, np.complex128: 1e-10}


_EXPORT_CONFIG = {"jax_enable_x64": True}  # f64 and c128 as they are


@contextlib.contextmanager
def _export_config():
    before = {name: getattr(jax.config, name) for name in _EXPORT_CONFIG}
    for name, value in _EXPORT_CONFIG.items():
        jax.config.update(name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            jax.config.update(name, value)


def _exported(fn, *args) -> str:
    with _export_config():
        return export.export(jax.jit(fn))(*args).mlir_module()


def _close(got, want, err_msg=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, err_msg)
    tol = _TOLERANCE[want.dtype.type] if want.dtype.kind in "fc" else 0
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(
        initial=0)), err_msg=err_msg)


def _random(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _on_both(text: str, *args) -> dict:
    comp = hg.load(text)
    results = {}
    for backend in BACKENDS:
        got = run(comp, backend, *args)
        results[backend] = got if isinstance(got, tuple) else (got,)
    return results


def _lapack_call(fn, *args) -> str:
    """A module whose main returns the results of the one LAPACK custom call of jax's export
    of `fn`, as they are (info and the untouched triangle included)."""
    text = _exported(fn, *args)
    line = next(l for l in text.splitlines() if "custom_call @lapack_" in l)
    call = re.search(r"stablehlo\.custom_call @\w+\((.*?)\) (\{.*\}) : \((.*?)\) -> (.*?) loc",
                     line)
    operands, types = call.group(1).split(", "), call.group(3).split(", ")
    results = call.group(4).strip("()").split(", ")
    target = re.search(r"@(\w+)", line).group(1)
    params = ", ".join(f"%p{i}: {t}" for i, t in enumerate(types))
    names = ", ".join(f"%r#{i}" for i in range(len(results))) if len(results) > 1 else "%r"
    count = f":{len(results)}" if len(results) > 1 else ""
    return (f"func.func @main({params}) -> ({', '.join(results)}) {{\n"
            f"  %r{count} = stablehlo.custom_call @{target}"
            f"({', '.join(f'%p{i}' for i in range(len(operands)))}) {call.group(2)} : "
            f"({', '.join(types)}) -> {call.group(4)}\n"
            f"  return {names} : {', '.join(results)}\n}}")


# -- potrf -------------------------------------------------------------------------------------

@SETTINGS
@given(batch=st.lists(st.integers(1, 2), max_size=1).map(tuple), n=st.integers(1, 5),
       dtype=st.sampled_from(_TYPES), lower=st.booleans(), definite=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_potrf_as_lapack_defines_it(batch, n, dtype, lower, definite, seed):
    rng = np.random.default_rng(seed)
    x = _random(rng, batch + (n, n), dtype)
    a = (x @ np.conj(np.swapaxes(x, -1, -2)) + (n if definite else -1) * np.eye(n)).astype(dtype)
    text = _lapack_call(lambda m: jax.lax.linalg.cholesky(m, symmetrize_input=False), a)
    if not lower:  # jax factors upper triangles by transposing: set the flag itself
        text = text.replace("uplo = 76", "uplo = 85")
    want, info = lapack.potrf(a, lower)
    keep = np.tril(np.ones((n, n), bool)) if lower else np.triu(np.ones((n, n), bool))
    for backend, (factor, got_info) in _on_both(text, a).items():
        np.testing.assert_array_equal(got_info, info, err_msg=backend)
        ok = info == 0
        _close(np.where(keep, factor, 0)[ok], np.where(keep, want, 0)[ok], backend)
        np.testing.assert_array_equal(np.where(keep, 0, factor), np.where(keep, 0, a),
                                      err_msg=backend)  # the other triangle is not touched


def test_jax_cholesky_export_runs_on_the_interpreter():
    rng = np.random.default_rng(0)
    x = _random(rng, (2, 4, 4), np.complex64)
    a = (x @ np.conj(np.swapaxes(x, -1, -2)) + 4 * np.eye(4)).astype(np.complex64)
    a[1] = -np.eye(4)  # not positive definite: jax gives NaN (in the lower triangle)
    text = _exported(jnp.linalg.cholesky, a)
    assert "lapack_cpotrf_ffi" in text
    jax_result = np.asarray(jnp.linalg.cholesky(a))
    for backend, (factor,) in _on_both(text, a).items():
        _close(factor[0], ref.cholesky(a[:1], True)[0], backend)
        _close(factor[0], jax_result[0], backend)
        np.testing.assert_array_equal(factor[1], jax_result[1], err_msg=backend)


# -- trsm --------------------------------------------------------------------------------------

@pytest.mark.parametrize("left_side,lower,transpose_a,unit_diagonal", list(itertools.product(
    (True, False), (True, False), ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"), (True, False))))
@settings(SETTINGS, max_examples=max(2, SETTINGS.max_examples // 4))
@given(batch=st.lists(st.integers(1, 2), max_size=1).map(tuple), m=st.integers(1, 4),
       k=st.integers(1, 3), dtype=st.sampled_from(_TYPES), seed=st.integers(0, 2**32 - 1))
def test_trsm_through_jax(left_side, lower, transpose_a, unit_diagonal, batch, m, k, dtype,
                          seed):
    rng = np.random.default_rng(seed)
    a = (_random(rng, batch + (m, m), dtype) + 4 * np.eye(m)).astype(dtype)
    b = _random(rng, batch + ((m, k) if left_side else (k, m)), dtype)
    kind = {"NO_TRANSPOSE": 0, "TRANSPOSE": 1, "ADJOINT": 2}[transpose_a]

    def solve(p, q):
        return jax.lax.linalg.triangular_solve(
            p, q, left_side=left_side, lower=lower, unit_diagonal=unit_diagonal,
            transpose_a=kind > 0, conjugate_a=kind == 2)

    text = _exported(solve, a, b)
    assert "trsm_ffi" in text
    want = ref.triangular_solve(a, b, left_side, lower, unit_diagonal, transpose_a)
    for backend, (x,) in _on_both(text, a, b).items():
        _close(x, want, backend)


# -- getrf -------------------------------------------------------------------------------------

@SETTINGS
@given(batch=st.lists(st.integers(1, 2), max_size=1).map(tuple), m=st.integers(1, 5),
       n=st.integers(1, 5), dtype=st.sampled_from(_TYPES), singular=st.booleans(),
       seed=st.integers(0, 2**32 - 1))
def test_getrf_as_lapack_defines_it(batch, m, n, dtype, singular, seed):
    rng = np.random.default_rng(seed)
    a = _random(rng, batch + (m, n), dtype)
    if singular:  # a zero column: a zero pivot, and info says where
        a[..., :, n // 2] = 0
    text = _lapack_call(jax.lax.linalg.lu, a)
    want_lu, want_pivots, want_info = lapack.getrf(a)
    for backend, (lu, pivots, info) in _on_both(text, a).items():
        np.testing.assert_array_equal(pivots, want_pivots, err_msg=backend)
        np.testing.assert_array_equal(info, want_info, err_msg=backend)
        _close(lu, want_lu, backend)


def test_jax_lu_export_runs_on_the_interpreter():
    a = _random(np.random.default_rng(3), (2, 4, 4), np.float64)
    text = _exported(jax.lax.linalg.lu, a)
    with _export_config():
        want = [np.asarray(v) for v in jax.lax.linalg.lu(a)]
    for backend, got in _on_both(text, a).items():
        for g, w in zip(got, want):
            _close(g, w, backend)


def test_getrf_built_with_jaxs_layouts_and_without():
    """ops.custom_call with jax's column-major layouts is the call jax makes: both backends
    run it alike. Declared row-major, the kernel factors the transposed matrices, which the
    interpreter's rewrite does not: it refuses the call."""
    a = _random(np.random.default_rng(4), (3, 3), np.float32)
    b = hg.Builder("getrf")
    x = b.parameter(hg.f32[3, 3])
    shapes = (hg.f32[3, 3], hg.s32[3], hg.s32[()])
    comp = b.build(*hg.ops.custom_call("lapack_sgetrf_ffi", [x], shapes, operand_layouts=[(0, 1)],
                                       result_layouts=[(0, 1), None, None]))
    want_lu, want_pivots, _ = lapack.getrf(a)
    for backend in BACKENDS:
        lu, pivots, _ = run(comp, backend, a)
        np.testing.assert_array_equal(pivots, want_pivots, err_msg=backend)
        _close(lu, want_lu, backend)
    b = hg.Builder("row_major")
    x = b.parameter(hg.f32[3, 3])
    comp = b.build(*hg.ops.custom_call("lapack_sgetrf_ffi", [x], shapes))
    with pytest.raises(hg.UnsupportedError, match="column-major"):
        hg.interpret(comp, a)
    lu, _, _ = run(comp, "cpu", a)
    _close(lu, lapack.getrf(a.T)[0].T)  # PJRT runs it: the factors of a.T


# -- what has no formulation -------------------------------------------------------------------

@pytest.mark.parametrize("fn,routine", [(jnp.linalg.eigh, "syevd"), (jnp.linalg.svd, "gesdd"),
                                        (jnp.linalg.qr, "geqrf")])
def test_eigen_svd_qr_are_refused_on_the_interpreter(fn, routine):
    a = np.eye(3, dtype=np.float32)
    comp = hg.load(_exported(fn, a))
    with pytest.raises(hg.UnsupportedError, match=f"lapack_s{routine}_ffi.*no formulation"):
        hg.interpret(comp, a)
    run(comp, "cpu", a)  # PJRT runs it
