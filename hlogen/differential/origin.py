"""The origin of a difference: the op where it is born, and the ops that only pass it on.

`find_origin` runs the module once per side with every top-level value of main as an extra
output (`probed`: the module as written, so that each value is of an op as the module writes
it; the test side gets it as written, the reference its own form), and follows the
difference of a differing result back along the ops it depends on. An op is where a
difference is *born* when, given identical inputs, the test side's op gives other values
than the reference's: as XLA's `run_hlo_module --isolate_instructions` does, the op runs
alone on the test side with the reference's values of its operands as parameters (the
candidates in one module: one compile, one run; only those it needs: the ops the module
already gave identical operands, then the others before the first of those that differs
by the tolerance). An op whose operands already differ and that, alone, agrees only passes
the difference on (or magnifies it): it is `amplified_by`, with the ULPs in (its
operands') and out (its results').

Which op: the first (in program order) born with a difference by the tolerance (by
compare's rule, or, where that is XLA's Near whose absolute bound does not scale, also
beyond 3 ULP and the relative bound: a flushed subnormal is the op's own difference);
where none is, the first born at all (a 1-ULP difference that tan magnifies). An op the
module gave identical operands (all of them, or for an element-wise op those of some
elements) whose values differ there, but that agrees alone, is born of its context (a
rewrite across ops, a constant folded: `in_context`; `hlogen bisect` names the pass):
log(exp(x)) made x by XLA's algebraic simplifier is born at log.

`with_findings` adds a comparison's findings (`Finding`: an origin, the arbiter's
judgement, the results it reaches): what `hlogen compare` reports and exits by.
"""
from __future__ import annotations

import dataclasses
import functools
import typing

import numpy as np
from jaxlib.mlir import ir

from hlogen import dynamism, mlir, preflight
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.differential import arbiter
from hlogen.differential.comparison import Side
from hlogen.differential.edits import new_main, op_alone
from hlogen.differential.near import Tolerance, compare_arrays, ulp_distance
from hlogen.errors import HlogenError

_SKIPPED = {"func.return", "stablehlo.constant"}  # constants are the same everywhere
_SCALED = Tolerance(ulp=3)  # where the rule is Near: also beyond 3 ULP (and rel)
_AT_ALL = Tolerance(ulp=0)  # any difference of bits (two NaNs, -0 and +0 agree)


@dataclasses.dataclass(frozen=True)
class Amplification:
    """An op after the origin that only passes the difference on, or magnifies it."""
    op: str
    line: int | None
    ulps_in: float   # the largest difference of its operands between the sides, in ULPs
    ulps_out: float  # of its results

    def to_json(self) -> dict:
        return {"op": self.op, "line": self.line, "ulps_in": _number(self.ulps_in),
                "ulps_out": _number(self.ulps_out)}


@dataclasses.dataclass(frozen=True)
class Origin:
    """The op where a difference is born (as the module writes it)."""
    op: str             # as the module writes it ("stablehlo.power", "chlo.erf")
    line: int | None    # line in the file given (None for a module built in Python)
    location: str       # file:line:column
    position: int       # index among main's top-level ops
    result: int         # which of its results differs
    alone: Computation  # the op alone, parameters = its operands (what arbitrate takes)
    operands: list      # the reference side's values of its operands: what both sides were given
    test: np.ndarray    # the op's result on the test side, run alone on `operands`
    reference: np.ndarray
    amplified_by: tuple  # Amplification, in program order, the ops between the origin and the result
    judgement: object = None  # hlogen.differential.arbiter.Judgement
    # the op alone agrees: the difference is born of the op in its module (a rewrite across
    # ops, a folded constant); `test` is then its value in the module
    in_context: bool = False
    of_result: int = 0   # which result of main the difference was followed from

    def text(self) -> str:
        """One line: where it is born, the verdict, what amplifies it."""
        where = f"{self.location}: {self.op}" + (f" (result {self.result})"
                                                 if self.result else "")
        how = ("differs only in its module (alone, with the reference's operands, it agrees: "
               "a rewrite across ops or a folded constant)") if self.in_context else \
            "differs, given the reference's values of its operands"
        said = [f"born at {where}: {how}"]
        j = self.judgement
        if j is not None:
            said.append(f"verdict: {_text(j.verdict)}: {j.reason}")
        if self.amplified_by:
            said.append("amplified by " + _amplifiers(self.amplified_by, "({} -> {} ULP)"))
        return "; ".join(said)

    def __str__(self) -> str:
        return self.text()


