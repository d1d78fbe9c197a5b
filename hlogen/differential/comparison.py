"""Running one computation on two backends and comparing the results (run_hlo_module's
`--platform=T --reference_platform=R`), by XLA's rule (hlogen.differential.near).

`run_on(backend, computation, inputs, xla_options)` is the one place that runs a
computation for this package. A third side (`also`) gives a third opinion: where two
sides agree against one, it names the odd one out (`three_way`). A side of a comparison
is a backend (a name hlogen.backends declares: "cpu", "gpu", "interpret", a plugin), its
XLA options, and the route the module takes: as it is, or through HLO ("hlo:cpu":
StableHLO -> an HLO module, as XLA compiles it -> StableHLO again, as `hlo-translate`
then `run_hlo_module` do); for a sharded module, also as its global program on one device
("cpu:one-device": the partitioner under test when the other side runs it partitioned,
hlogen.sharding).

A side that compiles (XLA) gets the module as written, as jax would give it
(hlogen.runtime.execution.as_written: CHLO ops for XLA's own converter, none of hlogen's
rewrites); hlogen's decompositions and XLA-semantics rewrites are the interpreter's. Where
XLA cannot compile it so, it runs hlogen's form and `Side.fallback` says what changed.
"""
from __future__ import annotations

import dataclasses
import os
import time

import numpy as np

from hlogen import backends, loading, native, sharding
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.differential.inputs import random_inputs
from hlogen.differential.near import ResultReport, Tolerance, compare_arrays
from hlogen.errors import InputError, UnsupportedError
from hlogen.runtime import compile as compile_for
from hlogen.runtime import xla_options as options_of
from hlogen.runtime.execution import as_written, prepare_as_compiled

HLO_ROUTE = "hlo:"  # a side's prefix: the module goes through HLO before it runs
ONE_DEVICE = ":one-device"  # a side's suffix: a sharded module's global program, unpartitioned


def parse_route(spec: str) -> tuple[str, bool, bool]:
    """A side as named ("hlo:cpu:one-device") -> (backend name, through HLO, one device)."""
    through = spec.startswith(HLO_ROUTE)
    spec = spec[len(HLO_ROUTE):] if through else spec
    one_device = spec.endswith(ONE_DEVICE)
    return (spec[:-len(ONE_DEVICE)] if one_device else spec), through, one_device


def run_on(backend: str, computation: Computation, inputs, xla_options=None) -> list:
    """The results of `computation` on `backend` with `inputs` (one per parameter), one
    array per result leaf (tuples flattened depth-first)."""
    results = compile_for(computation, backend=backends.get(backend),
                          xla_options=xla_options)(*inputs)
    if len(computation.result_shapes) == 1:
        results = (results,)
    return [np.asarray(leaf) for leaf in T.flatten(computation.result_shapes, results)]


