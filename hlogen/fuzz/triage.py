"""Triage: one program on both sides, and what differed named by its cause."""
from __future__ import annotations

import collections
import dataclasses
import functools
import re

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from hlogen import backends, mlir, ops
from hlogen import types as T
from hlogen.builder import Builder
from hlogen.computation import Computation
from hlogen.differential.allowed import bitcast_allows, order_allows
from hlogen.differential.arbiter import Verdict
from hlogen.differential.comparison import Comparison, Side
from hlogen.differential.edits import op_alone
from hlogen.differential.interests import (Divergence, Failure, Inputs, Interest, class_of,
                                           difference_class, message_gist, message_pattern,
                                           reduce_with)
from hlogen.differential.isolated import Died
from hlogen.differential.near import Tolerance, compare_arrays, flushed_to_zero, subnormal
from hlogen.differential.origin import ProbedRun, find_origin, probed_run
from hlogen.errors import HlogenError, InputError, UnsupportedError
from hlogen.fuzz.findings import Finding, Signature, by_majority
from hlogen.mlir import constant_of
from hlogen.runtime.execution import prepare_as_compiled

# ops a finding's op list leaves out: whether a value is a constant or a parameter is
# incidental
_NOT_SIGNED = frozenset({"stablehlo.constant", "func.func", "func.return", "stablehlo.return",
                         "builtin.module"})
_WRITTEN = "hlogen.fuzz.op"  # a location's name: which op of main, as written, a probe is of
_SCALED = Tolerance(ulp=3)  # where the rule is Near, an op's values also differ beyond this
_TINY = 3  # ops of a module that a signature may name together


# -- one program ----------------------------------------------------------------------------

@dataclasses.dataclass
class _Probed:
    """A candidate's probed run (origin.ProbedRun: every top-level value of main on both
    sides, one run that the origin follows too), and the op of main as written that each
    probe is of (for an op of a called function, the call)."""

    run: ProbedRun
    written: list

    @property
    def module(self) -> Computation:  # as written, every value returned
        return self.run.module

    @property
    def probes(self) -> list:  # origin.Probe: op, result index, position
        return self.run.probes

    @property
    def values(self) -> tuple:  # (test's, reference's): one per probe, then main's results
        return self.run.values

    @property
    def inputs(self) -> list:
        return self.run.inputs

    def operands(self, k: int, side: int) -> list | None:
        """The values of probe k's op's operands as `side` (0: test, 1: reference)
        computes them; None where one cannot be had (a value no probe returns)."""
        return self.run.operands(self.probes[k].op, side)