def _amplifiers(amplified_by, ulps: str) -> str:
    """The first amplifiers in words (op, line, the ULPs in and out as `ulps` formats them)."""
    shown = [f"{a.op}" + (f" (line {a.line})" if a.line else "") + " "
             + ulps.format(_ulps_text(a.ulps_in), _ulps_text(a.ulps_out))
             for a in amplified_by[:_SHOWN_AMPLIFIERS]]
    more = len(amplified_by) - _SHOWN_AMPLIFIERS
    return ", ".join(shown) + (f", and {more} more" if more > 0 else "")


def find_origin(computation: Computation, inputs, test, reference,
                tolerance: Tolerance | None = None, of_result: int | None = None,
                runner=None, strict: bool = False,
                probed: ProbedRun | None = None) -> Origin | None:
    """The origin of the difference of a result of `computation` between the `test` and
    `reference` sides (hlogen.differential.comparison.Side, or backend names) on `inputs`
    (one array per parameter leaf): result `of_result` of main, or the first that differs
    by `tolerance` (default XLA's Near at 1e-3); None when no result differs. `runner(side,
    module, inputs)` runs a side (default `Side.run`). `probed`: `computation`'s probed
    run on these sides and inputs (probed_run), where the caller has made it already: it
    is not run again. The origin's `judgement` is the arbiter's
    (hlogen.differential.arbiter, `strict` as its), where it judges."""
    if of_result is None:
        return next(iter(_origins(computation, inputs, test, reference, tolerance, None,
                                  runner, strict, probed)), None)
    return _origins(computation, inputs, test, reference, tolerance, [of_result], runner,
                    strict, probed)[0]


