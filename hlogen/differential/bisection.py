"""Which compiler stage makes two backends disagree: the HLO passes whose disabling
(`xla_disable_hlo_passes`) removes the divergence, found with fewer compiles than trying
the passes one by one.

`search` works on any predicate `diverges(disabled) -> bool` over sets of pass names.
It bisects over sets of passes (halves whose disabling removes the divergence), which
finds a pass that explains it alone with at most 2 * ceil(log2(P)) + 3 calls for the P
passes that ran (one for nothing disabled, one for all of them, the halves, one for the
passes left); where only passes together explain it, it narrows to a smallest such set
(QuickXplain's recursion). Real passes come before pipeline names: a pipeline is named
only when disabling every pass by name leaves the divergence and disabling the pipeline
removes it. A divergence that stays with every HLO pass disabled
(`xla_disable_all_hlo_passes`) comes from before or after them: the StableHLO-to-HLO
conversion, or code generation.

`bisect` is the search on a computation: the passes are read from XLA's log
(hlogen.differential.hlo_passes) and each call of the predicate compiles and runs the
test side in a child process (XLA ends the process without some passes), comparing with
the reference side's results, computed once, by XLA's rule.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from hlogen import backends, sharding
from hlogen.computation import Computation
from hlogen.differential.comparison import Side
from hlogen.differential.hlo_passes import passes_that_ran
from hlogen.differential.inputs import random_inputs
from hlogen.differential.isolated import IsolatedRunner
from hlogen.differential.near import Tolerance, compare_arrays
from hlogen.errors import ExecutionError, InputError
from hlogen.runtime import xla_options as options_of

EVERY_PASS = "*"  # in a set of disabled passes: every HLO pass (xla_disable_all_hlo_passes)
# passes the search never disables: XLA CPU ends the process without them (jaxlib 0.10.2)
ESSENTIAL = frozenset({"copy-insertion"})
# XLA's passes that make a sharded module's partitions: without them a partitioned compile
# fails (Shardy's markers reach code generation), so the search keeps them on a side
# that runs partitioned, and says when what stays is the partitioned program itself
PARTITIONER = frozenset({"shardy-xla", "spmd-partitioning", "sharding-propagation",
                         "spmd-simplify", "sharding-remover"})

# stage -> what it means
STAGES = {
    "none": "there is no divergence to explain",
    "hlo-pass": "HLO passes, each of which alone explains the divergence",
    "hlo-passes": "HLO passes that explain the divergence only when disabled together",
    "pipeline": "a pipeline of HLO passes, in which no pass explains the divergence alone",
    "conversion-or-codegen": "it stays with every HLO pass disabled: the StableHLO-to-HLO "
                             "conversion or code generation",
    "partitioned": "it stays with every HLO pass disabled but XLA's partitioner's: the "
                   "partitioned program itself (what each partition computes, the order of "
                   "its collectives' sums), its conversion or code generation",
    "unexplained": "disabling every HLO pass removes it, but no pass or pipeline the log "
                   "names does",
    "stopped": "the search was stopped before its end: what it had narrowed so far",
}


@dataclasses.dataclass
class Verdict:
    """What the search found: the stage, the passes (or pipeline) it names, the compiles
    (predicate calls) it took, and the options that remove the divergence."""

    stage: str
    passes: list
    compiles: int
    pass_count: int = 0  # the passes the search could disable
    fixed_options: tuple = ()  # the test side's options with the divergence removed
    test: str = ""
    reference: str = ""
    notes: list = dataclasses.field(default_factory=list)
    interrupted: BaseException | None = None  # what stopped the search (stage "stopped")
    alone: bool = False  # (stopped) each of `passes` alone removes the divergence
    narrowed: str = ""  # (stopped, no passes found) what is known, in words

    def to_json(self) -> dict:
        return {"stage": self.stage, "passes": self.passes, "compiles": self.compiles,
                "pass_count": self.pass_count, "meaning": STAGES[self.stage],
                "fixed_options": dict(self.fixed_options), "test": self.test,
                "reference": self.reference, "notes": self.notes,
                **({"stopped_by": str(self.interrupted)} if self.stage == "stopped" else {})}

    def _named(self) -> str:
        """The passes of a stopped search, named (by count when many: the options say)."""
        count = len(self.passes)
        if count == 1:
            return f"HLO pass {self.passes[0]}"
        if count <= 8:
            return f"the {count} HLO passes {', '.join(self.passes)}"
        return f"{'all' if count == self.pass_count else count} of the {self.pass_count} " \
               f"HLO passes (named below)"

    def text(self) -> str:
        stopped = f"stopped by {self.interrupted} after " if self.stage == "stopped" else ""
        head = (f"{self.test} against {self.reference}: " if self.test else "") + \
               f"{stopped}{self.compiles} compiles, bisecting {self.pass_count} HLO passes"
        if self.stage == "stopped" and not self.pass_count:  # (before the search)
            head = head.split(" after ")[0]
        names = ", ".join(self.passes)
        said = {"hlo-pass": f"the divergence comes from HLO pass {names}: disabling it alone "
                            f"removes it" if len(self.passes) == 1 else
                            f"the divergence comes from HLO passes {names}: disabling any "
                            f"one of them removes it",
                "hlo-passes": f"the divergence comes from HLO passes {names} together: "
                              f"disabling all of them removes it, none alone does",
                "pipeline": f"the divergence comes from the pipeline {names!r}: disabling it "
                            f"removes it, disabling any of its passes by name does not",
                "stopped": f"narrowed so far: disabling {self._named()} removes the "
                           f"divergence{' (each alone)' if self.alone else ''}"
                           if self.passes else f"narrowed so far: {self.narrowed}"}
        lines = [head, said.get(self.stage, STAGES[self.stage])]
        if self.fixed_options:
            lines.append(f"without it: {options_of.text(self.fixed_options)}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)


def search(passes: Sequence[str], diverges: Callable[[frozenset], bool],
           pipelines: dict | None = None, interrupted_by: tuple = (),
           kept: frozenset = frozenset()) -> Verdict:
    """The stage and passes that explain a divergence; `diverges(disabled)` says whether
    it remains with the passes of the frozenset `disabled` disabled (EVERY_PASS: all),
    and is called once per distinct set; `pipelines` (name -> passes in it) are tried,
    smallest first, only where no set of real passes explains it. An exception of
    `interrupted_by` (such as KeyboardInterrupt) ends the search early: the verdict is
    then "stopped", with what the calls so far narrowed (its `interrupted` holds the
    exception, for the caller to raise again once it has said the verdict). `kept`:
    passes never disabled, besides ESSENTIAL (PARTITIONER, for a partitioned side: every
    pass disabled is then every other one)."""
    asked: dict = {}
    try:
        return _search(passes, diverges, pipelines, asked, kept)
    except tuple(interrupted_by) as e:
        return _narrowed(asked, passes, e, kept)


def _narrowed(asked: dict, passes: Sequence[str], interrupted: BaseException,
              kept: frozenset = frozenset()) -> Verdict:
    """The verdict of a search stopped after the calls `asked` (disabled -> whether that
    removes the divergence): the passes that alone remove it, else the smallest set of
    passes known to, else what is known."""
    candidates = [p for p in dict.fromkeys(passes)
                  if p not in ESSENTIAL and p not in kept and p != EVERY_PASS]
    fixing = [d for d, fixes in asked.items() if fixes and d and d <= set(candidates)]
    alone = sorted(p for d in fixing if len(d) == 1 for p in d)
    found = alone or (sorted(min(fixing, key=len)) if fixing else [])
    verdict = Verdict("stopped", found, len(asked), len(candidates), interrupted=interrupted)
    verdict.alone = bool(alone) and len(alone) > 1
    if frozenset() not in asked:
        verdict.narrowed = "nothing: stopped before the first compile ended"
    elif asked[frozenset()]:
        verdict.narrowed = STAGES["none"]
    elif asked.get(frozenset({EVERY_PASS})) is False:
        verdict.narrowed = STAGES["conversion-or-codegen"]
    else:
        verdict.narrowed = "the divergence stays with nothing disabled; no set of passes " \
                           "whose disabling removes it was found yet"
    return verdict


def _search(passes, diverges, pipelines, asked: dict, kept: frozenset = frozenset()) -> Verdict:

    def fixes(disabled) -> bool:
        disabled = frozenset(disabled)
        if disabled not in asked:
            asked[disabled] = not diverges(disabled)
        return asked[disabled]

    candidates = [p for p in dict.fromkeys(passes)
                  if p not in ESSENTIAL and p not in kept and p != EVERY_PASS]

    def verdict(stage: str, found: list) -> Verdict:
        return Verdict(stage, list(found), len(asked), len(candidates))

    if fixes(()):
        return verdict("none", [])
    if candidates and fixes(candidates):
        singles: list = []
        rest = candidates
        while rest and fixes(rest):
            found = _smallest(fixes, frozenset(), rest)
            if len(found) > 1:  # found with others disabled: each confirmed alone
                alone = [p for p in found if fixes({p})]
                if not alone:
                    return verdict("hlo-pass", singles) if singles else verdict("hlo-passes", found)
                found = alone
            singles += found
            rest = [p for p in rest if p not in found]
        return verdict("hlo-pass", singles)
    if kept:  # every pass but those kept was disabled above (`candidates`)
        return verdict("partitioned", [])
    if not fixes({EVERY_PASS}):
        return verdict("conversion-or-codegen", [])
    for name in sorted(pipelines or {}, key=lambda n: len(pipelines[n])):
        if fixes({name}):
            return verdict("pipeline", [name])
    return verdict("unexplained", [])


def _smallest(fixes, base: frozenset, items: list) -> list:
    """A smallest subset M of `items` with fixes(base | M), given fixes(base | items) and
    not fixes(base): halves while one half suffices, both halves' needs otherwise."""
    if len(items) == 1:
        return list(items)
    half = len(items) // 2
    a, b = items[:half], items[half:]
    if fixes(base | set(a)):
        return _smallest(fixes, base, a)
    if fixes(base | set(b)):
        return _smallest(fixes, base, b)
    needed = _smallest(fixes, base | set(b), a)
    if fixes(base | set(needed)):
        return needed
    return needed + _smallest(fixes, base | set(needed), b)


