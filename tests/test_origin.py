"""The origin of a difference (hlogen.differential.origin) and the test side's module as
written (hlogen.runtime.execution.as_written), each on a module the test makes: where a
difference is born (an integer power, not the atan2 and exponential it reaches), what only
magnifies it (tan), and chlo.erf given to XLA as jax gives it."""
from __future__ import annotations

import jax
import numpy as np
from jax import lax

from hlogen import backends, loading, passes
from hlogen.differential import Side, compare
from hlogen.differential.origin import Amplification, find_origin, findings_of, probed
from hlogen.runtime import compile as compile_for
from hlogen.runtime.execution import as_written, hlogen_changes

POWER = """func.func @main(%a: tensor<3xi32>, %b: tensor<3xi32>, %x: tensor<3xf32>) -> (tensor<3xi32>, tensor<3xf32>) {
  %p = stablehlo.power %a, %b : tensor<3xi32>
  %f = stablehlo.convert %p : (tensor<3xi32>) -> tensor<3xf32>
  %y = stablehlo.atan2 %f, %x : tensor<3xf32>
  %e = stablehlo.exponential %y : tensor<3xf32>
  return %p, %e : tensor<3xi32>, tensor<3xf32>
}
"""
POWER_INPUTS = [np.array([0, 2, 3], np.int32), np.array([64, 3, 2], np.int32),
                np.array([1, 2, 3], np.float32)]


def power_module(tmp_path):
    path = tmp_path / "power.mlir"
    path.write_text(POWER)
    return loading.load_bytes(POWER.encode(), str(path))


def test_the_origin_of_a_misnamed_difference_is_the_integer_power(tmp_path):
    comp = power_module(tmp_path)
    found = compare(comp, POWER_INPUTS)
    assert not found.results[0].ok and not found.results[1].ok  # both results differ
    # XLA's integer power reads 6 bits of the exponent: 0**64 = 1 (exact: 0)
    origin = find_origin(comp, POWER_INPUTS, "cpu", "interpret", of_result=1)
    assert (origin.op, origin.line, origin.position, origin.result) == ("stablehlo.power", 2, 0, 0)
    assert origin.location.endswith("power.mlir:2:8") and not origin.in_context
    assert origin.test.tolist() == [1, 8, 9] and origin.reference.tolist() == [0, 8, 9]
    assert [o.tolist() for o in origin.operands] == [[0, 2, 3], [64, 3, 2]]
    # atan2 and exponential only pass it on
    assert [(a.op, a.line) for a in origin.amplified_by] == [
        ("stablehlo.convert", 3), ("stablehlo.atan2", 4), ("stablehlo.exponential", 5)]
    convert = origin.amplified_by[0]
    assert convert.ulps_in == 1 and convert.ulps_out == 0x3F800000  # 0 -> 1.0 in f32
    # the op alone takes the operands as parameters: what the arbiter judges
    assert origin.alone.parameter_shapes == [origin.alone.result_shapes[0]] * 2
    assert np.asarray(compile_for(origin.alone, backend="interpret")(*origin.operands)).tolist() \
        == [0, 8, 9]
    first = find_origin(comp, POWER_INPUTS, "cpu", "interpret")  # the first result that differs
    assert (first.op, first.of_result, first.amplified_by) == ("stablehlo.power", 0, ())
    (finding,) = findings_of(comp, POWER_INPUTS, "cpu", "interpret", [0, 1])
    assert finding.results == (0, 1) and finding.to_json()["op"] == "stablehlo.power"


def _rsqrt_one_ulp_apart() -> np.float32:
    """An x in (0.25, 1) whose rsqrt (in [1, 2): the ULP of pi/2) XLA CPU and the
    interpreter round apart."""
    x = np.random.default_rng(0).uniform(0.26, 0.99, 4096).astype(np.float32)
    text = ("func.func @main(%x: tensor<4096xf32>) -> tensor<4096xf32> {\n"
            "  %0 = stablehlo.rsqrt %x : tensor<4096xf32>\n  return %0 : tensor<4096xf32>\n}\n")
    comp = loading.load_bytes(text.encode(), "rsqrt.mlir")
    cpu = compile_for(as_written(comp), backend="cpu")(x)
    reference = compile_for(comp, backend="interpret")(x)
    (apart,) = np.nonzero(cpu != reference)[0][:1]
    return x[apart], reference[apart]