def through_hlo(computation: Computation) -> Computation:
    """`computation` after a round trip through XLA's HLO: the module as written (or, where
    jaxlib cannot convert that, in hlogen's form for XLA), made an HLO module by jaxlib's
    converter, read back as StableHLO (marked as written: XLA gets it as it came back)."""
    if any(isinstance(s, T.TupleShape)
           for s in computation.parameter_shapes + computation.result_shapes):
        raise InputError(f"{computation.name}: the route through HLO takes modules without "
                         f"tuple parameters or results")
    try:
        proto = native.call("stablehlo_to_hlo", prepare_as_compiled(
            as_written(computation), backends.CPU).computation.to_bytecode())
    except Exception:  # jaxlib's errors: hlogen's form, as XLA would run it
        try:
            proto = native.call("stablehlo_to_hlo", prepare_as_compiled(
                computation, backends.CPU).computation.to_bytecode())
        except Exception as e:
            raise InputError(f"{computation.name}: jaxlib cannot make an HLO module of it: "
                             f"{e}") from None
    return as_written(loading.load_bytes(
        proto, f"{computation.source or computation.name} (through HLO)"))


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of a comparison: a declared backend under its XLA options (the one value
    for "a backend with options": hlogen.backends.Backend.with_options), and whether the
    module goes through HLO first."""

    declared: backends.Backend  # with its XLA options
    through_hlo: bool = False
    one_device: bool = False  # a sharded module's global program (hlogen.sharding)

    @property
    def backend(self) -> str:
        """The backend's name without its options (as the command line names it)."""
        return self.declared.plain_name

    @property
    def xla_options(self) -> tuple:
        """Its checked (name, value) pairs."""
        return self.declared.xla_options

    @classmethod
    def of(cls, spec, xla_options=None) -> "Side":
        """A Side from a Side, a Backend, or a backend name ("hlo:cpu" for the route through
        HLO), under `xla_options` too."""
        if isinstance(spec, Side):
            library = spec.declared.library
            merged = dict(spec.xla_options) | dict(options_of.check(xla_options, library))
            return cls(_under(backends.get(spec.backend), options_of.check(merged, library)),
                       spec.through_hlo, spec.one_device)
        if isinstance(spec, backends.Backend):
            return cls(_under(spec, options_of.check(xla_options, spec.library)))
        if not isinstance(spec, str):
            raise InputError(f"a side is a backend name or a Side, got {spec!r}")
        backend, through, one_device = parse_route(spec)
        try:
            declared = backends.get(backend)  # a PJRT plugin's name finds it
        except InputError:
            raise InputError(f"no backend named {backend!r}; the backends are "
                             f"{', '.join(backends.names())}, each also as {HLO_ROUTE}NAME "
                             f"(through HLO) and NAME{ONE_DEVICE} (a sharded module's global "
                             f"program)") from None
        return cls(_under(declared, options_of.check(xla_options, declared.library)), through,
                   one_device)

    def __repr__(self) -> str:
        return f"Side({self.label!r})"

    @property
    def label(self) -> str:
        name = (HLO_ROUTE if self.through_hlo else "") + self.backend + \
            (ONE_DEVICE if self.one_device else "")
        return f"{name} ({options_of.text(self.xla_options)})" if self.xla_options else name

    def module(self, computation: Computation) -> Computation:
        """The module this side runs of `computation`: its global program (one device),
        then through HLO, or as written (marked so, where XLA compiles it), or the same (the
        interpreter: hlogen's form)."""
        if self.one_device:
            computation = sharding.global_program(computation)
        if self.through_hlo:
            return through_hlo(computation)
        return as_written(computation) if self.declared.compiles else computation

    def fallback(self, module: Computation) -> str | None:
        """Why this side ran hlogen's form of `module` (what `module()` made), not the
        module as written, and what hlogen changed; None where it ran it as written (or
        is the interpreter). Asked after a run in this process (the executable is cached)."""
        if not self.declared.compiles:
            return None
        executable = compile_for(module, backend=backends.get(self.backend),
                                 xla_options=self.xla_options)
        return getattr(executable, "fallback", None)

    def run(self, module: Computation, inputs) -> list:
        """The result leaves of `module` (what `module()` made) on this side."""
        # the plain backend and the options, so that messages name the backend as declared
        return run_on(self.backend, module, inputs, self.xla_options)

    def to_json(self) -> dict:
        return {"backend": self.backend, "through_hlo": self.through_hlo,
                **({"one_device": True} if self.one_device else {}),
                "xla_options": dict(self.xla_options)}


def _under(backend: backends.Backend, options: tuple) -> backends.Backend:
    """`backend` under checked XLA `options` (itself, for none)."""
    if not options:
        return backend
    if not backend.compiles:  # (as the interpreter's compile says it)
        raise UnsupportedError(f"{backend.words} takes no XLA options (given "
                               f"{options_of.text(options)})")
    return backend.with_options(dict(options))


# A third side's verdict on one result, by which of the three pairs agree (the test and
# the reference, the third and the test, the third and the reference): the odd one out
# is the side both others agree against
ODD_ONE_OUT = {(True, True, True): "agree", (False, False, True): "test",
               (False, True, False): "reference", (True, False, False): "third",
               (False, False, False): "apart"}