def _origins(computation, inputs, test, reference, tolerance, of_results, runner,
             strict, probed: ProbedRun | None = None) -> list:
    """The origin of each result of main in `of_results` (None: of the first that
    differs, or none) from one probed run per side (`probed`, or one made here)."""
    if not isinstance(computation, Computation):
        raise HlogenError(f"find_origin takes a Computation, got {type(computation).__name__}")
    tolerance = tolerance or Tolerance()
    sides = Side.of(test), Side.of(reference)
    run = runner or Side.run
    if probed is None:
        probed = probed_run(computation, inputs, sides[0], sides[1], run)
    probes, values = probed.probes, probed.values
    results = [(values[0][k], values[1][k]) for k in probed.result_at]
    if of_results is None:
        of_results = [i for i, (a, b) in enumerate(results) if _differs(a, b, tolerance)][:1]
    block = probed.module.main.regions[0].blocks[0]
    terminator = list(block.operations)[-1].operation
    where = computation.source or computation.name
    index = probed.index
    operand_values = probed.operands

    differs_cache: dict = {}  # probe -> whether its values differ at all
    ulps_cache: dict = {}     # probe -> the ULPs between its values

    def differing_at(k) -> bool:
        if k not in differs_cache:
            differs_cache[k] = not _same(values[0][k], values[1][k])
        return differs_cache[k]

    def ulps_at(k) -> float:
        if k not in ulps_cache:
            ulps_cache[k] = _ulps(values[0][k], values[1][k]) if differing_at(k) else 0.0
        return ulps_cache[k]

    alone_cache: dict = {}  # probe -> its results alone on the test side
    judgements: dict = {}   # (position, result) of an origin -> the arbiter's judgement

    def alone_of(candidates: list) -> dict:
        todo = [k for k in candidates if k not in alone_cache]
        got = _alone_values(sides[0], run, [probes[k].op for k in todo],
                            [operand_values(probes[k].op, 1) for k in todo])
        alone_cache.update(zip(todo, got))
        return alone_cache

    def origin_of(of_result: int) -> Origin | None:
        needed = _ancestors(block, terminator.operands[probed.result_at[of_result]])
        # the values that differ at all, on the way to the result
        candidates = [k for k, p in enumerate(probes) if p.position in needed
                      and differing_at(k)]
        if not candidates:
            return None

        def in_module(k):
            """(born, by the tolerance) of op k in its module, judged where the module gave
            it identical operands: every element, or for an op of operands shaped as its
            result (element-wise), the elements whose operands agree (a 1-ULP difference
            elsewhere in an operand does not hide a rewrite of the op)."""
            op = probes[k].op
            if operand_values(op, 1) is None:
                return False, False
            if any(v in index and differing_at(index[v]) for v in _captured(op)):
                return False, False  # (its regions use a value that differs: not born here)
            ins = [index[v] for v in op.operands if v in index and differing_at(index[v])]
            a, b = np.asarray(values[0][k]), np.asarray(values[1][k])
            if ins:
                if not _element_wise(op) or \
                        not all(np.shape(values[0][j]) == a.shape for j in ins):
                    return False, False
                agree = np.ones(a.shape, bool)
                for j in ins:
                    agree &= _agreeing(values[0][j], values[1][j])
                a, b = a[agree], b[agree]
            return not _same(a, b), _differs(a, b, tolerance)

        context = {k: in_module(k) for k in candidates}
        judged = {}  # per candidate: (born, born by the tolerance, in context, the test's value)

        def judge_op(k):
            want = values[1][k]
            got = None if alone_cache[k] is None else alone_cache[k][probes[k].index]
            alone_at = got is not None and _differs(got, want, _AT_ALL)
            alone_by = alone_at and _differs(got, want, tolerance)
            at, by = context[k]
            if alone_by or (alone_at and not by):
                judged[k] = (True, alone_by, False, got)
            elif at:  # identical operands in the module, other values: born in its context
                judged[k] = (True, by, True, values[0][k])
            else:
                judged[k] = (False, False, False, values[0][k])

        # alone-runs only where needed, each set in one module: the ops born in the module
        # (given identical operands there); then the others before the first of those born
        # by the tolerance (an op may add a difference of its own to one it was given)
        given_same = [k for k in candidates if context[k][0]]
        alone_of(given_same)
        for k in given_same:
            judge_op(k)
        limit = next((k for k in given_same if judged[k][1]), None)
        others = [k for k in candidates if not context[k][0] and (limit is None or k < limit)]
        alone_of(others)
        for k in others:
            judge_op(k)
        candidates_judged = sorted(judged)
        born = [k for k in candidates_judged if judged[k][0]]
        if not born:  # (the first candidate's operands agree: only an op alone may not run)
            return None
        first = next((k for k in born if judged[k][1]), born[0])
        probe = probes[first]
        _, _, in_context, got = judged[first]
        with mlir.context(), ir.Location.unknown():
            alone_module = Computation(op_alone(probe.op, parameters=True))
        amplified = []
        later = [k for k in candidates if k > first and not probes[k].index]
        _fill_ulps(ulps_cache, values, [*later, *(index[v] for k in later
                                                   for v in probes[k].op.operands if v in index)],
                   differing_at)
        for k in candidates:
            if k <= first or probes[k].index:
                continue
            op = probes[k].op
            # (parameters and constants are the same on both sides)
            ulps_in = max((ulps_at(index[v]) for v in [*op.operands, *_captured(op)]
                           if v in index), default=0.0)
            amplified.append(Amplification(op.name, _line(op, computation.source), ulps_in,
                                           ulps_at(k)))
        found = Origin(op=probe.op.name, line=_line(probe.op, computation.source),
                       location=preflight.located(probe.op, where), position=probe.position,
                       result=probe.index, alone=alone_module,
                       operands=[np.asarray(v) for v in operand_values(probe.op, 1) or []],
                       test=np.asarray(got), reference=np.asarray(values[1][first]),
                       amplified_by=tuple(amplified), in_context=in_context, of_result=of_result)
        key = (found.position, found.result)  # judged once, whichever result it reaches
        if key not in judgements:
            revealed = in_context and _revealed(probe.op, index, values, computation.source)
            judgements[key] = _allowed_bits(probe.op, *revealed, strict) if revealed else \
                judge(found, strict)
        return dataclasses.replace(found, judgement=judgements[key])

    return [origin_of(i) for i in of_results]