def test_a_one_ulp_difference_magnified_by_tan_is_born_at_the_first_op(tmp_path):
    x, y = _rsqrt_one_ulp_apart()
    c = np.float32(np.pi / 2) - y  # y + c: pi/2 on the reference, an ULP off on XLA
    text = ("func.func @main(%x: tensor<1xf32>) -> tensor<1xf32> {\n"
            "  %y = stablehlo.rsqrt %x : tensor<1xf32>\n"
            f"  %c = stablehlo.constant dense<{float(c)!r}> : tensor<1xf32>\n"
            "  %s = stablehlo.add %y, %c : tensor<1xf32>\n"
            "  %t = stablehlo.tan %s : tensor<1xf32>\n"
            "  return %t : tensor<1xf32>\n}\n")
    path = tmp_path / "tan.mlir"
    path.write_text(text)
    comp = loading.load_bytes(text.encode(), str(path))
    inputs = [np.array([x], np.float32)]
    assert not compare(comp, inputs).ok  # tan near its pole: a difference of millions
    origin = find_origin(comp, inputs, "cpu", "interpret")
    assert (origin.op, origin.line) == ("stablehlo.rsqrt", 2)
    assert abs(int(origin.test.view(np.int32)[0]) - int(origin.reference.view(np.int32)[0])) == 1
    add, tan = origin.amplified_by
    assert (add.op, add.line, tan.op, tan.line) == ("stablehlo.add", 4, "stablehlo.tan", 5)
    assert add.ulps_in == 1 and add.ulps_out >= 1
    assert tan.ulps_in == add.ulps_out and tan.ulps_out > 1e6
    assert isinstance(tan, Amplification) and "amplified by stablehlo.add" in origin.text()


def _erf_module():
    """chlo.erf as jax emits it, times 1e38: XLA's own erf of a small normal x is right;
    the polynomial chlo-legalize-to-stablehlo makes of it has a subnormal intermediate
    that XLA CPU flushes to zero."""
    x = np.array([1.3e-38, 0.5, 2.0], np.float32)
    text = jax.jit(lambda v: lax.erf(v) * np.float32(1e38)).lower(x).as_text()
    assert "chlo.erf" in text
    return loading.load_bytes(text.encode(), "erf.mlir"), [x]


def test_erf_as_written_agrees_where_hlogen_legalized_form_diverged():
    comp, inputs = _erf_module()
    assert compare(comp, inputs).ok  # XLA gets chlo.erf as written (before: it differed)
    legal = passes.run(comp, "legalize")
    assert "chlo.erf" not in str(legal.module)
    found = compare(legal, inputs)  # hlogen's polynomial, on both sides
    assert not found.ok
    assert found.results[0].first[0].actual == 0  # flushed on XLA CPU, 1.47 on the interpreter
    assert Side.of("cpu").module(comp).module.operation.attributes["hlogen.as_written"]
    assert find_origin(comp, inputs, "cpu", "interpret") is None


def test_the_probes_are_of_the_ops_as_written():
    comp, _ = _erf_module()
    module, probes, result_at = probed(comp)
    assert [p.op.name for p in probes] == ["chlo.erf", "stablehlo.broadcast_in_dim",
                                           "stablehlo.multiply"]
    # main's result is the multiply's value: returned once, where its probe is
    assert result_at == [2] and len(module.result_shapes) == 3 and "chlo.erf" in str(module.module)


def test_what_hlogen_form_changes_is_named():
    # what the test side's fallback says where XLA cannot compile a module as written
    text = ("func.func @main(%a: tensor<4xf32>, %n: tensor<4xi32>, %d: tensor<4xi32>) -> "
            "(tensor<4xf32>, tensor<4xi32>) {\n"
            "  %0 = chlo.erf %a : tensor<4xf32> -> tensor<4xf32>\n"
            "  %1 = stablehlo.divide %n, %d : tensor<4xi32>\n"
            "  return %0, %1 : tensor<4xf32>, tensor<4xi32>\n}\n")
    comp = as_written(loading.load_bytes(text.encode(), "changes.mlir"))
    assert hlogen_changes(comp, backends.CPU) == [
        "chlo.erf expanded into StableHLO ops (legalize)",
        "stablehlo.divide rewritten (x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN (the interpreter "
        "and XLA's constant folder die with SIGFPE otherwise))"]
    assert compile_for(comp, backend="cpu").fallback is None  # XLA compiles it as written


def test_the_origin_in_a_thousand_op_module():
    from benchmarks.origin import thousand_ops
    comp, inputs = thousand_ops()
    assert len(list(comp.main.regions[0].blocks[0].operations)) > 1000
    origin = find_origin(comp, inputs, "cpu", "interpret")
    assert origin.op == "stablehlo.power" and origin.position == 2
    assert len(origin.amplified_by) >= 900
    assert all(a.op != "stablehlo.power" for a in origin.amplified_by)


