"""`hlogen compare` and the input and XLA options of `run` (issue 27), on modules jax writes
in the test: the four rewrites of XLA's algebraic simplifier inside a larger program
(values checked against numpy's float32 arithmetic, which computes what the module
says), a module both sides agree on, random inputs that indices and sort keys constrain,
saved inputs replayed bit for bit, HloSnapshots that run with their recorded
arguments, XLA options in compiled files, a side that dies, and bad input (exit 2)."""
from __future__ import annotations

import json
import pathlib
import re
import shlex
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from click.testing import CliRunner
from jax import lax

import hlogen as hg
from hlogen_cli.main import main
from hlogen.runtime import pjrt
from tests.test_cli_process import ALWAYS_TRUE_SORT
from tests import docs
from tests.test_cli_readme import _pattern, shell

ROOT = pathlib.Path(__file__).resolve().parent.parent

# the rewrites (DIFFERENTIAL_NOTES): XLA CPU simplifies each to x, the interpreter computes it
REWRITES = {
    "log_exp": lambda x: jnp.log(jnp.exp(x)),
    "round_trick": lambda x: (x + 12582912.0) - 12582912.0,
    "sqrt_square": lambda x: jnp.sqrt(x * x),
    "scale_unscale": lambda x: (x * 1e30) / 1e30,
}
# what XLA CPU's algebraic simplifier makes of each
SIMPLIFIED = {"log_exp": lambda x: x, "round_trick": lambda x: x, "sqrt_square": np.abs,
              "scale_unscale": lambda x: x}
# x: each rewrite changes some of these (100: exp overflows; 0.3: rounded to an integer;
# 1e20: its square overflows; 1e10 * 1e30 overflows)
X = np.array([[0.3, 100.0, 2.5, -1.25], [1e20, 0.5, 1e10, 7.0]], np.float32)
W = np.full((4, 4), 0.25, np.float32)
XW = ["--input", "2x4xf32=[0.3 100 2.5 -1.25][1e20 0.5 1e10 7]", "--input", "4x4xf32=0.25"]


@pytest.fixture(autouse=True, scope="module")
def _hlogen_starts_the_cpu_backend():
    """jax below would start the CPU backend with jax's one device; hlogen's first."""
    pjrt.client("cpu")


def hlogen(*args, cwd=None):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def layer(x, w):
    return jnp.tanh(x @ w) * 0.5


def program(rewrites):
    """A larger program: a layer, and each rewrite of its input as a result of its own."""
    def f(x, w):
        return (layer(x, w), *[r(x) for r in rewrites])
    return f


def write_module(path: pathlib.Path, f, *args) -> pathlib.Path:
    path.write_text(jax.jit(f).lower(*args).as_text())
    return path


def what_the_module_says(x: np.ndarray) -> dict:
    """Each rewrite computed as written, in float32 (numpy: independent of both sides)."""
    f32 = np.float32
    with np.errstate(all="ignore"):
        return {"log_exp": np.log(np.exp(x)),
                "round_trick": (x + f32(12582912)) - f32(12582912),
                "sqrt_square": np.sqrt(x * x),
                "scale_unscale": (x * f32(1e30)) / f32(1e30)}


def test_compare_finds_each_rewrite_and_an_xla_flag_removes_them(tmp_path):
    path = write_module(tmp_path / "four.mlir", program(REWRITES.values()), X, W)
    report = tmp_path / "four.json"
    found = hlogen("compare", path, *XW, "--json", report)
    assert found.exit_code == 1, found.output
    as_json = json.loads(report.read_text())
    results = as_json["iterations"][0]["results"]
    assert results[0]["ok"]  # the layer agrees
    want = what_the_module_says(X)
    for name, result in zip(REWRITES, results[1:]):
        assert not result["ok"], name
        # every element where the written arithmetic and the simplified form part differs,
        # and no other (the rule's bounds: 1e-3)
        simplified = SIMPLIFIED[name](X)
        changed = ~np.isclose(want[name], simplified, rtol=1e-3, atol=1e-3)
        assert result["differing"] == int(changed.sum()), name
        first = result["first"][0]
        index = tuple(first["index"])
        assert changed[index]
        assert first["actual"] == pytest.approx(float(simplified[index]), rel=1e-6)
        assert first["expected"] == json_number(want[name][index])
    # log(exp(x)) is inf where exp overflows: 100, 1e10, 1e20
    assert "result 1 f32[2,4]: 3 of 8 elements differ" in found.output
    assert "at [0, 1]: test cpu 100, reference interpret inf (abs error inf, rel error inf, arg0=100)" \
        in found.output
    fixed = hlogen("compare", path, *XW, "--xla-flag", "xla_disable_hlo_passes=algsimp")
    assert fixed.exit_code == 0, fixed.output
    assert "test cpu (xla_disable_hlo_passes=algsimp) and reference interpret agree" in fixed.output