def judge(origin: Origin, strict: bool = False):
    """The arbiter's judgement of `origin` (hlogen.differential.arbiter.arbitrate: exact
    math of the op on the operands both sides were given)."""
    return arbiter.arbitrate(origin.alone, origin.operands, origin.test, origin.reference,
                             result=origin.result, strict=strict)


def _revealed(op, index: dict, values, source: str | None) -> tuple | None:
    """Where `op`'s inputs (operands, values its regions use) agree between the sides but
    for bits the spec leaves open, the sign of zeros or NaNs' sign and payload (which
    differing_at does not count): (the class, the op that made them, its line); else
    None. A bitcast or a sort in total order shows those bits: the op did not make them."""
    def apart(value) -> bool:  # (a probe's values: equal, but not to the bit)
        if value not in index:
            return False
        a, b = (np.asarray(v[index[value]]) for v in values)
        return a.tobytes() != b.tobytes() and _same(a, b)

    value = next((v for v in [*op.operands, *_captured(op)] if apart(v)), None)
    if value is None:
        return None
    a, b = (np.asarray(v[index[value]]) for v in values)
    bits = a.view(f"u{a.dtype.itemsize}") != b.view(f"u{b.dtype.itemsize}")
    with np.errstate(invalid="ignore"):
        nan = np.isnan(np.asarray(a, np.complex128 if a.dtype.kind == "c" else np.float64))
    made = value.owner.operation
    while True:  # back to the op whose inputs agree to the bit: where the bits were made
        earlier = next((v for v in [*made.operands, *_captured(made)] if apart(v)), None)
        if earlier is None:
            break
        made = earlier.owner.operation
    return ("nan-sign-payload" if (bits & nan).any() else "zero-sign", made.name,
            _line(made, source))


def _allowed_bits(op, allowed_class: str, made_by: str, line, strict: bool):
    """The judgement of an op that only shows bits its inputs differ in (_revealed)."""
    where = made_by if line is None else f"{made_by} (line {line})"
    what = {"zero-sign": "the sign of zeros", "nan-sign-payload": "NaNs' sign and payload"}
    reason = (f"{op.name} agrees alone given the reference's inputs; in its module its inputs "
              f"differ only in {what[allowed_class]}, made by {where}, which the spec leaves "
              f"open ({allowed_class}), and {op.name} shows those bits")
    return arbiter.Judgement(arbiter.Verdict.UNDETERMINED if strict else arbiter.Verdict.ALLOWED,
                             {"test": None, "reference": None}, [], [],
                             reason + (": strict counts it" if strict else ""),
                             None if strict else allowed_class)


UNDETERMINED = "undetermined"
ALLOWED = "allowed"


