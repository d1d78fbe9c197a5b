"""The reducer (hlogen.differential.reduction) on real artifacts made here: a jax residual
stack that diverges between XLA CPU and the interpreter (log(exp(x)) at x = 100), an XLA
compile error, a user's script; every reduced module checked again on its own (compiled
and interpreted here, not by the reducer's verdict)."""
from __future__ import annotations

import contextlib
import io
import re
import textwrap

import numpy as np
import pytest

import hlogen as hg
from hlogen import mlir, ops
from hlogen.differential import op_count, script_interest, shrink
from hlogen.progress import Progress
from tests import docs
from tests.helpers import fixed_inputs, residual_stack, results_differ, run_both

STRATEGIES = {"trim results", "remove ops", "return operands", "bypass ops", "inline calls",
              "simplify regions", "fold constants", "merge constants", "simplify constants",
              "simplify attributes", "shrink shapes", "drop unused parameters"}


def _names(comp) -> list:
    return [op.name for op in mlir.walk(comp.module)
            if op.name not in ("func.func", "func.return", "stablehlo.return")]


@pytest.fixture(scope="module")
def stack():
    return residual_stack(40)


def test_a_divergence_in_a_residual_stack_is_reduced_to_the_ops_that_diverge(stack):
    assert op_count(stack) > 500 and results_differ(stack)
    seen: list[Progress] = []
    reduced = shrink(stack, results_differ, progress=seen.append)

    comp = reduced.computation
    assert reduced.op_count == op_count(comp) <= 4, comp.as_text()
    assert reduced.original_op_count == op_count(stack) and not reduced.timed_out
    assert {"stablehlo.exponential", "stablehlo.log"} <= set(_names(comp))
    # one result, one parameter, shapes halved down (trim, drop, shrink)
    assert len(comp.result_shapes) == 1 and len(comp.parameter_shapes) == 1
    assert max(comp.parameter_shapes[0].dimensions) <= 2
    # checked again on its own: XLA CPU rewrites log(exp(x)) to x, the interpreter overflows
    cpu, interpreted = run_both(hg.load(comp.as_text()), *fixed_inputs(comp, 100.0))
    np.testing.assert_array_equal(cpu, np.full(cpu.shape, 100, np.float32))
    assert np.isinf(interpreted).all()
    # progress: after each candidate judged, the best module never grows
    assert [p.tried for p in seen] == list(range(1, reduced.tried + 1))
    assert all(a.op_count >= b.op_count for a, b in zip(seen, seen[1:]))
    assert seen[-1].op_count == reduced.op_count and seen[-1].accepted == reduced.accepted
    assert {p.strategy for p in seen} <= STRATEGIES


def _diverges_in_a_loop_and_a_branch() -> hg.Computation:
    """log(exp(x)) inside a branch whose predicate is a constant, inside a loop that runs
    twice, among other ops."""
    b = hg.Builder("loop_and_branch")
    x = b.parameter(hg.f32[4], "x")
    w = b.parameter(hg.f32[4], "w")

    def body(i, v):
        taken = ops.conditional(v.builder.constant(True), v, lambda u: ops.log(ops.exp(u)),
                                v, lambda u: ops.sin(u))
        return i + 1, ops.max(taken, ops.tanh(v))

    _, looped = ops.while_loop(lambda i, v: ops.lt(i, 2), body, (b.constant(np.int32(0)), x))
    return b.build(ops.add(ops.mul(looped, ops.cos(w)), ops.sqrt(ops.abs(w))))


def test_loops_and_constant_branches_are_unrolled_and_taken():
    comp = _diverges_in_a_loop_and_a_branch()
    assert results_differ(comp)
    reduced = shrink(comp, results_differ).computation
    names = _names(reduced)
    assert not {"stablehlo.while", "stablehlo.if", "stablehlo.case"} & set(names), names
    assert op_count(reduced) <= 4 and {"stablehlo.exponential", "stablehlo.log"} <= set(names)
    assert results_differ(hg.load(reduced.as_text()))


def _map_calling_a_function(size: int) -> hg.Computation:
    """A program whose map calls a function: XLA's map inliner then makes HLO its own
    verifier refuses (hg.ExecutionError at compile)."""
    b = hg.Builder("map_call")
    x = b.parameter(hg.f32[size], "x")
    y = ops.tanh(x)
    for k in range(10):
        y = ops.add(ops.mul(y, ops.sin(x)), ops.cos(y))
    callee = hg.Builder("negated")
    callee_x = callee.parameter(hg.f32[()])
    negated = callee.build(ops.neg(ops.exp(callee_x)))
    mapped = ops.map([y], lambda v: ops.call(negated, v))
    return b.build(ops.sqrt(ops.abs(mapped)), ops.floor(y))


def _fails_to_compile(pattern: str):
    """Test scaffolding: interesting while PJRT's compile raises an hg.HlogenError whose
    message matches `pattern`."""
    def interesting(comp):
        try:
            hg.compile(comp)
        except hg.HlogenError as e:
            return re.search(pattern, str(e)) is not None
        return False
    return interesting