def json_number(value):
    value = float(value)
    return value if np.isfinite(value) else str(value)


def test_a_module_both_sides_agree_on_is_exit_0(tmp_path):
    path = write_module(tmp_path / "layer.mlir", layer, X, W)
    agree = hlogen("compare", path, "--iterations", "3", "--test", "hlo:cpu", "--reference", "cpu",
                   "--bitwise")
    assert agree.exit_code == 0, agree.output
    assert "test hlo:cpu and reference cpu agree after 3 iterations, with random inputs (seed 2)" \
        in agree.output
    assert "all 8 elements match (bitwise)" in agree.output


def indexed(x, start, idx, keys, values):
    """Results that an out-of-bounds start or index (clamped, or read elsewhere) or a
    duplicate key (its values in either order) would change."""
    window = lax.dynamic_slice(x, (start,), (4,))
    picked = x.at[idx].get(mode="promise_in_bounds")
    _, ordered = lax.sort((keys, values), num_keys=1, is_stable=False)
    return window * 2, picked + 1, ordered


def test_random_inputs_respect_indices_and_sort_keys(tmp_path):
    args = (np.zeros(16, np.float32), np.int32(0), np.zeros(5, np.int32), np.zeros(64, np.int8),
            np.zeros(64, np.float32))
    path = write_module(tmp_path / "indexed.mlir", indexed, *args)
    saved = tmp_path / "in.npz"
    quiet = hlogen("compare", path, "--random-inputs", "--seed", "7", "--iterations", "3",
                   "--bitwise", "--save-inputs", saved)
    assert quiet.exit_code == 0, quiet.output
    assert "agree after 3 iterations, with random inputs (seed 9)" in quiet.output
    with np.load(saved) as inputs:
        start, idx, keys = inputs["arg1"], inputs["arg2"], inputs["arg3"]
    assert 0 <= start <= 16 - 4  # the window fits
    assert ((0 <= idx) & (idx < 16)).all()
    assert len(set(keys.tolist())) == 64  # s8 keys: 64 distinct ones


def test_saved_inputs_replay_bit_for_bit(tmp_path):
    def mixed(x, h, n):
        return jnp.sin(x) * 3, (h * 2).astype(jnp.bfloat16), n ^ 5

    args = (np.zeros((3, 4), np.float32), np.zeros(6, ml_dtypes.bfloat16), np.zeros(4, np.int64))
    path = write_module(tmp_path / "mixed.mlir", mixed, *args)
    first = hlogen("run", path, "--random-inputs", "--seed", "11", "--large-range",
                   "--save-inputs", tmp_path / "in.npz", "--output", tmp_path / "first.npz")
    assert first.exit_code == 0, first.output
    again = hlogen("run", path, "--input", tmp_path / "in.npz", "--output", tmp_path / "again.npz")
    assert again.exit_code == 0, again.output
    with np.load(tmp_path / "in.npz") as saved:
        keys = list(saved.files)
        assert keys == ["arg0", "arg1", "arg2"]  # (jax's module names no parameter)
        assert saved["arg1"].dtype == np.dtype("V2")  # bf16, as numpy saves it (raw)
        big = np.abs(saved["arg0"][np.isfinite(saved["arg0"])])
        assert big.max() > 1e10  # --large-range: beyond [-0.1, 0.2)
    with np.load(tmp_path / "first.npz") as a, np.load(tmp_path / "again.npz") as b:
        for k in a.files:
            assert a[k].tobytes() == b[k].tobytes(), k