@dataclasses.dataclass(frozen=True)
class Finding:
    """A difference of a comparison as a maintainer reads it: where it is born (`origin`),
    who is wrong (its judgement's verdict), and which results of main it reaches."""
    origin: Origin
    results: tuple  # the results of main it was followed from

    @property
    def verdict(self) -> str:
        j = self.origin.judgement
        return UNDETERMINED if j is None else _text(j.verdict)

    @property
    def allowed(self) -> bool:
        return self.verdict == ALLOWED

    def to_json(self) -> dict:
        o, j = self.origin, self.origin.judgement
        return {"op": o.op, "line": o.line, "location": o.location, "position": o.position,
                "result": o.result, "results": list(self.results), "verdict": self.verdict,
                "ulps": dict(j.ulps) if j is not None else {"test": None, "reference": None},
                "exact": list(j.exact) if j is not None else [],
                "elements": [list(map(int, np.atleast_1d(e))) for e in j.elements]
                if j is not None else [],
                "amplified_by": [a.to_json() for a in o.amplified_by],
                "reason": j.reason if j is not None else _UNJUDGED,
                "allowed_class": j.allowed_class if j is not None else None,
                "in_context": o.in_context}

    def text(self) -> str:
        """Its lines in words: the op, where it is born, the verdict, what amplifies it."""
        o, j = self.origin, self.origin.judgement
        results = ", ".join(map(str, self.results))
        said = [f"{o.op} at {o.location} (result{'s' if len(self.results) > 1 else ''} "
                f"{results} of main)",
                "  born there: " + (
                    "it differs only in its module (alone, given the reference's operands, it "
                    "agrees: a rewrite across ops or a folded constant; hlogen bisect names "
                    "the pass)" if o.in_context else
                    "given the reference's values of its operands, the test side's op gives "
                    "other values")]
        if j is None:
            said.append(f"  verdict: {UNDETERMINED} ({_UNJUDGED})")
        else:
            ulps = ", ".join(f"{side} {v:.3g}" if isinstance(v, float) else f"{side} {v}"
                             for side, v in j.ulps.items() if v is not None)
            said.append(f"  verdict: {self.verdict}: {j.reason}"
                        + (f" (errors in ULPs: {ulps})" if ulps else "")
                        + (f"; exact: {', '.join(j.exact[:3])}" if j.exact else ""))
        if o.amplified_by:
            said.append("  amplified by (each only passes the difference on): "
                        + _amplifiers(o.amplified_by, "{} -> {} ULP"))
        return "\n".join(said)


_SHOWN_AMPLIFIERS = 6
_UNJUDGED = "no exact answer was computed for it"


def findings_of(computation: Computation, inputs, test, reference, differing: list,
                tolerance: Tolerance | None = None, runner=None, strict: bool = False) -> list:
    """One Finding per origin of the results of main `differing` (indices), in order: the
    results whose differences are born at the same op make one finding."""
    found: dict = {}
    origins = _origins(computation, inputs, test, reference, tolerance, list(differing),
                       runner, strict)
    for i, origin in zip(differing, origins):
        if origin is None:
            continue
        key = (origin.position, origin.result)
        if key in found:  # the same origin: the longest way it goes shows what amplifies it
            kept = found[key].origin
            longer = origin if len(origin.amplified_by) > len(kept.amplified_by) else kept
            found[key] = Finding(longer, found[key].results + (i,))
        else:
            found[key] = Finding(origin, (i,))
    return list(found.values())


def with_findings(comparison, computation: Computation, inputs, runner=None,
                  strict: bool = False):
    """`comparison` (hlogen.differential.comparison.Comparison of `computation`) with the
    findings of its last iteration's differing results (run on `inputs`, that
    iteration's), `strict` (allowed findings count as differences: Comparison.failed)."""
    last = comparison.iterations[-1]
    leaves = len(T.leaf_shapes(computation.result_shapes))
    differing = [i for i, r in enumerate(last.results[:leaves]) if not r.ok]
    try:
        found = findings_of(computation, inputs, comparison.test, comparison.reference,
                            differing, comparison.tolerance, runner, strict) if differing else []
    except HlogenError as e:  # the probed module or an op alone does not run: said, not raised
        return dataclasses.replace(comparison, findings=[], strict=strict,
                                   unexplained=f"the difference could not be localised: {e}")
    return dataclasses.replace(comparison, findings=found, strict=strict)


def _text(verdict) -> str:
    return getattr(verdict, "value", verdict)


