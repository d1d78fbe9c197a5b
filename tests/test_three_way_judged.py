"""The third opinion where exact math cannot judge (issue 36 item 5): compare's findings
whose origin the arbiter has no model of (`undetermined`) are judged by the majority of
three sides, exact math stays the judge where it judged (a majority against it is said),
and the fuzzer's signatures name the side the two others agree against. The
disagreements are real: XLA's algebraic simplifier makes log(exp(x)) x inside a while
loop (the arbiter has no model of while); XLA without it (`algsimp` disabled) and the
interpreter agree on inf, the route through HLO agrees with XLA."""
from __future__ import annotations

import json

import numpy as np
import pytest

import hlogen as hg
from hlogen import differential
from hlogen.differential import Decision, Side, Tolerance
from hlogen.differential.isolated import Children
from hlogen.differential.origin import with_findings
from hlogen.fuzz.triage import Triage
from tests import docs
from tests.test_cli_compare import hlogen
from tests.test_cli_readme import run_session
from tests.test_fuzz_signatures import GIVEN, TWO
from tests.test_three_way import LOG_EXP, NO_ALGSIMP, X

PAGE = "docs/three-way.md"
JUDGED = "Who is wrong where exact math cannot say"
FUZZED = "A third side in the fuzzer"
(LOOP,) = docs.blocks(PAGE, "mlir", JUDGED)
(CORPUS,) = docs.blocks(PAGE, "mlir", FUZZED)
HLO = Side.of("hlo:cpu")
THIRD_LABEL = "cpu (xla_disable_hlo_passes=algsimp)"

# the loop of LOOP, its body also adding (x * 1e-30) / 1e-30: bit for bit the three sides
# all differ there (tests/test_three_way.py's THREE_APART, in a loop)
LOOP_APART = LOOP.replace("4xf32", "2xf32").replace(
    "      stablehlo.return %j, %l : tensor<i32>, tensor<2xf32>",
    """      %k = stablehlo.constant dense<1.0e-30> : tensor<2xf32>
      %m = stablehlo.multiply %v, %k : tensor<2xf32>
      %d = stablehlo.divide %m, %k : tensor<2xf32>
      %s = stablehlo.add %l, %d : tensor<2xf32>
      stablehlo.return %j, %s : tensor<i32>, tensor<2xf32>""")
APART_INPUT = np.float32([100, 1e-10])


def judged(module, inputs, also, **rule):
    comp = hg.load(module)
    return with_findings(differential.compare(comp, inputs, "cpu", "interpret", also=also,
                                              **rule), comp, inputs)


def test_an_undetermined_finding_is_judged_by_the_majority():
    found = judged(LOOP, [X], NO_ALGSIMP)
    (finding,) = found.findings
    assert (finding.origin.op, finding.verdict) == ("stablehlo.while", "undetermined")
    assert found.decisions == [Decision("test", "majority", "test")]
    assert f"by majority: the test side cpu is wrong: the reference and the third side " \
           f"{THIRD_LABEL} agree against it" in found.text()
    record = found.to_json()["findings"][0]
    assert record["verdict"] == "undetermined"  # (the arbiter's, as without a third side)
    assert record["third"] == {"verdict": "test", "decided_by": "majority", "wrong": "test",
                               "contradicts": False}
    assert found.failed
    # the other way round: the route through HLO sides with XLA against the interpreter
    other = judged(LOOP, [X], HLO)
    assert other.decisions == [Decision("reference", "majority", "reference")]
    assert "the reference interpret is wrong" in other.text()
    # without a third side: no decision, the JSON as before
    plain = judged(LOOP, [X], None)
    assert plain.decisions is None and "third" not in plain.to_json()["findings"][0]


def test_exact_math_stays_the_judge_and_a_contradiction_is_said():
    agreeing = judged(LOG_EXP, [X], NO_ALGSIMP)
    (finding,) = agreeing.findings
    assert finding.verdict == "test wrong"
    assert agreeing.decisions == [Decision("test", "exact math", "test")]
    assert "it agrees with the reference against the test side, as exact math does" in \
        agreeing.text()
    # XLA through HLO makes the same rewrite: two compilers agree on a wrong value
    against = judged(LOG_EXP, [X], HLO)
    assert against.decisions == [Decision("reference", "exact math", "test",
                                          contradicts=True)]
    assert "the third side hlo:cpu contradicts exact math: it agrees with the test side " \
           "cpu, which exact math finds wrong" in against.text()
    assert against.to_json()["findings"][0]["third"]["contradicts"] is True
    assert against.failed


def test_all_three_apart_leaves_it_undetermined():
    found = judged(LOOP_APART, [APART_INPUT], NO_ALGSIMP, bitwise=True)
    (finding,) = found.findings
    assert finding.verdict == "undetermined"
    assert found.decisions == [Decision("apart", None, None)]
    assert f"the third side {THIRD_LABEL}: all three differ (the finding stays " \
           f"undetermined)" in found.text()
    assert found.failed


