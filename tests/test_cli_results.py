"""A result whose shape or element type is not the module's is never shown as the answer:
XLA CPU's bitcast_convert of tensor<8xi1> to tensor<i8> hands back s8[8] (it counts pred
as 8 bits), and run, compare, check and hg.compile say so, naming the backend, the
result and both shapes (hlogen.runtime.execution.check_results), where `run` printed
the eight bytes as the result, exit 0."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

import hlogen as hg
from tests.helpers import hlogen_in as hlogen

MODULE = """func.func @main(%arg0: tensor<8xi1>) -> tensor<i8> {
  %0 = stablehlo.bitcast_convert %arg0 : (tensor<8xi1>) -> tensor<i8>
  return %0 : tensor<i8>
}
"""
# the same as StableHLO's conformance files are written: a check of the result
CHECKED = """// RUN: stablehlo-translate --interpret %s

func.func @main() {
  %0 = stablehlo.constant dense<[true, true, false, true, false, true, false, true]> : tensor<8xi1>
  %1 = stablehlo.bitcast_convert %0 : (tensor<8xi1>) -> tensor<i8>
  check.expect_eq_const %1, dense<-85> : tensor<i8>
  func.return
}
"""
INPUT = ["--input", "8xpred=1,1,0,1,0,1,0,1"]
SAID = ("main: the cpu backend returned result 0 as s8[8], where the module declares s8[]: "
        "not an answer of the module")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("results")
    (folder / "bitcast.mlir").write_text(MODULE)
    (folder / "bitcast_pred.mlir").write_text(CHECKED)
    return folder


def test_run_refuses_a_result_of_another_shape(folder):
    done = hlogen(folder, "run", "bitcast.mlir", "--backend", "cpu", *INPUT)
    assert done.returncode == 1 and SAID in done.stderr, done.stdout + done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    # the interpreter's is the module's: shown
    done = hlogen(folder, "run", "bitcast.mlir", "--backend", "interpret", *INPUT)
    assert done.returncode == 0 and done.stdout.split() == ["result[0]:", "s8[]", "-85"]


def test_compare_and_check_name_the_backend_and_both_shapes(folder):
    done = hlogen(folder, "compare", "bitcast.mlir", "--test", "cpu", "--reference",
                  "interpret", *INPUT)
    assert done.returncode == 1 and SAID in done.stdout + done.stderr, done.stdout + done.stderr
    done = hlogen(folder, "check", "bitcast_pred.mlir", "--backend", "cpu", "--json", "o.jsonl")
    assert done.returncode == 1, done.stdout + done.stderr
    [record] = [json.loads(line) for line in (folder / "o.jsonl").read_text().splitlines()]
    assert record["status"] == "error" and SAID in record["message"], record


def test_the_library_raises_where_results_come_back(folder):
    comp = hg.load(folder / "bitcast.mlir")
    bits = np.array([1, 1, 0, 1, 0, 1, 0, 1], bool)
    with pytest.raises(hg.ExecutionError, match=re.escape(SAID)):
        hg.compile(comp, backend="cpu")(bits)
    assert hg.compile(comp, backend="interpret")(bits) == np.int8(-85)
