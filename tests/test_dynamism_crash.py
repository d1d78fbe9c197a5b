"""`hlogen reduce --crash` on modules of the bounded types of two XLA issues that abort
XLA CPU (openxla/xla#47345: tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>, #47356:
tensor<?x2xi32, #stablehlo.bounds<4, ?>>; written here, the originals unseen): a cumulative
sum by reduce_window over the dynamic dimension, of a size below its bound, ends the
process (SIGSEGV, jaxlib 0.10.2). Each is shrunk while it still aborts."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import hlogen as hg
from hlogen.differential import op_count
from hlogen_cli.main import main

ISSUE_47345 = """\
func.func @main(%v: tensor<1x1x5xf32>, %n: tensor<i32>, %b: tensor<1x1x5xf32>) -> (tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>, tensor<f32>) {
  %a = stablehlo.set_dimension_size %v, %n, dim = 2 : (tensor<1x1x5xf32>, tensor<i32>) -> tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>
  %e = stablehlo.exponential %a : tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>
  %m = stablehlo.multiply %e, %a : tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %c = "stablehlo.reduce_window"(%m, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {window_dimensions = array<i64: 1, 1, 5>, padding = dense<[[0, 0], [0, 0], [4, 0]]> : tensor<3x2xi64>} : (tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>, tensor<f32>) -> tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>
  %t = stablehlo.tanh %c : tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>
  %q = stablehlo.multiply %b, %b : tensor<1x1x5xf32>
  %r = stablehlo.reduce(%q init: %z) applies stablehlo.add across dimensions = [0, 1, 2] : (tensor<1x1x5xf32>, tensor<f32>) -> tensor<f32>
  return %t, %r : tensor<1x1x?xf32, #stablehlo.bounds<?, ?, 5>>, tensor<f32>
}
"""

ISSUE_47356 = """\
func.func @main(%v: tensor<4x2xi32>, %n: tensor<i32>, %k: tensor<4x2xi32>) -> (tensor<?x2xi32, #stablehlo.bounds<4, ?>>, tensor<4x2xi32>) {
  %a = stablehlo.set_dimension_size %v, %n, dim = 0 : (tensor<4x2xi32>, tensor<i32>) -> tensor<?x2xi32, #stablehlo.bounds<4, ?>>
  %one = stablehlo.constant dense<1> : tensor<4x2xi32>
  %p = stablehlo.add %a, %one : (tensor<?x2xi32, #stablehlo.bounds<4, ?>>, tensor<4x2xi32>) -> tensor<?x2xi32, #stablehlo.bounds<4, ?>>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %c = "stablehlo.reduce_window"(%p, %z) ({
  ^bb0(%x: tensor<i32>, %y: tensor<i32>):
    %s = stablehlo.add %x, %y : tensor<i32>
    stablehlo.return %s : tensor<i32>
  }) {window_dimensions = array<i64: 4, 1>, padding = dense<[[3, 0], [0, 0]]> : tensor<2x2xi64>} : (tensor<?x2xi32, #stablehlo.bounds<4, ?>>, tensor<i32>) -> tensor<?x2xi32, #stablehlo.bounds<4, ?>>
  %g = stablehlo.negate %c : tensor<?x2xi32, #stablehlo.bounds<4, ?>>
  %kk = stablehlo.multiply %k, %k : tensor<4x2xi32>
  return %g, %kk : tensor<?x2xi32, #stablehlo.bounds<4, ?>>, tensor<4x2xi32>
}
"""

INPUTS = {"47345": ("1x1x5xf32=1", "i32=2", "1x1x5xf32=2"),
          "47356": ("4x2xi32=1", "i32=2", "4x2xi32=2")}


def hlogen(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


# #47356's module is docs/dynamic.md's, whose session tests/test_docs.py runs (reduce included)
@pytest.mark.parametrize("issue", ["47345"])
def test_an_issue_module_is_reduced_while_it_still_aborts_xla(issue, tmp_path):
    source = tmp_path / f"{issue}.mlir"
    source.write_text(ISSUE_47345 if issue == "47345" else ISSUE_47356)
    inputs = [a for value in INPUTS[issue] for a in ("--input", value)]
    ran = hlogen("run", source, *inputs)
    assert ran.exit_code == 1 and "aborted (SIGSEGV)" in ran.stderr, ran.output
    out = tmp_path / "reduced.mlir"
    result = hlogen("reduce", source, "-o", out, "--crash", *inputs)
    assert result.exit_code == 0, result.output
    reduced = hg.load(out)
    assert op_count(reduced) < op_count(hg.load(source)), reduced.as_text()
    assert "stablehlo.reduce_window" in reduced.as_text() and "#stablehlo.bounds" in \
        reduced.as_text()
    command = result.stdout.split()  # the command that shows it: XLA still aborts
    again = hlogen(*command[1:])
    assert again.exit_code == 1 and "aborted (SIGSEGV)" in again.stderr, again.output
