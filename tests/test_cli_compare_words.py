"""What `compare` (and `run --expected-output`) say, as a backend-bug hunter reads it:
each value named by its side ("test cpu 100, reference cpu inf", where one backend is on
both sides: "cpu 100, cpu inf" said nothing of which was which); the relative errors of
bitwise-unequal elements labelled as what they are, never as differences beside "all N
elements match"; and NaN on both sides counted, a comparison where every element is NaN
on both sides (inputs out of the ops' domain) said to compare nothing."""
from __future__ import annotations

import json

import pytest
from tests.helpers import hlogen_in as hlogen

LOG_EXP = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = stablehlo.exponential %x : tensor<2xf32>
  %1 = stablehlo.log %0 : tensor<2xf32>
  return %1 : tensor<2xf32>
}
"""
IDENTITY = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
"""
# sqrt(-(|x| + 1)): NaN whatever x is
NAN = """func.func @main(%a: tensor<16xf32>) -> tensor<16xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<16xf32>
  %0 = stablehlo.abs %a : tensor<16xf32>
  %1 = stablehlo.add %0, %one : tensor<16xf32>
  %2 = stablehlo.negate %1 : tensor<16xf32>
  %3 = stablehlo.sqrt %2 : tensor<16xf32>
  return %3 : tensor<16xf32>
}
"""
# sin(exp(x)): NaN where exp(x) is infinite (large-range inputs), numbers elsewhere
SOME_NAN = """func.func @main(%a: tensor<6x8xf32>) -> tensor<6x8xf32> {
  %0 = stablehlo.exponential %a : tensor<6x8xf32>
  %1 = stablehlo.sine %0 : tensor<6x8xf32>
  return %1 : tensor<6x8xf32>
}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_words")
    for name, text in [("log_exp", LOG_EXP), ("identity", IDENTITY), ("nan", NAN),
                       ("some_nan", SOME_NAN)]:
        (folder / f"{name}.mlir").write_text(text)
    return folder


def test_each_value_is_named_by_its_side_where_one_backend_is_on_both(folder):
    # XLA's algebraic simplifier folds log(exp(x)) to x; without it, exp(100) overflows
    done = hlogen(folder, "compare", "log_exp.mlir", "--test", "cpu", "--reference", "cpu",
                  "--reference-flag", "xla_disable_hlo_passes=algsimp", "--input", "2xf32=1,100")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  at [1]: test cpu 100, reference cpu inf (abs error inf" in done.stdout, done.stdout


def test_bitwise_differences_within_the_tolerance_are_not_called_differences(folder):
    done = hlogen(folder, "run", "identity.mlir", "--input", "2xf32=1,2", "--expected-output",
                  "2xf32=1.0000001,2")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-2].startswith("result[0]: all 2 elements match"), done.stdout
    assert lines[-1] == "  bitwise differences within the tolerance, by relative error: " \
                        "[1e-07, 1e-06): 1"
    assert "unequal elements" not in done.stdout
    # where some differ by the rule, the ones within it are counted apart
    done = hlogen(folder, "run", "identity.mlir", "--input", "2xf32=1,2", "--expected-output",
                  "2xf32=1.0000001,3")
    assert done.returncode == 1 and "1 of 2 elements differ" in done.stdout, done.stdout
    assert "  relative errors of the 2 unequal elements, 1 within the tolerance: " \
           "[1e-07, 1e-06): 1, [0.1, 1): 1" in done.stdout


def test_nan_on_both_sides_is_counted_and_all_nan_is_a_warning(folder):
    done = hlogen(folder, "compare", "nan.mlir", "--large-range", "--json", "nan.json")
    assert done.returncode == 0, done.stdout + done.stderr
    head, result = done.stdout.splitlines()
    assert head == ("main: test cpu and reference interpret agree, with random inputs (seed 0); "
                    "but every element is NaN on both sides: the inputs may be out of the ops' "
                    "domain")
    assert result.endswith("; all 16 NaN on both sides"), result
    saved = json.loads((folder / "nan.json").read_text())
    assert saved["iterations"][0]["results"][0]["both_nan"] == 16
    some = hlogen(folder, "compare", "some_nan.mlir", "--large-range")
    assert some.returncode == 0, some.stdout + some.stderr
    head, result = some.stdout.splitlines()
    assert head == "main: test cpu and reference interpret agree, with random inputs (seed 0)"
    count = int(result.rsplit("; ", 1)[1].split()[0])
    assert 0 < count < 48 and result.endswith(f"; {count} of them NaN on both sides"), result