# -- the probes ---------------------------------------------------------------------------

class Probe(typing.NamedTuple):
    op: ir.Operation  # a top-level op of main (of the probed module)
    index: int        # which of its results
    position: int     # the op's index among main's top-level ops


@dataclasses.dataclass
class ProbedRun:
    """A module run once per side with every top-level value of main returned (`probed`):
    what find_origin follows a difference along, and what the fuzzer's triage
    reads the spec's allowances and flushing from (one run serves both)."""

    module: Computation  # the probed copy, as written (its main returns every value)
    probes: list         # Probe, one per value; the module's first results
    result_at: list      # where each result of main is among the module's results
    inputs: list         # one array per parameter leaf
    values: tuple        # (the test side's results of `module`, the reference's)

    @functools.cached_property
    def index(self) -> dict:
        """Probe k of each value a probe returns."""
        return {p.op.results[p.index]: k for k, p in enumerate(self.probes)}

    def operands(self, op, side: int) -> list | None:
        """The values of the operands of `op` (a probe's op) as `side` (0: test, 1:
        reference) computes them; None where one cannot be had (a value no probe
        returns)."""
        key = (op, side)
        if key not in self._operands:
            got = []
            for value in op.operands:
                if value in self.index:
                    got.append(self.values[side][self.index[value]])
                elif isinstance(value.owner, ir.Block):
                    got.append(self.inputs[ir.BlockArgument(value).arg_number])
                else:  # (a constant many ops use is decoded once)
                    if value not in self._constants:
                        self._constants[value] = mlir.constant_of(value)
                    got.append(self._constants[value])
            self._operands[key] = None if any(g is None for g in got) else got
        return self._operands[key]

    def __post_init__(self):
        self._operands: dict = {}
        self._constants: dict = {}


def probed_run(computation: Computation, inputs, test, reference, runner=None) -> ProbedRun:
    """`computation` (`probed`'s module of it) run on `inputs` by the `test` and
    `reference` sides (Side, or backend names), each once; `runner` as find_origin's."""
    if not isinstance(computation, Computation):
        raise HlogenError(f"find_origin takes a Computation, got {type(computation).__name__}")
    run = runner or Side.run
    module, probes, result_at = probed(computation)
    inputs = list(inputs)
    values = tuple(run(side, side.module(module), inputs)
                   for side in (Side.of(test), Side.of(reference)))
    return ProbedRun(module, probes, result_at, inputs, values)


def probed(computation: Computation):
    """A copy of `computation`, as written, whose main returns every top-level intermediate
    tensor, then those of its own results that are not one of them (XLA without its HLO
    passes aborts on a buffer returned twice: "Unexpected duplicate"); the probes (Probe:
    op, result index, position, one per value returned first); and where each result of
    main is among the copy's results."""
    copy = computation.clone()
    main = copy.main
    block = main.regions[0].blocks[0]
    with mlir.context():  # a called function's ops are main's (jax's exports call their body)
        mlir.inline_calls(block, mlir.functions(copy.module))
    probes, values = [], []
    for position, op in enumerate(block.operations):
        op = op.operation
        if op.name in _SKIPPED:
            continue
        for index, result in enumerate(op.results):
            if isinstance(_try_shape(result.type), T.Shape):
                probes.append(Probe(op, index, position))
                values.append(result)
    terminator = list(block.operations)[-1].operation
    originals = list(terminator.operands)
    at = {v: k for k, v in enumerate(values)}
    extra = [v for v in originals if v not in at]
    result_at, more = [], len(values)
    for v in originals:
        if v in at:
            result_at.append(at[v])
        else:
            result_at.append(more)
            more += 1
    with mlir.context(), ir.InsertionPoint(terminator), terminator.location:
        ir.Operation.create("func.return", operands=values + extra)
        terminator.erase()
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), [v.type for v in values + extra]))
        if "res_attrs" in main.attributes:
            del main.attributes["res_attrs"]
    return Computation(copy.module, computation.source), probes, result_at