class Triage:
    def __init__(self, sides, tolerance, children, run_seconds, third=None):
        self.sides, self.tolerance = sides, tolerance
        self.third = third  # a third Side: where exact math cannot judge, the majority does
        self.children, self.run_seconds = children, run_seconds
        self._flushes: dict = {}  # (side, dtype) -> whether it flushes subnormals
        # the signatures a reduction's candidates showed instead of the one kept
        self.moved: collections.Counter = collections.Counter()
        # an op's values differ: by the rule, or (Near) also beyond 3 ULP and `rel`
        self.scaled = None if tolerance.ulp is not None or tolerance.bitwise else \
            (_SCALED, Tolerance(0, tolerance.rel))

    def observe(self, program: Computation, given, seed: int, large_range: bool):
        """None when both sides agree; (the interest that keeps the difference, its
        signature as the program shows it) when they do not; or why the program was
        skipped (a string)."""
        for side in self.sides:
            try:
                prepare_as_compiled(side.module(program), backends.get(side.backend))
            except UnsupportedError:
                return "refused by hlogen's preflight"
            except HlogenError:
                return "not runnable"
        try:
            inputs = Inputs(program, given, seed, large_range)
        except InputError:
            return "no inputs (constraints that conflict)"
        tagged = inputs.tagged(program)
        divergence = Divergence(*self.sides, self.tolerance, inputs, self.children,
                                self.run_seconds)
        try:
            comparison = divergence.compare(tagged)
        except HlogenError:
            return self._failure(tagged, inputs)
        if comparison.ok:
            return None
        probed = self.probe(tagged, inputs.of(tagged))
        if probed is not None and self.allows(probed):
            return "allowed (the order of a sum or product, or bits of matching values)"
        signature = self.signature(tagged, comparison, probed)
        if (signature.wrong or "").startswith("allowed"):  # the spec allows it: counted
            return signature.wrong
        return dataclasses.replace(divergence, kind=difference_class(comparison),
                                   keeps=functools.partial(self.keeps, signature)), signature

    def probe(self, candidate: Computation, inputs: list) -> _Probed | None:
        """`candidate`'s top-level values on both sides (None when they cannot be had)."""
        tagged = candidate.clone()
        block = tagged.main.regions[0].blocks[0]
        written = []
        with mlir.context():
            for i, op in enumerate(block.operations):
                written.append(op.operation.name)
                op.operation.location = ir.Location.name(f"{_WRITTEN}{i}",
                                                         childLoc=op.operation.location)
        try:
            run = probed_run(tagged, inputs, *self.sides, runner=self._run)
        except HlogenError:
            return None
        names = []
        for op, _, _ in run.probes:  # (an op of a called function: the call's tag)
            tag = re.search(rf'"{re.escape(_WRITTEN)}(\d+)"', str(op.location))
            names.append(written[int(tag.group(1))] if tag else op.name)
        return _Probed(run, names)

    def keeps(self, signature: Signature, candidate: Computation, inputs,
              comparison: Comparison) -> bool:
        """Whether a candidate of a reduction still shows the difference of `signature`:
        not one the spec allows (`allows`), and of the same signature (so that a program
        where one cause shows first is not reduced to another it also holds)."""
        probed = self.probe(candidate, inputs)
        if probed is None or self.allows(probed):
            return False
        found = str(self.signature(candidate, comparison, probed))
        if found != str(signature):  # another origin, class or wrong side: another cause
            self.moved[found] += 1
            return False
        return True

    def allows(self, probed: _Probed) -> bool:
        """Whether the first top-level op of main whose values differ between the sides
        (by the rule) differs only as the spec lets it (`spec_allows`)."""
        for k in range(len(probed.probes)):
            if self.differs_by_rule(probed.values[0][k], probed.values[1][k]) is not None:
                return self.spec_allows(probed, k)
        return False

    def spec_allows(self, probed: _Probed, k: int) -> bool:
        """Whether probe k's op differs between the sides only as the spec lets it: the
        order of its arithmetic (order_allows, its operands as the reference side computes
        them) or, for a bitcast_convert, the bits of operands that match (bitcast_allows)."""
        op, a, b = probed.probes[k][0], probed.values[0][k], probed.values[1][k]
        operands = probed.operands(k, 1)
        if operands is None:
            return False
        if op.name == "stablehlo.bitcast_convert":
            return bitcast_allows(a, b, probed.operands(k, 0)[0], operands[0], self.tolerance)
        return order_allows(op, a, b, operands, self.tolerance)

    def signature(self, candidate: Computation, comparison: Comparison,
                  probed: _Probed | None) -> Signature:
        """The signature of a divergence (module docstring): the first op whose values
        differ by the rule other than as the spec allows (or, where none does, beyond 3
        ULP and `rel`), unless a side's flushing of subnormals explains it there; but
        where an op before it already differs beyond 3 ULP and `rel` (at all, where the
        op's results are not floats), not by flushing, the difference starts there
        (log(exp(x)) in f16 differs a little, rsqrt of it a lot; (x*c)/c differs by an
        ULP, x != (x*c)/c by everything). Without probes, the op that makes the first
        differing result."""
        found = None if probed is None else (
            next(self._differing(probed, self.differs_by_rule), None)
            or next(self._differing(probed, self.differs), None))
        if found is None:
            return Signature("divergence", difference_class(comparison) or "value",
                             _result_op(candidate, comparison))
        k, report = found
        flushing = self._flushing(probed, k)
        if flushing is not None:
            return Signature("divergence", "subnormal",
                             gist=f"{flushing.label} flushes subnormals to zero")
        origin = self.origin(candidate, probed.inputs, probed)
        if origin is not None:
            return Signature("divergence", _class_at(origin), origin.op,
                             wrong=self.wrong(origin.judgement, candidate, probed.inputs,
                                              origin.of_result))
        # where the op's results are not floats (a comparison, a conversion to integers),
        # any difference of the floats before it can flip them: the first one is the start
        stepped = T.element_type(np.asarray(probed.values[0][k]).dtype).kind \
            not in (T.FLOAT, T.COMPLEX)
        for differs in (self.differs, self.differs_in_bits) if stepped else (self.differs,):
            earlier = next(((j, small) for j, small in self._differing(probed, differs, k)
                            if self._flushing(probed, j) is None), None)
            if earlier is not None:
                k, report = earlier
                break
        return Signature("divergence", "shape" if report.problem else
                         class_of(report.first[0].actual, report.first[0].expected),
                         probed.written[k])

    def origin(self, candidate: Computation, inputs: list, probed: _Probed | None = None):
        """Where the difference of `candidate` is born, with the arbiter's judgement there
        (hlogen.differential.origin), from `probed` (the triage's probed run of it) where
        given; None where it finds none."""
        try:
            return find_origin(candidate, inputs, *self.sides, self.tolerance, runner=self._run,
                               probed=None if probed is None else probed.run)
        except (HlogenError, ir.MLIRError):  # (an op origin cannot run alone: no origin,
            return None                      # the triage's own probing names the op)

    def _run(self, side: Side, module: Computation, inputs) -> list:
        """`module` (the side's form of it) on `side`, in the triage's child process."""
        return self.children.run(side.backend, module, inputs, side.xla_options,
                                 self.run_seconds)

    def wrong(self, judgement, candidate=None, inputs=None, of_result: int = 0) -> str:
        """Who exact math finds wrong: "SIDE wrong", "allowed (CLASS)", "undetermined";
        where it cannot judge and a third side runs, the majority of the three on
        `candidate`'s result `of_result` (findings.by_majority)."""
        verdict = None if judgement is None else Verdict(judgement.verdict)
        if verdict == Verdict.TEST_WRONG:
            return f"{self.sides[0].label} wrong"
        if verdict == Verdict.REFERENCE_WRONG:
            return f"{self.sides[1].label} wrong"
        if verdict == Verdict.ALLOWED:
            return f"allowed ({judgement.allowed_class or 'within the accuracy'})"
        if self.third is not None and candidate is not None:
            return by_majority(self.sides, self.third, self.tolerance, candidate, inputs,
                               of_result, self._run)
        return "undetermined"

    def _differing(self, probed: _Probed, differs, before: int | None = None):
        """(index, report) of each probe (before `before`) whose values differ by
        `differs` other than as the spec allows, in order."""
        for k in range(len(probed.probes) if before is None else before):
            report = differs(probed.values[0][k], probed.values[1][k])
            if report is not None and not self.spec_allows(probed, k):
                yield k, report

    def _flushing(self, probed: _Probed, k: int) -> Side | None:
        """The side whose values of probe k are the other side's with subnormals made
        zeros: its operands' (the op run alone on the other side's backend, where it
        differs from this side's with the operands as they are and agrees once their
        subnormals are zeros: flushing, not a rewrite of the op in its module, makes the
        difference), its results', or the module's inputs' and constants'
        (_flushed_at_source); None when none are. A side is named only where it flushes
        a subnormal product of the type to zero (`flushes`): where flushing the operands
        does not change the exact result, the other side's op may differ for another
        reason."""
        op, index, _ = probed.probes[k]
        values = [*(probed.operands(k, 0) or ()), probed.values[0][k]]
        floats = [np.asarray(v).dtype for v in values
                  if T.element_type(np.asarray(v).dtype).kind in (T.FLOAT, T.COMPLEX)]
        for this in (0, 1):
            if not floats or not self.flushes(this, floats[0]):
                continue
            other = 1 - this
            mine = probed.values[this][k]
            operands = probed.operands(k, other)
            if operands is None:
                continue
            value = probed.values[other][k]
            if any(subnormal(x).any() for x in operands):
                side = self.sides[other]
                with mlir.context(), ir.Location.unknown():
                    alone = Computation(op_alone(op, parameters=True))
                try:
                    raw, value = (self._run(side, side.module(alone), given)[index]
                                  for given in (operands, [flushed_to_zero(x) for x in operands]))
                except HlogenError:
                    continue
                if self.differs(mine, raw) is None:
                    continue  # alone, the other side agrees without flushing
            elif not subnormal(value).any():
                value = None  # nothing to flush in the op
            if value is not None and self.differs(mine, flushed_to_zero(value)) is None:
                return self.sides[this]
            if self._flushed_at_source(probed, k, this):
                return self.sides[this]
        return None

    def _flushed_at_source(self, probed: _Probed, k: int, this: int) -> bool:
        """Whether the other side, running the probed module with its subnormal inputs
        and constants made zeros, gives side `this`'s values of probe k (a subnormal
        flushed by an op before the one whose values differ by the rule)."""
        if not all(isinstance(x, np.ndarray) for x in probed.inputs):
            return False
        module = probed.module.clone()
        changed = any(subnormal(x).any() for x in probed.inputs)
        with mlir.context():
            for op in mlir.walk(module.module):
                value = constant_of(op.results[0]) if op.name == "stablehlo.constant" else None
                if value is not None and subnormal(value).any():
                    op.attributes["value"] = mlir.dense_attr(
                        flushed_to_zero(value), mlir.shape_of_type(op.results[0].type))
                    changed = True
        if not changed:
            return False
        side = self.sides[1 - this]
        try:
            values = self._run(side, side.module(module),
                               [flushed_to_zero(x) for x in probed.inputs])
        except HlogenError:
            return False
        return self.differs(probed.values[this][k], values[k]) is None

    def flushes(self, side: int, dtype: np.dtype) -> bool:
        """Whether `side` (0: test, 1: reference) flushes subnormals of `dtype` (its
        parts', for a complex type) to zero: the smallest subnormal times 1, both
        parameters, is 0 there."""
        dtype = np.dtype(np.real(np.zeros((), dtype)).dtype)
        key = (side, dtype)
        if key not in self._flushes:
            chosen = self.sides[side]
            b = Builder("flushes")
            shape = T.Shape(T.element_type(dtype), ())
            comp = b.build(ops.mul(b.parameter(shape, "x"), b.parameter(shape, "y")))
            tiny = np.array(ml_dtypes.finfo(dtype).smallest_subnormal, dtype)
            try:
                (got,) = self._run(chosen, chosen.module(comp), [tiny, np.ones((), dtype)])
                self._flushes[key] = bool(np.asarray(got) == 0)
            except HlogenError:
                self._flushes[key] = False
        return self._flushes[key]

    @staticmethod
    def differs_in_bits(a, b):
        """The report of an op's values `a` and `b` when they differ at all (0 ULP apart:
        two NaNs, or -0 and +0, do not); None when they do not."""
        report = compare_arrays(a, b, Tolerance(ulp=0), shown=1)
        return None if report.ok else report

    def differs_by_rule(self, a, b):
        """The report of an op's values `a` and `b` when they differ by the rule; None
        when they do not."""
        report = compare_arrays(a, b, self.tolerance, shown=1)
        return None if report.ok else report

    def differs(self, a, b):
        """The report of an op's values `a` and `b` when they differ (by the rule, or
        beyond 3 ULP and `rel` where it is Near); None when they do not."""
        report = compare_arrays(a, b, self.tolerance, shown=1)
        if report.ok and self.scaled is not None:
            report = compare_arrays(a, b, self.scaled[0], also=self.scaled[1], shown=1)
        return None if report.ok else report

    def _failure(self, tagged: Computation, inputs: Inputs):
        """What to make of a program a side failed on: (its interest, its signature), or
        why it is skipped."""
        failed = {}
        for side in self.sides:
            try:
                self.children.run(side.backend, side.module(tagged), inputs.of(tagged),
                                  side.xla_options)
            except HlogenError as e:
                failed[side] = e
        died = {s: e for s, e in failed.items() if isinstance(e, Died)}
        if any(e.how == "timeout" for e in died.values()):
            return "timed out"
        for side, e in died.items():
            if e.signal is not None:
                words = _last_words(str(e))
                return (Failure(side, message_pattern(words), True, inputs, self.children,
                                self.run_seconds),
                        Signature(f"crash of {side.label}", e.signal, gist=message_gist(words)))
        if len(failed) != 1:  # both (or, run again, neither)
            return "failed on both sides" if failed else "not runnable"
        (side, e), = failed.items()
        other = self.sides[1] if side == self.sides[0] else self.sides[0]
        return (Failure(side, message_pattern(str(e)), False, inputs, self.children,
                        self.run_seconds, runs=other),
                Signature(f"error on {side.label}", type(e).__name__, gist=message_gist(str(e))))


