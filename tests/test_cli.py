"""The command line: emit, run, devices; exit codes 0 / 1 / 2 and their messages."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest
from click.testing import CliRunner

import hlogen as hg
from hlogen_cli.main import main

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
ELEMENTWISE = str(SAMPLES / "elementwise.py")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "executable-cache"))


def hlogen(*args, cwd=None):
    if cwd is None:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    previous = pathlib.Path.cwd()
    os.chdir(cwd)
    try:
        return CliRunner().invoke(main, list(args), catch_exceptions=False)
    finally:
        os.chdir(previous)


def test_emit_every_function_to_a_directory(tmp_path):
    (tmp_path / "out").mkdir()  # emit writes into a folder that exists
    result = hlogen("emit", ELEMENTWISE, "-o", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert "integer_division.mlir" in written and "gelu_like.mlir" in written
    comp = hg.load(tmp_path / "out" / "integer_division.mlir")
    assert comp.result_shapes == [hg.s32[4], hg.s32[4]]


@pytest.mark.parametrize("fmt", ["text", "bytecode", "portable"])
def test_emit_one_function_in_each_format(fmt, tmp_path):
    out = tmp_path / "gelu.bin"
    args = ["emit", ELEMENTWISE, "--function", "gelu_like", "-o", str(out), "--format", fmt]
    if fmt == "portable":
        args += ["--target-version", "1.0.0"]
    assert hlogen(*args).exit_code == 0
    x = np.linspace(-2, 2, 8).astype(np.float32)
    np.testing.assert_allclose(hg.compile(hg.load(out))(x), x * 0.5 * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2))), rtol=1e-5)


def test_emit_to_stdout_with_a_pipeline():
    result = hlogen("emit", ELEMENTWISE, "--function", "gelu_like", "-o", "-", "--pipeline", "default")
    assert result.exit_code == 0
    assert "stablehlo." in result.output and "chlo." not in result.output


def test_emit_writes_into_the_current_directory(tmp_path):
    result = hlogen("emit", ELEMENTWISE, "--function", "shifts", cwd=tmp_path)
    assert result.exit_code == 0
    assert result.output.startswith("shifts.mlir: shifts(a: s8[4], n: s8[4])")


def test_run_a_python_file_with_literal_inputs():
    result = hlogen("run", ELEMENTWISE, "--function", "integer_division",
                    "--input", "4xs32=7,-7,-2147483648,5", "--input", "4xi32=2,0,-1,0")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "result[0]: s32[4]", "[          3          -1 -2147483648          -1]",
        "result[1]: s32[4]", "[ 1 -7  0  5]"]


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_run_an_mlir_file_with_npy_and_npz_inputs(backend, tmp_path):
    hlogen("emit", str(SAMPLES / "broadcasting.py"), "--function", "matrix_plus_vector", "-o", str(tmp_path / "m.mlir"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.save(tmp_path / "x.npy", x)
    np.savez(tmp_path / "v.npz", v=np.array([7, 8, 9], np.float32))
    out = tmp_path / "out.npz"
    result = hlogen("run", str(tmp_path / "m.mlir"), "--input", f"@{tmp_path / 'x.npy'}",
                    "--input", str(tmp_path / "v.npz"), "--backend", backend, "--output", str(out),
                    "--repeat", "3")
    assert result.exit_code == 0, result.output
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["result_0"], x + [7, 8, 9])
    assert "3 runs on" in result.output


def test_run_fills_an_array_from_one_value_and_reads_scalars():
    result = hlogen("run", ELEMENTWISE, "--function", "clamp_and_select",
                    "--input", "5xf32=3", "--input", "f32=0", "--input", "f32=1.5")
    assert result.exit_code == 0, result.output
    assert "[1.5 1.5 1.5 1.5 1.5]" in result.output


@pytest.mark.parametrize("args,message", [
    (["run", "missing.py"], "missing.py: no such file"),
    (["run", "missing.mlir"], "missing.mlir: no such file"),
    (["run", ELEMENTWISE], "defines 9 functions"),
    (["run", ELEMENTWISE, "--function", "nope"], "no @hg.function named 'nope'"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1,2,3"], "needs 4 values"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xq8=1"], "unknown element type 'q8'"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1,2,3,x"], "'x' is not a whole number"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1,2,3,400"], "not representable as s8"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1"], "takes 2 argument(s)"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1", "--input", "4xf32=1"],
     "parameter 'n' of shifts expects s8[4]"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "nonsense"], "expected SHAPExTYPE=VALUES"),
    (["emit", ELEMENTWISE, "--pipeline", "optimize", "-o", "-", "--function", "shifts"], "unknown pipeline"),
    (["emit", ELEMENTWISE, "--target-version", "1.0.0"], "--format portable only"),
])
def test_bad_input_exits_2_with_a_message(args, message):
    result = hlogen(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_errors_in_sources_name_file_line_and_column(tmp_path):
    bad_py = tmp_path / "bad.py"
    bad_py.write_text("import hlogen as hg\nfrom hlogen import ops\n\n@hg.function\n"
                      "def f(x: hg.f32[2], y: hg.s32[2]):\n    return ops.add(x, y)\n")
    result = hlogen("emit", str(bad_py))
    assert result.exit_code == 2
    assert "add: operands must have the same element type" in result.output
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def f(:\n")
    assert f"{syntax}:1:" in hlogen("emit", str(syntax)).output
    bad_mlir = tmp_path / "bad.mlir"
    bad_mlir.write_text("func.func @main() {\n  %0 = stablehlo.add\n}\n")
    result = hlogen("run", str(bad_mlir))
    assert result.exit_code == 2 and f"{bad_mlir}:2:" in result.output


def test_a_failed_run_exits_1(tmp_path):
    mlir = tmp_path / "cc.mlir"
    mlir.write_text("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                    "  %0 = stablehlo.custom_call @no_such_target(%a) : (tensor<2xf32>) -> tensor<2xf32>\n"
                    "  return %0 : tensor<2xf32>\n}\n")
    result = hlogen("run", str(mlir), "--input", "2xf32=1,2", "--backend", "cpu")
    assert result.exit_code == 1 and "cannot compile" in result.output


def test_devices_and_help():
    result = hlogen("devices")
    assert result.exit_code == 0 and result.output.startswith("cpu: ")
    assert "interpret:" in result.output
    for command in ([], ["emit"], ["run"]):
        assert hlogen(*command, "--help").exit_code == 0


# A comparator that is not a strict weak order: the interpreter aborts while sorting.
ALWAYS_TRUE_SORT = """func.func @main(%a: tensor<2000xf32>) -> tensor<2000xf32> {
  %0 = "stablehlo.sort"(%a) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
  }) {dimension = 0 : i64, is_stable = false} : (tensor<2000xf32>) -> tensor<2000xf32>
  return %0 : tensor<2000xf32>
}
"""


def test_a_native_abort_while_running_is_exit_1_not_a_crash(tmp_path):
    # Nothing up front can know that the interpreter aborts (it depends on the values).
    path = tmp_path / "sort.mlir"
    path.write_text(ALWAYS_TRUE_SORT)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random(2000).astype(np.float32))
    result = hlogen("run", str(path), "--backend", "interpret", "--input", f"@{tmp_path / 'x.npy'}",
                    cwd=tmp_path)
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"error: the interpreter aborted (SIGABRT) while running {path}")
    assert not list(tmp_path.glob("core*"))


def test_checks_before_running_are_exit_2(tmp_path):
    path = tmp_path / "rng.mlir"
    path.write_text("func.func @main(%a: tensor<f32>) -> tensor<2xf32> {\n"
                    "  %s = stablehlo.constant dense<2> : tensor<1xi64>\n"
                    "  %0 = stablehlo.rng %a, %a, %s, distribution = UNIFORM : "
                    "(tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<2xf32>\n"
                    "  return %0 : tensor<2xf32>\n}\n")
    result = hlogen("run", str(path), "--backend", "interpret", "--input", "f32=1")
    assert result.exit_code == 2
    assert result.output.startswith(f"error: {path}:3:8: the reference interpreter cannot run "
                                    f"stablehlo.rng")
    result = hlogen("run", str(path), "--backend", "cpu", "--input", "f32=1")
    assert result.exit_code == 0 and "[1. 1.]" in result.output
