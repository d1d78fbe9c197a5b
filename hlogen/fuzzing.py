"""The fuzzer behind `hlogen fuzz` (`hg.fuzz`): programs run on two backends until they
disagree, each disagreement reduced, named by its cause and kept once.

Each program is random (hlogen.differential.generate: hlogen's op library, its shape
rules, bounded sizes and depth, and its dictionary of idioms compilers rewrite) or, with a
corpus, one of its modules (a module of a file of StableHLO, made runnable as the
conformance runner makes it: checks become results, constants parameters with the file's
values; hlogen.conformance.module), as it is the first time and mutated
(hlogen.differential.mutate) after. It runs on the test and the reference side in a
child process that may die or be stopped (hlogen.differential.isolated), with random
inputs (hlogen.differential.inputs: run_hlo_module's; for a share of the programs,
`large_range`, over the whole exponent range, where overflows and rewrites of extreme
values show) or the corpus file's values. What counts as a finding:
- a divergence: the results differ by the comparison rule (XLA's Near by default), and
  the first op whose values differ does not differ only as the spec allows (a sum or
  product in another order; a bitcast_convert of values that match by the rule, as NaNs
  of another sign or payload do);
- an error only one side reports (what hlogen refuses before a backend sees the module,
  hlogen.preflight's refusals, is not one: the program is skipped);
- a crash: a side's process ends by a signal.
Each finding is reduced (hlogen.differential.interests, at most `reduce_seconds`) while
its signature stays the same: a divergence whose first difference is of the same class
and of the same cause, the same side's error or crash with the same message (numbers
aside). Its signature names the cause once, as a triager files it (`Signature`):
- a divergence: the op where the sides first differ (the class of the difference there,
  interests.difference_class: a NaN or an infinity, a subnormal, an integer, a
  predicate, a value, a shape, is recorded but does not tell causes apart), found by
  probing (every top-level value of main returned and compared,
  hlogen.conformance.explain.probed: by the rule, or, where no op differs by it, by 3
  ULP and the relative bound), named as the module writes it (a chlo op, not its
  decomposition); where that op's values on one side are the other side's with
  subnormals (of its operands, the op run alone on them, and of its results) made
  zeros, the cause is the side's flushing of subnormals, whatever the op: one
  signature. Where no probe differs (probing keeps a compiler from a rewrite), the
  class and the op that makes the first differing result;
- an error or a crash: the side, the error's class (or the signal) and the gist of its
  message (numbers aside: interests.message_gist).
One reproducer per signature is kept in the output folder (NAME.mlir, NAME.inputs.npz,
NAME.txt with what differed and the command that shows it), with `summary.json` (every
signature the folder holds, this run's counts) and `junit.xml`. A program whose
difference has, before reduction, a signature this run has already reduced is counted
for it (`Finding.seen`) and not reduced again. A signature already in the folder's
summary is not new: `Fuzzed.new` lists the others.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import random
import re
import time
import xml.etree.ElementTree as ET
from typing import Callable

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from hlogen import backends, files, mlir, ops
from hlogen import types as T
from hlogen.builder import Builder
from hlogen.computation import Computation
from hlogen.conformance import files as conformance_files
from hlogen.conformance.bounds import REDUCTIONS, reassociation_bound
from hlogen.conformance import explain
from hlogen.conformance.module import Case, constant_of, load_case
from hlogen.differential.compare import Comparison, Side
from hlogen.differential.generate import (DEFAULT_ELEMENT_TYPES, checked_options, generate,
                                          mutate)
from hlogen.differential.interests import (Divergence, Failure, Inputs, Interest, class_of,
                                           difference_class, message_gist, message_pattern,
                                           reduce_with)
from hlogen.differential.isolated import Children, Died
from hlogen.differential.near import (Tolerance, compare_arrays, flushed_to_zero, judge,
                                      subnormal)
from hlogen.differential.reduce import op_alone
from hlogen.errors import HlogenError, InputError, UnsupportedError
from hlogen.loading import load
from hlogen.runtime.execution import prepare

SUMMARY, JUNIT = "summary.json", "junit.xml"
LARGE_RANGE_SHARE = 0.5  # of the programs, by default, whose inputs span the exponent range
_PROGRAM_SEED = 1_000_003
# ops a finding's op list leaves out: whether a value is a constant or a parameter is
# incidental
_NOT_SIGNED = frozenset({"stablehlo.constant", "func.func", "func.return", "stablehlo.return",
                         "builtin.module"})
_WRITTEN = "hlogen.fuzz.op"  # a location's name: which op of main, as written, a probe is of
_SCALED = Tolerance(ulp=3)  # where the rule is Near, an op's values also differ beyond this
_TINY = 3  # ops of a module that a signature may name together


@dataclasses.dataclass(frozen=True)
class Signature:
    """What a triager files once: the kind ("divergence", "error on SIDE", "crash of
    SIDE"), the difference (the class of the first difference, the error's class, or the
    signal), the op where the sides first differ (a divergence's), and a gist (an error's
    message, or what explains a divergence at no op in particular)."""

    kind: str
    difference: str
    at: str | None = None
    gist: str | None = None

    def __str__(self) -> str:
        """What names the cause: an op where the sides first differ names it whatever
        the class of the difference there (log(exp(x)) rewritten to x is an infinity for
        a large x, a value for a rounded one: one cause)."""
        return (self.kind + (f" at {self.at}" if self.at else f" ({self.difference})")
                + (f": {self.gist}" if self.gist else ""))


@dataclasses.dataclass
class Finding:
    """One signature: what differed, reduced, and where its reproducer is."""

    signature: str
    kind: str             # "divergence", "error on cpu", "crash of cpu"
    difference: str       # "value", "subnormal", ...; "ExecutionError", ...; "SIGABRT"
    at: str | None        # the op where the sides first differ (a divergence)
    gist: str | None      # an error's message, normalized; or why a divergence is at no op
    ops: list             # of the reduced module (constants aside), sorted
    program: str          # where the program came from: generate(...) or a corpus module
    message: str          # what differed on the reduced module
    module: str           # the reproducer's files, in the output folder
    inputs: str | None
    command: str | None
    op_count: int         # of the reduced module
    original_op_count: int
    reduce_seconds: float
    timed_out: bool       # the reduction stopped at its time limit
    new: bool = True      # not in the folder's summary before this run
    seen: int = 1         # programs of this run that showed it

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Fuzzed:
    """What a fuzz run did and found (`findings`: this run's signatures, new or not)."""

    test: Side
    reference: Side
    tolerance: Tolerance
    seed: int
    seconds: float = 0.0
    programs: int = 0     # generated or taken from the corpus
    generated: int = 0
    from_corpus: int = 0
    large_range: int = 0  # programs whose random inputs span the exponent range
    agreed: int = 0
    reducing: float = 0.0  # seconds spent reducing findings
    skipped: dict = dataclasses.field(default_factory=dict)  # why -> count
    findings: list = dataclasses.field(default_factory=list)

    @property
    def new(self) -> list:
        return [f for f in self.findings if f.new]

    def to_json(self) -> dict:
        return {"test": self.test.to_json(), "reference": self.reference.to_json(),
                "tolerance": self.tolerance.to_json(), "seed": self.seed,
                "seconds": round(self.seconds, 3), "programs": self.programs,
                "generated": self.generated, "from_corpus": self.from_corpus,
                "large_range": self.large_range, "agreed": self.agreed,
                "reducing_seconds": round(self.reducing, 3), "skipped": dict(self.skipped),
                "new": len(self.new), "findings": [f.to_json() for f in self.findings]}

    def text(self) -> str:
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.skipped.items()))
        lines = [f"{self.programs} programs in {self.seconds:.0f} s ({self.generated} generated, "
                 f"{self.from_corpus} from the corpus): {self.agreed} agreed, "
                 f"{len(self.findings)} signature(s) found, {len(self.new)} new"
                 + (f"; skipped: {skipped}" if skipped else "")]
        for f in self.findings:
            lines.append(f"{'new' if f.new else 'known'}: {f.signature} ({f.seen} program(s); "
                         f"{f.original_op_count} -> {f.op_count} ops) {f.module}")
            if f.command:
                lines.append(f"  {f.command}")
        return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class Progress:
    """Where a fuzz run is, after each program and at each step of a reduction."""

    programs: int
    findings: int
    new: int
    seconds: float
    reducing: str | None = None  # the signature being reduced (as the program shows it)
    reduced_ops: int | None = None


