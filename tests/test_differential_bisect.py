"""Which compiler stage makes two backends disagree (hlogen.differential.bisection): the search
against predicates whose answer is known (its calls counted against the bound), XLA's
log of the passes that ran, and the search for real on modules made with jax, with the
StableHLO interpreter as the reference."""
from __future__ import annotations

import math

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from hlogen.differential import (EVERY_PASS, IsolatedRunner, bisect, compare, options_disabling,
                                 parse_log, passes_that_ran, search)
from hlogen.differential.bisection import ESSENTIAL
from tests.differential_cases import REWRITES, rewritten


def counting(explains):
    """A predicate: the divergence stays unless `explains(disabled)`; counts its calls."""
    calls = []

    def diverges(disabled):
        calls.append(disabled)
        return not explains(disabled)
    return diverges, calls


def bound(p: int) -> int:
    return 2 * math.ceil(math.log2(p)) + 3 if p > 1 else 3


@pytest.mark.parametrize("p", [1, 2, 3, 7, 94, 1000])
def test_one_pass_is_found_within_the_bound(p):
    passes = [f"pass{i}" for i in range(p)]
    for culprit in sorted({0, p // 3, p // 2, p - 1}):
        diverges, calls = counting(lambda d, c=passes[culprit]: c in d)
        found = search(passes, diverges)
        assert (found.stage, found.passes) == ("hlo-pass", [passes[culprit]])
        assert found.compiles == len(calls) <= bound(p), (p, culprit)
        assert len(set(calls)) == len(calls)  # no set is compiled twice


def test_every_pass_that_explains_it_alone_is_named():
    passes = [f"p{i}" for i in range(40)]
    diverges, _ = counting(lambda d: "p3" in d or "p30" in d)
    found = search(passes, diverges)
    assert (found.stage, sorted(found.passes)) == ("hlo-pass", ["p3", "p30"])


def test_passes_that_explain_it_only_together():
    passes = [f"p{i}" for i in range(50)]
    diverges, _ = counting(lambda d: {"p7", "p41"} <= d)
    found = search(passes, diverges)
    assert (found.stage, sorted(found.passes)) == ("hlo-passes", ["p41", "p7"])


def test_a_pipeline_is_named_only_when_no_pass_explains_it():
    passes = ["algsimp", "dce", "cse"]
    pipelines = {"outer": ["algsimp", "dce", "cse", "fusion"], "simplification": ["algsimp", "dce"]}
    # the pipeline's name explains it, its passes by name do not (as a pass the log misses)
    diverges, _ = counting(lambda d: bool({"simplification", "outer", EVERY_PASS} & d))
    found = search(passes, diverges, pipelines)
    assert (found.stage, found.passes) == ("pipeline", ["simplification"])  # the smaller one
    # where a pass explains it, the pipelines around it are not named
    diverges, _ = counting(lambda d: bool({"algsimp", "simplification", "outer"} & d))
    assert search(passes, diverges, pipelines).passes == ["algsimp"]


def test_no_divergence_and_divergences_no_pass_explains():
    passes = [f"p{i}" for i in range(10)]
    diverges, calls = counting(lambda d: True)
    found = search(passes, diverges)
    assert (found.stage, found.compiles) == ("none", 1)
    diverges, calls = counting(lambda d: False)
    assert search(passes, diverges).stage == "conversion-or-codegen"
    assert calls[-1] == frozenset({EVERY_PASS}) and len(calls) == 3
    diverges, _ = counting(lambda d: EVERY_PASS in d)
    assert search(passes, diverges).stage == "unexplained"


def test_passes_xla_cannot_do_without_are_never_disabled():
    passes = ["algsimp", *ESSENTIAL, "dce"]
    diverges, calls = counting(lambda d: "dce" in d)
    assert search(passes, diverges).passes == ["dce"]
    assert not any(ESSENTIAL & c for c in calls)


def test_options_disabling_keeps_the_options_given():
    given = (("xla_cpu_enable_fast_math", False), ("xla_disable_hlo_passes", "cse"))
    assert dict(options_disabling({"dce", "algsimp"}, given)) == {
        "xla_cpu_enable_fast_math": False, "xla_disable_hlo_passes": "cse,algsimp,dce"}
    assert dict(options_disabling({EVERY_PASS}))["xla_disable_all_hlo_passes"] is True


LOG = """\
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: outer
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:181]   HLO pass dce
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:181]   HLO pass simplification
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: simplification
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:181]   HLO pass algsimp
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:181]   HLO pass dce
something else XLA says
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: simplification
I1125 17:03:33.354 16378 hlo_pass_pipeline.cc:181]   HLO pass algsimp
"""


def test_the_log_is_read_into_passes_and_pipelines():
    log = parse_log(LOG)
    assert log.passes == ["dce", "algsimp"]
    assert log.pipelines == {"outer": ["dce"], "simplification": ["algsimp", "dce"]}
    assert len(log.runs) == 4


@pytest.fixture(scope="module")
def log_exp():
    return rewritten("log(exp(x))")


def test_the_passes_that_really_ran(log_exp):
    comp, _ = log_exp
    log = passes_that_ran(comp)
    assert {"algsimp", "constant_folding", "layout-assignment", "dce"} <= set(log.passes)
    assert "simplification" in log.pipelines and "simplification" not in log.passes
    assert "algsimp" in log.pipelines["simplification"] and len(log.runs) > len(log.passes)
    with pytest.raises(hg.InputError):
        passes_that_ran(comp, backend="interpret")


@pytest.mark.parametrize("name", list(REWRITES))
def test_bisect_names_the_pass_of_each_rewrite(name):
    comp, inputs = rewritten(name)
    found = bisect(comp, inputs)
    assert found.stage == "hlo-pass" and "algsimp" in found.passes, found.text()
    assert set(found.passes) <= {"algsimp", "constant_folding"}  # real passes, no pipeline
    if len(found.passes) == 1:
        assert found.compiles <= bound(found.pass_count)
    assert compare(comp, inputs, test_options=found.fixed_options).ok
    assert "the divergence comes from HLO pass" in found.text()


def test_bisect_with_nothing_to_explain(log_exp):
    comp, inputs = log_exp
    found = bisect(comp, [np.array([1, 2, 3, 4], np.float32), inputs[1]])
    assert (found.stage, found.passes, found.compiles) == ("none", [], 1)


def test_a_divergence_no_hlo_pass_explains():
    b = hg.Builder("plus_zero")
    x = b.parameter(hg.f32[3], "x")
    comp = b.build(ops.mul(ops.add(x, 0.0), 2.0))  # x + 0 is folded before any HLO pass
    found = bisect(comp, [np.array([-0.0, 1.0, 2.0], np.float32)], bitwise=True)
    assert found.stage == "conversion-or-codegen" and found.passes == [] and found.compiles == 3
    assert "StableHLO-to-HLO conversion or code generation" in found.text()


def test_xla_ending_the_process_does_not_end_the_caller():
    b = hg.Builder("twice")
    x = b.parameter(hg.f32[3], "x")
    comp = b.build(x, x)  # XLA CPU aborts on it without copy-insertion
    inputs = [np.array([1, 2, 3], np.float32)]
    with IsolatedRunner("cpu", comp, inputs) as runner:
        with pytest.raises(hg.ExecutionError, match="killed by SIGABRT .*Check failed"):
            runner.run((("xla_disable_hlo_passes", "copy-insertion"),))
        again = runner.run()  # a fresh child
    assert [a.tolist() for a in again] == [[1, 2, 3], [1, 2, 3]]