def _try_shape(t):
    try:
        return mlir.shape_of_type(t)
    except Exception:
        return None


def _ancestors(block, value) -> set:
    """The positions of the top-level ops of `block` that `value` depends on (through
    operands, and the values that ops in their regions use)."""
    position = {op.operation: i for i, op in enumerate(block.operations)}
    seen, todo = set(), [value]
    while todo:
        owner = todo.pop().owner
        if isinstance(owner, ir.Block):
            continue
        op = owner.operation
        while op is not None and op not in position:  # an op in a region: its holder
            op = op.parent.operation if op.parent is not None else None
        if op is None or position[op] in seen:
            continue
        seen.add(position[op])
        todo += list(op.operands)
        for inner in _nested(op):
            todo += list(inner.operands)
    return seen


def _captured(op) -> list:
    """The values the ops in `op`'s regions use that are defined outside `op` (a case or
    while body may use main's values directly: inputs of `op` beside its operands)."""
    inside, used = set(), []

    def walk(holder):
        for region in holder.regions:
            for block in region.blocks:
                inside.update(block.arguments)
                for inner in block.operations:
                    inner = inner.operation
                    inside.update(inner.results)
                    used.extend(inner.operands)
                    walk(inner)
    walk(op)
    return [v for v in used if v not in inside]


def _nested(op):
    """The ops inside `op`'s regions."""
    for region in op.regions:
        for block in region.blocks:
            for inner in block.operations:
                inner = inner.operation
                yield inner
                yield from _nested(inner)


# -- the ops alone, on the test side -------------------------------------------------------

def _alone_values(side, run, ops: list, operands: list) -> list:
    """Each op's results run alone on `side` with `operands` (the reference's values),
    all in one module; None for an op whose operands are not known or that cannot run
    alone (one by one where the module of all cannot)."""
    # (an op whose regions use values from outside it has more inputs than its operands:
    # not run alone)
    todo = [j for j, given in enumerate(operands) if given is not None and not _captured(ops[j])]
    found: list = [None] * len(ops)
    if not todo:
        return found
    try:
        batch = _alone_batch([ops[j] for j in todo])
        flat = run(side, side.module(batch), [a for j in todo for a in operands[j]])
    except (HlogenError, ir.MLIRError):
        for j in todo:  # one by one: an op that cannot run alone loses only itself
            try:
                one = _alone_batch([ops[j]])
                found[j] = run(side, side.module(one), list(operands[j]))
            except (HlogenError, ir.MLIRError):
                pass
        return found
    at = 0
    for j in todo:
        count = len(ops[j].results)
        found[j] = flat[at:at + count]
        at += count
    return found


def _alone_batch(ops: list) -> Computation:
    """One module whose main runs each of `ops` alone: its operands as parameters (in
    order, op after op), its results returned (in order)."""
    with mlir.context(), ir.Location.unknown():
        module, block = new_main([v.type for op in ops for v in op.operands],
                                 [t for op in ops for t in op.results.types])
        returned, at = [], 0
        with ir.InsertionPoint(block):
            for op in ops:
                copy = op.clone()
                for i in range(len(op.operands)):
                    copy.operands[i] = block.arguments[at + i]
                at += len(op.operands)
                returned += list(copy.results)
            ir.Operation.create("func.return", operands=returned)
        module.operation.verify()
    return Computation(module)


# -- judging values -------------------------------------------------------------------------