def test_a_rewrite_across_ops_is_born_at_the_op_rewritten():
    # XLA's algebraic simplifier makes log(exp(x)) x; the interpreter's exp(100) is inf.
    # exp(4) may differ by an ULP between the sides: log is still the op where the
    # difference is born (its operands agree at element 1), in its module, not alone
    x = np.array([4.0, 100.0], np.float32)
    text = jax.jit(lambda v: jax.numpy.log(jax.numpy.exp(v))).lower(x).as_text()
    comp = loading.load_bytes(text.encode(), "logexp.mlir")
    origin = find_origin(comp, [x], "cpu", "interpret")
    assert (origin.op, origin.in_context) == ("stablehlo.log", True)
    assert origin.test[1] == 100 and origin.reference[1] == np.inf
    assert origin.operands[0][1] == np.inf  # what both sides' log was given there
    assert origin.judgement.verdict.value == "test wrong"  # log(inf) is inf
    assert "differs only in its module" in origin.text()


RAGGED_DOT = """func.func @main(%lhs: tensor<11x5xf32>, %rhs: tensor<3x5x7xf32>, %g: tensor<3xi64>) -> tensor<11x7xf32> {
  %0 = "chlo.ragged_dot"(%lhs, %rhs, %g) {ragged_dot_dimension_numbers = #chlo.ragged_dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [1], lhs_ragged_dimensions = [0], rhs_group_dimensions = [0]>, precision_config = [#chlo<precision DEFAULT>, #chlo<precision DEFAULT>]} : (tensor<11x5xf32>, tensor<3x5x7xf32>, tensor<3xi64>) -> tensor<11x7xf32>
  return %0 : tensor<11x7xf32>
}
"""


def test_a_module_xla_cannot_compile_as_written_runs_in_hlogen_form_and_says_so():
    # XLA:CPU has no ragged-dot; chlo-legalize-to-stablehlo expands it into ops it has
    comp = loading.load_bytes(RAGGED_DOT.encode(), "ragged.mlir")
    lhs = np.arange(55, dtype=np.float32).reshape(11, 5)
    rhs = np.arange(105, dtype=np.float32).reshape(3, 5, 7)
    groups = np.array([4, 4, 3], np.int64)
    found = compare(comp, [lhs, rhs, groups])
    assert found.ok
    want = np.concatenate([lhs[:4] @ rhs[0], lhs[4:8] @ rhs[1], lhs[8:] @ rhs[2]])
    got = compile_for(as_written(comp), backend="cpu")(lhs, rhs, groups)
    assert np.array_equal(got, want)
    assert list(found.fallbacks) == ["test"]
    said = found.fallbacks["test"]
    assert said.startswith("XLA cannot compile the module as written (UNIMPLEMENTED: HLO opcode "
                           "`ragged-dot` is not supported")
    assert said.endswith("it ran hlogen's form, where chlo.ragged_dot expanded into StableHLO "
                         "ops (legalize)")
    assert f"note: the test side: {said}" in found.text()


# XLA's constant folder's count_leading_zeros of negative s8 constants (-56; exact 0), used
# by a case whose branches return it from main directly (their regions capture it)
CLZ_IN_CASE = """func.func @main() -> tensor<3xi8> {
  %c = stablehlo.constant dense<[4, -8, -6]> : tensor<3xi8>
  %0 = stablehlo.count_leading_zeros %c : tensor<3xi8>
  %i = stablehlo.constant dense<0> : tensor<i32>
  %1 = "stablehlo.case"(%i) ({
    stablehlo.return %0 : tensor<3xi8>
  }, {
    stablehlo.return %0 : tensor<3xi8>
  }) : (tensor<i32>) -> tensor<3xi8>
  return %1 : tensor<3xi8>
}
"""


def test_an_op_whose_regions_use_a_differing_value_only_passes_it_on():
    """A case (or while) whose body uses a value of main is not run alone (the value is an
    input it does not take as an operand: the module of it alone would not verify), and is
    not where a difference of that value is born: it amplifies it."""
    comp = loading.load_bytes(CLZ_IN_CASE.encode(), "clz.mlir")
    origin = find_origin(comp, [], "cpu", "interpret")
    assert (origin.op, origin.line, origin.in_context) == ("stablehlo.count_leading_zeros", 3, True)
    assert origin.test.tolist() == [5, -56, -56] and origin.reference.tolist() == [5, 0, 0]
    assert origin.judgement.verdict == "test wrong"
    assert [(a.op, a.ulps_in, a.ulps_out) for a in origin.amplified_by] == [("stablehlo.case", 56, 56)]


