"""`hlogen fuzz` (hg.fuzz.run) for a few seconds with a fixed seed and a bounded number of
programs: the example of docs/fuzz.md (a new signature is exit 1, the same one again exit 0),
the files it writes (reproducers checked again on their own, summary.json, junit.xml),
a corpus module on which XLA CPU aborts (a crash is a finding, reduced; the fuzzer goes
on), and bad input. `make fuzz-backends` runs the long search (tests/test_fuzz_backends.py)."""
from __future__ import annotations

import json
import os
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner

import hlogen as hg
from hlogen_cli.main import main
from tests import docs
from tests.test_cli_readme import fresh_clone, run_session
from tests.test_cli_reduce import small_network, with_missing_mesh
from tests.test_report import block, without_hlogen


def hlogen(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_the_page_s_example_and_what_it_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(fresh_clone(tmp_path))
    assert len(run_session(docs.console("docs/fuzz.md", "An example"))) == 5
    summary = json.loads(open("out/fuzz/summary.json").read())
    assert summary["new"] == 0 and summary["programs"] == 4 and summary["seed"] == 0
    assert summary["test"]["backend"] == "cpu" and summary["reference"]["backend"] == "interpret"
    (finding,) = summary["findings"]
    # named by its cause, the op where the sides part; the class of the difference there
    # is recorded beside it
    assert finding["signature"] == "divergence at stablehlo.subtract (value): cpu wrong"
    # exact math at the origin: x + 12582912 - 12582912 rounds to 0 for a small x; XLA
    # CPU's x (algsimp drops the pair) is the wrong side
    assert (finding["verdict"], finding["wrong"]) == ("test wrong", "cpu wrong")
    assert finding["exact"][0] == "0"
    assert (finding["kind"], finding["difference"], finding["at"]) == \
        ("divergence", "value", "stablehlo.subtract")
    assert finding["ops"] == ["stablehlo.add", "stablehlo.subtract"]
    assert finding["program"] == "out/corpus/residual.mlir" and finding["seen"] == 1
    # the mutated module's inputs span the exponent range (seed 0's share): it agrees there
    assert summary["large_range"] == 2
    # the reproducer, checked again: XLA CPU gives x, the interpreter x rounded (numpy's f32)
    module = hg.load(finding["module"])
    with np.load(finding["inputs"]) as saved:
        x = saved[module.parameter_names[0]]
    rounding = np.float32(12582912)
    np.testing.assert_array_equal(hg.compile(module)(x), x)
    np.testing.assert_array_equal(hg.interpret(module, x), (x + rounding) - rounding)
    assert "to see it: hlogen compare" in open(finding["module"][:-len(".mlir")] + ".txt").read()
    # the report beside it: its reproducer, run without hlogen, prints XLA CPU's x
    report = open(finding["report"]).read()
    assert finding["report"] == finding["module"][:-len(".mlir")] + ".report.md"
    assert "stablehlo.subtract" in report.splitlines()[0], report
    assert report.splitlines()[0].startswith(
        "# XLA:CPU gives a wrong result for stablehlo.subtract (f32)"), report
    done = without_hlogen(block(report, "python"), tmp_path)
    assert f"cpu (test) {float(x.flat[0])!r}, interpret (reference) 0.0, exact 0" in \
        done.stdout and done.returncode == 1, done.stdout + done.stderr
    # docs/report.md's session, on this finding (the python its sessions run: this one)
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep +
                       os.environ["PATH"])
    run_session(docs.console("docs/report.md", "From a fuzz finding to the report"))
    # JUnit: the finding (known by the second run: skipped) and the programs that agreed
    suite = ET.parse("out/fuzz/junit.xml").getroot().find("testsuite")
    assert suite.get("failures") == "0" and suite.get("skipped") == "1"
    names = [case.get("name") for case in suite.iter("testcase")]
    assert names == ["programs that agree", finding["signature"]]


def test_a_crash_in_the_corpus_is_a_finding_and_the_fuzzer_goes_on(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "sdy.mlir").write_text(with_missing_mesh(small_network()))
    (corpus / "fine.mlir").write_text(small_network().as_text())
    run = hg.fuzz.run("cpu", "interpret", out=tmp_path / "found", seed=1, corpus=[corpus],
                  programs=6, seconds=300, reduce_seconds=60)
    assert run.programs == 6 and run.from_corpus == 3
    crashes = [f for f in run.findings if f.kind.startswith("crash")]
    assert [(f.kind, f.difference) for f in crashes] == [("crash of cpu", "SIGABRT")], run.text()
    (crash,) = crashes
    assert crash.new and crash.op_count <= 2 and "Mesh not found" in crash.message
    # the signature: the signal and XLA's last words, as they are but for numbers
    assert crash.signature == "crash of cpu (SIGABRT): Check failed: false Mesh not found " \
                              "with name: @mesh", crash.signature
    assert crash.command.startswith(f"hlogen run {crash.module} --backend cpu")
    # XLA ends the process on the reproducer still: hlogen run reports it, exit 1
    ran = hlogen(*crash.command.split()[1:])
    assert ran.exit_code == 1 and "aborted (SIGABRT)" in ran.stderr, ran.output
    summary = json.loads((tmp_path / "found" / "summary.json").read_text())
    assert [f["kind"] for f in summary["findings"]] == [f.kind for f in run.findings]