def _class_at(origin) -> str:
    """The class of the first element where the origin op's values differ."""
    a, b = np.asarray(origin.test), np.asarray(origin.reference)
    if a.shape != b.shape or a.dtype != b.dtype:
        return "shape"
    report = compare_arrays(a, b, Tolerance(ulp=0), shown=1)
    return class_of(report.first[0].actual, report.first[0].expected) if report.first \
        else "value"


def _result_op(candidate: Computation, comparison: Comparison) -> str | None:
    """The op of main that makes the first result that differs; for a parameter returned
    as it is (an op wrote over it), the ops of a module of at most _TINY ops."""
    first = next((i for i, r in enumerate(comparison.results) if not r.ok), 0)
    block = candidate.main.regions[0].blocks[0]
    returned = list(list(block.operations)[-1].operands)
    if first < len(returned) and not isinstance(returned[first].owner, ir.Block):
        return returned[first].owner.name
    ops = sorted({op.operation.name for op in block.operations} - _NOT_SIGNED)
    return " and ".join(ops) if 0 < len(ops) <= _TINY else None


def _plain(ulps):
    """A number of ULPs as JSON holds it (None where a side's is unknown; an infinity or
    a NaN as a string)."""
    if ulps is None or isinstance(ulps, (bool, int)):
        return ulps
    ulps = float(ulps)
    return ulps if np.isfinite(ulps) else str(ulps)