def _same(a, b) -> bool:
    """Whether `a` and `b` agree to the bit, but for the sign of zeros and NaN payloads
    (ULP 0 apart): the fast test of "differs at all"."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.tobytes() == b.tobytes():
        return True
    if T.element_type(a.dtype).kind not in (T.FLOAT, T.COMPLEX):
        return False
    try:
        return bool(np.array_equal(a, b, equal_nan=True))
    except TypeError:  # a type numpy compares only bit by bit (narrow floats)
        return compare_arrays(a, b, _AT_ALL, shown=0).ok


def _element_wise(op) -> bool:
    """Whether each element of `op`'s result is computed from the same element of each
    operand (of its shape): StableHLO's element-wise ops and CHLO's."""
    return op.name in dynamism.ELEMENTWISE or op.name.startswith("chlo.")


def _agreeing(a, b) -> np.ndarray:
    """Per element, whether `a` and `b` agree (equal, both NaN, or the bits equal)."""
    a, b = np.asarray(a), np.asarray(b)
    try:
        with np.errstate(invalid="ignore"):
            same = a == b
        if T.element_type(a.dtype).kind in (T.FLOAT, T.COMPLEX):
            same |= np.isnan(a) & np.isnan(b)
        return np.asarray(same, bool)
    except TypeError:  # narrow floats numpy cannot compare: by their bits
        return a.view(f"u{a.dtype.itemsize}") == b.view(f"u{b.dtype.itemsize}")


def _differs(a, b, tolerance: Tolerance) -> bool:
    """Whether an op's values `a` and `b` differ by `tolerance` (where it is XLA's Near:
    also beyond 3 ULP and its relative bound, so that a difference the absolute bound hides
    in small values counts)."""
    if _same(a, b):
        return False
    if tolerance is _AT_ALL:
        return True
    a, b = np.asarray(a), np.asarray(b)
    if not compare_arrays(a, b, tolerance, shown=0).ok:
        return True
    near = tolerance.ulp is None and not tolerance.bitwise
    return near and not compare_arrays(
        a, b, _SCALED, also=Tolerance(0, tolerance.rel), shown=0).ok


def _ulps(a: np.ndarray, b: np.ndarray) -> float:
    """The largest distance between `a` and `b`, in ULPs of their type (integers: their
    difference; complex numbers: of either part)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return float("inf")
    if a.size == 0 or _same(a, b):
        return 0.0
    kind = T.element_type(a.dtype).kind
    if kind == T.COMPLEX:
        return max(_ulps(a.real, b.real), _ulps(a.imag, b.imag))
    if kind == T.FLOAT:
        return float(np.max(ulp_distance(a, b)))
    return float(np.max(np.abs(a.astype(object) - b.astype(object)))) if a.dtype != bool \
        else float(np.count_nonzero(a != b))


def _fill_ulps(cache: dict, values, probes: list, differing_at) -> None:
    """`cache`[k] = _ulps of probe k's values for each of `probes`, the floats of each type
    in one vectorized computation (a thousand small arrays cost as one large one)."""
    groups: dict = {}
    for k in dict.fromkeys(probes):
        if k in cache:
            continue
        if not differing_at(k):
            cache[k] = 0.0
            continue
        a, b = np.asarray(values[0][k]), np.asarray(values[1][k])
        if a.shape == b.shape and a.dtype == b.dtype and a.size and \
                T.element_type(a.dtype).kind == T.FLOAT:
            groups.setdefault(a.dtype, []).append((k, a.ravel(), b.ravel()))
        else:
            cache[k] = _ulps(a, b)
    for members in groups.values():
        starts = np.cumsum([0] + [len(a) for _, a, _ in members[:-1]])
        d = ulp_distance(np.concatenate([a for _, a, _ in members]),
                         np.concatenate([b for _, _, b in members]))
        for (k, _, _), most in zip(members, np.maximum.reduceat(d, starts)):
            cache[k] = float(most)


def _line(op, source: str | None) -> int | None:
    """`op`'s line in the file `source` (None for a module built in Python)."""
    if source is None:
        return None
    found = mlir.file_location(op.location, source)
    return None if found is None or found[0] != source else found[1]


def _number(x: float):
    return None if x != x else (int(x) if float(x).is_integer() and abs(x) < 2**53 else x)


def _ulps_text(x: float) -> str:
    return "?" if x != x else (f"{x:.0f}" if x < 1e6 else f"{x:.3g}")
