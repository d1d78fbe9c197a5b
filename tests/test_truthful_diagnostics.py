"""Diagnostics that tell the truth (issue 24): `--explain` names the op where a subnormal
is flushed, judged by each op's own values; loaded modules (what jax writes) get the
XLA-semantics rewrites built ones get, so that `--check-interpret` raises no false alarm.
Modules are written by jax in the test; results are compared with jax's own."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax

import hlogen as hg
from hlogen import ops, passes, rewrites
from hlogen.differential.near import Tolerance
from hlogen.differential.origin import find_origin
from hlogen.runtime import pjrt

HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")


@pytest.fixture(autouse=True, scope="module")
def _hlogen_starts_the_cpu_backend():
    """jax.jit below would start the CPU backend with jax's one device; started by hlogen
    first, it has hlogen's (the replica tests of other files, run later, need them)."""
    pjrt.client("cpu")


def hlogen(*args, cwd=None):
    return subprocess.run([str(HLOGEN), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


# -- --explain ------------------------------------------------------------------------------

def chain(x, y, z):
    a = jnp.sin(x) + 1
    b = a * y  # XLA CPU flushes this subnormal product to zero
    return b * z


def test_explain_blames_the_op_that_flushed_a_subnormal_in_a_jax_module(tmp_path):
    spec = jax.ShapeDtypeStruct((4,), jnp.float32)
    path = tmp_path / "chain.mlir"
    path.write_text(jax.jit(chain).lower(spec, spec, spec).as_text())
    flushed_line = next(i for i, line in enumerate(path.read_text().splitlines(), 1)
                        if "stablehlo.multiply" in line)
    run = hlogen("run", path, "--check-interpret", "--explain", "--input", "4xf32=1,2,3,4",
                 "--input", "4xf32=1e-39", "--input", "4xf32=1e38")
    assert run.returncode == 1, run.stderr
    # with run's --atol (1e-6) the flushed 1.8e-39 would pass, and b * z be blamed
    assert f"explain: born at {path}:{flushed_line}:" in run.stdout, run.stdout
    assert "stablehlo.multiply: differs, given the reference's values" in run.stdout


def test_find_origin_judges_each_op_by_its_own_values():
    b = hg.Builder("chain")
    x, y, z = (b.parameter(hg.f32[4], n) for n in "xyz")
    a = ops.add(ops.sin(x), b.constant(np.float32(1)), broadcast_dimensions=())
    flushed = ops.mul(a, y)  # FLUSHED
    comp = b.build(ops.mul(flushed, z))
    args = [np.float32([1, 2, 3, 4]), np.full(4, 1e-39, np.float32), np.full(4, 1e38, np.float32)]
    found = find_origin(comp, args, "cpu", "interpret", Tolerance(1e-6, 1e-5))
    assert found is not None and found.op == "stablehlo.multiply"
    line = next(i for i, text in enumerate(pathlib.Path(__file__).read_text().splitlines(), 1)
                if text.endswith("# FLUSHED"))
    assert f"test_truthful_diagnostics.py:{line}:" in found.location
    assert found.test.tolist() == [0] * 4  # XLA CPU flushes the subnormal operand
    # the reference's value: the operands both sides were given, multiplied
    assert found.reference == pytest.approx(found.operands[0] * found.operands[1], rel=1e-6)
    assert found.reference[0] == pytest.approx((np.sin(1.0) + 1) * 1e-39, rel=1e-5)
    # the multiply by z only passes it on (1.8e-39 -> 0 becomes 1.8e-1 -> 0)
    (passed,) = found.amplified_by
    assert passed.op == "stablehlo.multiply" and passed.ulps_out > 1e9
    # values within a few ULP of each other are no divergence (normal inputs agree)
    ones = np.ones(4, np.float32)
    assert find_origin(comp, [args[0], ones, ones], "cpu", "interpret") is None


# -- loaded modules get XLA's semantics ---------------------------------------------------------

X = np.arange(6, dtype=np.float32)
WINDOWS = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(),
                                      scatter_dims_to_operand_dims=(0,))
SLICES = lax.GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,))


def unsigned_and_windows(x, start, small, starts):
    """XLA clamps an unsigned start of 2**31 to the end (the interpreter reads it as a
    negative number); a scatter window partly out of bounds is skipped whole."""
    return (lax.dynamic_slice(x, (start,), (2,)),
            lax.dynamic_update_slice(x, jnp.full(2, -1.0), (start,)),
            lax.dynamic_slice(x, (small,), (3,)),
            lax.gather(x, starts, SLICES, (2,), mode=lax.GatherScatterMode.CLIP),
            lax.scatter_add(x, jnp.array([[5], [1]], jnp.int32), jnp.ones((2, 2), jnp.float32),
                            WINDOWS, mode=lax.GatherScatterMode.FILL_OR_DROP))


