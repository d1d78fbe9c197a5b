"""hlogen check: formats, judging rules, workers that die, known deviations, reports,
divergence localisation, and a stratified sample of StableHLO's own test files."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from click.testing import CliRunner
from jaxlib.mlir import ir

import hlogen as hg
from hlogen import conformance, mlir, ops
from hlogen.differential.near import Tolerance
from hlogen.differential.origin import find_origin
from hlogen.conformance import files, judge, known, module, runner, sample
from hlogen_cli.main import main as cli

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="the StableHLO conformance data is absent")


def write_testdata(path, op_line, inputs, expected, check="expect_eq", ty="tensor<4xf32>"):
    """A file in the testdata format: @main computes `op_line` on @inputs, checks @expected."""
    path.write_text(f"""// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret
module @jit_main {{
  func.func public @main() -> ({ty}) {{
    %0 = call @inputs() : () -> {ty}
    %1 = call @expected() : () -> {ty}
    {op_line}
    stablehlo.custom_call @check.{check}(%2, %1) {{has_side_effect = true}} : ({ty}, {ty}) -> ()
    return %2 : {ty}
  }}
  func.func private @inputs() -> {ty} {{
    %cst = stablehlo.constant dense<{inputs}> : {ty}
    return %cst : {ty}
  }}
  func.func private @expected() -> {ty} {{
    %cst = stablehlo.constant dense<{expected}> : {ty}
    return %cst : {ty}
  }}
}}
""")
    return path


# -- formats ----------------------------------------------------------------------------

def test_check_dialect_short_and_generic_forms_become_custom_calls():
    text = """func.func @t() {
  %a = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf64>
  check.expect_eq_const %a, dense<[1.0, 2.0]> : tensor<2xf64>
  check.expect_almost_eq_const %a,
      dense<[1.0,
             2.0]> : tensor<2xf64>
  check.expect_almost_eq %a, %a, tolerance = 0.1 : tensor<2xf64>
  check.expect_almost_eq_const %a, dense<[1.0, 2.0]> : tensor<2xf64> {tolerance = 0.5 : f64}
  check.expect_close %a, %a, max_ulp_difference = 7 : tensor<2xf64>, tensor<2xf64>
  "check.expect_eq_const"(%a) <{value = dense<[1.0, 2.0]> : tensor<2xf64>}> : (tensor<2xf64>) -> ()
  func.return
}"""
    rewritten, checks = files.rewrite_checks(text, "t.mlir")
    assert "check.expect" not in rewritten.replace("@check.expect", "")
    assert [c["name"] for c in checks] == ["expect_eq_const", "expect_almost_eq_const",
                                          "expect_almost_eq", "expect_almost_eq_const",
                                          "expect_close", "expect_eq_const"]
    assert checks[2]["tolerance"] == 0.1 and checks[3]["tolerance"] == 0.5
    assert checks[4]["max_ulp_difference"] == 7
    case = module.load_case(text, "t.mlir", lift_constants=True)
    assert [c.rule.mode for c in case.checks] == ["exact", "near", "near", "near", "ulp", "exact"]
    assert [c.rule.abs for c in case.checks[1:4]] == [1e-4, 0.1, 0.5]  # 1e-4: the dialect's default
    assert all(c.rule.rel == 0 for c in case.checks[1:4]) and case.checks[4].rule.ulp == 7


def test_run_lines_and_split_files():
    text = "// RUN: stablehlo-translate --interpret -split-input-file %s\nA\n// -----\nB\n// -----\nC\n"
    plan = files.plan_of(text)
    assert plan.interpret and plan.split and not plan.disabled
    mods = files.modules_of("f.mlir", text, plan)
    assert [m.text.strip() for m in mods] == ["// RUN: stablehlo-translate --interpret -split-input-file %s\nA", "B", "C"]
    assert [m.line for m in mods] == [1, 4, 6]
    disabled = files.plan_of("// RUN-DISABLED(inaccurate) stablehlo-opt -inline %s | stablehlo-translate --interpret\n")
    assert disabled.disabled == "inaccurate" and not disabled.interpret
    assert files.plan_of("// RUN: stablehlo-translate --serialize --target=current %s\n").roundtrip


def test_constants_are_decoded_directly():
    src = """func.func @main() -> () {
  %a = stablehlo.constant dense<[0xFF80, -2.500000e+00, 0x7FC0]> : tensor<3xbf16>
  %b = stablehlo.constant dense<[(1.0, 2.0), (0x7FC00000, 3.0)]> : tensor<2xcomplex<f32>>
  %c = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
  %d = stablehlo.constant dense<3> : tensor<2x2xi32>
  %e = stablehlo.constant dense<[1, -2]> : tensor<2xi4>
  return
}"""
    m = ir.Module.parse(src, context=mlir.context())
    got = [mlir.decode_constant(op.operation) for op in m.body.operations[0].regions[0].blocks[0].operations
           if op.operation.name == "stablehlo.constant"]
    assert got[0].dtype == hg.bf16.dtype and got[0][0] == -np.inf and np.isnan(got[0][2])
    assert got[1].dtype == np.complex64 and got[1][0] == 1 + 2j and np.isnan(got[1][1].real)
    np.testing.assert_array_equal(got[2], np.array([1, 2], np.float32))
    np.testing.assert_array_equal(got[3], np.full((2, 2), 3, np.int32))
    assert got[4].dtype == hg.s4.dtype and list(got[4].astype(int)) == [1, -2]


def test_pjrt_gets_constants_as_parameters(tmp_path):
    f = write_testdata(tmp_path / "exp.mlir", "%2 = stablehlo.exponential %0 : tensor<4xf32>",
                      "[0.0, 1.0, 2.0, 3.0]", "[1.0, 2.71828175, 7.38905621, 20.0855369]", "expect_close")
    case = module.load_case(f.read_text(), str(f), lift_constants=True)
    assert len(case.computation.parameter_shapes) == 2  # inputs and expected
    assert "stablehlo.constant" not in case.computation.as_text()
    assert case.ops == ["stablehlo.exponential"]


# -- judging ----------------------------------------------------------------------------

def test_judging_rules():
    """StableHLO's checks, each as hlogen.differential.near's rule for it."""
    def ok(call, params, got, want, from_dialect=False):
        return judge.judge(judge.rule_of(call, params, from_dialect), np.array(got),
                           np.array(want)).ok

    nan = np.float32("nan")
    assert not ok("expect_eq", {}, [nan], [nan])  # NaN differs from NaN
    assert ok("expect_eq", {}, [np.float32(-0.0)], [np.float32(0.0)])
    assert ok("expect_close", {}, [nan], [nan])
    one = np.array([1.0], np.float32)
    three_ulp = one.view(np.int32) + 3
    assert ok("expect_close", {}, three_ulp.view(np.float32), one)
    assert not ok("expect_close", {}, (three_ulp + 1).view(np.float32), one)
    assert ok("expect_close", {"max_ulp_difference": 0}, [-0.0], [0.0])
    assert not ok("expect_close", {"min_ulp_difference": 1}, one, one)  # at least 1 apart
    # an infinity is no number of ULPs from a finite value (StableHLO's ULPDifference),
    # not even from the largest, the next value in the type's order
    big = np.finfo(np.float32).max
    assert not ok("expect_close", {}, [np.float32(np.inf)], [big])
    assert not ok("expect_close", {}, [big], [np.float32(np.inf)])
    assert ok("expect_close", {}, [np.float32(-np.inf)], [np.float32(-np.inf)])
    assert ok("expect_almost_eq", {}, [1.0005], [1.0])  # the custom call: 1e-3
    assert not ok("expect_almost_eq", {}, [1.0005], [1.0], from_dialect=True)  # 1e-4
    assert ok("eq", {}, [1.00001], [1.0])
    assert not ok("eq", {}, [2], [1])
    assert not ok("expect_almost_eq", {}, [np.inf], [np.float32(3e38)])
    v = judge.judge(judge.rule_of("expect_almost_eq", {}, True), np.array([1 + 2j]),
                    np.array([1 + 2.5j]))
    assert not v.ok and v.first[0].index == (0,)
    assert judge.describe(v).startswith("1 of 1 elements differ first at [0]: got (1+2j)")
    assert v.mask.tolist() == [True]


def test_results_of_another_shape_are_no_difference_in_ulp(tmp_path):
    """A known entry `when: ulp<=N` explains close values, never results of another
    shape or type (which the rule cannot measure)."""
    f = write_testdata(tmp_path / "add.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                       "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 8.0]", "expect_close")
    case = module.load_case(f.read_text(), str(f), lift_constants=True)
    for got in (np.zeros(3, np.float32), np.zeros(4, np.float64)):
        record = runner.judge_results(case, [got, np.zeros(4, np.float32)])
        assert record["status"] == "fail" and "shapes differ" in record["message"], record
        assert not known.Entry("cpu", "close", "t", op="stablehlo.add", when="ulp<=3").explains(record)


# -- runs through workers ---------------------------------------------------------------

def test_wrong_expected_values_fail_on_both_backends(tmp_path):
    write_testdata(tmp_path / "good.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                  "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 8.0]")
    write_testdata(tmp_path / "wrong.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                  "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 9.0]")
    run = conformance.run([str(tmp_path)], ["interpret", "cpu"], jobs=2, use_default_known=False)
    status = {(os.path.basename(r["file"]), r["backend"]): r for r in run.records}
    for backend in ("interpret", "cpu"):
        assert status[("good.mlir", backend)]["status"] == "pass"
        wrong = status[("wrong.mlir", backend)]
        assert wrong["status"] == "fail", wrong
        assert "1 of 4 elements differ first at [3]: got 8.0, expected 9.0" in wrong["message"]
        assert wrong["op"] == "stablehlo.add"


SORT_LE = """// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret
module {
  func.func public @main() -> tensor<1000xf32> {
    %0 = stablehlo.constant dense<1.0> : tensor<1000xf32>
    %1 = "stablehlo.sort"(%0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.compare LE, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    }) {dimension = 0 : i64, is_stable = false} : (tensor<1000xf32>) -> tensor<1000xf32>
    stablehlo.custom_call @check.expect_eq(%1, %0) {has_side_effect = true} : (tensor<1000xf32>, tensor<1000xf32>) -> ()
    return %1 : tensor<1000xf32>
  }
}
"""

FOREVER = """// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret
module {
  func.func public @main() -> tensor<i32> {
    %0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.while(%i = %0) : tensor<i32>
    cond {
      %t = stablehlo.constant dense<true> : tensor<i1>
      stablehlo.return %t : tensor<i1>
    } do {
      stablehlo.return %i : tensor<i32>
    }
    stablehlo.custom_call @check.expect_eq(%1, %0) {has_side_effect = true} : (tensor<i32>, tensor<i32>) -> ()
    return %1 : tensor<i32>
  }
}
"""


def test_a_crash_and_a_timeout_are_recorded_and_the_run_goes_on(tmp_path):
    # a comparator that is not a strict weak order makes the interpreter abort (LLVM ERROR)
    (tmp_path / "a_sort_le.mlir").write_text(SORT_LE)
    (tmp_path / "b_forever.mlir").write_text(FOREVER)
    write_testdata(tmp_path / "c_good.mlir", "%2 = stablehlo.negate %0 : tensor<4xf32>",
                  "[1.0, 2.0, 3.0, 4.0]", "[-1.0, -2.0, -3.0, -4.0]")
    run = conformance.run([str(tmp_path)], ["interpret"], jobs=1, timeout=5,
                          use_default_known=False)
    by_name = {os.path.basename(r["file"]): r for r in run.records}
    crash = by_name["a_sort_le.mlir"]
    assert crash["status"] == "crash" and "SIGABRT" in crash["message"], crash
    assert "LLVM ERROR" in crash["message"]  # the last lines of its stderr
    assert crash["op"] == "stablehlo.sort"  # read from the text: the worker could not say
    timeout = by_name["b_forever.mlir"]
    assert timeout["status"] == "timeout" and "did not finish in 5 s" in timeout["message"]
    assert by_name["c_good.mlir"]["status"] == "pass"  # on a fresh worker


def test_known_deviations_and_stale_entries(tmp_path):
    write_testdata(tmp_path / "wrong.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                  "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 9.0]")
    listing = tmp_path / "known.json"
    listing.write_text(json.dumps([
        {"backend": "cpu", "op": "stablehlo.add", "reason": "a deliberate wrong value"},
        {"backend": "interpret", "op": "stablehlo.add", "when": "ulp<=0", "file": "wrong.mlir",
         "reason": "never this small"},
        {"backend": "interpret", "op": "stablehlo.add", "when": "ulp<=0", "reason": "no file: never stale"},
        {"backend": "cpu", "file": ["other.mlir", "more.mlir"], "reason": "about files not run here"}]))
    run = conformance.run([str(tmp_path / "wrong.mlir")], ["interpret", "cpu"], jobs=1,
                          known_lists=[str(listing)], use_default_known=False)
    by_backend = {r["backend"]: r for r in run.records}
    assert by_backend["cpu"]["status"] == "known"
    assert by_backend["cpu"]["known"] == "a deliberate wrong value"
    assert by_backend["interpret"]["status"] == "fail"  # the condition does not hold
    # stale: an entry about files the run ran that explains none of their modules
    assert [e.reason for e in run.stale] == ["never this small"]


def test_known_list_errors_name_the_entry(tmp_path):
    bad = tmp_path / "k.json"
    bad.write_text(json.dumps([{"backend": "cpu", "reason": "no pattern"}]))
    with pytest.raises(hg.HlogenError, match="entry 1: give at least one of op"):
        known.load(str(bad))
    bad.write_text("[{")
    with pytest.raises(hg.HlogenError, match="not JSON"):
        known.load(str(bad))


def test_cli_reports_and_exit_codes(tmp_path):
    write_testdata(tmp_path / "wrong.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                  "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 9.0]")
    write_testdata(tmp_path / "good.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                  "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 8.0]")
    junit, jsonl = tmp_path / "out.xml", tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "--backend", "all", "-j", "2",
                                      "--junit", str(junit), "--json", str(jsonl)])
    assert result.exit_code == 1, result.output
    assert "interpret: 1 pass, 1 fail" in result.output and "cpu: 1 pass, 1 fail" in result.output
    suites = ET.parse(junit).getroot().findall("testsuite")
    # all: the interpreter, jaxlib's cpu, and each PJRT plugin installed (xla-cpu-pjrt)
    names = {s.get("name") for s in suites}
    assert {"conformance.cpu", "conformance.interpret"} <= names, names
    failures = [c for s in suites for c in s.findall("testcase") if c.find("failure") is not None]
    assert len(failures) == len(names) and "expected 9.0" in failures[0].find("failure").get("message")
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(records) == 2 * len(names) and {r["status"] for r in records} == {"pass", "fail"}
    ok = CliRunner().invoke(cli, ["check", str(tmp_path / "good.mlir"), "--backend", "cpu"])
    assert ok.exit_code == 0, ok.output
    for bad_args in (["check", str(tmp_path / "missing")],
                     ["check", str(tmp_path), "--known", str(tmp_path / "nope.json")]):
        bad = CliRunner().invoke(cli, bad_args)
        assert bad.exit_code == 2 and "error:" in bad.output, bad.output


# -- divergence localisation ------------------------------------------------------------

def test_find_origin_names_the_op_where_a_subnormal_is_flushed():
    b = hg.Builder("chain")
    x = b.parameter(hg.f32[4], "x")
    y = b.parameter(hg.f32[4], "y")
    normal = ops.add(y, y)                      # no subnormal: agrees
    scaled = ops.mul(x, b.constant(np.float32(2.0 ** 100)))  # XLA CPU flushes x to zero here
    out = ops.add(ops.exp(ops.neg(normal)), scaled)
    comp = b.build(out)
    xs = np.array([1e-40, 2e-40, 1.0, 3e-39], np.float32)
    ys = np.array([10.0, 10.0, 3.0, 10.0], np.float32)  # exp(-20): the flushed part shows
    found = find_origin(comp, [xs, ys], "cpu", "interpret", Tolerance(ulp=3))
    assert found is not None
    assert found.op == "stablehlo.multiply", str(found)
    assert "test_conformance.py" in found.location and found.line is None  # built in Python
    assert found.test.tolist() == [0, 0, 2.0 ** 100, 0] and found.reference[0] > 0
    assert [a.op for a in found.amplified_by] == ["stablehlo.add"]
    assert find_origin(comp, [np.ones(4, np.float32), ys], "cpu", "interpret",
                       Tolerance(ulp=3)) is None


def test_check_explain_localises_a_failing_module(tmp_path):
    f = write_testdata(tmp_path / "flush.mlir",
                      "%c = stablehlo.constant dense<1.0e+30> : tensor<4xf32>\n"
                      "    %s = stablehlo.multiply %0, %c : tensor<4xf32>\n"
                      "    %2 = stablehlo.abs %s : tensor<4xf32>",
                      "[1.0e-40, 1.0, 2.0, 3.0]",
                      "[9.99994610e-11, 1.0e+30, 2.0e+30, 3.0e+30]", "expect_close")
    result = CliRunner().invoke(cli, ["check", str(f), "--backend", "cpu", "--explain",
                                      "--no-default-known"])
    assert result.exit_code == 1, result.output
    assert "born at" in result.output and "stablehlo.multiply" in result.output
    assert f"{f}:" in result.output  # the op's location in the file


# -- StableHLO's own files: a stratified sample (every op at least once) --------------------

@needs_data
def test_stratified_sample_of_stablehlo_testdata():
    chosen = sample.stratified([str(DATA / "testdata")])
    every_op = set()
    for path in files.discover([str(DATA / "testdata")]):
        text = pathlib.Path(path).read_text()
        if files.plan_of(text).interpret:
            every_op |= sample.strata_of(text)
    covered = set().union(*(sample.strata_of(pathlib.Path(p).read_text()) for p in chosen))
    assert covered == every_op  # every op, and every element type of each op
    assert len(chosen) < len(files.discover([str(DATA / "testdata")])) / 3
    run = conformance.run(chosen + [str(DATA / "tests" / "interpret" / "compare.mlir")],
                          ["interpret", "cpu"], jobs=os.cpu_count() or 2)
    failing = [f"{r['status']} {r['backend']} {r['file']}#{r['module']}: {r['message'][:300]}"
               for r in run.records if r["status"] in ("fail", "error", "crash", "timeout")]
    assert not failing, "\n".join(failing)
    assert sum(r["status"] == "pass" for r in run.records) >= len(chosen)


BITCAST_COMPLEX = """// RUN: stablehlo-opt -inline %s | stablehlo-translate --interpret
module {
  func.func public @main() -> tensor<2xcomplex<f32>> {
    %0 = stablehlo.constant dense<(1.0, 2.0)> : tensor<complex<f64>>
    %1 = stablehlo.bitcast_convert %0 : (tensor<complex<f64>>) -> tensor<2xcomplex<f32>>
    %2 = stablehlo.constant dense<[(0.0, 1.875), (0.0, 2.0)]> : tensor<2xcomplex<f32>>
    stablehlo.custom_call @check.expect_eq(%1, %2) {has_side_effect = true} : (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) -> ()
    return %1 : tensor<2xcomplex<f32>>
  }
}
"""


def test_a_batch_runs_as_one_computation_each_module_with_its_own_values(tmp_path):
    """The joined path itself: run_batch falls back to one module at a time when a batch
    fails, so a broken join would only show as slowness, not as a failing record."""
    written = [("%2 = stablehlo.add %0, %0 : tensor<4xf32>", "[1.0, 2.0, 3.0, 4.0]",
                np.array([2, 4, 6, 8], np.float32), "tensor<4xf32>"),
               ("%2 = stablehlo.negate %0 : tensor<2xi32>", "[1, -2]",
                np.array([-1, 2], np.int32), "tensor<2xi32>"),
               ("%2 = stablehlo.abs %0 : tensor<3xf64>", "[-1.5, 0.0, 2.5]",
                np.array([1.5, 0.0, 2.5]), "tensor<3xf64>")]
    cases = [module.load_case(write_testdata(tmp_path / f"m{i}.mlir", line, inputs,
                                             json.dumps(want.tolist()), ty=ty).read_text(),
                              f"m{i}.mlir", lift_constants=True)
             for i, (line, inputs, want, ty) in enumerate(written)]
    outputs = runner._run_joined(cases, "cpu")
    assert len(outputs) == len(written)
    for (_, _, want, _), (actual, expected) in zip(written, outputs):
        assert actual.dtype == want.dtype and expected.dtype == want.dtype
        np.testing.assert_array_equal(actual, want)
        np.testing.assert_array_equal(expected, want)


def test_a_batch_that_fails_to_compile_is_run_module_by_module(tmp_path):
    for i in range(3):
        write_testdata(tmp_path / f"good{i}.mlir", "%2 = stablehlo.sine %0 : tensor<4xf32>",
                       "[0.0, 0.0, 0.0, 0.0]", "[0.0, 0.0, 0.0, 0.0]")
    (tmp_path / "bitcast.mlir").write_text(BITCAST_COMPLEX)
    run = conformance.run([str(tmp_path)], ["cpu"], jobs=1, batch=8, use_default_known=False)
    status = {os.path.basename(r["file"]): r for r in run.records}
    assert status["bitcast.mlir"]["status"] == "error"
    assert "complex" in status["bitcast.mlir"]["message"]
    assert [status[f"good{i}.mlir"]["status"] for i in range(3)] == ["pass"] * 3
    # the built-in list knows this one, in the file of StableHLO's tests it names
    (tmp_path / "bitcast_convert.mlir").write_text(BITCAST_COMPLEX)
    again = conformance.run([str(tmp_path / "bitcast_convert.mlir")], ["cpu"], jobs=1)
    assert again.records[0]["status"] == "known"


def test_disabled_round_trip_and_interpreter_only_files(tmp_path):
    good = write_testdata(tmp_path / "disabled.mlir", "%2 = stablehlo.negate %0 : tensor<4xf32>",
                          "[1.0, 2.0, 3.0, 4.0]", "[-1.0, -2.0, -3.0, -4.0]")
    good.write_text(good.read_text().replace("// RUN: ", "// RUN-DISABLED(inaccurate): ", 1))
    (tmp_path / "roundtrip.mlir").write_text(
        "// RUN: stablehlo-translate --serialize --target=current %s | stablehlo-translate "
        "--deserialize | stablehlo-opt > %t.0\n"
        "func.func @main(%a: tensor<?xf32>) -> tensor<?xf32> {\n"
        "  %0 = stablehlo.abs %a : tensor<?xf32>\n  return %0 : tensor<?xf32>\n}\n")
    (tmp_path / "parallel.mlir").write_text(
        "// RUN: stablehlo-translate --interpret -split-input-file %s\n"
        "func.func @main() {\n  %0 = stablehlo.constant dense<1> : tensor<i64>\n"
        "  %1 = \"interpreter.run_parallel\"() {programs = [[@main]]} : () -> tensor<i64>\n"
        "  check.expect_eq_const %0, dense<1> : tensor<i64>\n  func.return\n}\n")
    run = conformance.run([str(tmp_path)], ["interpret", "cpu"], jobs=2)
    got = {(os.path.basename(r["file"]), r["backend"]): r for r in run.records}
    for backend in ("interpret", "cpu"):
        disabled = got[("disabled.mlir", backend)]
        assert disabled["status"] == "disabled"
        assert disabled["message"].startswith("RUN-DISABLED upstream (inaccurate); here: pass")
        parallel = got[("parallel.mlir", backend)]
        assert parallel["status"] == "skipped" and "interpreter.run_parallel" in parallel["message"]
    roundtrip = got[("roundtrip.mlir", "roundtrip")]
    assert roundtrip["status"] == "pass" and len(run.records) == 7
    for backend in ("interpret", "cpu"):  # its dynamic dimension refined, it runs too
        assert got[("roundtrip.mlir", backend)]["status"] == "ran"
    assert not run.failed


def test_check_from_a_folder_holding_a_clone_and_a_numpy_py(tmp_path):
    """The workers import what is installed, not the current folder's hlogen/ or numpy.py
    (the installed console script, run as a user runs it)."""
    (tmp_path / "hlogen").mkdir()
    (tmp_path / "hlogen" / "__init__.py").write_text("raise SystemExit('imported ./hlogen')\n")
    (tmp_path / "numpy.py").write_text("raise SystemExit('imported ./numpy.py')\n")
    write_testdata(tmp_path / "double.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                   "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 8.0]")
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    hlogen = pathlib.Path(sys.executable).with_name("hlogen")
    done = subprocess.run([str(hlogen), "check", "double.mlir", "--backend", "all", "-j", "2"],
                          cwd=tmp_path, capture_output=True, text=True, env=environment,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "interpret: 1 pass" in done.stdout and "cpu: 1 pass" in done.stdout, done.stdout
