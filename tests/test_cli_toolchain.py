"""The toolchain commands through click's runner: emit --force, opt, run's options
(input forms, --check-interpret, --explain, --expected-output, --output), compile,
cache, samples, --version, completion, --debug; each error path and exit code."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from click.testing import CliRunner

import hlogen as hg
from hlogen_cli.main import main

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
ELEMENTWISE = str(SAMPLES / "elementwise.py")

# XLA CPU flushes subnormal results to zero, the interpreter does not: a divergence
# at the multiply (op 1 of @main) when a = b = 1e-20.
SUBNORMAL = """func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.add %a, %b : tensor<2xf32>
  %1 = stablehlo.multiply %0, %b : tensor<2xf32>
  %2 = stablehlo.add %1, %1 : tensor<2xf32>
  return %2 : tensor<2xf32>
}
"""
ERF = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = chlo.erf %x : tensor<3xf32> -> tensor<3xf32>
  %1 = stablehlo.add %0, %0 : tensor<3xf32>
  %2 = stablehlo.add %0, %0 : tensor<3xf32>
  %3 = stablehlo.multiply %1, %2 : tensor<3xf32>
  return %3 : tensor<3xf32>
}
"""


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def hlogen(*args, input=None):
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# -- emit -----------------------------------------------------------------------------------

def test_emit_never_overwrites_without_force(tmp_path):
    out = tmp_path / "gelu.mlir"
    assert hlogen("emit", ELEMENTWISE, "--function", "gelu_like", "-o", str(out)).exit_code == 0
    out.write_text("mine")
    result = hlogen("emit", ELEMENTWISE, "--function", "gelu_like", "-o", str(out))
    assert result.exit_code == 2
    assert f"{out} exists" in result.output and "--force" in result.output
    assert out.read_text() == "mine"
    result = hlogen("emit", ELEMENTWISE, "--function", "gelu_like", "-o", str(out), "--force")
    assert result.exit_code == 0 and "stablehlo" in out.read_text()


def test_emit_into_a_directory_named_with_a_slash(tmp_path):
    missing = hlogen("emit", ELEMENTWISE, "--function", "shifts", "-o", f"{tmp_path}/new/")
    assert missing.exit_code == 2 and "does not exist (hlogen creates no folders)" in missing.output
    (tmp_path / "new").mkdir()
    result = hlogen("emit", ELEMENTWISE, "--function", "shifts", "-o", f"{tmp_path}/new/")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "new" / "shifts.mlir").is_file()


# -- opt ------------------------------------------------------------------------------------

def test_opt_runs_named_pipelines_on_each_format(tmp_path):
    src = write(tmp_path, "erf.mlir", ERF)
    result = hlogen("opt", src, "--pipeline", "legalize,canonicalize")
    assert result.exit_code == 0, result.output
    assert "chlo." not in result.stdout
    assert re.search(r"stablehlo.multiply (%\w+), \1 :", result.stdout)  # cse merged the adds
    out = tmp_path / "erf.mlirbc"
    assert hlogen("opt", src, "--format", "bytecode", "-o", str(out)).exit_code == 0
    portable = tmp_path / "erf.portable"
    assert hlogen("opt", str(out), "--format", "portable", "-o", str(portable)).exit_code == 0
    x = np.array([-1, 0, 0.5], np.float32)
    np.testing.assert_allclose(hg.compile(hg.load(portable))(x), hg.compile(hg.load(src))(x))


def test_opt_reads_standard_input_and_raw_pipelines(tmp_path):
    result = hlogen("opt", "-", "--mlir-pipeline", "builtin.module(func.func(cse))", input=ERF)
    assert result.exit_code == 0, result.output
    assert "chlo.erf" in result.stdout and re.search(r"stablehlo.multiply (%\w+), \1 :", result.stdout)


def test_opt_prints_the_ir_after_each_pass(tmp_path):
    result = hlogen("opt", write(tmp_path, "erf.mlir", ERF), "--print-ir-after-all")
    assert result.exit_code == 0
    dumps = [line for line in result.stderr.splitlines() if line.startswith("// -----// IR Dump After")]
    assert len(dumps) == 4 and "chlo-legalize-to-stablehlo" in dumps[0] and "cse" in dumps[-1]