ARGS = (X, np.uint32(2**31), np.uint8(200), np.array([[2**31], [1]], np.uint32))


def test_check_interpret_agrees_with_jax_on_unsigned_indices_and_partial_windows(tmp_path):
    path = tmp_path / "indices.mlir"
    path.write_text(jax.jit(unsigned_and_windows).lower(*ARGS).as_text())
    out = tmp_path / "out.npz"
    run = hlogen("run", path, "--check-interpret", "--input", "6xf32=0,1,2,3,4,5",
                 "--input", "u32=2147483648", "--input", "u8=200",
                 "--input", "2x1xu32=2147483648,1", "--output", out)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "differ" not in run.stdout
    with np.load(out) as saved:
        for i, want in enumerate(jax.jit(unsigned_and_windows)(*ARGS)):
            np.testing.assert_array_equal(saved[f"result_{i}"], want)


def _rewrite(module) -> int:
    return rewrites.rewrite_module(module, rewrites.XLA_SEMANTICS)


def test_loaded_modules_are_rewritten_once_and_built_ones_not_at_all():
    loaded = passes.run(hg.load(jax.jit(unsigned_and_windows).lower(*ARGS).as_text()), "legalize")
    # three starts of unsigned types, one gather of them, one scatter's windows
    assert _rewrite(loaded.module) == 5
    assert _rewrite(loaded.module) == 0
    assert _rewrite(passes.run(hg.load(loaded.as_text()), "legalize").module) == 0
    b = hg.Builder("built")
    x, start = b.parameter(hg.f32[6], "x"), b.parameter(hg.u32[()], "start")
    starts, updates = b.parameter(hg.u32[2, 1], "starts"), b.parameter(hg.f32[2, 2], "u")
    built = b.build(
        ops.dynamic_slice(x, [start], [2]),
        ops.dynamic_update_slice(x, ops.dynamic_slice(x, [start], [2]), [start]),
        ops.gather(x, starts, offset_dims=[1], collapsed_slice_dims=[], start_index_map=[0],
                   index_vector_dim=1, slice_sizes=[2]),
        ops.scatter(x, starts, updates, lambda p, q: p + q, update_window_dims=[1],
                    inserted_window_dims=[], scatter_dims_to_operand_dims=[0], index_vector_dim=1),
        ops.population_count(b.parameter(hg.s4[3], "bits")))
    assert _rewrite(passes.run(built, "legalize").module) == 0


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_a_loaded_scatter_of_unsigned_indices_follows_xla(backend):
    # jax converts a scatter's unsigned indices itself; a module may not: ui32 by hand
    # (2**32 - 1: XLA skips its window, the interpreter would read -1 and update x[0])
    text = jax.jit(unsigned_and_windows).lower(*ARGS).as_text()
    comp = hg.load(text.replace("dense<[[5], [1]]> : tensor<2x1xi32>",
                                "dense<[[4294967295], [1]]> : tensor<2x1xui32>")
                   .replace("tensor<2x1xi32>, tensor<2x2xf32>", "tensor<2x1xui32>, tensor<2x2xf32>"))
    got = hg.compile(comp, backend=backend)(*ARGS)
    np.testing.assert_array_equal(got[4], jax.jit(unsigned_and_windows)(*ARGS)[4])


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_a_loaded_population_count_of_s4_counts_its_four_bits(backend):
    values = np.array([-1, 7, -8, 0], ml_dtypes.int4)
    comp = hg.load(jax.jit(lax.population_count).lower(values).as_text())
    want = [bin(int(v) & 0xF).count("1") for v in values]  # the spec: the bits of the type
    np.testing.assert_array_equal(np.asarray(hg.compile(comp, backend=backend)(values)).astype(int),
                                  want)


LOGISTIC_F8 = """func.func @main(%x: tensor<25xf8E4M3FN>) -> tensor<25xf8E4M3FN> {
  %0 = stablehlo.logistic %x : tensor<25xf8E4M3FN>
  return %0 : tensor<25xf8E4M3FN>
}"""


def test_a_loaded_function_of_f8_is_computed_in_f32_on_both_backends():
    # as XLA CPU computes it (the interpreter's own f8e4m3fn logistic differs on 10 of these)
    x = np.linspace(-3, 3, 25).astype(ml_dtypes.float8_e4m3fn)
    want = (1 / (1 + np.exp(-x.astype(np.float32)))).astype(ml_dtypes.float8_e4m3fn)
    comp = hg.load(LOGISTIC_F8)
    for backend in ("cpu", "interpret"):
        np.testing.assert_array_equal(hg.compile(comp, backend=backend)(x), want)