def fuzz(test="cpu", reference="interpret", *, out, seconds: float = 60, seed: int = 0,
         corpus=(), ops: int = 20, max_rank: int = 3, max_dim: int = 8, depth: int = 2,
         element_types=DEFAULT_ELEMENT_TYPES, large_range: bool | float = LARGE_RANGE_SHARE,
         test_options=None, reference_options=None, abs: float = 1e-3, rel: float = 1e-3,
         ulp: int | None = None, bitwise: bool = False, reduce_seconds: float = 60,
         run_seconds: float = 30, programs: int | None = None,
         progress: Callable[[Progress], None] | None = None) -> Fuzzed:
    """Runs programs on `test` and `reference` (backend names or hlogen.differential
    Sides, each with XLA options) for `seconds` (or `programs` programs, whichever ends
    first) and keeps a reduced reproducer of each cause of a difference in the folder
    `out` (made if missing, in a folder that exists); see the module docstring.
    Programs: random ones of `ops` ops (`max_rank`, `max_dim`, `depth`, `element_types`:
    generate's bounds), and, with a `corpus` (files or folders of StableHLO, or
    Computations), alternately its modules. Random inputs span the exponent range
    (run_hlo_module's large range) for the share `large_range` of the programs (True:
    all, False: none; chosen by each program's seed). `seed` makes the run repeatable
    (on the same machine and load: `seconds` decides how many programs run). Each run of
    a side is bounded by `run_seconds`, each reduction by `reduce_seconds`.
    `progress(Progress)` follows it."""
    folder = files.folder(out, "-o", "fuzz writes its findings into a folder", made=True)
    tolerance = Tolerance(abs, rel, ulp, bitwise)
    sides = Side.of(test, test_options), Side.of(reference, reference_options)
    options = checked_options(ops, max_rank, max_dim, element_types, depth)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"fuzz: seed must be a whole number >= 0, got {seed!r}")
    for name, value in (("seconds", seconds), ("reduce_seconds", reduce_seconds),
                        ("run_seconds", run_seconds)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise InputError(f"fuzz: {name} must be a positive number, got {value!r}")
    share = float(large_range) if isinstance(large_range, (bool, int, float)) else -1.0
    if not 0 <= share <= 1:
        raise InputError(f"fuzz: large_range must be True, False or a share in [0, 1], got "
                         f"{large_range!r}")
    entries = _corpus(corpus)
    folder.mkdir(exist_ok=True)
    known = _known(folder)
    outputs = _Outputs(folder)
    run = Fuzzed(sides[0], sides[1], tolerance, seed)
    start = time.monotonic()
    found: dict = {}  # signature -> Finding
    with Children(run_seconds) as children:
        fuzzer = _Fuzzer(sides, tolerance, children, run_seconds)

        def tell(**more):
            if progress is not None:
                progress(Progress(run.programs, len(found), sum(f.new for f in found.values()),
                                  time.monotonic() - start, **more))

        k = 0
        while time.monotonic() - start < seconds and (programs is None or k < programs):
            program_seed = program_seed_of(seed, k)
            if entries and k % 2:
                run.from_corpus += 1
                where, program, given = entries.pick(k // 2, program_seed)
            else:
                run.generated += 1
                where = (f"generate({program_seed}, ops={options.ops}, max_rank="
                         f"{options.max_rank}, max_dim={options.max_dim}, depth={options.depth})")
                program, given = generate(program_seed, ops=options.ops,
                                          max_rank=options.max_rank, max_dim=options.max_dim,
                                          element_types=options.element_types,
                                          depth=options.depth), None
            k += 1
            run.programs += 1
            large = large_range_of(program_seed, share)
            run.large_range += large and given is None
            outcome = fuzzer.observe(program, given, program_seed, large)
            if isinstance(outcome, str) or outcome is None:
                if outcome is None:
                    run.agreed += 1
                else:
                    run.skipped[outcome] = run.skipped.get(outcome, 0) + 1
                tell()
                continue
            interest, signature = outcome
            if str(signature) in found:  # reduced already: counted, not reduced again
                found[str(signature)].seen += 1
                tell()
                continue
            started = time.monotonic()
            reduced = _reduce(program, interest, signature, where, program_seed,
                              reduce_seconds, fuzzer,
                              lambda p, s=str(signature): tell(reducing=s,
                                                               reduced_ops=p.op_count))
            run.reducing += time.monotonic() - started
            if reduced is None:
                run.skipped["not seen again"] = run.skipped.get("not seen again", 0) + 1
            elif reduced[0].signature in found:
                found[reduced[0].signature].seen += 1
            else:
                finding = reduced[0]
                finding.new = finding.signature not in known
                _save(outputs, finding, reduced[1])
                found[finding.signature] = finding
            tell()
    run.seconds = time.monotonic() - start
    run.findings = list(found.values())
    outputs.write(SUMMARY, _summary(run, known))
    outputs.write(JUNIT, junit(run))
    return run


def program_seed_of(seed: int, k: int) -> int:
    """The seed of program k (its generation, mutation and inputs) in a run of `seed`."""
    return seed * _PROGRAM_SEED + k


def large_range_of(program_seed: int, share: float) -> bool:
    """Whether program `program_seed`'s random inputs span the exponent range, for a run
    that gives the share `share` of its programs such inputs."""
    return random.Random(f"{program_seed} large range").random() < share


# -- one program ----------------------------------------------------------------------------

@dataclasses.dataclass
class _Probed:
    """A candidate whose every top-level value of main ran on both sides: the probes
    (op, result index, position: explain.probed's), the op of the module as written
    that each is of, and each side's values (one per probe, then main's results)."""

    module: Computation  # legalized, every value returned (it holds the probes' ops)
    probes: list
    written: list
    values: tuple        # (test's, reference's)
    inputs: list

    def operands(self, k: int, side: int) -> list | None:
        """The values of probe k's op's operands as `side` (0: test, 1: reference)
        computes them; None where one cannot be had (a value no probe returns)."""
        op = self.probes[k][0]
        where = {p[0].results[p[1]]: j for j, p in enumerate(self.probes[:k])}
        operands = []
        for value in op.operands:
            if value in where:
                operands.append(self.values[side][where[value]])
            elif isinstance(value.owner, ir.Block) and \
                    value.owner == self.module.main.regions[0].blocks[0]:
                operands.append(self.inputs[ir.BlockArgument(value).arg_number])
            else:
                operands.append(constant_of(value))
        return None if any(o is None for o in operands) else operands


class _Fuzzer:
    def __init__(self, sides, tolerance, children, run_seconds):
        self.sides, self.tolerance = sides, tolerance
        self.children, self.run_seconds = children, run_seconds
        self._flushes: dict = {}  # (side, dtype) -> whether it flushes subnormals
        # an op's values differ: by the rule, or (Near) also beyond 3 ULP and `rel`
        self.scaled = None if tolerance.ulp is not None or tolerance.bitwise else \
            (_SCALED, Tolerance(0, tolerance.rel))

    def observe(self, program: Computation, given, seed: int, large_range: bool):
        """None when both sides agree; (the interest that keeps the difference, its
        signature as the program shows it) when they do not; or why the program was
        skipped (a string)."""
        for side in self.sides:
            try:
                prepare(side.module(program), backends.get(side.backend))
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
            return "allowed by the spec (the order of a sum or product, bits of matching values)"
        divergence.kind = difference_class(comparison)
        signature = self.signature(tagged, comparison, probed)
        divergence.keeps = functools.partial(self.keeps, signature)
        return divergence, signature

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
        module, probes = explain.probed(tagged)
        try:
            values = tuple(self.children.run(side.backend, side.module(module), inputs,
                                             side.xla_options, self.run_seconds)
                           for side in self.sides)
        except HlogenError:
            return None
        names = []
        for op, _, _ in probes:  # (a decomposed op keeps the location of the op written)
            tag = re.search(rf'"{re.escape(_WRITTEN)}(\d+)"', str(op.location))
            names.append(written[int(tag.group(1))] if tag else op.name)
        return _Probed(module, probes, names, values, list(inputs))

    def keeps(self, signature: Signature, candidate: Computation, inputs,
              comparison: Comparison) -> bool:
        """Whether a candidate of a reduction still shows the difference of `signature`:
        not one the spec allows (`allows`), and of the same signature (so that a program
        where one cause shows first is not reduced to another it also holds)."""
        probed = self.probe(candidate, inputs)
        return probed is not None and not self.allows(probed) and \
            str(self.signature(candidate, comparison, probed)) == str(signature)

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
                    raw, value = (self.children.run(side.backend, side.module(alone), given,
                                                    side.xla_options, self.run_seconds)[index]
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
            values = self.children.run(side.backend, side.module(module),
                                       [flushed_to_zero(x) for x in probed.inputs],
                                       side.xla_options, self.run_seconds)
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
                (got,) = self.children.run(chosen.backend, chosen.module(comp),
                                           [tiny, np.ones((), dtype)], chosen.xla_options,
                                           self.run_seconds)
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


# ops whose results the spec computes by arithmetic it leaves the order of to the
# implementation: a NaN on one side against an infinity on the other, from operands that
# hold infinities or NaNs, is the order's (inf - inf in one, inf + 1 in the other)
_ORDER_FREE = {"stablehlo.convolution", "stablehlo.dot_general", "stablehlo.reduce",
               "stablehlo.reduce_window", "stablehlo.triangular_solve", "stablehlo.cholesky"}
# and of these the algorithm too: where operands hold infinities or NaNs, whether a NaN
# reaches an element is the algorithm's (XLA CPU's blocked solve, the interpreter's
# substitution)
_ALGORITHM_FREE = {"stablehlo.triangular_solve", "stablehlo.cholesky"}


def order_allows(op, got, want, operands: list, tolerance: Tolerance = Tolerance()) -> bool:
    """Whether `op` (of _ORDER_FREE), computing `got` on one side and `want` on the other
    from `operands` (their values), differs only as the order of its arithmetic can:
    within twice the error bound of a float sum in any order (a dot_general,
    convolution, or reduce or reduce_window that adds: hlogen.conformance.bounds, from
    the operands' finite values: an element a term of which is not finite is not finite
    on either side) or of a product in any order (a reduce or reduce_window that
    multiplies: _product_bound), an infinity where the other side reaches the type's
    largest finite value within that bound (one order overflows), or a NaN against an
    infinity from operands that hold infinities or NaNs (against anything, for a
    triangular solve or a Cholesky factorization, _ALGORITHM_FREE, and for a product
    that can reach both an infinity and a zero: _zero_meets_overflow)."""
    a, e = np.asarray(got), np.asarray(want)
    if op.name not in _ORDER_FREE or a.shape != e.shape or a.dtype != e.dtype or \
            T.element_type(a.dtype).kind not in (T.FLOAT, T.COMPLEX):
        return False
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    floats = [T.element_type(np.asarray(v).dtype).kind in (T.FLOAT, T.COMPLEX) for v in operands]
    finite = [np.where(np.isfinite(np.asarray(v).astype(wide)), v, np.zeros_like(v)) if f
              else v for v, f in zip(operands, floats)]
    with mlir.context(), ir.Location.unknown():  # the op alone, on its operands' values
        alone = Computation(op_alone(op, parameters=True))
        bound = reassociation_bound(Case(alone, finite, [], [], []), 0)
    with np.errstate(all="ignore"):
        x, y = a.astype(wide), e.astype(wide)
        if bound is None:
            bound = _product_bound(op, x, y)
        if bound is None:
            close = overflows = np.zeros(x.shape, bool)
        else:
            largest = float(ml_dtypes.finfo(np.real(a).dtype).max)
            close = np.abs(x - y) <= bound
            overflows = (np.isinf(x) & (np.abs(y) + bound >= largest)) | \
                (np.isinf(y) & (np.abs(x) + bound >= largest))
        odd = any(f and not np.isfinite(np.asarray(v).astype(wide)).all()
                  for v, f in zip(operands, floats))
        swapped = odd & ((np.isnan(x) | np.isnan(y)) if op.name in _ALGORITHM_FREE else
                         (np.isnan(x) & np.isinf(y)) | (np.isinf(x) & np.isnan(y)))
        if _multiplies(op) and _zero_meets_overflow(finite, floats, a.dtype):
            swapped = swapped | np.isnan(x) | np.isnan(y)
    return bool(np.all((close | overflows | swapped)[judge(a, e, tolerance)[0]]))


def _multiplies(op) -> bool:
    """Whether `op` is a reduce or reduce_window whose body multiplies."""
    body = [o.operation.name for o in op.regions[0].blocks[0].operations] if op.regions else []
    return op.name in ("stablehlo.reduce", "stablehlo.reduce_window") and \
        body == ["stablehlo.multiply", "stablehlo.return"]


def _zero_meets_overflow(finite: list, floats: list, dtype) -> bool:
    """Whether a product of the float operands' finite values in some order can overflow
    to an infinity before it meets a zero (inf * 0: a NaN in that order, a number in
    another): their magnitudes above 1 multiply past the largest value of `dtype`, and
    they hold a zero, or their magnitudes below 1 multiply past its smallest."""
    values = [np.abs(np.asarray(v).astype(np.complex128 if np.iscomplexobj(v) else np.float64))
              for v, f in zip(finite, floats) if f]
    if not values:
        return False
    info = ml_dtypes.finfo(np.real(np.zeros((), dtype)).dtype)
    with np.errstate(divide="ignore"):
        growth = sum(float(np.log2(v[v > 1]).sum()) for v in values)
        shrinking = sum(float(np.log2(v[(v > 0) & (v < 1)]).sum()) for v in values)
    zero = any((v == 0).any() for v in values) or \
        shrinking < float(np.log2(float(info.smallest_subnormal)))
    return zero and growth > float(np.log2(float(info.max)))


def bitcast_allows(got, want, operand_got, operand_want,
                   tolerance: Tolerance = Tolerance()) -> bool:
    """Whether a bitcast_convert's results `got` and `want` (of its operand's values
    `operand_got` and `operand_want` on each side) differ only as its float operand's
    bits do, where the operand's values match by the rule: a bitcast shows the bits of
    what the rule lets differ (a NaN's sign and payload, which the spec, as IEEE 754,
    leaves to the implementation; the last bits of a function it leaves inexact)."""
    x, y, got, want = (np.asarray(v) for v in (operand_got, operand_want, got, want))
    if T.element_type(x.dtype).kind not in (T.FLOAT, T.COMPLEX) or \
            (x.shape, x.dtype, got.shape, got.dtype) != (y.shape, y.dtype, want.shape, want.dtype) \
            or judge(x, y, tolerance)[0].any():
        return False
    operand_differs = judge(x, y, Tolerance(bitwise=True))[0]
    differs = judge(got, want, tolerance)[0]
    if differs.ndim == x.ndim + 1:  # to narrower elements: several per operand element
        differs = differs.any(-1)
    elif x.ndim == differs.ndim + 1:  # to wider elements: several operand elements in one
        operand_differs = operand_differs.any(-1)
    return differs.shape == operand_differs.shape and not np.any(differs & ~operand_differs)


def _product_bound(op, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """For a reduce or reduce_window whose body multiplies, how far two evaluations of
    its products (x and y, widened) may be apart: n terms in any order are n - 1
    roundings, each evaluation within gamma_{n-1} of the exact product relatively
    (Higham 3.1), so two within 2 gamma / (1 - gamma) of the larger finite magnitude."""
    if not _multiplies(op):
        return None
    roundings = REDUCTIONS[op.name][0](op) - 1
    u = float(ml_dtypes.finfo(mlir.shape_of_type(op.results[0].type).element_type.dtype).eps) / 2
    if roundings * u >= 0.5:
        return None
    gamma = roundings * u / (1 - roundings * u)
    larger = np.maximum(*(np.where(np.isfinite(v), np.abs(v), 0) for v in (x, y)))
    return 2 * gamma / (1 - gamma) * larger


def _last_words(message: str) -> str:
    """What a dead child said last (XLA's check), without the module's name."""
    return message.split("while running it: ", 1)[-1]


def _reduce(program: Computation, interest: Interest, signature: Signature, where: str,
            seed: int, seconds: float, fuzzer: _Fuzzer, progress):
    """(the Finding, its Reduction), or None when the difference does not show again.
    The reduction keeps the signature (a divergence's, Divergence.keeps; an error's
    message, numbers aside)."""
    try:
        reduced = reduce_with(interest.inputs.tagged(program), interest, seed=seed,
                              timeout=seconds, progress=progress)
    except InputError:  # a difference that comes and goes
        return None
    interest.deadline = None  # (the search's: over)
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
    return Finding(str(signature), signature.kind, signature.difference, signature.at,
                   signature.gist, ops, where, message, "", None, None, search.op_count,
                   search.original_op_count, round(search.seconds, 3),
                   search.timed_out), reduced


# -- the output folder ----------------------------------------------------------------------

class _Outputs:
    """Files in the output folder, each written whole (hlogen.files.Output)."""

    def __init__(self, folder):
        self.folder = folder

    def path(self, name: str) -> str:
        return os.path.join(str(self.folder), name)

    def write(self, name: str, data: bytes) -> None:
        files.Output(self.path(name), "-o").write(data)


def _name(signature: str) -> str:
    """A file name for a signature: its words, and a digest that keeps names apart."""
    words = re.sub(r"[^a-z0-9]+", "-", signature.lower().replace("stablehlo.", "")).strip("-")
    return f"{words[:60].rstrip('-')}-{hashlib.sha256(signature.encode()).hexdigest()[:8]}"


def _save(outputs: _Outputs, finding: Finding, reduced) -> None:
    """The reproducer of `finding`: NAME.mlir, NAME.inputs.npz (when it has inputs), and
    NAME.txt (the signature, the program, what differs, the command)."""
    name = _name(finding.signature)
    finding.module = outputs.path(f"{name}.mlir")
    outputs.write(f"{name}.mlir", reduced.computation.as_text().encode())
    if reduced.inputs:
        finding.inputs = outputs.path(f"{name}.inputs.npz")
        outputs.write(f"{name}.inputs.npz", reduced.npz())
    finding.command = reduced.command(finding.module, finding.inputs)
    outputs.write(f"{name}.txt", "\n".join([
        finding.signature, f"from: {finding.program}",
        f"reduced: {finding.original_op_count} -> {finding.op_count} ops in "
        f"{finding.reduce_seconds:.1f} s" + (" (stopped at its time limit)"
                                              if finding.timed_out else ""),
        "", finding.message, "", f"to see it: {finding.command}", ""]).encode())


def _known(folder) -> dict:
    """The findings of the folder's summary (signature -> JSON), {} when it has none."""
    path = os.path.join(str(folder), SUMMARY)
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        return {f["signature"]: f for f in data["findings"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a summary of hlogen fuzz ({e}); move it away or "
                         f"choose another folder") from None


def _summary(run: Fuzzed, known: dict) -> bytes:
    """This run's summary, with the signatures the folder held before that it did not see."""
    data = run.to_json()
    seen = {f.signature for f in run.findings}
    data["earlier"] = [f for s, f in known.items() if s not in seen]
    return (json.dumps(data, indent=1) + "\n").encode()


def junit(run: Fuzzed) -> bytes:
    """JUnit XML: one testcase per signature found (a failure when new, skipped when the
    folder knew it), and one for the programs that agreed."""
    root = ET.Element("testsuites", name="hlogen fuzz", time=f"{run.seconds:.3f}")
    suite = ET.SubElement(root, "testsuite", name=f"fuzz.{run.test.label} vs {run.reference.label}",
                          tests=str(len(run.findings) + 1), failures=str(len(run.new)),
                          errors="0", skipped=str(len(run.findings) - len(run.new)),
                          time=f"{run.seconds:.3f}")
    agreed = ET.SubElement(suite, "testcase", classname="fuzz", name="programs that agree",
                           time=f"{run.seconds:.3f}")
    ET.SubElement(agreed, "system-out").text = (f"{run.agreed} of {run.programs} programs "
                                                f"agree")
    for f in run.findings:
        case = ET.SubElement(suite, "testcase", classname="fuzz", name=f.signature,
                             time=f"{f.reduce_seconds:.3f}", file=f.module)
        details = f"{f.message}\n\nto see it: {f.command}"
        if f.new:
            ET.SubElement(case, "failure", type=f.kind, message=f.signature).text = details
        else:
            ET.SubElement(case, "skipped", message=f"known: {f.signature}").text = details
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


# -- the corpus -----------------------------------------------------------------------------

class _Corpus:
    """Modules to run and mutate: their places (file, module index) are listed at once,
    each is read (made runnable) when first picked."""

    def __init__(self, places: list):
        self.places = places          # (path, index) or a Computation
        self.read: dict = {}          # place -> (name, Computation, arguments) or None

    def __bool__(self) -> bool:
        return bool(self.places)

    def pick(self, k: int, seed: int):
        """The k-th program from the corpus: module k mod n, as it is the first time and
        mutated after. (where, computation, arguments or None)."""
        n = len(self.places)
        for step in range(n):  # a module that cannot be read gives its turn to the next
            place = self.places[(k + step) % n]
            entry = self._entry(place)
            if entry is None:
                continue
            name, comp, arguments = entry
            if (k + step) < n:
                return name, comp, arguments
            try:
                return f"mutate({name}, {seed})", mutate(comp, seed), arguments
            except HlogenError:  # nothing a mutation applies to: as it is
                return name, comp, arguments
        raise InputError("the corpus holds no module hlogen can run")

    def _entry(self, place):
        if place not in self.read:
            self.read[place] = _read(place)
        return self.read[place]


def _read(place):
    """(name, Computation, arguments or None) of a corpus place, None when it cannot run."""
    if isinstance(place, Computation):
        return place.source or place.name, place, None
    path, index = place
    if index is None:
        try:
            return path, load(path), None
        except HlogenError:
            return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    plan = conformance_files.plan_of(text)
    module = conformance_files.modules_of(path, text, plan)[index]
    if plan.filecheck or conformance_files.interpreter_only(module.text):
        return None
    text = "\n" * (module.line - 1) + module.text  # (locations are the file's lines)
    try:
        case = load_case(text, path, lift_constants=True)
        if case.computation is not None and \
                len(case.arguments) != len(case.computation.parameter_shapes):
            case = load_case(text, path, lift_constants=False)  # parameters of its own
            case.arguments = None  # (random inputs)
    except HlogenError:
        return None
    if case.computation is None or case.replicated is not None:
        return None
    return f"{path}#{index}" if plan.split else path, case.computation, case.arguments


def _corpus(corpus) -> _Corpus:
    """The places of `corpus` (paths of files or folders, and Computations): every module
    of every .mlir file (files of StableHLO's tests split on `// -----`), other files as
    hg.load reads them."""
    if isinstance(corpus, (str, os.PathLike, Computation)):
        corpus = [corpus]
    places = []
    for item in corpus:
        if isinstance(item, Computation):
            places.append(item)
            continue
        path = os.fspath(item)
        found = conformance_files.discover([path]) if os.path.isdir(path) else [path]
        for file in found:
            if not os.path.isfile(file):
                raise InputError(f"--corpus {file}: no such file or folder")
            if not file.endswith(".mlir"):
                places.append((file, None))
                continue
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read()
            count = len(conformance_files.modules_of(file, text, conformance_files.plan_of(text)))
            places += [(file, i) for i in range(count)]
    return _Corpus(places)