def test_an_error_message_interest_keeps_the_ops_xla_fails_on():
    comp = _map_calling_a_function(8)
    interesting = _fails_to_compile("map-inline")
    first = shrink(comp, interesting, seed=3)
    again = shrink(comp, interesting, seed=3)  # deterministic for a seed
    assert first.computation.as_text() == again.computation.as_text()
    assert first.tried == again.tried
    reduced = first.computation
    names = _names(reduced)
    assert "stablehlo.map" in names and "func.call" in names, names
    assert op_count(reduced) <= 3, reduced.as_text()
    with pytest.raises(hg.ExecutionError, match="map-inline"):
        hg.compile(hg.load(reduced.as_text()))


def test_a_script_interest_follows_creduce_exit_status(tmp_path):
    comp = _map_calling_a_function(4)
    calls = tmp_path / "calls"
    script = tmp_path / "still_interesting.sh"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        # C-Reduce's convention: exit 0 while the candidate is still interesting. The
        # candidate is $1, in the folder the script runs in.
        echo "$1" >> {calls}
        test -f "./$(basename "$1")" || exit 3
        grep -q "stablehlo.sine" "$1" && grep -q "stablehlo.cosine" "$1"
        """))
    script.chmod(0o755)
    reduced = shrink(comp, script_interest(script))
    names = _names(reduced.computation)
    assert names.count("stablehlo.sine") == 1 and names.count("stablehlo.cosine") == 1, names
    assert reduced.op_count == 2
    assert len(calls.read_text().splitlines()) == reduced.tried + 1  # and the original


# script text, its executable bit, what script_interest(..., timeout=0.5) or reduce says
SCRIPTS_THAT_CANNOT_SAY_YES = [
    ("#!/bin/sh\nexit 1\n", True, "not interesting to begin with"),
    ("#!/bin/sh\nsleep 30\n", True, "not interesting to begin with"),  # past its timeout
    ("exit 0\n", True, "cannot run the interestingness script"),  # no #! line
    ("#!/bin/sh\nexit 0\n", False, "must be an executable file"),
    (None, False, "must be an executable file"),  # no file
]


@pytest.mark.parametrize("text,executable,said", SCRIPTS_THAT_CANNOT_SAY_YES)
def test_scripts_that_cannot_say_yes(tmp_path, text, executable, said):
    script = tmp_path / "script.sh"
    if text is not None:
        script.write_text(text)
        script.chmod(0o755 if executable else 0o644)
    with pytest.raises(hg.InputError, match=said):
        shrink(_map_calling_a_function(4), script_interest(script, timeout=0.5))


def test_constants_of_constants_are_folded():
    """broadcast_in_dim of a constant becomes the constant it computes (by the interpreter)."""
    b = hg.Builder("folded")
    x = b.parameter(hg.f32[2, 2], "x")
    three = ops.broadcast_in_dim(b.constant(np.float32(3)), [2, 2], [])
    comp = b.build(ops.add(x, three))

    def adds_three(candidate):  # checked against numpy: x + 3 at x = 1
        result = hg.interpret(candidate, *fixed_inputs(candidate, 1.0))
        return np.array_equal(result, np.full((2, 2), 4, np.float32))

    reduced = shrink(comp, adds_three).computation
    assert _names(reduced) == ["stablehlo.constant", "stablehlo.add"], reduced.as_text()
    assert "dense<3.000000e+00> : tensor<2x2xf32>" in reduced.as_text()


def test_the_search_ends_at_its_timeout_with_the_best_so_far(stack):
    reduced = shrink(stack, results_differ, timeout=1e-6)
    assert reduced.timed_out and reduced.tried == 0
    assert reduced.computation.as_text() == stack.as_text()


def test_predicates_errors_and_bad_arguments(stack):
    comp = _map_calling_a_function(4)
    with pytest.raises(hg.InputError, match="not interesting to begin with"):
        shrink(comp, lambda c: False)
    with pytest.raises(hg.HlogenError, match="timeout must be a positive number"):
        shrink(comp, lambda c: True, timeout=0)
    with pytest.raises(hg.HlogenError, match="seed must be an int"):
        shrink(comp, lambda c: True, seed=1.5)

    def fails_on_candidates(candidate):  # an hg.HlogenError: not interesting
        if candidate is not comp:
            raise hg.ExecutionError("the candidate does not run")
        return True

    kept = shrink(comp, fails_on_candidates)
    assert kept.accepted == 0 and kept.tried > 0
    assert kept.computation.as_text() == comp.as_text()

    def broken(candidate):  # any other exception is the predicate's bug: it ends the search
        if candidate is not comp:
            raise ValueError("a bug in the predicate")
        return True

    with pytest.raises(ValueError, match="a bug in the predicate"):
        shrink(comp, broken)


def test_the_readme_example_prints_what_the_readme_says():
    code, printed = (docs.blocks("docs/differential-library.md", language, "An example")
                     for language in ("python", "text"))
    assert len(code) == len(printed) == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code[0], "docs/differential-library.md", "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed[0]