def test_a_bitcast_of_values_that_match_is_not_a_finding(tmp_path):
    """XLA CPU's log of a negative number is a NaN of other bits than the interpreter's,
    and a bitcast_convert to integers shows them: the spec leaves a NaN's sign and
    payload open, so the fuzzer leaves the difference out (compare reports it)."""
    comp = hg.load("""
module @m {
  func.func @main(%x: tensor<4xf32>) -> tensor<4xi32> {
    %0 = stablehlo.log %x : tensor<4xf32>
    %1 = stablehlo.bitcast_convert %0 : (tensor<4xf32>) -> tensor<4xi32>
    return %1 : tensor<4xi32>
  }
}""")
    shown = hg.differential.compare(comp, [np.array([-1, -2, 3, -4], np.float32)])
    assert not shown.ok  # the bits differ: cpu's NaN is 0xFFFFFFFF, the interpreter's not
    run = hg.fuzz.run("cpu", "interpret", out=tmp_path / "found", seed=0, corpus=[comp],
                  programs=12, seconds=300, large_range=False)
    assert "bits of matching values" in " ".join(run.allowed), run.text()
    assert not [f for f in run.findings if f.at == "stablehlo.bitcast_convert"], run.text()
    # and the rule behind it, on arrays: only where the operands' bits differ, and
    # wherever they differ, they match by the rule
    from hlogen.differential.allowed import bitcast_allows
    a = np.array([np.nan, 1.0], np.float32)
    b = a.copy()
    b[0] = -b[0]
    assert bitcast_allows(a.view(np.int32), b.view(np.int32), a, b)
    assert bitcast_allows(a.view(np.int8).reshape(2, 4), b.view(np.int8).reshape(2, 4), a, b)
    h = np.array([[np.nan, 1], [2, np.nan]], np.float16)
    g = h.copy()
    g[0, 0] = -g[0, 0]
    assert bitcast_allows(h.view(np.int32)[:, 0], g.view(np.int32)[:, 0], h, g)
    g[1, 0] = 3  # a value that does not match
    assert not bitcast_allows(h.view(np.int32)[:, 0], g.view(np.int32)[:, 0], h, g)
    same = np.array([1, 2], np.float32)  # equal operands, results that differ: a fault
    assert not bitcast_allows(np.array([1, 2], np.int32), np.array([1, 3], np.int32), same, same)


def test_a_product_in_another_order_may_meet_an_infinity_or_a_zero_first():
    """A reduce that multiplies f16 values whose large ones overflow and whose small ones
    underflow: XLA CPU's order gives inf * 0 = NaN, the interpreter's 0 (a fuzzing find);
    the spec leaves the order open. Values that cannot overflow leave no such excuse."""
    from hlogen.differential.allowed import order_allows
    comp = hg.load("""
module @m {
  func.func @main(%x: tensor<8xf16>) -> tensor<f16> {
    %one = stablehlo.constant dense<1.0> : tensor<f16>
    %0 = stablehlo.reduce(%x init: %one) applies stablehlo.multiply across dimensions = [0] : (tensor<8xf16>, tensor<f16>) -> tensor<f16>
    return %0 : tensor<f16>
  }
}""")
    (op,) = [op for op in hg.mlir.walk(comp.module) if op.name == "stablehlo.reduce"]
    nan, zero = np.float16(np.nan), np.float16(0)
    extreme = np.array([300, 450, 330, 3100, 1e-4, 2e-4, 1e-3, 3e-3], np.float16)
    assert order_allows(op, nan, zero, [extreme, np.float16(1)])
    tame = np.array([3, 4, 3, 3, 1e-4, 2e-4, 1e-3, 3e-3], np.float16)
    assert not order_allows(op, nan, zero, [tame, np.float16(1)])


@pytest.mark.parametrize("args,said", [
    (["-o", "{tmp}/no/such/folder"], "does not exist"),
    (["-o", "{tmp}/out", "--element-types", "f32,f33"], "f33"),
    (["-o", "{tmp}/out", "--corpus", "{tmp}/nothing"], "no such file"),
    (["-o", "{tmp}/out", "--test", "nowhere"], "backend must be one of"),
])
def test_bad_input_is_exit_2(tmp_path, args, said):
    result = hlogen("fuzz", "--programs", 1, *[a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2, result.output
    assert said in result.stderr and "Traceback" not in result.output


def test_a_folder_whose_summary_is_not_fuzz_s_is_refused(tmp_path):
    (tmp_path / "summary.json").write_text("[1, 2]")
    result = hlogen("fuzz", "--programs", 1, "-o", tmp_path)
    assert result.exit_code == 2 and "not a summary of hlogen fuzz" in result.stderr
    assert (tmp_path / "summary.json").read_text() == "[1, 2]"
