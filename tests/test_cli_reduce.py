"""`hlogen reduce` and `hg.reduce_module` on real artifacts made here: a 1,000-op jax residual
stack carrying the round-to-integer trick (random inputs), a 300-op one carrying
log(exp(x)) (inputs given), an XLA compile error, XLA CPU's abort on a parameter whose
sdy sharding names a missing mesh, a user's script; the examples of docs/reduce.md. Every reduced
module is checked again on its own: loaded from the file written, compiled and run here,
interpreted, and compared by a statement of XLA's rule written here (not by reduce's
verdict, nor by hlogen.differential's comparison)."""
from __future__ import annotations

import contextlib
import io
import re
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

import hlogen as hg
from hlogen import mlir
from hlogen.differential import op_count
from hlogen_cli.main import main
from tests.differential_cases import jax_module
from tests.helpers import residual_stack
from tests import docs
from tests.test_cli_readme import fresh_clone, run_session

ROUNDING = np.float32(12582912.0)
SDY = '{mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{\\"x\\"}, {}]>"}}'


def hlogen(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _names(comp) -> list:
    return [op.name for op in mlir.walk(comp.module)
            if op.name not in ("func.func", "func.return", "stablehlo.return")]


def _inputs(comp, npz_path) -> list:
    """The arrays of an .npz written by reduce, in parameter order (keyed by name)."""
    with np.load(npz_path) as saved:
        assert sorted(saved.files) == sorted(comp.parameter_names)
        return [saved[name] for name in comp.parameter_names]


def _near_differs(actual, expected, bound=1e-3) -> bool:
    """XLA's Near, stated here: an element differs when exactly one side is NaN, or an
    infinity is not matched exactly, or its absolute AND relative errors pass the bound."""
    a, e = np.asarray(actual, np.float64), np.asarray(expected, np.float64)
    nan = np.isnan(a) != np.isnan(e)
    infinite = (np.isinf(a) | np.isinf(e)) & (a != e) & ~np.isnan(a) & ~np.isnan(e)
    with np.errstate(all="ignore"):
        error = np.abs(a - e)
        far = np.isfinite(error) & (error > bound) & (error > bound * np.abs(e))
    return bool((nan | infinite | far).any())


@pytest.fixture(scope="module")
def stack_file(tmp_path_factory):
    """A jax program of about 1,000 ops with (x + 12582912) - 12582912 at its middle layer."""
    comp = residual_stack(66, rewrite="round to integer")
    assert 950 <= op_count(comp) <= 1100
    path = tmp_path_factory.mktemp("stack") / "stack.mlir"
    path.write_text(comp.as_text())
    return path


def test_a_1000_op_divergence_on_random_inputs_is_reduced_to_the_trick(stack_file, tmp_path):
    out = tmp_path / "small.mlir"
    result = hlogen("reduce", stack_file, "-o", out, "--seed", 3)
    assert result.exit_code == 0, result.output
    npz = tmp_path / "small.inputs.npz"
    assert result.stdout == (f"hlogen compare {out} --test cpu --reference interpret "
                             f"--input {npz}\n")
    assert re.fullmatch(rf"{re.escape(str(stack_file))}: 10\d\d ops -> [1-4] in [\d.]+ s, \d+ "
                        rf"candidates \(\d+ accepted\); wrote {re.escape(str(out))} and "
                        rf"{re.escape(str(npz))}\n", result.stderr), result.stderr
    # checked again on its own: XLA CPU gives x, the interpreter rounds x (numpy's f32 too)
    reduced = hg.load(out)
    assert op_count(reduced) <= 4 and {"stablehlo.add", "stablehlo.subtract"} <= \
        set(_names(reduced)), reduced.as_text()
    (x,) = _inputs(reduced, npz)
    assert ((-0.1 <= x) & (x < 0.2)).all()  # random inputs, as run_hlo_module's
    cpu, interpreted = hg.compile(reduced)(x), hg.interpret(reduced, x)
    np.testing.assert_array_equal(interpreted, (x + ROUNDING) - ROUNDING)
    np.testing.assert_array_equal(cpu, x)
    assert _near_differs(cpu, interpreted)
    # and by hlogen run, as a user would see it
    ran = hlogen("run", out, "--input", npz, "--check-interpret")
    assert ran.exit_code == 1 and "1 of 1 elements differ" in ran.stdout, ran.output


def test_the_api_reduces_log_exp_on_inputs_given():
    comp = residual_stack(20)  # log(exp(x)) at its middle layer: 300 ops
    assert op_count(comp) > 290
    inputs = [np.full(s.dimensions, 100, s.dtype) for s in comp.parameter_shapes]
    steps = []
    found = hg.reduce_module(comp, inputs=inputs, progress=steps.append)
    assert found.op_count == op_count(found.computation) <= 4
    assert {"stablehlo.exponential", "stablehlo.log"} <= set(_names(found.computation))
    assert found.search.original_op_count == op_count(comp) and not found.search.timed_out
    assert steps and steps[-1].op_count == found.op_count
    # the inputs it is interesting with are the ones given (cut to the shapes it has now)
    assert all((a == 100).all() for a in found.inputs)
    reduced = hg.load(found.computation.as_text())
    cpu, interpreted = hg.compile(reduced)(*found.inputs), hg.interpret(reduced, *found.inputs)
    assert (np.asarray(cpu) == 100).all() and np.isinf(interpreted).all()
    assert found.command("a.mlir", "a.npz") == \
        "hlogen compare a.mlir --test cpu --reference interpret --input a.npz"


def _rng_program(layers: int) -> str:
    """A chain of element-wise ops and an rng_bit_generator whose THREE_FRY state has 3
    words: StableHLO's verifier takes it, XLA's refuses it ("Expected instruction to have
    shape equal to (u64[2], ...")."""
    lines, value = [], "%x"
    for i in range(layers):
        op = ("sine", "cosine", "tanh", "exponential")[i % 4]
        lines.append(f"  %v{i} = stablehlo.{op} {value} : tensor<8xf32>")
        value = f"%v{i}"
    return textwrap.dedent(f"""\
        func.func @main(%x: tensor<8xf32>, %s: tensor<3xui64>) -> (tensor<8xf32>, tensor<4xui32>) {{
        {chr(10).join(lines)}
          %r:2 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (tensor<3xui64>) -> (tensor<3xui64>, tensor<4xui32>)
          return {value}, %r#1 : tensor<8xf32>, tensor<4xui32>
        }}
        """)


def test_an_xla_error_is_reduced_to_the_op_it_is_about_the_same_for_a_seed(tmp_path):
    (tmp_path / "rng.mlir").write_text(_rng_program(30))
    runs = []
    for name in ("a", "b"):
        result = hlogen("reduce", tmp_path / "rng.mlir", "-o", tmp_path / f"{name}.mlir",
                        "--error", r"Expected instruction to have shape equal to \(u64\[2\]",
                        "--seed", 7)
        assert result.exit_code == 0, result.output
        runs.append((tmp_path / f"{name}.mlir").read_text())
    assert runs[0] == runs[1]  # deterministic for a seed
    reduced = hg.load(tmp_path / "a.mlir")
    assert _names(reduced) == ["stablehlo.rng_bit_generator"], reduced.as_text()
    with pytest.raises(hg.ExecutionError, match=r"shape equal to \(u64\[2\]"):
        hg.compile(reduced)
    # the command printed shows it: hlogen run, exit 1, XLA's message
    command = result.stdout.split()
    assert command[:5] == ["hlogen", "run", str(tmp_path / "b.mlir"), "--backend", "cpu"]
    ran = hlogen(*command[1:])
    assert ran.exit_code == 1 and "shape equal to (u64[2]" in ran.stderr, ran.output


def with_missing_mesh(comp) -> str:
    """`comp` whose first parameter's sdy sharding names @mesh, which the module lacks:
    jax's converter drops the sharding's mesh, and XLA CPU ends the process on it
    ("Check failed: false Mesh not found with name: @mesh"); the preflight cannot know."""
    return re.sub(r"(%arg0: tensor<[^>]*>)", r"\1 " + SDY.replace("\\", "\\\\"), comp.as_text(),
                  count=1)


def small_network() -> hg.Computation:
    """A layer of a network as jax lowers it: about 15 ops."""
    import jax.numpy as jnp  # here: only the tests that make jax programs need it
    return jax_module(lambda x, w: jnp.maximum(jnp.tanh(x @ w) * 2 + 1, 0).sum(0),
                      np.zeros((4, 8), np.float32), np.zeros((8, 8), np.float32))


def test_a_crash_of_xla_is_reduced_and_the_command_still_crashes(tmp_path):
    (tmp_path / "sdy.mlir").write_text(with_missing_mesh(small_network()))
    out = tmp_path / "crash.mlir"
    result = hlogen("reduce", tmp_path / "sdy.mlir", "-o", out, "--crash", "--error",
                    "Mesh not found")
    assert result.exit_code == 0, result.output
    reduced = hg.load(out)
    assert op_count(reduced) <= 2 and "xla.sdy.sharding" in reduced.as_text(), reduced.as_text()
    # XLA still ends the process on it (hlogen run's child process reports the signal)
    command = result.stdout.split()
    ran = hlogen(*command[1:])
    assert ran.exit_code == 1 and "aborted (SIGABRT)" in ran.stderr, ran.output
    assert "Mesh not found" in ran.stderr


def test_a_script_says_what_is_interesting(tmp_path):
    script = tmp_path / "tanh_of_a_dot.sh"
    script.write_text('#!/bin/sh\n# C-Reduce\'s convention: 0 while still interesting\n'
                      'grep -q stablehlo.tanh "$1" && grep -q stablehlo.dot_general "$1"\n')
    script.chmod(0o755)
    (tmp_path / "stack.mlir").write_text(residual_stack(4).as_text())
    out = tmp_path / "tanh.mlir"
    result = hlogen("reduce", tmp_path / "stack.mlir", "-o", out, "--script", script)
    assert result.exit_code == 0, result.output
    assert result.stdout == f"{script} {out}\n"
    names = _names(hg.load(out))
    assert {"stablehlo.dot_general", "stablehlo.tanh"} <= set(names) and len(names) <= 3, names
    assert not (tmp_path / "tanh.inputs.npz").exists()  # a script runs nothing of hlogen's


@pytest.mark.parametrize("extra,said", [
    (["--script", "S", "--crash"], "--script is the interest itself"),
    (["--input", "8xf32=1", "--random-inputs"], "--input gives the arguments"),
    (["--error", "("], "not a regular expression"),
    (["--test", "nowhere"], "backend must be one of"),
    (["--test-flag", "xla_no_such_option=1"], "xla_no_such_option"),
    (["--error", "no such message"], "not interesting to begin with"),
])
def test_bad_input_is_exit_2_before_any_search(tmp_path, extra, said):
    (tmp_path / "rng.mlir").write_text(_rng_program(2))
    result = hlogen("reduce", tmp_path / "rng.mlir", "-o", tmp_path / "out.mlir", *extra)
    assert result.exit_code == 2, result.output
    assert said in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "out.mlir").exists()


def test_outputs_are_checked_first_and_timeout_writes_the_best_so_far(tmp_path):
    (tmp_path / "rng.mlir").write_text(_rng_program(20))
    (tmp_path / "out.mlir").write_text("mine")
    args = ["reduce", tmp_path / "rng.mlir", "-o", tmp_path / "out.mlir", "--error", "u64"]
    refused = hlogen(*args)
    assert refused.exit_code == 2 and "exists" in refused.stderr
    assert (tmp_path / "out.mlir").read_text() == "mine"
    stopped = hlogen(*args, "--force", "--timeout", "1e-3")
    assert stopped.exit_code == 0 and "stopped at --timeout" in stopped.stderr, stopped.output
    assert op_count(hg.load(tmp_path / "out.mlir")) == op_count(hg.load(tmp_path / "rng.mlir"))


def test_the_readme_examples(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(fresh_clone(tmp_path))
    assert len(run_session(docs.console("docs/reduce.md", "An example"))) == 7
    code, printed = (docs.blocks("docs/reduce.md", language, "From Python")
                     for language in ("python", "text"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code[0], "docs/reduce.md", "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed[0]
