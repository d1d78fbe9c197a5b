"""Three-way verdicts: `hlogen compare --also BACKEND` and `differential.compare(...,
also=...)`: a third side compared with the test and the reference names the odd one out,
or says that all three differ. The sides here are XLA CPU under other options, the route
through HLO and the interpreter; IREE, where it is installed, in the last test."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest
import hlogen as hg
from hlogen import differential
from hlogen.differential import Side, Tolerance, compare_arrays, three_way
from tests import docs
from tests.test_cli_compare import hlogen
from tests.test_cli_readme import run_session

# log(exp(x)): XLA's algebraic simplifier makes it x (100 at x = 100), the interpreter
# computes inf, as XLA does without algsimp
LOG_EXP = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %e = stablehlo.exponential %x : tensor<4xf32>
  %l = stablehlo.log %e : tensor<4xf32>
  return %l : tensor<4xf32>
}"""
X = np.array([1, 100, 3, 4], np.float32)
NO_ALGSIMP = Side.of("cpu", {"xla_disable_hlo_passes": "algsimp"})


def test_two_sides_agreeing_against_one_name_it():
    comp = hg.load(LOG_EXP)
    cases = [("cpu", "interpret", NO_ALGSIMP, "test"),
             ("interpret", "cpu", NO_ALGSIMP, "reference"),
             ("cpu", "hlo:cpu", "interpret", "third")]
    for test, reference, also, odd in cases:
        found = differential.compare(comp, [X], test, reference, also=also)
        assert found.verdicts == [odd], (test, reference, also)
        assert not found.ok
        (seen,) = found.iterations[-1].third
        assert seen.odd_one_out == odd
        assert "is the odd one out" in found.text()


def test_three_sides_that_agree():
    found = differential.compare(hg.load(LOG_EXP), [np.float32([1, 2, 3, 4])], "cpu",
                                 "interpret", also=NO_ALGSIMP)
    assert found.ok and found.verdicts == ["agree"]
    assert "all three agree" in found.text()
    # without a third side: no verdicts, the JSON as before
    plain = differential.compare(hg.load(LOG_EXP), [X], "cpu", "interpret")
    assert plain.verdicts is None and "third" not in plain.to_json()
    assert "three_way" not in plain.to_json()["iterations"][0]


# (x * 1e-30) / 1e-30 + log(exp(x)): at x = 1e-10 the simplifier gives x, the interpreter
# keeps the subnormal product (nearly x), XLA without algsimp flushes it to 0; at 100 the
# simplifier gives 100, the others inf: bit for bit, no two sides agree
THREE_APART = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %e = stablehlo.exponential %x : tensor<2xf32>
  %l = stablehlo.log %e : tensor<2xf32>
  %c = stablehlo.constant dense<1.0e-30> : tensor<2xf32>
  %m = stablehlo.multiply %x, %c : tensor<2xf32>
  %d = stablehlo.divide %m, %c : tensor<2xf32>
  %r = stablehlo.add %l, %d : tensor<2xf32>
  return %r : tensor<2xf32>
}"""


def test_all_three_apart():
    found = differential.compare(hg.load(THREE_APART), [np.float32([100, 1e-10])], "cpu",
                                 "interpret", also=NO_ALGSIMP, bitwise=True)
    assert found.verdicts == ["apart"]
    assert found.iterations[-1].third[0].odd_one_out is None
    assert "all three differ" in found.text()


def test_the_verdict_of_each_combination():
    rule = Tolerance(abs=1.5, rel=0.0)

    def verdict(test, reference, third):
        a, b, c = (np.float32([v]) for v in (test, reference, third))
        return three_way(compare_arrays(a, b, rule), compare_arrays(c, a, rule),
                         compare_arrays(c, b, rule)).verdict
    assert verdict(0, 0, 0) == "agree"
    assert verdict(5, 0, 0) == "test"
    assert verdict(0, 5, 0) == "reference"
    assert verdict(0, 0, 5) == "third"
    assert verdict(0, 5, 10) == "apart"
    # within the bounds of both, which differ: no odd one out
    assert verdict(0, 2, 1) == differential.UNDECIDED


def test_the_command_line(tmp_path):
    module = tmp_path / "le.mlir"
    module.write_text(LOG_EXP)
    args = ["compare", str(module), "--input", "4xf32=[1 100 3 4]", "--also", "cpu",
            "--also-flag", "xla_disable_hlo_passes=algsimp", "--json", str(tmp_path / "v.json")]
    found = hlogen(*args)
    assert found.exit_code == 1, found.output
    assert "result 0: the test side cpu is the odd one out: the reference and the third side " \
           "agree" in found.output
    record = json.loads((tmp_path / "v.json").read_text())
    assert record["third"] == {"backend": "cpu", "through_hlo": False,
                               "xla_options": {"xla_disable_hlo_passes": "algsimp"}}
    (seen,) = record["iterations"][0]["three_way"]
    assert (seen["verdict"], seen["odd_one_out"]) == ("test", "test")
    assert seen["third_against_reference"]["ok"] is True
    assert seen["third_against_test"]["ok"] is False
    agree = hlogen("compare", str(module), "--input", "4xf32=[1 2 3 4]", "--also", "hlo:cpu")
    assert agree.exit_code == 0 and "all three agree" in agree.output


def test_the_command_line_refuses(tmp_path):
    module = tmp_path / "le.mlir"
    module.write_text(LOG_EXP)
    alone = hlogen("compare", str(module), "--also-flag", "xla_disable_hlo_passes=algsimp")
    assert alone.exit_code == 2 and "--also" in alone.output
    unknown = hlogen("compare", str(module), "--also", "nowhere")
    assert unknown.exit_code == 2 and "--also" in unknown.output


def test_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    for name, code in zip(("le.mlir", "apart.mlir"),
                          docs.blocks("docs/three-way.md", "mlir", "Three sides")):
        (tmp_path / name).write_text(code)
    assert len(run_session(docs.console("docs/three-way.md", "Three sides"))) == 4
    (code,) = docs.blocks("docs/three-way.md", "python", "From Python")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/three-way.md", "exec"), {"__name__": "page"})
    assert out.getvalue() == "['test']\n"


def test_iree_as_the_third_side_and_as_the_reference():
    # IREE, where installed: no algebraic simplifier of its own, so it sides with the
    # interpreter against XLA's rewrite; and a fast reference of its own
    pytest.importorskip("iree.runtime")
    pytest.importorskip("iree.compiler")
    comp = hg.load(LOG_EXP)
    found = differential.compare(comp, [X], "cpu", "interpret", also="iree")
    assert found.verdicts == ["test"]
    assert differential.compare(comp, [X], "cpu", "iree", also=NO_ALGSIMP).verdicts == ["test"]
    assert not differential.compare(comp, [X], "cpu", "iree").ok
