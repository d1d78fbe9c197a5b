"""Comparing a computation on two sides (hlogen.differential.comparison): XLA's rewrites that
the StableHLO interpreter does not make, found inside larger programs; the options that
remove them; the route through HLO; iterations of random inputs; the report."""
from __future__ import annotations

import json

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from hlogen.differential import HLO_ROUTE, Side, compare, run_on, through_hlo
from tests.differential_cases import REWRITES, W, rewritten


@pytest.mark.parametrize("name", list(REWRITES))
def test_compare_finds_each_rewrite_and_disabling_algsimp_removes_it(name):
    comp, inputs = rewritten(name)
    _, x, on_cpu, on_interpreter = REWRITES[name]
    found = compare(comp, inputs)
    assert not found.ok
    first, hidden = found.results
    assert hidden.ok and first.differing >= 1
    (where,) = [d for d in first.first if d.index == (1,)]
    assert where.inputs == {"arg0": np.float32(x[1])}  # (jax names no parameters)
    relu = lambda v: max(v + float(np.tanh(W @ inputs[0]).sum()), 0) * 0.5
    assert where.actual == pytest.approx(relu(on_cpu), rel=1e-6)
    assert where.expected == pytest.approx(relu(on_interpreter), rel=1e-6)
    assert compare(comp, inputs, test_options={"xla_disable_hlo_passes": "algsimp"}).ok


def test_the_report_is_json_and_text():
    comp, inputs = rewritten("log(exp(x))")
    found = compare(comp, inputs, test_options=["xla_cpu_enable_fast_math=false"])
    as_json = json.loads(json.dumps(found.to_json(), allow_nan=False))
    assert as_json["ok"] is False and as_json["test"]["xla_options"] == {
        "xla_cpu_enable_fast_math": False}
    # the default rule: Near, and a floor of ULPs per element type (near.Tolerance.chosen)
    assert as_json["tolerance"] == {"mode": "near", "abs": 1e-3, "rel": 1e-3, "ulp": None,
                                    "min_ulp": 0, "per_type": True}
    (iteration,) = as_json["iterations"]
    assert iteration["seed"] is None and iteration["results"][0]["first"][0]["expected"] == "inf"
    text = found.text()
    assert "test cpu (xla_cpu_enable_fast_math=false) and reference interpret differ" in text
    assert "at [1]: test cpu 51.82" in text and "reference interpret inf (abs error inf" in text
    assert "arg0=100)" in text


def test_the_route_through_hlo_keeps_the_module():
    comp, inputs = rewritten("log(exp(x))")
    assert not compare(comp, inputs, test=HLO_ROUTE + "cpu").ok  # the rewrite is XLA's passes'
    assert compare(comp, inputs, test=HLO_ROUTE + "cpu", reference="cpu").ok
    back = through_hlo(comp)
    assert back.parameter_shapes == comp.parameter_shapes
    assert back.result_shapes == comp.result_shapes
    # the integer semantics hlogen gives survive the round trip
    b = hg.Builder("division")
    x, y = b.parameter(hg.s32[4], "x"), b.parameter(hg.s32[4], "y")
    division = b.build(ops.div(x, y), ops.rem(x, y))
    args = [np.array([7, -7, -2**31, 5], np.int32), np.array([2, 0, -1, 0], np.int32)]
    assert compare(division, args, test="hlo:cpu", reference="hlo:interpret", bitwise=True).ok


def test_iterations_draw_new_inputs_and_stop_at_the_first_difference():
    comp, _ = rewritten("log(exp(x))")
    agreeing = compare(comp, iterations=3, seed=4)
    assert agreeing.ok and [i.seed for i in agreeing.iterations] == [4, 5, 6]
    assert "agree after 3 iterations, with random inputs (seed 6)" in agreeing.text()
    # over the whole exponent range exp(x) overflows at once
    differing = compare(comp, iterations=10, seed=0, large_range=True)
    assert not differing.ok and not differing.iterations[-1].ok
    assert all(i.ok for i in differing.iterations[:-1]) and len(differing.iterations) < 10


def test_stricter_modes():
    b = hg.Builder("plus_zero")
    x = b.parameter(hg.f32[3], "x")
    comp = b.build(ops.add(x, 0.0))  # x + 0 at -0: -0 on XLA (folded), +0 in the interpreter
    inputs = [np.array([-0.0, 1.0, 2.0], np.float32)]
    assert compare(comp, inputs).ok and compare(comp, inputs, ulp=0).ok
    bitwise = compare(comp, inputs, bitwise=True)
    assert not bitwise.ok and bitwise.results[0].first[0].index == (0,)


def test_run_on_gives_the_result_leaves():
    b = hg.Builder("leaves")
    x = b.parameter(hg.f32[2], "x")
    comp = b.build(ops.tuple([x, ops.tuple([ops.neg(x)])]), ops.abs(x))
    got = run_on("interpret", comp, [np.array([1, -2], np.float32)])
    assert [g.tolist() for g in got] == [[1, -2], [-1, 2], [1, 2]]


def test_mistakes_are_input_errors():
    comp, inputs = rewritten("log(exp(x))")
    for bad in ({"test": "tpu"}, {"reference": "hlo:nothing"}, {"test": 3},
                {"iterations": 0}, {"iterations": 2, "inputs": inputs},
                {"test_options": {"xla_no_such_option": 1}}, {"abs": -1}):
        with pytest.raises(hg.InputError):
            compare(comp, **{"inputs": inputs, **bad})
    with pytest.raises(hg.UnsupportedError, match="takes no XLA options"):
        compare(comp, inputs, reference_options={"xla_cpu_enable_fast_math": True})
    assert Side.of("hlo:cpu", ["xla_cpu_enable_fast_math=true"]).label == \
        "hlo:cpu (xla_cpu_enable_fast_math=true)"