def _last_words(message: str) -> str:
    """What a dead child said last (XLA's check), without the module's name."""
    return message.split("while running it: ", 1)[-1]


def reduce_finding(program: Computation, interest: Interest, signature: Signature, where: str,
            seed: int, seconds: float, fuzzer: Triage, progress, interrupted_by: tuple = ()):
    """(the Finding, its Reduction), or None when the difference does not show again.
    The reduction keeps the signature (a divergence's, Divergence.keeps; an error's
    message, numbers aside)."""
    fuzzer.moved.clear()
    try:
        reduced = reduce_with(interest.inputs.tagged(program), interest, seed=seed,
                              timeout=seconds, progress=progress,
                              interrupted_by=interrupted_by)
    except InputError:  # a difference that comes and goes, or a cause that does not stay
        if fuzzer.moved:
            return f"origin not kept (seen again as {fuzzer.moved.most_common(1)[0][0]})"
        return None
    note = None
    if fuzzer.moved:  # what the reduction left, to keep the cause
        other, times = fuzzer.moved.most_common(1)[0]
        note = (f"{sum(fuzzer.moved.values())} candidate(s) not taken: another origin, class "
                f"or wrong side (most often, {times}: {other})")
    if isinstance(interest, Divergence):
        try:
            message = interest.compare(reduced.computation, reduced.inputs).text()
        except HlogenError as e:
            message = str(e)
    else:
        message = reduced.seen(fuzzer.children)
    ops = sorted({op.name for op in mlir.walk(reduced.computation.module)
                  if op.name not in _NOT_SIGNED})
    search = reduced.search
    finding = Finding(str(signature), signature.kind, signature.difference, signature.at,
                      signature.gist, ops, where, message, "", None, None, search.op_count,
                      search.original_op_count, round(search.seconds, 3), search.timed_out,
                      wrong=signature.wrong, note=note)
    if isinstance(interest, Divergence) and signature.at is not None:
        origin = fuzzer.origin(reduced.computation, reduced.inputs)
        judgement = None if origin is None else origin.judgement
        if judgement is not None:
            finding.verdict = Verdict(judgement.verdict).value
            finding.reason, finding.exact = judgement.reason, list(judgement.exact)
            finding.ulps = {k: _plain(v) for k, v in judgement.ulps.items()}
    return finding, reduced


