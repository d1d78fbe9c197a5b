"""`run --no-hlo-passes` of XLA CPU's optimized HLO of jax's QR, whose LAPACK custom calls
(lapack_sgeqrf_ffi, lapack_sorgqr_ffi) take their operands column-major: with every HLO
pass disabled nothing gives them that layout (hlogen reads HLO into StableHLO, which has
no layouts but a custom call's own, and XLA's layout assignment is a pass), so the run is
refused, naming the call and the layout, where it printed wrong numbers (24 of 24
elements of Q differed from jax's); with the passes, the dump gives jax's result."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

HLOGEN = pathlib.Path(sys.executable).parent / "hlogen"


def hlogen(folder, *args):
    env = {**os.environ, "HLOGEN_CACHE_DIR": str(folder / "cache")}
    return subprocess.run([str(HLOGEN), *map(str, args)], cwd=folder, capture_output=True,
                          text=True, env=env, timeout=300)


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


def test_a_custom_call_that_needs_a_layout_is_refused_without_hlo_passes(qr):
    done = hlogen(qr, "run", "qr.hlo", "--input", "@x.npy", "--no-hlo-passes", "--output", "no.npz")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert ("qr.hlo: custom call lapack_sgeqrf_ffi needs its operand 0 in layout {0,1} "
            "(column-major); with every HLO pass disabled") in done.stderr
    assert "run it without --no-hlo-passes" in done.stderr and not (qr / "no.npz").exists()


def test_with_the_passes_the_dump_gives_jax_s_result(qr):
    done = hlogen(qr, "run", "qr.hlo", "--input", "@x.npy", "--output", "hlogen.npz")
    assert done.returncode == 0, done.stderr
    with np.load(qr / "hlogen.npz") as got, np.load(qr / "jax.npz") as want:
        np.testing.assert_allclose(got["result_0"], want["q"], rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got["result_1"], want["r"], rtol=1e-5, atol=1e-5)