# the other cases: one side is within the bounds of both others, which differ (the
# bounds are not transitive): no odd one out
UNDECIDED = "undecided"


@dataclasses.dataclass
class ThreeWay:
    """One result as a third side sees it: its reports against the test and the
    reference side, and the verdict (ODD_ONE_OUT's values, or UNDECIDED)."""

    against_test: ResultReport
    against_reference: ResultReport
    verdict: str

    @property
    def odd_one_out(self) -> str | None:
        """"test", "reference" or "third": the side the two others agree against."""
        return self.verdict if self.verdict in ("test", "reference", "third") else None

    def words(self, test: "Side", reference: "Side", third: "Side") -> str:
        return {"agree": "all three agree",
                "test": f"the test side {test.label} is the odd one out: the reference and "
                        f"the third side agree",
                "reference": f"the reference {reference.label} is the odd one out: the test "
                             f"and the third side agree",
                "third": f"the third side {third.label} is the odd one out: the test and the "
                         f"reference agree",
                "apart": "all three differ: no two sides agree",
                UNDECIDED: "undecided: one side agrees with both others, which differ from "
                           "each other"}[self.verdict]

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "odd_one_out": self.odd_one_out,
                "third_against_test": self.against_test.to_json(),
                "third_against_reference": self.against_reference.to_json()}


def three_way(test_vs_reference: ResultReport, against_test: ResultReport,
              against_reference: ResultReport) -> ThreeWay:
    """The verdict on one result from the reports of its three pairs."""
    key = (test_vs_reference.ok, against_test.ok, against_reference.ok)
    return ThreeWay(against_test, against_reference, ODD_ONE_OUT.get(key, UNDECIDED))


def third_side(also, also_options, command: str) -> "Side | None":
    """The third side of `also` under `also_options` (None without `also`); options for a
    third side nobody asked for are a mistake, not ignored."""
    if also is None:
        if also_options:
            raise InputError(f"{command}: also_options={also_options!r} without also: the XLA "
                             f"options of a third side need the third side (also=BACKEND)")
        return None
    return Side.of(also, also_options)


def majority(verdicts) -> str:
    """One verdict for the results a difference reaches: theirs where they all have the
    same, else UNDECIDED (the results do not name one odd one out together)."""
    found = set(verdicts)
    return found.pop() if len(found) == 1 else UNDECIDED


# who judges a finding where a third side ran: the arbiter's exact math where it could;
# where it could not ("undetermined": no exact model of the op), the two sides that agree
EXACT_MATH, MAJORITY = "exact math", "majority"


@dataclasses.dataclass(frozen=True)
class Decision:
    """Who is wrong at one finding (hlogen.differential.origin.Finding) of a comparison with
    a third side: exact math where the arbiter judged; where it could not, the majority of
    the three sides at the results the finding reaches (`majority` of their verdicts)."""

    verdict: str             # the three-way verdict at the finding's results
    decided_by: str | None   # EXACT_MATH, MAJORITY, or None: neither could judge
    wrong: str | None        # "test" or "reference"; None: no side (allowed, or no judge)
    # exact math names one side wrong, yet that side and the third agree against the
    # other: two implementations that agree on a wrong value
    contradicts: bool = False

    @classmethod
    def of(cls, finding, verdicts: list) -> "Decision":
        """The decision on `finding` given the three-way verdict of each result of main
        (`verdicts`, Comparison.verdicts)."""
        seen = majority([verdicts[i] for i in finding.results if i < len(verdicts)])
        exact = {"test wrong": "test", "reference wrong": "reference"}.get(finding.verdict)
        if exact is not None:
            other = "reference" if exact == "test" else "test"
            return cls(seen, EXACT_MATH, exact, contradicts=seen == other)
        if finding.verdict != "undetermined":  # (allowed: exact math says no side is wrong)
            return cls(seen, EXACT_MATH, None)
        if seen in ("test", "reference"):
            return cls(seen, MAJORITY, seen)
        return cls(seen, None, None)

    def words(self, test: "Side", reference: "Side", third: "Side") -> str:
        """One line, under the finding's own."""
        label = {"test": f"the test side {test.label}",
                 "reference": f"the reference {reference.label}"}
        other = {"test": "reference", "reference": "test"}
        if self.decided_by == MAJORITY:
            return (f"by majority: {label[self.wrong]} is wrong: the {other[self.wrong]} and "
                    f"the third side {third.label} agree against it (exact math could not "
                    f"judge; two sides agreeing is no proof)")
        if self.contradicts:
            return (f"the third side {third.label} contradicts exact math: it agrees with "
                    f"{label[self.wrong]}, which exact math finds wrong (two implementations "
                    f"agreeing on a wrong value)")
        odd = {"test": "the test side", "reference": "the reference"}
        if self.verdict in odd:
            seen = f"it agrees with the {other[self.verdict]} against {odd[self.verdict]}"
            if self.wrong == self.verdict:
                return f"the third side {third.label}: {seen}, as exact math does"
        elif self.verdict == "apart":
            seen = "all three differ"
        else:
            seen = "no majority at the results it reaches"
        judge = "exact math judged: allowed" if self.decided_by == EXACT_MATH else \
            "the finding stays undetermined"
        return f"the third side {third.label}: {seen} ({judge})"

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "decided_by": self.decided_by, "wrong": self.wrong,
                "contradicts": self.contradicts}


