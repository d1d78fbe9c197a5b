"""`run --no-hlo-passes` of XLA CPU's optimized HLO (jax's `.compile().as_text()`), where
layouts are part of the meaning: hlogen reads HLO into StableHLO, which says no layouts
but a custom call's, and with every HLO pass disabled XLA's layout assignment does not
run. Jax's QR calls LAPACK (lapack_sgeqrf_ffi, lapack_sorgqr_ffi) on column-major
operands, and a transpose XLA lays out as a bitcast reached the result in the wrong
order: 24 of 24 elements of Q differed from jax's, and x.T + 1 came back as x + 1
reshaped. hlogen.rewrites.LAYOUTS moves the data where the layouts would have: the
results are jax's."""
from __future__ import annotations


import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tests.helpers import hlogen_in as hlogen



@pytest.fixture(scope="module")
def qr(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layouts")
    x = (np.arange(12, dtype=np.float32).reshape(4, 3) + 1) ** 1.3
    compiled = jax.jit(jnp.linalg.qr).lower(x).compile()
    (folder / "qr.hlo").write_text(compiled.as_text())  # the optimized HLO, with layouts
    np.save(folder / "x.npy", x)
    q, r = compiled(x)
    np.savez(folder / "jax.npz", q=np.asarray(q), r=np.asarray(r))
    return folder


def test_a_custom_call_gets_the_layouts_it_asks_for_without_hlo_passes(qr):
    for passes in (["--no-hlo-passes"], []):
        done = hlogen(qr, "run", "qr.hlo", "--input", "@x.npy", *passes, "--output", "got.npz")
        assert done.returncode == 0, done.stderr
        with np.load(qr / "got.npz") as got, np.load(qr / "jax.npz") as want:
            np.testing.assert_allclose(got["result_0"], want["q"], rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(got["result_1"], want["r"], rtol=1e-5, atol=1e-5)


def test_a_transpose_reaches_the_result_in_its_order_without_hlo_passes(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    compiled = jax.jit(lambda v: v.T + 1).lower(x).compile()
    (tmp_path / "t.hlo").write_text(compiled.as_text())  # a transpose, then a copy
    np.save(tmp_path / "x.npy", x)
    done = hlogen(tmp_path, "run", "t.hlo", "--input", "@x.npy", "--no-hlo-passes",
                  "--output", "@got.npy")
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "got.npy"), x.T + 1)