def test_an_hlo_snapshot_runs_with_its_recorded_arguments(tmp_path):
    def f(x, n, flags):
        return jnp.where(flags, jnp.exp(x), -x).sum(axis=1), n * 3 - 7

    x = np.array([[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]], np.float32)
    n = np.array([-5, 0, 7, 2**30], np.int32)
    flags = np.array([[True, False, True], [False, False, True]])
    comp = hg.load(jax.jit(f).lower(x, n, flags).as_text())
    dump = tmp_path / "dump"
    ran = hg.compile(comp, backend="cpu", xla_options={"xla_dump_to": str(dump),
                                                      "xla_dump_hlo_snapshots": True})(x, n, flags)
    (snapshot,) = dump.glob("*.snapshot.*.pb")
    run = hlogen("run", snapshot, "--output", tmp_path / "out.npz", "--save-inputs",
                 tmp_path / "in.npz")
    assert run.exit_code == 0, run.output
    assert f"inputs: the 3 argument(s) {snapshot} recorded" in run.output
    with np.load(tmp_path / "in.npz") as recorded:
        for want, got in zip((x, n, flags), recorded.values()):
            np.testing.assert_array_equal(got, want)
    with np.load(tmp_path / "out.npz") as out:
        for i, want in enumerate(ran):
            np.testing.assert_array_equal(out[f"result_{i}"], want)
    # as it is, without XLA's passes: the snapshot holds the optimized module
    as_is = hlogen("run", snapshot, "--no-hlo-passes")
    assert as_is.exit_code == 0 and "cpu: XLA options xla_disable_all_hlo_passes=true" in as_is.output


def test_what_xla_cannot_run_without_its_passes_says_so(tmp_path):
    def scatter(x, i):
        return x.at[i].add(1.0)

    path = write_module(tmp_path / "scatter.mlir", scatter, np.zeros(5, np.float32),
                        np.zeros(2, np.int32))
    refused = hlogen("run", path, "--zero-inputs", "--no-hlo-passes")
    assert refused.exit_code == 2, refused.output
    assert "HLO opcode `scatter` is not supported" in refused.output
    assert "with every HLO pass disabled" in refused.output and "Traceback" not in refused.output


def test_xla_options_of_a_compiled_file_are_its_own(tmp_path):
    path = write_module(tmp_path / "four.mlir", program(REWRITES.values()), X, W)
    compiled = tmp_path / "four.hlx"
    made = hlogen("compile", path, "-o", compiled, "--xla-flag", "xla_disable_hlo_passes=algsimp")
    assert made.exit_code == 0, made.output
    assert "cpu: XLA options xla_disable_hlo_passes=algsimp" in made.output
    # run compiles with them again: the interpreter agrees (its log(exp(100)) is inf too)
    ran = hlogen("run", compiled, *XW, "--check-interpret", "--atol", "1e-3", "--rtol", "1e-3")
    assert ran.exit_code == 0, ran.output
    other = hlogen("run", compiled, *XW, "--xla-flag", "xla_disable_hlo_passes=constant_folding")
    assert other.exit_code == 2
    assert "compiled with XLA options xla_disable_hlo_passes=algsimp; this run asks for " \
           "xla_disable_hlo_passes=constant_folding" in other.output


def test_a_side_that_dies_is_named(tmp_path):
    path = tmp_path / "sort.mlir"
    path.write_text(ALWAYS_TRUE_SORT)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random(2000).astype(np.float32))
    # (the interpreter first: XLA CPU's sort may never end with such a comparator)
    died = hlogen("compare", path, "--input", f"@{tmp_path / 'x.npy'}", "--test", "interpret",
                  "--reference", "cpu", "--timeout", "120")
    assert died.exit_code == 1
    assert f"error: the interpreter aborted (SIGABRT) while running {path} on the test side " \
           f"(interpret)" in died.output