@pytest.mark.parametrize("args,message", [
    (["--pipeline", "legalize", "--mlir-pipeline", "builtin.module(cse)"], "give one of them"),
    (["--pipeline", "fast"], "unknown pipeline 'fast'"),
    (["--mlir-pipeline", "cse"], "starts with 'builtin.module('"),
    (["--mlir-pipeline", "builtin.module(no-such-pass)"], "invalid pass pipeline"),
    (["--target-version", "1.0.0"], "--format portable only"),
])
def test_opt_bad_arguments_exit_2(tmp_path, args, message):
    result = hlogen("opt", write(tmp_path, "erf.mlir", ERF), *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_opt_parse_errors_name_the_line_and_column(tmp_path):
    result = hlogen("opt", "-", input="func.func @main() {\n  %0 = stablehlo.bogus\n}\n")
    assert result.exit_code == 2 and "<stdin>:2:" in result.output
    assert hlogen("opt", str(tmp_path / "none.mlir")).exit_code == 2


# -- run: input forms ---------------------------------------------------------------------

def test_run_takes_nested_literals_and_raw_files(tmp_path):
    np.arange(3, dtype="<f4").tofile(tmp_path / "v.bin")
    result = hlogen("run", str(SAMPLES / "broadcasting.py"), "--function", "matrix_plus_vector",
                    "--input", "2x3xf32=[[1,2,3],[4,5,6]]", "--input", f"3xf32=@{tmp_path / 'v.bin'}")
    assert result.exit_code == 0, result.output
    assert "[[1. 3. 5.]\n [4. 6. 8.]]" in result.output
    result = hlogen("run", str(SAMPLES / "broadcasting.py"), "--function", "matrix_plus_vector",
                    "--input", "2x3xf32=[1 2 3][4 5 6]", "--input", "3xf32=0")
    assert "[[1. 2. 3.]\n [4. 5. 6.]]" in result.output


@pytest.mark.parametrize("inputs,message", [
    (["2x3xf32=[1 2 3][4 5 6"], "unbalanced brackets"),
    (["2x3xf32=1", "3xf32=@nowhere.bin"], "cannot read nowhere.bin"),
    ([], "missing --input for parameter 0 'x' (f32[2,3]), 1 'v' (f32[3])"),
    (["2x3xf32=1"], "missing --input for parameter 1 'v' (f32[3])"),
    (["2x3xf32=1", "3xf32=1", "s32=4"], "1 --input value(s) too many (the first extra one is s32[])"),
    (["2x3xf32=1", "3xs32=1"], "parameter 'v' of matrix_plus_vector expects f32[3]"),
])
def test_run_input_messages_name_the_parameter(inputs, message):
    args = [a for i in inputs for a in ("--input", i)]
    result = hlogen("run", str(SAMPLES / "broadcasting.py"), "--function", "matrix_plus_vector", *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_unnamed_parameters_are_arg0_arg1(tmp_path):
    result = hlogen("run", write(tmp_path, "s.mlir", SUBNORMAL), "--input", "2xf32=1")
    assert result.exit_code == 2
    assert "missing --input for parameter 1 'arg1' (f32[2])" in result.output


# -- run: comparisons and outputs ---------------------------------------------------------

def test_expected_output_match_and_mismatch(tmp_path):
    base = ["run", ELEMENTWISE, "--function", "integer_division",
            "--input", "4xs32=7,-7,-2147483648,5", "--input", "4xs32=2,0,-1,0"]
    ok = hlogen(*base, "--expected-output", "4xs32=3,-1,-2147483648,-1",
                "--expected-output", "4xs32=[1 -7 0 5]")
    assert ok.exit_code == 0, ok.output
    assert "result[1]: all 4 elements match" in ok.output
    bad = hlogen(*base, "--expected-output", "4xs32=3,-1,-2147483648,-2",
                 "--expected-output", "4xs32=1,-7,0,5")
    assert bad.exit_code == 1
    assert "result[0]: 1 of 4 elements differ (XLA's Near, abs 1e-06 and rel 1e-05); largest errors: abs 1, rel 0.5" in bad.output
    assert "at [3]: got -1, expected -2 (abs error 1, rel error 0.5" in bad.output
    wrong_type = hlogen(*base, "--expected-output", "4xf32=0", "--expected-output", "4xs32=1,-7,0,5")
    assert wrong_type.exit_code == 1 and "the results' shapes differ: s32[4] against f32[4]" in wrong_type.output
    count = hlogen(*base, "--expected-output", "4xs32=0")
    assert count.exit_code == 2 and "has 2 result(s) (s32[4], s32[4]), got 1" in count.output
    literal = hlogen(*base, "--expected-output", "4xs32=1,2")
    assert literal.exit_code == 2 and literal.output.startswith("error: --expected-output '4xs32=1,2'")


def test_expected_output_tolerances_and_npz_by_name(tmp_path):
    x = np.linspace(-2, 2, 8).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    import math
    want = (x * 0.5 * (1 + np.vectorize(math.erf)(x / np.sqrt(2)))).astype(np.float32)
    np.savez(tmp_path / "want.npz", result_0=want + np.float32(1e-3))
    base = ["run", ELEMENTWISE, "--function", "gelu_like", "--input", f"@{tmp_path / 'x.npy'}",
            "--expected-output", str(tmp_path / "want.npz")]
    assert hlogen(*base).exit_code == 1
    assert hlogen(*base, "--atol", "2e-3").exit_code == 0


def test_check_interpret_agrees(tmp_path):
    result = hlogen("run", ELEMENTWISE, "--function", "gelu_like", "--input", "8xf32=[-2 -1 0 1 2 3 4 5]",
                    "--check-interpret", "--rtol", "1e-5", "--atol", "1e-6")
    assert result.exit_code == 0, result.output
    assert "result[0]: cpu vs interpret: all 8 elements match (XLA's Near, abs 1e-06 and rel 1e-05)" in result.output


def test_check_interpret_explains_the_first_divergence(tmp_path):
    path = write(tmp_path, "subnormal.mlir", SUBNORMAL)
    args = ["run", path, "--input", "2xf32=1e-20,1", "--input", "2xf32=1e-20,2", "--check-interpret",
            "--rtol", "0", "--atol", "0"]
    result = hlogen(*args, "--explain")
    assert result.exit_code == 1, result.output
    assert "cpu vs interpret: 1 of 2 elements differ (XLA's Near, abs 0 and rel 0)" in result.output
    # the first differing element, both values and the inputs there
    assert "at [0]: cpu 0, interpret 4.00000647e-40 (abs error 4.00000647e-40, rel error 1, " \
           "arg0=9.99999968e-21, arg1=9.99999968e-21)" in result.output
    assert f"explain: born at {path}:3:8: stablehlo.multiply: differs, given the reference's " \
        "values of its operands" in result.output
    assert hlogen(*args[:-4], "--atol", "1e-30").exit_code == 0  # a subnormal is within atol


@pytest.mark.parametrize("args,message", [
    (["--explain"], "--explain needs --check-interpret"),
    (["--check-interpret", "--backend", "interpret"], "choose --backend cpu or gpu"),
    (["--output", "out.txt"], "--output 'out.txt': use out.npz"),
    (["--output", "@a.npy", "--output", "@b.npy", "--output", "@c.npy", "--output", "@d.npy"],
     "--output: 4 given, the computation has 3 result(s)"),
])
def test_run_bad_options_exit_2(args, message):
    result = hlogen("run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1", "--input", "4xs8=2", *args)
    assert result.exit_code == 2 and message in result.output, result.output


def test_output_per_result_npy_and_repeat(tmp_path):
    result = hlogen("run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1", "--input", "4xs8=[0 1 7 8]",
                    "--output", f"@{tmp_path / 'left.npy'}", "--output", "-",
                    "--output", f"@{tmp_path / 'logical.npy'}", "--repeat", "4")
    assert result.exit_code == 0, result.output
    np.testing.assert_array_equal(np.load(tmp_path / "left.npy"), np.array([1, 2, -128, 0], np.int8))
    np.testing.assert_array_equal(np.load(tmp_path / "logical.npy"), np.array([1, 0, 0, 0], np.int8))
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".npy") == ["left.npy", "logical.npy"]
    assert "4 runs on cpu: min " in result.stderr and ", median " in result.stderr and ", max " in result.stderr


# -- compile, cache -------------------------------------------------------------------------

def test_compile_hlo_cost_and_executable(tmp_path, cache_dir):
    src = write(tmp_path, "erf.mlir", ERF)
    hlo = hlogen("compile", src)
    assert hlo.exit_code == 0 and hlo.stdout.startswith("HloModule main")
    cost = hlogen("compile", src, "--cost")
    assert cost.exit_code == 0 and "flops: " in cost.stdout and "bytes accessed: 24" in cost.stdout
    out = tmp_path / "erf.hlx"
    result = hlogen("compile", src, "-o", str(out), "-v")
    assert result.exit_code == 0
    assert "compiled for cpu" in result.stderr and "loaded from the cache" in result.stderr
    assert out.stat().st_size > 1000
    info = hlogen("cache", "info")
    assert f"directory: {cache_dir}" in info.output and "valid: 1" in info.output


def test_compile_errors(tmp_path):
    bad = write(tmp_path, "bad.mlir", "func.func @main() {\n  %0 = stablehlo.add\n}\n")
    result = hlogen("compile", bad)
    assert result.exit_code == 2 and f"{bad}:2:" in result.output
    cc = write(tmp_path, "cc.mlir", "func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
               "  %0 = stablehlo.custom_call @no_such_target(%a) : (tensor<2xf32>) -> tensor<2xf32>\n"
               "  return %0 : tensor<2xf32>\n}\n")
    result = hlogen("compile", cc)
    assert result.exit_code == 1 and "cannot compile" in result.output


def test_run_uses_the_cache_and_no_cache_skips_it(tmp_path, cache_dir):
    args = ["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1", "--input", "4xs8=2", "-v"]
    assert "compiled, stored in the cache" in hlogen(*args).stderr
    assert "loaded from the cache" in hlogen(*args).stderr
    assert "cpu: compiled in" in hlogen(*args, "--no-cache").stderr
    cleared = hlogen("cache", "clear")
    assert cleared.output == f"removed 1 entry from {cache_dir}\n"
    assert "entries: 0" in hlogen("cache", "info").output


# -- samples, version, completion, debug ----------------------------------------------------

def test_samples_list_show_and_run():
    listing = hlogen("samples")
    assert listing.exit_code == 0
    lines = listing.output.splitlines()
    assert any(line.startswith("elementwise.gelu_like ") for line in lines)
    assert len(lines) > 20
    show = hlogen("samples", "show", "gelu_like")
    assert show.exit_code == 0 and show.output.startswith("// ") and "chlo.erf" in show.output
    ran = hlogen("samples", "run", "elementwise.integer_division", "--backend", "interpret")
    assert ran.exit_code == 0, ran.output
    assert ran.output.startswith("input a: 4xs32=0,1,2,3\ninput b: 4xs32=0,1,2,3\nresult[0]: s32[4]")
    for name, message in (("nope", "no sample named 'nope'"), ("nofile.gelu_like", "no sample file nofile.py")):
        result = hlogen("samples", "show", name)
        assert result.exit_code == 2 and message in result.output


def test_version_completion_and_help():
    assert hlogen("--version").output == f"hlogen, version {hg.__version__}\n"
    script = hlogen("completion", "bash")
    assert script.exit_code == 0 and "_HLOGEN_COMPLETE" in script.output
    for command in ([], ["emit"], ["opt"], ["run"], ["compile"], ["cache"], ["cache", "info"],
                    ["samples"], ["samples", "run"], ["devices"], ["check"], ["completion"]):
        result = hlogen(*command, "--help")
        assert result.exit_code == 0, command
    assert "check " in hlogen("--help").output


def test_debug_shows_the_traceback_and_nothing_else_does():
    plain = hlogen("run", "missing.mlir")
    assert plain.exit_code == 2 and "Traceback" not in plain.output
    debug = hlogen("--debug", "run", "missing.mlir")
    assert debug.exit_code == 2 and "Traceback (most recent call last)" in debug.output
    assert debug.output.rstrip().endswith("error: missing.mlir: no such file")
