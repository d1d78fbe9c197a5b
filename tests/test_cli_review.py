"""What the review of the command line as pip's (issue 25, item 6) found, as a new user
meets it: the installed `hlogen` run as a subprocess. Each test failed before its fix;
what is checked is the exit status, the message (one paragraph naming the argument) and
that no traceback is printed."""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import subprocess
import sys

import pytest

HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")
SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
SQUARE = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %x, %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


@pytest.fixture
def square(tmp_path):
    path = tmp_path / "square.mlir"
    path.write_text(SQUARE)
    return path


def hlogen(*args, cwd=None):
    environment = {**os.environ, "HLOGEN_CACHE_DIR": str(pathlib.Path(cwd or ".") / "cache")}
    return subprocess.run([str(HLOGEN), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=environment)


def refused(result, *words) -> None:
    """Exit 2 with one line, `error: ...`, that holds each of `words`; no traceback."""
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


@pytest.mark.parametrize("command", [["compile"], ["graph", "--optimized", "-o", "g.html"]])
def test_what_compiles_with_xla_refuses_the_interpreter(square, command):
    """`compile --backend interpret` was an internal error (the interpreter has no
    optimized HLO); `graph --optimized --backend interpret` drew jax's default device's
    optimized HLO and called it the interpreter's."""
    result = hlogen(command[0], square, *command[1:], "--backend", "interpret",
                    cwd=square.parent)
    refused(result, "--backend interpret: the reference interpreter compiles nothing")
    assert not (square.parent / "g.html").exists()


def test_compare_and_bisect_take_plugin_as_every_command_with_a_backend_does(square):
    """--test and --reference name any backend, a plugin loaded by path too (docs/plugins.md:
    `--plugin PATH.so[:NAME]` on any command); compare and bisect had no --plugin."""
    try:
        library = importlib.metadata.distribution("xla-cpu-pjrt").locate_file(
            "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("xla-cpu-pjrt (the test extra) is not installed")
    result = hlogen("compare", square, "--plugin", f"{library}:by_path", "--test", "by_path",
                    "--reference", "cpu", "--input", "4xf32=1,-2,3e10,0.5", cwd=square.parent)
    assert result.returncode == 0, result.stderr
    assert "test by_path and reference cpu agree" in result.stdout
    assert "all 4 elements match" in result.stdout
    assert "--plugin PATH.so[:NAME]" in hlogen("bisect", "--help").stdout


@pytest.mark.parametrize("args,option", [
    (["run", "{m}", "--zero-inputs", "--backend", "nope"], "--backend"),
    (["compile", "{m}", "--backend", "nope"], "--backend"),
    (["compare", "{m}", "--test", "nope"], "--test"),
    (["compare", "{m}", "--reference", "hlo:nope"], "--reference"),
    (["check", "{m}", "--backend", "nope"], "--backend"),
])
def test_an_unknown_backend_is_named_with_its_option(square, args, option):
    """The message named no option, and offered Python's None ("or None for jax's default
    device"), the library's words."""
    result = hlogen(*[str(square) if a == "{m}" else a for a in args], cwd=square.parent)
    refused(result, f"{option} nope: the backend must be one of cpu, gpu, interpret",
            "hlogen devices lists them")
    assert "None" not in result.stderr


def test_check_of_every_backend_says_which_plugin_it_could_not_run(tmp_path):
    """`check --backend all` ran the others and reported green, never saying that the
    plugin given with --plugin was left out (docs/plugins.md: one that fails to load "is listed as
    not available, with why, and the command goes on")."""
    module = tmp_path / "add.mlir"
    module.write_text("// RUN: stablehlo-translate --interpret %s\n"
                      "func.func @main() {\n"
                      "  %0 = stablehlo.constant dense<[1.0, 2.5]> : tensor<2xf32>\n"
                      "  %1 = stablehlo.add %0, %0 : tensor<2xf32>\n"
                      "  check.expect_eq_const %1, dense<[2.0, 5.0]> : tensor<2xf32>\n"
                      "  func.return\n}\n")
    missing = tmp_path / "libmissing_pjrt.so"
    result = hlogen("check", module, "--backend", "all", "-j", "1", "--plugin", missing,
                    cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "interpret: 1 pass" in result.stdout and "cpu: 1 pass" in result.stdout
    assert f"missing_pjrt: not available, not run: {missing}: no such file" in result.stderr


@pytest.mark.parametrize("command,metavars", [
    ("run", ["--rtol R", "--atol A", "--replicas N", "--num-processes P", "--process-id I",
             "--repeat N"]),
    ("check", ["-j, --jobs N", "--timeout SECONDS", "--batch N"]),
    ("compare", ["--abs A", "--rel R", "--ulp N", "--iterations N", "--shown K"]),
    ("bisect", ["--abs A", "--rel R"]),
    ("view", ["--port P"]),
])
def test_help_names_values_as_the_readme_s_synopsis_does(command, metavars):
    """--help said FLOAT RANGE and INTEGER RANGE where the synopsis (docs/reference.md) and the
    option's own help say N, P, R, ... (and SECONDS, as run's and compare's --timeout)."""
    text = hlogen(command, "--help").stdout
    assert "RANGE" not in text
    for metavar in metavars:
        assert f"  {metavar} " in text, metavar


def test_compile_s_help_says_when_it_prints_the_hlo(square):
    """--hlo's help said it is the default without -o or --cost; --memory leaves it out
    too."""
    assert "(the default without -o, --cost or --memory)" in \
        " ".join(hlogen("compile", "--help").stdout.split())
    memory = hlogen("compile", square, "--memory", cwd=square.parent)
    assert memory.returncode == 0, memory.stderr
    assert "HloModule" not in memory.stdout and "arguments:" in memory.stdout


def test_cache_s_help_names_the_folder_it_uses(tmp_path):
    """The help said the default is ~/.cache/hlogen; where XDG_CACHE_HOME is set, the
    cache is there."""
    environment = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    environment.pop("HLOGEN_CACHE_DIR", None)
    info = subprocess.run([str(HLOGEN), "cache", "info"], capture_output=True, text=True,
                          env=environment, timeout=300)
    assert info.returncode == 0 and f"directory: {tmp_path / 'hlogen'}\n" in info.stdout
    assert "$HLOGEN_CACHE_DIR, else $XDG_CACHE_HOME/hlogen, else ~/.cache/hlogen" in \
        " ".join(hlogen("cache", "--help").stdout.split())


def test_view_s_help_says_function_picks_a_module_s_function_too():
    """view reads IN as graph does (a module's public function by --function too); its
    help spoke of .py files only."""
    assert "or the public function of a module (default: main)" in \
        " ".join(hlogen("view", "--help").stdout.split())


def test_graph_refuses_a_backend_it_would_not_use(square):
    """Without --optimized, graph draws the module as written: --backend was ignored
    without a word (--xla-flag, the other option of the compile, is refused)."""
    result = hlogen("graph", square, "-o", "g.html", "--backend", "cpu", cwd=square.parent)
    refused(result, "--backend cpu chooses where XLA compiles: it goes with --optimized")
    assert not (square.parent / "g.html").exists()


@pytest.mark.parametrize("args,said", [
    (["run", "{m}", "--zero-inputs", "--xla-flag", "xla_cpu_enable_fast_mat=true"],
     "--xla-flag xla_cpu_enable_fast_mat=true: no XLA option named 'xla_cpu_enable_fast_mat'; "
     "the closest known: xla_cpu_enable_fast_math"),
    (["compile", "{m}", "--xla-flag", "xla_cpu_enable_fast_math"],
     "--xla-flag xla_cpu_enable_fast_math: an XLA option is NAME=VALUE"),
    (["compare", "{m}", "--reference", "cpu", "--reference-flag", "xla_cpu_enable_fast_math=maybe"],
     "--reference-flag xla_cpu_enable_fast_math=maybe: XLA option xla_cpu_enable_fast_math "
     "takes true or false, got 'maybe'"),
    (["check", "{m}", "--backend", "cpu", "--xla-flag", "xla_backend_optimization_levl=1"],
     "--xla-flag xla_backend_optimization_levl=1: no XLA option named"),
    (["graph", "{m}", "--optimized", "-o", "g.html", "--xla-flag", "x=1"],
     "--xla-flag x=1: no XLA option named 'x'"),
])
def test_a_bad_xla_option_is_named_with_the_option_it_came_in(square, args, said):
    """compare takes XLA's options by three options (--xla-flag, --test-flag,
    --reference-flag); a bad one was not said to be from any of them."""
    result = hlogen(*[str(square) if a == "{m}" else a for a in args], cwd=square.parent)
    refused(result, said)


PRINTS = '''import hlogen as hg

print("printed while imported")


@hg.function
def double(x: hg.f32[2]):
    return x + x
'''


def test_emit_to_dev_stdout_keeps_standard_output_the_module(tmp_path):
    """-o /dev/stdout (docs/reference.md: written in place) put emit's "PATH: signature" line and the
    user's prints on standard output with the module: a pipe got a module that does not
    parse, a file redirected to (>) one whose start was written over."""
    (tmp_path / "prints.py").write_text(PRINTS)
    piped = hlogen("emit", "prints.py", "-o", "/dev/stdout", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.startswith("module @double") and "printed" not in piped.stdout
    assert "/dev/stdout: double(x: f32[2]) -> (f32[2])" in piped.stderr
    assert "printed while imported" in piped.stderr
    with open(tmp_path / "double.txt", "w") as redirected:
        done = subprocess.run([str(HLOGEN), "emit", "prints.py", "-o", "/dev/stdout"],
                              stdout=redirected, stderr=subprocess.PIPE, cwd=tmp_path,
                              timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "double.txt").read_text() == piped.stdout


@pytest.mark.parametrize("args,other", [
    (["run", "{m}", "--input", "4xf32=1", "--seed", "3"], "--input"),
    (["compare", "{m}", "--zero-inputs", "--large-range"], "--zero-inputs"),
])
def test_seed_with_inputs_given_is_refused_for_what_it_is(square, args, other):
    """--seed or --large-range beside --input or --zero-inputs was told to give
    --random-inputs too, which those options refuse in turn."""
    result = hlogen(*[str(square) if a == "{m}" else a for a in args], cwd=square.parent)
    refused(result, f"--seed and --large-range choose random inputs: not with {other}")
    assert "give --random-inputs too" not in result.stderr


@pytest.mark.parametrize("option", ["--backend", "--test", "--reference"])
def test_tab_completes_every_option_that_names_a_backend(option):
    """--backend completed the backends' names; compare's --test and --reference, which
    take the same names, completed nothing."""
    command = "run" if option == "--backend" else "compare"
    environment = {**os.environ, "_HLOGEN_COMPLETE": "bash_complete",
                   "COMP_WORDS": f"hlogen {command} m.mlir {option} ", "COMP_CWORD": "4"}
    done = subprocess.run([str(HLOGEN)], capture_output=True, text=True, env=environment,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert {"plain,cpu", "plain,interpret"} <= set(done.stdout.split())


def test_emit_and_opt_take_format_and_target_version_as_one_option(tmp_path):
    """--format and --target-version were declared by emit and again by opt, opt's with
    less help ("Output format."); one declaration (options.format_options) serves both."""
    def described(command):
        text = hlogen(command, "--help").stdout
        return text[text.index("  --format"):text.index("(default: the current one).")]
    assert described("emit") == described("opt")
    assert "versioned StableHLO portable artifact" in described("opt")
    (tmp_path / "m.mlir").write_text(SQUARE)
    refused(hlogen("opt", "m.mlir", "--target-version", "1.0.0", cwd=tmp_path),
            "--target-version applies to --format portable only")


def test_emit_of_several_files_to_standard_output_says_what_to_do():
    """-o - of several files said "choose with --function", which refuses several files
    in turn."""
    result = hlogen("emit", SAMPLES / "elementwise.py", SAMPLES / "mlp.py", "-o", "-")
    refused(result, "-o - writes one function; 2 files define",
            "give one FILE and choose with --function")