@pytest.mark.parametrize("args,message", [
    (["compare", "{m}", "--test", "nope"], "backend must be one of"),
    (["compare", "{m}", "--test-flag", "xla_disable_hlo_pass=algsimp"],
     "no XLA option named 'xla_disable_hlo_pass'; the closest known: xla_disable_hlo_passes"),
    (["run", "{m}", "--zero-inputs", "--xla-flag", "xla_cpu_enable_fast_math=maybe"],
     "XLA option xla_cpu_enable_fast_math takes true or false, got 'maybe'"),
    (["compare", "{m}", "--ulp", "2", "--abs", "1"], "--abs and --rel are the bounds of XLA's rule"),
    (["compare", "{m}", "--ulp", "2", "--bitwise"], "choose one of --ulp and --bitwise"),
    (["compare", "{m}", "--reference-flag", "xla_cpu_enable_fast_math=true"],
     "--reference-flag: the reference side, interpret, compiles nothing"),
    (["compare", "{m}", "--input", "f32=1", "--iterations", "2"], "--iterations 2 draws new"),
    (["run", "{m}", "--random-inputs", "--zero-inputs"], "choose one of --random-inputs and"),
    (["run", "{m}", "--save-inputs", "in.txt", "--zero-inputs"], "saved as an .npz"),
    (["run", "{m}", "--zero-inputs", "--backend", "interpret", "--xla-flag", "a=b"],
     "the interpreter compiles nothing"),
])
def test_bad_input_is_exit_2(tmp_path, args, message):
    m = write_module(tmp_path / "m.mlir", layer, X, W)
    result = hlogen(*[a.format(m=m) for a in args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


# -- docs/disagree.md's worked example -----------------------------------------------------------

def _readme_example() -> tuple[str, str]:
    page, heading = "docs/disagree.md", "From the command line: compare, then bisect"
    (code,) = docs.blocks(page, "python", heading)
    return code, docs.console(page, heading)


def test_the_readme_example_runs_as_written(tmp_path, monkeypatch):
    """Each command as written, its output matched (`...`: any text or lines); a command
    ending in `# exit N` exits N, the others 0."""
    code, session = _readme_example()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text(code)
    commands = re.split(r"^\$ ", session, flags=re.M)[1:]
    assert len(commands) >= 4
    for command in commands:
        line, _, expected = command.partition("\n")
        words = shlex.split(line, comments=True)
        status = int(line.rpartition("# exit ")[2]) if "# exit " in line else 0
        if words[0] == "python":
            output, code_ = shell(shlex.join([sys.executable, *words[1:]]))
        else:
            result = hlogen(*words[1:])
            output, code_ = result.output, result.exit_code
        assert code_ == status, f"$ {line}\n{output}"
        assert _pattern(expected).fullmatch(output), f"$ {line}\n{output}"
    verdict = json.loads((tmp_path / "verdict.json").read_text())
    assert (verdict["stage"], verdict["passes"]) == ("hlo-pass", ["algsimp"])
    with np.load(tmp_path / "found.npz") as found:
        assert sorted(found.files) == ["arg0", "arg1"]


def test_check_and_graph_compile_with_xla_flags(tmp_path):
    """The options reach the conformance workers' compiles: a file that expects the
    interpreter's log(exp(100)) = inf passes on XLA CPU only without algsimp."""
    from tests.test_conformance import write_testdata
    path = write_testdata(tmp_path / "log_exp.mlir",
                          "%9 = stablehlo.exponential %0 : tensor<4xf32>\n"
                          "    %2 = stablehlo.log %9 : tensor<4xf32>",
                          "[1.0, 100.0, 2.0, 3.0]", "[1.0, 0x7F800000, 2.0, 3.0]", "expect_close")
    check = ["check", path, "--backend", "cpu", "-j", "1", "-q"]
    assert hlogen(*check).exit_code == 1
    fixed = hlogen(*check, "--xla-flag", "xla_disable_hlo_passes=algsimp")
    assert fixed.exit_code == 0, fixed.output
    assert "XLA options of the PJRT compiles: xla_disable_hlo_passes=algsimp" in fixed.output
    drawn = hlogen("graph", write_module(tmp_path / "m.mlir", layer, X, W), "--optimized",
                   "--xla-flag", "xla_disable_all_hlo_passes=true", "-o", tmp_path / "g.html")
    assert drawn.exit_code == 0, drawn.output
    assert "on cpu (xla_disable_all_hlo_passes=true)" in (tmp_path / "g.html").read_text()
    unoptimized = hlogen("graph", tmp_path / "m.mlir", "--xla-flag", "a=b", "-o", tmp_path / "h.html")
    assert unoptimized.exit_code == 2 and "it goes with --optimized" in unoptimized.output
