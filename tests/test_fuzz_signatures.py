"""Fuzz signatures keyed by cause (issue 35 item 5): the op where a difference is born,
its class and the side exact math finds wrong; a difference the arbiter allows counted,
not a finding; a reduction that keeps the cause (a candidate of another origin is not
interesting); a re-run that never replaces a known signature's smaller reproducer by a
larger one."""
from __future__ import annotations

import json

import numpy as np
import pytest

import hlogen as hg
from hlogen.differential.comparison import Side
from hlogen.differential.isolated import Children
from hlogen.differential.near import Tolerance
from hlogen.fuzz.triage import Triage

# two causes in one program: XLA's integer power reads 6 exponent bits (0**64 = 1, exact
# 0), and algsimp drops (x + c) - c (XLA gives x, exact x rounded to a multiple of 1)
TWO = """func.func @main(%x: tensor<4xi32>, %y: tensor<4xi32>, %f: tensor<4xf32>) -> (tensor<4xi32>, tensor<4xf32>) {
  %p = stablehlo.power %x, %y : tensor<4xi32>
  %c = stablehlo.constant dense<12582912.0> : tensor<4xf32>
  %a = stablehlo.add %f, %c : tensor<4xf32>
  %s = stablehlo.subtract %a, %c : tensor<4xf32>
  return %p, %s : tensor<4xi32>, tensor<4xf32>
}"""
SUBTRACT_ONLY = """func.func @main(%x: tensor<4xi32>, %y: tensor<4xi32>, %f: tensor<4xf32>) -> tensor<4xf32> {
  %c = stablehlo.constant dense<12582912.0> : tensor<4xf32>
  %a = stablehlo.add %f, %c : tensor<4xf32>
  %s = stablehlo.subtract %a, %c : tensor<4xf32>
  return %s : tensor<4xf32>
}"""
GIVEN = [np.array([0, 0, 2, 3], np.int32), np.array([64, 128, 3, 2], np.int32),
         np.array([0.1, 0.2, 0.3, 0.4], np.float32)]
EXP = """func.func @main(%x: tensor<256xf32>) -> tensor<256xf32> {
  %e = stablehlo.exponential %x : tensor<256xf32>
  return %e : tensor<256xf32>
}"""


@pytest.fixture(scope="module")
def children():
    with Children(120) as made:
        yield made


def triage(children, tolerance=Tolerance()):
    return Triage((Side.of("cpu"), Side.of("interpret")), tolerance, children, 120)


def test_the_signature_is_the_origin_its_class_and_the_wrong_side(children):
    interest, signature = triage(children).observe(hg.load(TWO), GIVEN, 0, False)
    assert str(signature) == "divergence at stablehlo.power (integer): cpu wrong"
    assert (signature.at, signature.difference, signature.wrong) == \
        ("stablehlo.power", "integer", "cpu wrong")


class _Counting:
    """Children that note each module they run: (backend, how many results it returns)."""

    def __init__(self, children):
        self.children, self.ran = children, []

    def run(self, backend, computation, inputs, *args, **kwargs):
        self.ran.append((backend, len(computation.result_shapes)))
        return self.children.run(backend, computation, inputs, *args, **kwargs)


def test_the_triage_and_the_origin_share_one_probed_run(children):
    """A program that differs runs its probed module (every value returned: here the
    power, the add and the subtract, 3 results; the program itself returns 2) once per
    side: the triage's allowances and flushing and the origin read the same run
    (origin.probed_run); the origin then runs only the ops it needs alone."""
    counting = _Counting(children)
    fuzzer = Triage((Side.of("cpu"), Side.of("interpret")), Tolerance(), counting, 120)
    interest, signature = fuzzer.observe(hg.load(TWO), GIVEN, 0, False)
    assert signature.at == "stablehlo.power" and signature.wrong == "cpu wrong"
    assert sorted(r for r in counting.ran if r[1] >= 3) == [("cpu", 3), ("interpret", 3)]
    assert sorted(r for r in counting.ran if r[1] == 2) == [("cpu", 2), ("interpret", 2)]


def test_a_candidate_of_another_cause_is_not_interesting(children):
    """The program's first cause is power's; a candidate that keeps only the subtract
    still differs, but born elsewhere: the reduction does not take it, and says which
    signature it saw instead."""
    fuzzer = triage(children)
    program = hg.load(TWO)
    interest, signature = fuzzer.observe(program, GIVEN, 0, False)
    tagged = interest.inputs.tagged(program)
    assert interest(tagged)
    candidate = interest.inputs.tagged(hg.load(SUBTRACT_ONLY))
    assert not interest(candidate)
    assert "not in the way kept" in interest.observed
    assert list(fuzzer.moved) == ["divergence at stablehlo.subtract (value): cpu wrong"]


def test_a_difference_exact_math_allows_is_counted_not_found(children):
    """exp on XLA CPU and in the interpreter, compared to the bit: the sides differ by
    an ULP here and there, each within exp's accuracy of the exact value: allowed."""
    x = np.random.default_rng(0).uniform(-20, 20, 256).astype(np.float32)
    assert triage(children, Tolerance(ulp=0)).observe(hg.load(EXP), [x], 0, False) == \
        "allowed (within-accuracy)"


def test_a_rerun_keeps_the_smaller_reproducer(tmp_path):
    """A known signature whose reproducer in the folder is smaller stays as it is; one
    whose reproducer is larger is replaced by the smaller one found."""
    out = tmp_path / "found"

    def fuzz():
        return hg.fuzz.run("cpu", "interpret", out=out, seed=0, corpus=[hg.load(TWO)],
                           programs=2, seconds=300, reduce_seconds=60, large_range=False)

    first = fuzz()
    (finding,) = [f for f in first.findings if f.at == "stablehlo.power"]
    assert finding.new and finding.op_count == 1
    summary_path = out / "summary.json"
    # the folder's reproducer, said to be smaller (as a better reduction would leave it)
    summary = json.loads(summary_path.read_text())
    (entry,) = [f for f in summary["findings"] if f["signature"] == finding.signature]
    entry["op_count"] = 0
    summary_path.write_text(json.dumps(summary))
    marker = "// the smaller reproducer, kept\n" + open(finding.module).read()
    with open(finding.module, "w") as f:
        f.write(marker)
    second = fuzz()
    (again,) = [f for f in second.findings if f.signature == finding.signature]
    assert not again.new and again.op_count == 0 and again.module == finding.module
    assert open(finding.module).read() == marker
    # said to be larger: replaced
    summary = json.loads(summary_path.read_text())
    (entry,) = [f for f in summary["findings"] if f["signature"] == finding.signature]
    entry["op_count"] = 40
    summary_path.write_text(json.dumps(summary))
    third = fuzz()
    (again,) = [f for f in third.findings if f.signature == finding.signature]
    assert again.op_count == 1 and open(finding.module).read() != marker
