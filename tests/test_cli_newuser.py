"""The command line as a new user meets it (issue 17): the installed `hlogen` run as a
subprocess from a folder of their own, which holds a clone (`hlogen/`), a `numpy.py`
and a `jax.py`, with their own modules and mistakes. Values are checked against numpy."""
from __future__ import annotations

import importlib
import json
import os
import pathlib
import re
import stat
import subprocess
import sys

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops, passes
from hlogen_cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")
SAMPLES = ROOT / "samples"

MODULE = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func public @square(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = func.call @main(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @helper(%a: tensor<4xf32>) -> tensor<4xf32> {
  return %a : tensor<4xf32>
}
"""

FUNCTIONS = '''import hlogen as hg


@hg.function
def good(x: hg.f32[2]):
    return x + x


@hg.function
def broken(x: hg.f32[2], y: hg.f32[3]):
    z = x * x
    return z + y  # BROKEN LINE


@hg.function
def after(x: hg.f32[2]):
    return x * x
'''
BROKEN_LINE = FUNCTIONS.splitlines().index("    return z + y  # BROKEN LINE") + 1
A, B = np.float32([1, 2, 3, 4]), np.float32([2, 0.5, -1, 3])


@pytest.fixture
def home(tmp_path):
    """A user's folder: a clone named hlogen/, a numpy.py and a jax.py that would break
    whatever imported them, and the user's module and functions."""
    (tmp_path / "hlogen" / "hlogen").mkdir(parents=True)
    (tmp_path / "hlogen" / "README.md").write_text("a clone of hlogen\n")
    for name in ("numpy", "jax"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('imported ./{name}.py')\n")
    (tmp_path / "x.mlir").write_text(MODULE)
    (tmp_path / "fns.py").write_text(FUNCTIONS)
    (tmp_path / "cache").mkdir()
    return tmp_path


def hlogen(home, *args, input=None, shell=None, umask=None, env=None):
    """The installed console script, run in `home` as the user runs it (through bash
    when `shell` is a command line that uses bash's syntax)."""
    environment = {**os.environ, "HLOGEN_CACHE_DIR": str(home / "cache"), **(env or {})}
    environment.pop("PYTHONPATH", None)
    if shell is not None or umask is not None:
        line = shell if shell is not None else " ".join(map(_quote, [str(HLOGEN), *args]))
        line = line.replace("hlogen ", f"{HLOGEN} ", 1) if shell is not None else line
        line = (f"umask {umask:03o}; " if umask is not None else "") + line
        return subprocess.run(["bash", "-c", line], cwd=home, capture_output=True, text=True,
                              input=input, env=environment, timeout=300)
    return subprocess.run([str(HLOGEN), *map(str, args)], cwd=home, capture_output=True,
                          text=True, input=input, env=environment, timeout=300)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def printed(output: str, index: int = 0) -> np.ndarray:
    """Result `index` as `hlogen run` printed it."""
    body = output.split(f"result[{index}]: ", 1)[1].split("\n", 1)[1]
    body = body.split("result[", 1)[0]
    return np.array([float(v) for v in re.findall(r"[-+]?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan)", body.split("]")[0])])


def literal(array) -> str:
    return f"{array.size}xf32=" + ",".join(repr(float(v)) for v in array)


# -- bug 1: the current folder -------------------------------------------------------------

def test_the_current_folder_does_not_change_what_hlogen_imports(home):
    run = hlogen(home, "run", "x.mlir", "--input", literal(A), "--input", literal(B))
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(printed(run.stdout), A * B)
    compiled = hlogen(home, "compile", "x.mlir")
    assert compiled.returncode == 0, compiled.stderr
    assert compiled.stdout.startswith("HloModule")
    sample = hlogen(home, "samples", "run", "elementwise.shifts")
    assert sample.returncode == 0, sample.stderr
    assert "[ 0  2  8 24]" in sample.stdout  # a << n for a = n = 0..3
    from_python = hlogen(home, "run", "fns.py", "--function", "good", "--input", "2xf32=1.5,-2")
    assert from_python.returncode == 0, from_python.stderr
    np.testing.assert_array_equal(printed(from_python.stdout), [3.0, -4.0])
    assert "imported ./" not in run.stderr + compiled.stderr + sample.stderr + from_python.stderr


# -- bug 2: emit takes Python files ----------------------------------------------------------

def test_emit_of_a_module_says_what_emit_takes(home):
    result = hlogen(home, "emit", "x.mlir")
    assert result.returncode == 2
    assert result.stderr.startswith("error: x.mlir: not a Python file: emit and samples take "
                                    "FILE.py files of @hg.function definitions")
    assert sorted(p.name for p in home.glob("*.mlir*")) == ["x.mlir"]  # nothing written


# -- bug 3: permissions -------------------------------------------------------------------------

@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_written_files_follow_the_umask(home, umask):
    np.save(home / "a.npy", A)
    commands = [
        ["emit", "fns.py", "--function", "good", "-o", "good.mlir"],
        ["opt", "x.mlir", "-o", "opt.mlir"],
        ["run", "x.mlir", "--input", "@a.npy", "--input", "@a.npy", "--output", "o.npz"],
        ["run", "x.mlir", "--input", "@a.npy", "--input", "@a.npy", "--output", "@o.npy"],
        ["compile", "x.mlir", "-o", "x.hlx"],
    ]
    for args in commands:
        result = hlogen(home, *args, umask=umask)
        assert result.returncode == 0, (args, result.stderr)
    for name in ("good.mlir", "opt.mlir", "o.npz", "o.npy", "x.hlx"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o666 & ~umask, name
    np.testing.assert_array_equal(np.load(home / "o.npy"), A * A)


# -- bug 4: a broken function -------------------------------------------------------------------

def test_a_broken_function_names_its_line_and_leaves_the_others_usable(home):
    broken = hlogen(home, "run", "fns.py", "--function", "broken", "--input", "2xf32=1",
                    "--input", "3xf32=1")
    assert broken.returncode == 2
    assert broken.stderr.startswith(f"error: {home / 'fns.py'}:{BROKEN_LINE}: in @hg.function "
                                    f"broken: add: cannot broadcast f32[2] and f32[3]")
    for name, want in (("good", [2.0, -6.0]), ("after", [1.0, 9.0])):
        result = hlogen(home, "run", "fns.py", "--function", name, "--input", "2xf32=1,-3")
        assert result.returncode == 0, result.stderr
        np.testing.assert_array_equal(printed(result.stdout), want)
    every = hlogen(home, "emit", "fns.py", "-o", "out/")
    assert every.returncode == 2 and f"fns.py:{BROKEN_LINE}: in @hg.function broken" in every.stderr


# -- bug 5: compiled files ----------------------------------------------------------------------

def test_a_compiled_file_runs_without_compiling(home):
    warm = hlogen(home, "run", "x.mlir", "--input", literal(A), "--input", literal(B))
    assert warm.returncode == 0, warm.stderr  # the cache holds it: -o writes the cached bytes
    made = hlogen(home, "compile", "x.mlir", "-o", "x.hlx", "-v")
    assert made.returncode == 0, made.stderr
    assert "x.hlx: compiled for cpu" in made.stderr and "hlogen run x.hlx runs it" in made.stderr
    run = hlogen(home, "run", "x.hlx", "--input", literal(A), "--input", literal(B), "-v",
                 "--check-interpret")
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(printed(run.stdout), A * B)
    assert "cpu: loaded from x.hlx" in run.stderr
    assert "cpu vs interpret: all" in run.stdout and "elements match" in run.stdout
    fresh = hlogen(home, "compile", "x.mlir", "--function", "square", "-o", "sq.hlx", "--no-cache")
    assert fresh.returncode == 0, fresh.stderr
    square = hlogen(home, "run", "sq.hlx", "--input", literal(B))
    assert square.returncode == 0, square.stderr
    np.testing.assert_array_equal(printed(square.stdout), B * B)


def test_a_compiled_file_for_elsewhere_or_damaged_is_refused(home):
    assert hlogen(home, "compile", "x.mlir", "-o", "x.hlx").returncode == 0
    data = (home / "x.hlx").read_bytes()
    magic, header, rest = data.split(b"\n", 2)
    other = json.loads(header)
    other["jaxlib"] = "0.0.1"
    (home / "other.hlx").write_bytes(magic + b"\n" + json.dumps(other).encode() + b"\n" + rest)
    refused = hlogen(home, "run", "other.hlx", "--input", literal(A), "--input", literal(B))
    assert refused.returncode == 2
    assert "other.hlx: compiled for jaxlib '0.0.1'; this run has '" in refused.stderr
    (home / "cut.hlx").write_bytes(data[:-10])
    cut = hlogen(home, "run", "cut.hlx", "--input", literal(A), "--input", literal(B))
    assert cut.returncode == 2 and "cut.hlx: a compiled file (hlogen compile -o) that is not " \
        "whole" in cut.stderr
    again = hlogen(home, "compile", "x.hlx")
    assert again.returncode == 2 and "compiled already" in again.stderr


# -- friction: standard input, pipes, --function --------------------------------------------------

def test_standard_input_and_pipes(home):
    run = hlogen(home, "run", "-", "--input", literal(A), "--input", literal(B), input=MODULE)
    assert run.returncode == 0, run.stderr
    np.testing.assert_array_equal(printed(run.stdout), A * B)
    compiled = hlogen(home, "compile", "-", "--cost", input=MODULE)
    assert compiled.returncode == 0 and "flops: 4" in compiled.stdout, compiled.stderr
    np.save(home / "a.npy", A)
    np.savez(home / "ab.npz", arg0=A, arg1=B)
    piped = hlogen(home, shell="hlogen run x.mlir --input @<(cat a.npy) --input 4xf32=2")
    assert piped.returncode == 0, piped.stderr
    np.testing.assert_array_equal(printed(piped.stdout), A * 2)
    npz = hlogen(home, shell="hlogen run <(cat x.mlir) --input @<(cat ab.npz)")
    assert npz.returncode == 0, npz.stderr
    np.testing.assert_array_equal(printed(npz.stdout), A * B)


def test_function_runs_any_public_function_of_a_module(home):
    square = hlogen(home, "run", "x.mlir", "--function", "square", "--input", literal(B))
    assert square.returncode == 0, square.stderr
    np.testing.assert_array_equal(printed(square.stdout), B * B)
    for name, why in (("helper", "is private"), ("nope", "is not defined")):
        result = hlogen(home, "run", "x.mlir", "--function", name, "--input", literal(B))
        assert result.returncode == 2
        assert result.stderr.startswith(f"error: x.mlir: @{name} {why}; --function names a "
                                        f"public function of the module: main, square")


# -- friction: literals ---------------------------------------------------------------------------

@pytest.mark.parametrize("value, message", [
    ("4x8xf32=1,a", "'a' is not a number (f32)"),
    ("s32=1.0", "'1.0' is not a whole number such as 3, -3 or 0x10 (s32)"),
    ("4xf32=1e40", "'1e40' is out of range of f32 (its largest finite value is 3.40282e+38)"),
    ("4xf32=1e400", "'1e400' is out of range of f32 (its largest finite value is 3.40282e+38)"),
    ("4xbf16=1e39", "'1e39' is out of range of bf16 (its largest finite value is 3.38953e+38)"),
    ("4xf32=1,2,3", "f32[4] needs 4 values (or 1 to fill it), got 3"),
])
def test_a_bad_literal_names_the_value(home, value, message):
    result = hlogen(home, "run", "x.mlir", "--input", value, "--input", "4xf32=1")
    assert result.returncode == 2
    assert result.stderr == f"error: --input {value!r}: {message}\n"


def test_an_npz_after_at_is_read_as_an_npz_and_infinity_is_a_value(home):
    np.savez(home / "ab.npz", arg0=A, arg1=B)
    result = hlogen(home, "run", "x.mlir", "--input", "@ab.npz")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(printed(result.stdout), A * B)
    inf = hlogen(home, "run", "x.mlir", "--input", "4xf32=inf,-inf,1,2", "--input", "4xf32=1")
    assert inf.returncode == 0, inf.stderr
    np.testing.assert_array_equal(printed(inf.stdout), [np.inf, -np.inf, 1, 2])


# -- friction: where outputs go -------------------------------------------------------------------

def test_outputs_go_to_folders_that_exist_and_replace_nothing_unasked(home):
    args = ["run", "x.mlir", "--input", literal(A), "--input", literal(B)]
    dash = hlogen(home, *args, "--output", "@-")
    assert dash.returncode == 2 and "--output @-: the results are printed on standard output" \
        in dash.stderr and not (home / "-").exists()
    missing = hlogen(home, *args, "--output", "missing/dir/o.npz")
    assert missing.returncode == 2
    assert "--output missing/dir/o.npz: the folder missing/dir does not exist" in missing.stderr
    several = hlogen(home, "emit", str(SAMPLES / "elementwise.py"), "-o", "one.mlir")
    assert several.returncode == 2 and "one.mlir does not exist (hlogen creates no folders)" \
        in several.stderr
    to_missing = hlogen(home, "emit", "fns.py", "--function", "good", "-o", "nowhere/")
    assert to_missing.returncode == 2
    assert not any((home / n).exists() for n in ("missing", "one.mlir", "nowhere"))
    assert hlogen(home, "opt", "x.mlir", "-o", "o.mlir").returncode == 0
    again = hlogen(home, "opt", "x.mlir", "-o", "o.mlir")
    assert again.returncode == 2 and "o.mlir exists" in again.stderr and "--force" in again.stderr
    assert hlogen(home, "opt", "x.mlir", "-o", "o.mlir", "--force").returncode == 0


# -- friction: what -v, --cost, samples and opt --help say ------------------------------------------

def test_verbose_says_when_the_cache_cannot_be_written(home):
    (home / "not-a-folder").write_text("")
    result = hlogen(home, "run", "x.mlir", "--input", literal(A), "--input", literal(B), "-v",
                    env={"HLOGEN_CACHE_DIR": str(home / "not-a-folder" / "cache")})
    assert result.returncode == 0, result.stderr
    assert "cpu: compiled; not stored: the cache folder" in result.stderr
    assert "stored in the cache" not in result.stderr.replace("not stored", "")


def test_cost_names_are_words(home):
    result = hlogen(home, "compile", "x.mlir", "--cost")
    assert result.returncode == 0, result.stderr
    names = [line.rsplit(": ", 1)[0] for line in result.stdout.splitlines()]
    assert "bytes accessed by operand 0 of each instruction, summed" in names
    assert "bytes accessed by the output of each instruction, summed" in names
    assert "flops" in names and not any("{" in n or "_" in n for n in names)
    assert result.stdout.splitlines()[names.index("flops")] == "flops: 4"


def test_samples_are_listed_in_aligned_columns(home):
    result = hlogen(home, "samples")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    width = max(len(line.split("  ", 1)[0]) for line in lines)
    assert all(line[width:width + 2] == "  " and line[width + 2] != " " for line in lines)


def test_opt_help_says_what_each_pipeline_runs(home):
    """The help lists the named pipelines (docs/emitting.md: legalize, canonicalize, default; and
    xla-semantics), and what it says each runs, run as a raw pipeline, does the same."""
    text = " ".join(hlogen(home, "opt", "--help").stdout.split()).replace("- ", "-")
    listed = re.search(r"Named pipelines: legalize (\S+) canonicalize (\S+) default (\S+) "
                       r"xla-semantics hlogen's rewrites to XLA's semantics", text)
    assert listed, text
    said = dict(zip(("legalize", "canonicalize", "default"), listed.groups()))
    b = hg.Builder("pipelines")
    x = b.parameter(hg.f32[4], "x")
    comp = b.build(ops.erf(x) + ops.erf(x))  # chlo to legalize, a repeat to eliminate
    for name, pipeline in said.items():
        named = passes.run(comp, name).as_text()
        assert named == passes.run(comp, f"builtin.module({pipeline})").as_text(), name
        assert named != comp.as_text(), name
    assert said["default"] == f"{said['legalize']},{said['canonicalize']}"


def test_help_summarizes_every_command_in_its_own_words(home):
    """`hlogen --help` lists the commands without importing them (hlogen_cli/main.py's COMMANDS
    holds their summaries): each is the start of the command's own help."""
    text = " ".join(hlogen(home, "--help").stdout.split())
    for name, (module, summary) in main.COMMANDS.items():
        command = importlib.import_module(f"hlogen_cli.commands.{module}").command
        assert " ".join(command.help.split()).startswith(summary), name
        assert f"{name} {summary}" in text
