"""A cached executable that calls jaxlib's LAPACK kernels runs as a fresh compile does.

XLA CPU ends the process (SIGSEGV) on a LAPACK custom call unless jaxlib's kernels were
initialized in the process; hlogen initializes them before compiling such a module, and
must do so before loading one from the executable cache as well (a second `hlogen run` of
the same jax export is a cache hit).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")


def _solve(a, b):
    return jnp.linalg.solve(a @ a.T + 3 * jnp.eye(4, dtype=a.dtype), b)


def test_a_cached_executable_with_lapack_calls_runs(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.random((4, 4), dtype=np.float32)
    b = rng.random((4, 2), dtype=np.float32)
    module = tmp_path / "solve.mlir"
    module.write_text(jax.jit(_solve).lower(a, b).as_text())
    assert "lapack_" in module.read_text()
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    env = dict(os.environ, HLOGEN_CACHE_DIR=str(tmp_path / "cache"))
    expected = np.linalg.solve((a @ a.T + 3 * np.eye(4)).astype(np.float64), b)
    for outcome in ("stored", "hit"):  # the second run loads what the first one stored
        out = tmp_path / f"{outcome}.npy"
        run = subprocess.run([HLOGEN, "run", "-v", module, "--input", f"@{tmp_path / 'a.npy'}",
                              "--input", f"@{tmp_path / 'b.npy'}", "--output", f"@{out}"],
                             capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr
        np.testing.assert_allclose(np.load(out), expected, rtol=1e-5, atol=1e-6)
    assert "loaded from the cache" in run.stderr, run.stderr