@dataclasses.dataclass
class Iteration:
    """One run of both sides (and a third, where one was asked for) with one set of
    inputs."""

    seed: int | None  # of random_inputs; None for inputs given
    results: list     # ResultReport per result leaf
    test_seconds: float
    reference_seconds: float
    third: list | None = None  # ThreeWay per result leaf, with a third side
    third_seconds: float | None = None

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results) and \
            all(t.verdict == "agree" for t in self.third or ())

    def to_json(self) -> dict:
        found = {"seed": self.seed, "ok": self.ok, "test_seconds": round(self.test_seconds, 6),
                 "reference_seconds": round(self.reference_seconds, 6),
                 "results": [r.to_json() for r in self.results]}
        if self.third is not None:
            found["third_seconds"] = round(self.third_seconds, 6)
            found["three_way"] = [t.to_json() for t in self.third]
        return found


@dataclasses.dataclass
class Comparison:
    """What `compare` found: the sides, the rule, and each iteration (the last one is the
    first that differs, where one does)."""

    computation: str
    test: Side
    reference: Side
    tolerance: Tolerance
    iterations: list
    xla_flags: str  # XLA_FLAGS, in force on both sides
    # per side ("test", "reference") that ran hlogen's form, not the module as written: why
    fallbacks: dict = dataclasses.field(default_factory=dict)
    # where the differences of the last iteration are born, and who is wrong
    # (hlogen.differential.origin.Finding; with_findings adds them); None where not asked for
    findings: list | None = None
    strict: bool = False  # allowed findings count as differences
    unexplained: str | None = None  # why no finding could be had, where none could
    third: Side | None = None  # a third opinion (compare's `also`)

    @property
    def failed(self) -> bool:
        """Whether a difference counts: one whose finding the spec does not allow (any,
        `strict`), one no finding explains, or a third side that the two others agree
        against."""
        if "third" in (self.verdicts or ()):
            return True
        if self.ok:
            return False
        if not self.findings or self.strict:
            return True
        return any(not f.allowed for f in self.findings)

    @property
    def ok(self) -> bool:
        return all(i.ok for i in self.iterations)

    @property
    def results(self) -> list:
        """The reports of the last iteration run."""
        return self.iterations[-1].results

    def to_json(self) -> dict:
        found = {"computation": self.computation, "ok": self.ok, "test": self.test.to_json(),
                 "reference": self.reference.to_json(), "tolerance": self.tolerance.to_json(),
                 "xla_flags": self.xla_flags, "fallbacks": dict(self.fallbacks),
                 "iterations": [i.to_json() for i in self.iterations]}
        if self.third is not None:
            found["third"] = self.third.to_json()
        if self.findings is not None:
            found["findings"] = [f.to_json() for f in self.findings]
            for record, decision in zip(found["findings"], self.decisions or ()):
                record["third"] = decision.to_json()
        if self.unexplained:
            found["unexplained"] = self.unexplained
        return found

    @property
    def verdicts(self) -> list:
        """With a third side: the verdict on each result of the last iteration
        (ODD_ONE_OUT's values, or UNDECIDED); None without one."""
        last = self.iterations[-1]
        return None if last.third is None else [t.verdict for t in last.third]

    @property
    def decisions(self) -> list | None:
        """With a third side and findings: who is wrong at each finding (Decision, in the
        order of `findings`); None without."""
        verdicts = self.verdicts
        if verdicts is None or self.findings is None:
            return None
        return [Decision.of(f, verdicts) for f in self.findings]

    def text(self) -> str:
        last = self.iterations[-1]
        inputs = "the inputs given" if last.seed is None else f"random inputs (seed {last.seed})"
        runs = f" after {len(self.iterations)} iterations" if len(self.iterations) > 1 else ""
        pair_ok = all(r.ok for r in last.results)
        verdict = "agree" if pair_ok else "differ"
        nan = self.ok and last.results and all(r.all_nan for r in last.results)
        third = f" (third side {self.third.label})" if self.third is not None else ""
        lines = [f"{self.computation}: test {self.test.label} and reference "
                 f"{self.reference.label} {verdict}{third}{runs}, with {inputs}"
                 + (f"; XLA_FLAGS={self.xla_flags}" if self.xla_flags else "")
                 + ("; but every element is NaN on both sides: the inputs may be out of the "
                    "ops' domain" if nan else "")]
        # each side named as test or reference: the same backend may be on both
        test, reference = (side.backend + ONE_DEVICE * side.one_device
                           for side in (self.test, self.reference))
        lines += [r.text(f"test {test}", f"reference {reference}") for r in last.results]
        for report, seen in zip(last.results, last.third or ()):
            lines.append(f"{report.name}: {seen.words(self.test, self.reference, self.third)}")
            name = f"third {self.third.backend}"
            lines += [r.text(name, other, head=f"  third against {other}: ")
                      for r, other in ((seen.against_test, f"test {test}"),
                                       (seen.against_reference, f"reference {reference}"))
                      if not r.ok and seen.verdict != "agree"]
        lines += [f"note: the {which} side: {why}" for which, why in self.fallbacks.items()]
        if self.findings is not None and not self.ok:
            decisions = self.decisions or [None] * len(self.findings)
            lines += [f"finding {k}: {f.text()}" + (
                f"\n  {d.words(self.test, self.reference, self.third)}" if d else "")
                for k, (f, d) in enumerate(zip(self.findings, decisions), 1)] or \
                [f"no finding: {self.unexplained or _NO_ORIGIN}"]
            allowed = sum(f.allowed for f in self.findings)
            if allowed and not self.failed:
                lines.append(f"every difference is allowed by the spec ({allowed} "
                             f"finding{'s' if allowed > 1 else ''}): no bug")
        return "\n".join(lines)