# a sort in total order (the bits of each key, as jax's sort of floats writes it): it shows
# the bits of its keys, which the spec leaves open where they are a NaN's or a zero's sign
TOTAL_ORDER_SORT = """func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %0 = {KEYS}
  %1 = "stablehlo.sort"(%0) <{dimension = 0 : i64}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>):
    %2 = stablehlo.bitcast_convert %a : (tensor<f32>) -> tensor<i32>
    %c = stablehlo.constant dense<31> : tensor<i32>
    %3 = stablehlo.shift_right_arithmetic %2, %c : tensor<i32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %4 = stablehlo.shift_right_logical %3, %c_0 : tensor<i32>
    %5 = stablehlo.xor %2, %4 : tensor<i32>
    %6 = stablehlo.bitcast_convert %b : (tensor<f32>) -> tensor<i32>
    %7 = stablehlo.shift_right_arithmetic %6, %c : tensor<i32>
    %8 = stablehlo.shift_right_logical %7, %c_0 : tensor<i32>
    %9 = stablehlo.xor %6, %8 : tensor<i32>
    %10 = stablehlo.compare LT, %5, %9 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %10 : tensor<i1>
  }) : (tensor<2xf32>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}
"""


def test_bits_the_spec_leaves_open_shown_by_a_sort_are_allowed_where_they_were_made():
    """log of a negative number is a NaN whose sign XLA CPU and the interpreter choose
    differently; the sort in total order puts it first on one side, last on the other.
    The sort agrees alone: its inputs differ only in a NaN's sign, which log made."""
    text = TOTAL_ORDER_SORT.replace("{KEYS}", "stablehlo.log %x : tensor<2xf32>")
    comp = loading.load_bytes(text.encode(), "sort.mlir")
    x = np.float32([1002.7205, -3.1e-28])
    cpu = compile_for(as_written(comp), backend="cpu")(x)
    reference = compile_for(comp, backend="interpret")(x)
    assert cpu.tobytes() != reference.tobytes()  # (the NaN first on one side, last on the other)
    origin = find_origin(comp, [x], "cpu", "interpret")
    assert (origin.op, origin.in_context) == ("stablehlo.sort", True)
    judged = origin.judgement
    assert (judged.verdict.value, judged.allowed_class) == ("allowed", "nan-sign-payload")
    assert "made by stablehlo.log (line 2)" in judged.reason
    strict = find_origin(comp, [x], "cpu", "interpret", strict=True).judgement
    assert (strict.verdict.value, strict.allowed_class) == ("undetermined", None)


# a stable sort of zeros by their bits, carrying their positions: XLA CPU's dot without a
# contraction gives -3 * 0 = -0, the interpreter's sum from +0 gives +0
ZERO_KEYS = """func.func @main(%x: tensor<3xf32>) -> tensor<3xi32> {
  %z = stablehlo.constant dense<0.0> : tensor<1xf32>
  %d = stablehlo.dot_general %x, %z, contracting_dims = [] x [] : (tensor<3xf32>, tensor<1xf32>) -> tensor<3x1xf32>
  %k = stablehlo.reshape %d : (tensor<3x1xf32>) -> tensor<3xf32>
  %i = stablehlo.iota dim = 0 : tensor<3xi32>
  %s:2 = "stablehlo.sort"(%k, %i) <{dimension = 0 : i64, is_stable = true}> ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %p: tensor<i32>, %q: tensor<i32>):
    %2 = stablehlo.bitcast_convert %a : (tensor<f32>) -> tensor<i32>
    %6 = stablehlo.bitcast_convert %b : (tensor<f32>) -> tensor<i32>
    %10 = stablehlo.compare LT, %2, %6, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %10 : tensor<i1>
  }) : (tensor<3xf32>, tensor<3xi32>) -> (tensor<3xf32>, tensor<3xi32>)
  return %s#1 : tensor<3xi32>
}
"""


def test_the_sign_of_a_zero_a_sort_shows_is_allowed_where_it_was_made():
    comp = loading.load_bytes(ZERO_KEYS.encode(), "zeros.mlir")
    origin = find_origin(comp, [np.float32([2.0, -3.0, 5.0])], "cpu", "interpret")
    assert (origin.op, origin.test.tolist(), origin.reference.tolist()) == \
        ("stablehlo.sort", [1, 0, 2], [0, 1, 2])
    judged = origin.judgement
    assert (judged.verdict.value, judged.allowed_class) == ("allowed", "zero-sign")
    assert "made by stablehlo.dot_general (line 3)" in judged.reason  # (not the reshape after it)