def test_the_majority_of_a_findings_results():
    assert differential.majority(["test", "test"]) == "test"
    assert differential.majority(["test", "reference"]) == differential.UNDECIDED
    assert differential.majority(["apart"]) == "apart"


def test_compare_says_it_on_the_command_line(tmp_path):
    module = tmp_path / "loop.mlir"
    module.write_text(LOOP)
    found = hlogen("compare", module, "--input", "4xf32=[1 100 3 4]", "--also", "hlo:cpu",
                   "--json", tmp_path / "v.json")
    assert found.exit_code == 1, found.output
    assert "by majority: the reference interpret is wrong: the test and the third side " \
           "hlo:cpu agree against it" in found.output
    (record,) = json.loads((tmp_path / "v.json").read_text())["findings"]
    assert record["third"]["decided_by"] == "majority"


@pytest.fixture(scope="module")
def children():
    with Children(120) as made:
        yield made


def signature_of(children, module, inputs, third, tolerance=Tolerance()):
    fuzzer = Triage((Side.of("cpu"), Side.of("interpret")), tolerance, children, 120,
                    third=third)
    return str(fuzzer.observe(hg.load(module), inputs, 0, False)[1])


def test_the_fuzzers_signature_names_the_side_by_majority(children):
    assert signature_of(children, LOOP, [X], None) == \
        "divergence at stablehlo.while (value): undetermined"
    assert signature_of(children, LOOP, [X], NO_ALGSIMP) == \
        f"divergence at stablehlo.while (value): cpu wrong (by majority with {THIRD_LABEL})"
    assert signature_of(children, LOOP, [X], HLO) == \
        "divergence at stablehlo.while (value): interpret wrong (by majority with hlo:cpu)"
    assert signature_of(children, LOOP_APART, [APART_INPUT], NO_ALGSIMP,
                        Tolerance(bitwise=True)) == \
        f"divergence at stablehlo.while (non-finite): all three apart (with {THIRD_LABEL})"
    # where exact math judges, it stays the judge: the signature is as without a third side
    assert signature_of(children, TWO, GIVEN, HLO) == \
        "divergence at stablehlo.power (integer): cpu wrong"


def test_the_page(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "le.mlir").write_text(LOG_EXP)
    (tmp_path / "loop.mlir").write_text(LOOP)
    (tmp_path / "corpus.mlir").write_text(CORPUS)
    judged_session = docs.console("docs/three-way.md", "Who is wrong where exact math cannot say")
    assert len(run_session(judged_session)) == 3
    assert len(run_session(docs.console("docs/three-way.md", "A third side in the fuzzer"))) == 2
    summary = json.loads((tmp_path / "found" / "summary.json").read_text())
    (finding,) = summary["findings"]
    assert "--also cpu --also-flag xla_disable_hlo_passes=algsimp" in finding["command"]
    assert finding["decided_by"] == "majority"
    report = open(finding["report"]).read()  # NAME.report.md says it under its verdict
    assert f"**By majority:** cpu wrong (by majority with {THIRD_LABEL}): the two other " \
           f"sides agree against it" in report


@pytest.mark.iree
def test_iree_judges_where_exact_math_cannot(tmp_path, children):
    """The issue's spelling, `compare --reference interpret --also iree`: IREE, a compiler
    of its own without XLA's simplifier, sides with the interpreter; and the fuzzer's."""
    pytest.importorskip("iree.runtime")
    pytest.importorskip("iree.compiler")
    module = tmp_path / "loop.mlir"
    module.write_text(LOOP)
    found = hlogen("compare", module, "--input", "4xf32=[1 100 3 4]", "--reference",
                   "interpret", "--also", "iree")
    assert found.exit_code == 1, found.output
    assert "by majority: the test side cpu is wrong: the reference and the third side iree " \
           "agree against it" in found.output
    assert signature_of(children, LOOP, [X], Side.of("iree")) == \
        "divergence at stablehlo.while (value): cpu wrong (by majority with iree)"


def test_options_of_a_third_side_without_one_are_refused(tmp_path):
    b = hg.Builder("neg")
    comp = b.build(hg.ops.neg(b.parameter(hg.f32[2], "x")))
    with pytest.raises(hg.InputError, match="also_options=.* without also"):
        differential.compare(comp, [np.ones(2, np.float32)], also_options=["xla_disable_hlo_passes=algsimp"])
    with pytest.raises(hg.InputError, match="fuzz: also_options=.* without also"):
        hg.fuzz.run("cpu", "interpret", out=tmp_path / "f", programs=1,
                    also_options=["xla_disable_hlo_passes=algsimp"])
