"""Bounded dynamic dimensions (SetDimensionSize): the seed's example, and each op that
runs on a dynamic dimension against numpy on the data cut to its size, on both backends
(hlogen.dynamism)."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests.helpers import BACKENDS

V = np.arange(1, 11, dtype=np.float32)


def _seed():
    b = hg.Builder("seed")
    v, n = b.parameter(hg.f32[10], "v"), b.parameter(hg.s32[()], "n")
    d = ops.set_dimension_size(v, n, 0)
    total = ops.reduce(d, b.constant(np.float32(0)), lambda x, y: x + y, [0])
    product = ops.reduce(d, b.constant(np.float32(1)), lambda x, y: x * y, [0])
    return b.build(total, product, ops.get_dimension_size(d, 0), d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_seeds_example(backend):
    run = hg.compile(_seed(), backend=backend)
    for size, total, product in ((0, 0, 1), (5, 15, 120), (6, 21, 720), (10, 55, 3628800)):
        got = run(V, np.int32(size))
        assert [float(got[0]), float(got[1]), int(got[2])] == [total, product, size]
        np.testing.assert_array_equal(got[3], V[:size])  # the dynamic result, cut


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [11, -1])
def test_sizes_past_the_bound_are_refused(backend, size):
    with pytest.raises(hg.ExecutionError, match=rf"given size {size}, outside \[0, 10\]"):
        hg.compile(_seed(), backend=backend)(V, np.int32(size))


def test_a_constant_size_past_the_bound_is_a_shape_error():
    b = hg.Builder("c")
    with pytest.raises(hg.ShapeError, match=r"size 11 of dimension 0 of f32\[10\] is outside"):
        ops.set_dimension_size(b.parameter(hg.f32[10]), b.constant(np.int32(11)), 0)


X = np.arange(1, 25, dtype=np.float32).reshape(6, 4) / 7
Y = np.arange(1, 21, dtype=np.float32).reshape(4, 5) / 3


def _dot(lhs, rhs, lc, rc):
    return ops.dot_general(lhs, rhs, {"lhs_contracting_dimensions": (lc,),
                                      "rhs_contracting_dimensions": (rc,)})


# name: (the dimension of x (f32[6, 4]) made dynamic, the op on x, numpy on x cut to its size)
CASES = {
    "elementwise": (0, lambda x: ops.mul(ops.add(x, x), ops.exp(x)), lambda x: (x + x) * np.exp(x)),
    "convert": (1, lambda x: ops.convert_element_type(x, hg.s32), lambda x: x.astype(np.int32)),
    "broadcast_in_dim": (0, lambda x: ops.broadcast_in_dim(x, [2, 6, 4], [1, 2]),
                         lambda x: np.broadcast_to(x, (2,) + x.shape)),
    "reshape": (0, lambda x: ops.reshape(x, [6, 2, 2]), lambda x: x.reshape(len(x), 2, 2)),
    "reshape_minor": (1, lambda x: ops.reshape(x, [6, 1, 4, 1]),
                      lambda x: x.reshape(6, 1, x.shape[1], 1)),
    "transpose": (0, lambda x: ops.transpose(x, [1, 0]), lambda x: x.T),
    "slice": (0, lambda x: ops.slice(x, [1, 0], [5, 4], [2, 1]), lambda x: x[1:5:2]),
    "concatenate": (0, lambda x: ops.concatenate([x, x * 2, x], 0),
                    lambda x: np.concatenate([x, x * 2, x])),
    "concatenate_other_dim": (0, lambda x: ops.concatenate([x, x], 1),
                              lambda x: np.concatenate([x, x], 1)),
    "reduce_sum": (0, lambda x: ops.reduce(x, x.builder.constant(np.float32(0)),
                                           lambda a, b: a + b, [0]), lambda x: x.sum(0)),
    "reduce_max_kept": (1, lambda x: ops.reduce(x, x.builder.constant(np.float32(-np.inf)),
                                                ops.max, [0]), lambda x: x.max(0)),
    "dot_contracting": (1, lambda x: _dot(x, x.builder.constant(Y), 1, 0),
                        lambda x: x @ Y[:x.shape[1]]),
    "dot_free": (0, lambda x: _dot(x, x.builder.constant(Y), 1, 0), lambda x: x @ Y),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_op_on_a_dynamic_dimension(backend, name):
    dimension, fn, reference = CASES[name]
    b = hg.Builder(name)
    x, n = b.parameter(hg.f32[6, 4], "x"), b.parameter(hg.s32[()], "n")
    comp = b.build(fn(ops.set_dimension_size(x, n, dimension)))
    run = hg.compile(comp, backend=backend)
    for size in range(X.shape[dimension] + 1):
        cut = X[:size] if dimension == 0 else X[:, :size]
        want = reference(cut)
        got = run(X, np.int32(size))
        assert got.shape == want.shape, (size, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"size {size}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_without_a_rule_is_refused_naming_it(backend):
    b = hg.Builder("sort")
    x, n = b.parameter(hg.f32[6]), b.parameter(hg.s32[()])
    comp = b.build(ops.sort(ops.set_dimension_size(x, n, 0)))
    with pytest.raises(hg.UnsupportedError, match="stablehlo.sort.*on a dynamic dimension"):
        hg.compile(comp, backend=backend)(X[:, 0], np.int32(3))


SEED_MLIR = """
func.func @main(%v: tensor<10xf32>, %n: tensor<i32>) -> (tensor<f32>, tensor<f32>, tensor<i32>, tensor<?xf32, #stablehlo.bounds<10>>) {
  %d = stablehlo.set_dimension_size %v, %n, dim = 0 : (tensor<10xf32>, tensor<i32>) -> tensor<?xf32, #stablehlo.bounds<10>>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %o = stablehlo.constant dense<1.0> : tensor<f32>
  %s = stablehlo.reduce(%d init: %z) applies stablehlo.add across dimensions = [0] : (tensor<?xf32, #stablehlo.bounds<10>>, tensor<f32>) -> tensor<f32>
  %p = stablehlo.reduce(%d init: %o) applies stablehlo.multiply across dimensions = [0] : (tensor<?xf32, #stablehlo.bounds<10>>, tensor<f32>) -> tensor<f32>
  %g = stablehlo.get_dimension_size %d, dim = 0 : (tensor<?xf32, #stablehlo.bounds<10>>) -> tensor<i32>
  return %s, %p, %g, %d : tensor<f32>, tensor<f32>, tensor<i32>, tensor<?xf32, #stablehlo.bounds<10>>
}
"""

PARAMETER_HLO = """HloModule p, entry_computation_layout={(f32[<=4,3]{1,0}, s32[])->(f32[3]{0}, f32[<=4,3]{1,0})}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  v = f32[<=4,3]{1,0} parameter(0)
  n = s32[] parameter(1)
  d = f32[<=4,3]{1,0} set-dimension-size(v, n), dimensions={0}
  z = f32[] constant(0)
  r = f32[3]{0} reduce(d, z), dimensions={0}, to_apply=add
  ROOT t = (f32[3]{0}, f32[<=4,3]{1,0}) tuple(r, d)
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_bounded_types_load_from_text_bytecode_and_hlo(backend):
    text = hg.load(SEED_MLIR)
    for comp in (text, hg.load(text.to_bytecode())):
        assert [str(s) for s in comp.result_shapes] == ["f32[]", "f32[]", "s32[]", "f32[10]"]
        got = hg.compile(comp, backend=backend)(V, np.int32(6))
        assert [float(got[0]), float(got[1]), int(got[2])] == [21, 720, 6]
        np.testing.assert_array_equal(got[3], V[:6])
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    total, rows = hg.compile(hg.load(PARAMETER_HLO), backend=backend)(x, np.int32(2))
    np.testing.assert_array_equal(total, x[:2].sum(0))  # a bounded parameter: at its bound
    np.testing.assert_array_equal(rows, x[:2])


def test_a_dimension_with_no_bound_is_named():
    with pytest.raises(hg.HlogenError, match=r"dimension 0 of tensor<\?xf32> is dynamic with no "
                                             r"bound"):
        hg.compile(hg.load("func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n"
                           "  return %a : tensor<?xf32>\n}\n"), backend="cpu")


@pytest.mark.parametrize("backend", BACKENDS)
def test_hlogen_run_prints_results_cut_and_refuses_a_size_past_the_bound(backend, tmp_path):
    import subprocess
    import sys
    source = tmp_path / "seed.mlir"
    source.write_text(SEED_MLIR)
    hlogen = [sys.executable, "-m", "hlogen_cli.main"]
    data = "10xf32=" + ",".join(str(i) for i in range(1, 11))
    for size, total, product in ((0, "0.", "1."), (5, "15.", "120."), (6, "21.", "720."),
                                 (10, "55.", "3.6288e+06")):
        done = subprocess.run(hlogen + ["run", str(source), "--backend", backend, "--input", data,
                                        "--input", f"i32={size}"], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.split("\n")
        assert lines[1] == total and lines[3] == product and lines[5] == str(size)
        assert lines[6] == f"result[3]: f32[{size}]"
    saved = tmp_path / "out.npz"  # saved cut as well
    done = subprocess.run(hlogen + ["run", str(source), "--backend", backend, "--input", data,
                                    "--input", "i32=4", "--output", str(saved)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(saved)["result_3"], V[:4])
    done = subprocess.run(hlogen + ["run", str(source), "--backend", backend, "--input", data,
                                    "--input", "i32=11"], capture_output=True, text=True)
    assert done.returncode == 1 and "given size 11, outside [0, 10]" in done.stderr
    assert "Traceback" not in done.stderr


# jax's shape polymorphism as StableHLO's *_dynamic.mlir files have it: a leading i64
# dimension variable, a parameter of unbounded dimension, a shape computed from the variable
UNBOUNDED = """
func.func @main(%n: tensor<i64>, %a: tensor<?x3xf32>) -> (tensor<?x3xf32>, tensor<3xi32>) {
  %0 = stablehlo.convert %n : (tensor<i64>) -> tensor<i32>
  %1 = stablehlo.reshape %0 : (tensor<i32>) -> tensor<1xi32>
  %2 = stablehlo.constant dense<3> : tensor<1xi32>
  %3 = stablehlo.concatenate %1, %2, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %4 = stablehlo.dynamic_iota %3, dim = 0 : (tensor<2xi32>) -> tensor<?x3xi32>
  %5 = stablehlo.exponential %a : tensor<?x3xf32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %6 = stablehlo.reduce(%4 init: %z) applies stablehlo.add across dimensions = [0] : (tensor<?x3xi32>, tensor<i32>) -> tensor<3xi32>
  return %5, %6 : tensor<?x3xf32>, tensor<3xi32>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_unbounded_dimensions_are_refined_from_the_inputs(backend):
    comp = hg.load(UNBOUNDED)
    for rows in (1, 4):
        a = np.linspace(-1, 1, rows * 3, dtype=np.float32).reshape(rows, 3)
        refined = hg.passes.refine(comp, [np.int64(rows), a])
        assert refined.signature().endswith(f"-> (f32[{rows},3], s32[3])"), refined.signature()
        e, s = hg.compile(refined, backend=backend)(np.int64(rows), a)
        np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)
        np.testing.assert_array_equal(s, [rows * (rows - 1) // 2] * 3)


def test_unbounded_dimensions_that_stay_dynamic_are_named():
    comp = hg.load(UNBOUNDED)
    with pytest.raises(hg.ShapeError, match=r"parameter 1 of .* is tensor<\?x3xf32>: an input "
                                            r"of shape \[2, 4\] does not fit it"):
        hg.passes.refine(comp, [np.int64(2), np.zeros((2, 4), np.float32)])
    with pytest.raises(hg.HlogenError, match=r"dimension 0 of tensor<\?x3xf32> is dynamic with "
                                             r"no bound: give inputs whose shapes refine it"):
        hg.compile(comp, backend="interpret")
    shape_from_a_vector = """
func.func @main(%s: tensor<2xi32>) -> tensor<?x?xi32> {
  %0 = stablehlo.dynamic_iota %s, dim = 0 : (tensor<2xi32>) -> tensor<?x?xi32>
  return %0 : tensor<?x?xi32>
}
"""
    with pytest.raises(hg.ShapeError, match=r"the result of stablehlo.dynamic_iota .*\(its shape "
                                            r"is a value\) stays dynamic once refined"):
        hg.passes.refine(hg.load(shape_from_a_vector), [np.array([2, 3], np.int32)])


def test_hlogen_run_refines_from_its_inputs(tmp_path):
    import subprocess
    import sys
    source = tmp_path / "poly.mlir"
    source.write_text(UNBOUNDED)
    hlogen = [sys.executable, "-m", "hlogen_cli.main", "run", str(source)]
    done = subprocess.run(hlogen + ["--input", "i64=2", "--input", "2x3xf32=0"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:4] == ["result[0]: f32[2,3]", "[[1. 1. 1.]", " [1. 1. 1.]]",
                                           "result[1]: s32[3]"], done.stdout
    done = subprocess.run(hlogen, capture_output=True, text=True)
    assert done.returncode == 2 and "dimension 0 of parameter 1 of @main (tensor<?x3xf32>) is " \
        "dynamic with no bound: give one --input per parameter" in done.stderr, done.stderr


def test_only_xla_cpu_whose_dynamic_results_were_measured_runs_them():
    from hlogen import backends
    assert "stablehlo.set_dimension_size" not in backends.CPU.refuses
    assert "stablehlo.set_dimension_size" not in backends.INTERPRET.refuses
    assert "not measured" in backends.GPU.refuses["stablehlo.set_dimension_size"].why


@pytest.mark.parametrize("backend", BACKENDS)
def test_bounded_types_load_from_an_hlo_proto(backend):
    from hlogen.runtime import _jaxlib
    proto = _jaxlib.hlo_text_to_proto(PARAMETER_HLO)
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    total, rows = hg.compile(hg.load(proto), backend=backend)(x, np.int32(3))
    np.testing.assert_array_equal(total, x[:3].sum(0))
    np.testing.assert_array_equal(rows, x[:3])


def test_hlogen_compare_agrees_on_a_dynamic_module(tmp_path):
    import subprocess
    import sys
    source = tmp_path / "seed.mlir"
    source.write_text(SEED_MLIR)
    done = subprocess.run([sys.executable, "-m", "hlogen_cli.main", "compare", str(source),
                           "--input", "10xf32=" + ",".join(str(i) for i in range(1, 11)),
                           "--input", "i32=6"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test cpu and reference interpret agree" in done.stdout
    assert "result 3 f32[6]: all 6 elements match" in done.stdout


def test_xla_refuses_dynamic_dimensions_on_several_replicas():
    b = hg.Builder("replicas")
    x, n = b.parameter(hg.f32[4]), b.parameter(hg.s32[()])
    with pytest.raises(hg.UnsupportedError, match=r"run on one replica"):
        hg.compile(b.build(ops.set_dimension_size(x, n, 0)), backend="cpu", num_replicas=2)