_NO_ORIGIN = ("no op of main differs by itself, given the reference's values of its operands "
              "(the difference is in the results as a whole)")


def compare(computation: Computation, inputs=None, test=backends.CPU.name,
            reference=backends.INTERPRET.name,
            test_options=None, reference_options=None, abs=None, rel=None, ulp=None,
            bitwise=False, iterations=1, seed=0, large_range=False, shown=5,
            watch=None, runner=None, tolerance: Tolerance | None = None, also=None,
            also_options=None) -> Comparison:
    """Runs `computation` on the test and the reference side and compares each result
    by XLA's rule (abs and rel bounds; where neither is given, 1e-3 each with a floor of
    ULPs per element type: near.Tolerance.chosen), or within `ulp` units, or `bitwise` (or
    by `tolerance`, a Tolerance given whole, in place of these four).

    `also` (a backend name or Side, under `also_options`): a third side, run too and
    compared with both; each result then has a verdict (`Comparison.verdicts`): the
    odd one out ("test", "reference", "third": the side the two others agree against),
    "agree", "apart" (no two agree) or "undecided" (one agrees with both others, which
    differ). The comparison is ok only when all three agree.

    `test`, `reference`: backend names (hlogen.backends: "cpu", "gpu", "interpret"; "hlo:cpu" takes the
    route through HLO) or Sides; `*_options`: XLA options of each (a dict or NAME=VALUE
    strings). `inputs`: one array per parameter; None for random inputs
    (hlogen.differential.inputs, `seed`, `large_range`), new ones for each of `iterations`
    (seed, seed + 1, ...), stopping at the first that differs. `shown`: how many
    differing elements each report lists. `watch("test" or "reference", side)` is called
    before each side compiles and runs (the command line names a side that dies).
    `runner(side, module, inputs)`: how a side runs a module (default `Side.run`, in this
    process; hlogen.differential.isolated's Children run it in a child process that may die).
    Where results differ, hlogen.differential.origin.with_findings adds where each
    difference is born and who is wrong. `watch` names the third side "third".
    """
    tolerance = Tolerance.chosen(abs, rel, ulp, bitwise) if tolerance is None else tolerance
    sides = Side.of(test, test_options), Side.of(reference, reference_options)
    third = third_side(also, also_options, "compare")
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise InputError(f"iterations must be a whole number >= 1, got {iterations!r}")
    if inputs is not None and iterations > 1:
        raise InputError("iterations > 1 draws new random inputs each time: give no inputs")
    modules = [side.module(computation) for side in sides]
    third_module = None if third is None else third.module(computation)
    watch = watch or (lambda which, side: None)
    run = runner or Side.run
    done = []
    for k in range(iterations):
        args = list(inputs) if inputs is not None else \
            random_inputs(computation, seed=seed + k, large_range=large_range)
        watch("test", sides[0])
        start = time.perf_counter()
        got = run(sides[0], modules[0], args)
        watch("reference", sides[1])
        middle = time.perf_counter()
        want = run(sides[1], modules[1], args)
        end = time.perf_counter()
        named = _named_leaves(computation, args)

        def reports_of(got, want):
            found = [compare_arrays(g, w, tolerance, name=f"result {i}", inputs=named,
                                    shown=shown) for i, (g, w) in enumerate(zip(got, want))]
            if len(got) != len(want):
                found.append(ResultReport("results", f"{len(got)} against {len(want)}",
                                          tolerance, 0, 0, problem="the sides return "
                                          "different numbers of results"))
            return found
        reports = reports_of(got, want)
        iteration = Iteration(None if inputs is not None else seed + k, reports,
                              middle - start, end - middle)
        if third is not None:
            watch("third", third)
            begun = time.perf_counter()
            opinion = run(third, third_module, args)
            iteration.third_seconds = time.perf_counter() - begun
            iteration.third = [three_way(*found) for found in zip(
                reports, reports_of(opinion, got), reports_of(opinion, want))]
        done.append(iteration)
        if not done[-1].ok:
            break
    fallbacks = {} if runner is not None else {
        which: why for which, side, module in zip(("test", "reference"), sides, modules)
        if (why := side.fallback(module)) is not None}
    return Comparison(computation.name, sides[0], sides[1], tolerance, done,
                      os.environ.get("XLA_FLAGS", ""), fallbacks, third=third)


def leaf_names(computation: Computation) -> list:
    """The name of each parameter leaf, in order (NAME.i for the elements of a tuple)."""
    return [n for name, shape in zip(computation.parameter_names, computation.parameter_shapes)
            for n in _names(name, shape)]


def _names(name: str, shape) -> list:
    if isinstance(shape, T.TupleShape):
        return [n for i, s in enumerate(shape.elements) for n in _names(f"{name}.{i}", s)]
    return [name]


def _named_leaves(computation: Computation, args) -> dict:
    """Each argument leaf by name (leaf_names), as arrays."""
    leaves = T.flatten(computation.parameter_shapes, args)
    return {name: np.asarray(v) for name, v in zip(leaf_names(computation), leaves)}