def options_disabling(disabled, xla_options=()) -> tuple:
    """`xla_options` (checked) with the passes `disabled` disabled as well."""
    options = dict(xla_options)
    if EVERY_PASS in disabled:
        options["xla_disable_all_hlo_passes"] = True
    elif disabled:
        given = [p for p in str(options.get("xla_disable_hlo_passes", "")).split(",") if p]
        options["xla_disable_hlo_passes"] = ",".join(dict.fromkeys(given + sorted(disabled)))
    return options_of.check(options)


def bisect(computation: Computation, inputs=None, test=backends.CPU.name,
           reference=backends.INTERPRET.name,
           test_options=None, reference_options=None, abs=None, rel=None, ulp=None,
           bitwise=False, seed=0, large_range=False, seconds=600,
           interrupted_by: tuple = ()) -> Verdict:
    """The stage of the test side's compiler that makes it disagree with the reference
    (arguments as hlogen.differential.comparison's; `seconds`: the limit of one compile
    and run; `interrupted_by`: as `search`'s, a "stopped" verdict of what was narrowed)."""
    tolerance = Tolerance.chosen(abs, rel, ulp, bitwise)
    test_side, reference_side = Side.of(test, test_options), Side.of(reference, reference_options)
    if not test_side.declared.compiles:
        words = test_side.declared.words  # the interpreter, IREE: passes that are not XLA's
        raise InputError(f"bisect looks for the XLA pass that makes the test side differ: "
                         f"the test side must be an XLA backend, not "
                         f"{'the interpreter' if words == backends.INTERPRET.words else words}")
    args = list(inputs) if inputs is not None else \
        random_inputs(computation, seed=seed, large_range=large_range)
    module = test_side.module(computation)
    try:
        want = reference_side.run(reference_side.module(computation), args)
        log = passes_that_ran(module, test_side.backend, test_side.xla_options, seconds)
    except tuple(interrupted_by) as e:
        return Verdict("stopped", [], 0, test=test_side.label, reference=reference_side.label,
                       interrupted=e, narrowed="nothing: stopped before the search began "
                                               "(running the reference side, or reading "
                                               "the passes XLA runs)")
    notes = []
    with IsolatedRunner(test_side.backend, module, args, seconds) as runner:

        def diverges(disabled) -> bool:
            options = options_disabling(disabled, test_side.xla_options)
            try:
                got = runner.run(options)
            except ExecutionError as e:  # counted as not removing it (the search's safe side)
                if not disabled:  # the module does not run on the test side at all
                    raise
                notes.append(f"with {options_of.text(options)} the test side fails: {e}")
                return True
            return len(got) != len(want) or \
                not all(compare_arrays(g, w, tolerance).ok for g, w in zip(got, want))

        # a side that runs a sharded module partitioned keeps XLA's partitioner
        partitioned = not test_side.one_device and sharding.of_module(module.module) is not None
        found = search(log.passes, diverges, log.pipelines, interrupted_by,
                       PARTITIONER if partitioned else frozenset())
    found.test, found.reference, found.notes = test_side.label, reference_side.label, notes
    if found.stage in ("hlo-pass", "hlo-passes", "pipeline", "stopped") and found.passes:
        disabled = found.passes[:1] if found.stage == "hlo-pass" or found.alone \
            else found.passes
        found.fixed_options = options_disabling(disabled, test_side.xla_options)
    return found
