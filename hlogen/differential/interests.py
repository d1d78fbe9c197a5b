"""What keeps a module worth reducing, and the reducer with it: `hg.reduce_module`.

An interest is a predicate of the reducer's candidates (hlogen.differential.reduction) that
can also say how to see it again (`command`):
- `Divergence`: `compare` finds the two sides differ (XLA's Near, or ulp, or bitwise),
  and the first difference is of the same class as the original's (`difference_class`:
  a NaN or an infinity, a subnormal, an integer, a predicate, or a value), so that the
  reducer does not wander off to another difference;
- `Failure`: a side reports an error whose message matches a pattern, or (`crash`) its
  process ends by a signal; optionally while another side runs the candidate well;
- a user's script (`script_interest`, C-Reduce's convention) or any predicate.
Backends run in a child process (hlogen.differential.isolated.Children) that may die or
be stopped at a time limit: no candidate ends or hangs the reducer.

Inputs (`Inputs`): every candidate runs with the original's inputs (given, or random from
a seed: hlogen.differential.inputs), each parameter of the original keeping its values
(cut to its shape where the reducer halved a dimension), and a parameter the reducer made
(a removed op's result) getting random values as `random_inputs` makes them on the
candidate (its constraints), from a generator of its own seeded by the seed and where the
parameter came from (whatever the other parameters are); so the same module gets the same
inputs, and the reduced module is written with the inputs it is interesting with.
Parameters are followed by an attribute
(`ORIGIN`) the reducer keeps; the reduced module has it replaced by names.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import re
import shlex
import time
import zlib
from typing import Callable

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.computation import Computation, NAME_ATTRIBUTE
from hlogen.differential.comparison import Comparison, Side, compare
from hlogen.differential.inputs import random_inputs, random_inputs_apart
from hlogen.differential.isolated import Children, Died
from hlogen.differential.near import Tolerance
from hlogen.differential.reproduce import command_line
from hlogen.differential.reduction import NotInteresting, Reduced, script_interest, shrink
from hlogen.errors import HlogenError, InputError
from hlogen.loading import load
from hlogen.runtime.arrays import flatten_arguments

ORIGIN = "hlogen.reduce.origin"  # a parameter's index in the original module
RUN_SECONDS = 120.0  # one candidate's compile and run, on one side, at most
_NEW = 1_000_003  # a new parameter's values come from the seed * _NEW + its own number


# -- inputs ---------------------------------------------------------------------------------

class Inputs:
    """The arguments of the original module and of every candidate (module docstring)."""

    def __init__(self, original: Computation, given=None, seed: int = 0,
                 large_range: bool = False):
        self.seed, self.large_range = seed, large_range
        self.shapes = original.parameter_shapes
        self.names = _unique(original.parameter_names)
        if given is None:
            self.values = random_inputs(original, seed=seed, large_range=large_range)
        else:
            flatten_arguments(original, list(given))  # the count and each shape, named
            self.values = [v if isinstance(v, tuple) else np.asarray(v) for v in given]

    def tagged(self, computation: Computation) -> Computation:
        """A copy of the original whose parameters carry their index (ORIGIN)."""
        copy = computation.clone()
        with mlir.context():
            _set_parameter_attributes(copy, lambda i, attrs: {
                **attrs, ORIGIN: ir.StringAttr.get(str(i))})
        return Computation(copy.module, computation.source)

    def of(self, candidate: Computation) -> list:
        """The arguments of `candidate` (a tagged original, reduced)."""
        made, seeds, seen = [], {}, collections.Counter()
        arguments = candidate.main.regions[0].blocks[0].arguments
        for i, (origin, shape) in enumerate(zip(candidate.parameter_attribute(ORIGIN),
                                                candidate.parameter_shapes)):
            value = None if origin is None else _fit(self.values[int(origin)],
                                                     self.shapes[int(origin)], shape)
            if value is None:
                # a new one (or one whose shape changed): its own values, from the seed and
                # where it came from (the removed op's location, its type), whatever the
                # other parameters are
                key = f"{arguments[i].location}|{arguments[i].type}"
                seen[key] += 1
                seeds[i] = self.seed * _NEW + (zlib.crc32(key.encode()) + seen[key]) % _NEW
            made.append(value)
        if seeds:
            for i, value in random_inputs_apart(candidate, seeds, self.large_range).items():
                made[i] = value
        return made

    def named(self, candidate: Computation) -> Computation:
        """`candidate` without ORIGIN, each parameter named: the original's name, or
        new0, new1, ... for those the reducer made."""
        copy = candidate.clone()
        taken, count = set(self.names), 0
        names = []
        for origin in candidate.parameter_attribute(ORIGIN):
            if origin is None:
                while f"new{count}" in taken:
                    count += 1
                taken.add(f"new{count}")
                origin_name = f"new{count}"
            else:
                origin_name = self.names[int(origin)]
            names.append(origin_name)
        with mlir.context():
            _set_parameter_attributes(copy, lambda i, attrs: {
                **{k: v for k, v in attrs.items() if k != ORIGIN},
                NAME_ATTRIBUTE: ir.StringAttr.get(names[i])})
        return Computation(copy.module, candidate.source)


def _unique(names: list) -> list:
    seen: dict = {}
    unique = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        unique.append(name if seen[name] == 1 else f"{name}_{seen[name] - 1}")
    return unique


def _fit(value, original_shape, shape):
    """`value` of a parameter of `original_shape` for one of `shape`: the same, or its
    leading part where the reducer halved dimensions; None where it cannot be."""
    if shape == original_shape:
        return value
    if isinstance(shape, T.Shape) and isinstance(original_shape, T.Shape) and \
            shape.element_type == original_shape.element_type and \
            shape.rank == original_shape.rank and \
            all(d <= o for d, o in zip(shape.dimensions, original_shape.dimensions)):
        return np.ascontiguousarray(value[tuple(slice(0, d) for d in shape.dimensions)])
    return None


def _set_parameter_attributes(computation: Computation, update) -> None:
    """main's argument attributes, each dictionary replaced by update(i, {name: attr})."""
    main = computation.main
    count = len(main.regions[0].blocks[0].arguments)
    old = list(ir.ArrayAttr(main.attributes["arg_attrs"])) if "arg_attrs" in main.attributes \
        else []
    dicts = []
    for i in range(count):
        attrs = {a.name: a.attr for a in ir.DictAttr(old[i])} if i < len(old) else {}
        dicts.append(ir.DictAttr.get(update(i, attrs)))
    main.attributes["arg_attrs"] = ir.ArrayAttr.get(dicts)


def npz(computation: Computation, arrays: list) -> bytes:
    """An .npz of `arrays`, keyed by `computation`'s parameter names: what `--input
    FILE.npz` reads back (ml_dtypes arrays as raw bytes of their width, which it reads as
    the parameter's type)."""
    buffer = io.BytesIO()
    np.savez(buffer, **{name: _savable(np.asarray(a))
                        for name, a in zip(computation.parameter_names, arrays)})
    return buffer.getvalue()


def _savable(array: np.ndarray) -> np.ndarray:
    if array.dtype.type.__module__ == "ml_dtypes":
        return array.view(np.dtype(f"V{array.dtype.itemsize}"))
    return array


# -- classes of differences -----------------------------------------------------------------

def difference_class(comparison: Comparison) -> str | None:
    """The class of the first difference `comparison` found (None when there is none):
    "shape" (results that cannot be compared), "non-finite", "subnormal" (a side's
    value is subnormal, or zero where the other's is subnormal: flushed), "integer",
    "predicate", or "value"."""
    for report in comparison.results:
        if report.problem:
            return "shape"
        if report.first:
            return class_of(report.first[0].actual, report.first[0].expected)
    return None


def class_of(actual, expected) -> str:
    """The class of a difference between two values of one element (difference_class)."""
    a, e = np.asarray(actual), np.asarray(expected)
    kind = T.element_type(a.dtype).kind
    if kind == T.PRED:
        return "predicate"
    if kind in T.INTEGER:
        return "integer"
    parts = [(a.real, e.real), (a.imag, e.imag)] if kind == T.COMPLEX else [(a, e)]
    values = [np.asarray(v).astype(np.float64) for pair in parts for v in pair]
    if not all(np.isfinite(v) for v in values):
        return "non-finite"  # (an infinity becomes a NaN in later ops: one class)
    tiny = float(ml_dtypes.finfo(np.real(a).dtype).smallest_normal)
    if any(0 < abs(float(v)) < tiny for v in values):
        return "subnormal"
    return "value"


# -- the interests --------------------------------------------------------------------------

class Interest:
    """A predicate of candidates (`__call__`), with what it needs to say how to see it
    again. Subclasses run backends in `children`, each run bounded by `seconds` and by
    the search's `deadline` (a time.monotonic() value, or None). Each is a frozen value,
    built whole (another deadline or process: dataclasses.replace); what the last
    candidate judged showed is the interest's own note (`notes`, `observed`)."""

    uses_inputs = False

    def __call__(self, candidate: Computation) -> bool:
        raise NotImplementedError

    def command(self, module: str, inputs: str | None) -> str | None:
        """The command line that shows it on `module` (with `inputs`), or None."""
        return None

    def describe(self) -> str:
        raise NotImplementedError

    @property
    def observed(self) -> str:
        """What the last candidate judged not interesting showed instead, in words (the
        message of a module not interesting to begin with states it, then what is
        wanted)."""
        return self.notes.get("observed", "the predicate returns False on it")

    def wants(self) -> str:
        """What the interest wants of a candidate, in words ("them to differ ...")."""
        return self.describe()

    def seen(self, computation: Computation, inputs) -> str:
        """What it sees of `computation` (a reduced module) with `inputs`, in words."""
        return self.describe()

    def _seconds(self) -> float:
        """How long one run may take: `seconds`, and no more than until the deadline
        (a second at least)."""
        if self.deadline is None:
            return self.seconds
        return max(1.0, min(self.seconds, self.deadline - time.monotonic()))

    def _run(self, side: Side, module: Computation, args) -> list:
        return self.children.run(side.backend, module, args, side.xla_options, self._seconds())


@dataclasses.dataclass(frozen=True, eq=False)
class Predicate(Interest):
    """A caller's predicate (a Python function, or a script: script_interest)."""

    predicate: Callable
    script: str | None = None
    seconds: float = RUN_SECONDS
    children: Children | None = None
    deadline: float | None = None
    notes: dict = dataclasses.field(default_factory=dict, repr=False)  # shared by its copies

    def __call__(self, candidate):
        if self.script is None:
            return self.predicate(candidate)
        # script_interest's predicate: killed at the deadline; it says what the script did
        verdict = self.predicate(candidate, timeout=self._seconds())
        self.notes["observed"] = f"the script {self.script} {self.predicate.outcome} on it"
        return verdict

    def command(self, module, inputs):
        return shlex.join([self.script, module]) if self.script else None

    def describe(self) -> str:
        return f"the script {self.script} exits with status 0" if self.script else \
            "the predicate holds"

    def wants(self) -> str:
        return "the script to exit with status 0" if self.script else "the predicate to hold"


@dataclasses.dataclass(frozen=True, eq=False)
class Divergence(Interest):
    """The two sides' results differ by `tolerance`, the first difference of `kind`
    (difference_class; any, for None), and `keeps(candidate, inputs, comparison)` holds
    when given: the difference is still the one being kept (the fuzzer's: one the spec
    does not allow, of the same signature)."""

    uses_inputs = True

    test: Side
    reference: Side
    tolerance: Tolerance
    inputs: Inputs
    children: Children
    seconds: float = RUN_SECONDS
    kind: str | None = None
    keeps: Callable | None = None
    deadline: float | None = None
    notes: dict = dataclasses.field(default_factory=dict, repr=False)  # shared by its copies

    def compare(self, candidate: Computation, inputs=None) -> Comparison:
        """The comparison of `candidate` with `inputs` (default: its Inputs)."""
        results = self.notes["results"] = {}  # side -> its result leaves

        def run(side, module, args):
            results[side] = self._run(side, module, args)
            return results[side]

        return compare(candidate, self.inputs.of(candidate) if inputs is None else inputs,
                       test=self.test, reference=self.reference, tolerance=self.tolerance,
                       runner=run)

    def differs(self, candidate: Computation, inputs=None) -> Comparison | None:
        """The comparison, when the results differ in the way being kept (`keeps`)."""
        inputs = self.inputs.of(candidate) if inputs is None else inputs
        comparison = self.compare(candidate, inputs)
        if comparison.ok or (self.keeps is not None and
                             not self.keeps(candidate, inputs, comparison)):
            return None
        return comparison

    def seen(self, computation, inputs):
        return self.compare(computation, inputs).text()

    def __call__(self, candidate):
        inputs = self.inputs.of(candidate)
        comparison = self.compare(candidate, inputs)
        sides = f"{self.test.label} and {self.reference.label}"
        if comparison.ok:
            self.notes["observed"] = f"{sides} agree on it ({self.tolerance.describe()})"
            return False
        if self.keeps is not None and not self.keeps(candidate, inputs, comparison):
            self.notes["observed"] = f"{sides} differ on it, but not in the way kept"
            return False
        found = difference_class(comparison)
        if self.kind not in (None, found):
            self.notes["observed"] = f"{sides} differ on it, {found} first"
            return False
        return True

    def command(self, module, inputs):
        return command_line("compare", module, test=self.test, reference=self.reference,
                            inputs=["--input", inputs] if inputs else [],
                            tolerance=self.tolerance)

    def describe(self) -> str:
        kind = f" ({self.kind} first)" if self.kind else ""
        return (f"{self.test.label} and {self.reference.label} differ{kind} "
                f"({self.tolerance.describe()})")

    def wants(self) -> str:
        kind = f", {self.kind} first" if self.kind else ""
        return f"them to differ{kind}"


@dataclasses.dataclass(frozen=True, eq=False)
class Failure(Interest):
    """`side` reports an error whose message matches `pattern` (a compiled regular
    expression; any error for None), or, with `crash`, its process ends by a signal
    (whose message, with the last words of the process, matches `pattern`); with
    `runs` (a Side), that side must run the candidate without an error."""

    uses_inputs = True

    side: Side
    pattern: re.Pattern | None
    crash: bool
    inputs: Inputs
    children: Children
    seconds: float = RUN_SECONDS
    runs: Side | None = None
    deadline: float | None = None
    notes: dict = dataclasses.field(default_factory=dict, repr=False)  # shared by its copies

    def failure(self, candidate: Computation, inputs=None) -> HlogenError | None:
        """What running `candidate` on the side with `inputs` (default: its Inputs)
        raised; None when it ran."""
        try:
            self._run(self.side, self.side.module(candidate),
                      self.inputs.of(candidate) if inputs is None else inputs)
        except HlogenError as e:
            return e
        return None

    def seen(self, computation, inputs):
        e = self.failure(computation, inputs)
        return str(e) if e is not None else f"{self.side.label} runs it: it does not fail again"

    def __call__(self, candidate):
        e = self.failure(candidate)
        side = self.side.label
        if e is None:
            self.notes["observed"] = f"{side} runs it without an error"
            return False
        died = isinstance(e, Died) and e.how == "crash" and e.signal is not None
        if isinstance(e, Died) and not died:  # a timeout, or an exit status
            self.notes["observed"] = f"{side} does not end by a signal: {_first_line(str(e))}"
            return False
        if died != self.crash:
            self.notes["observed"] = (f"{side}'s process ends by {e.signal}" if died else
                             f"{side} reports an error, its process does not end by a "
                             f"signal: {_first_line(str(e))}")
            return False
        if self.pattern is not None and not self.pattern.search(str(e)):
            self.notes["observed"] = (f"{side}'s process ends by {e.signal}, its message not matching"
                             if died else f"{side} reports an error not matching") + \
                f" {self.pattern.pattern!r}: {_first_line(str(e))}"
            return False
        if self.runs is not None:
            self._run(self.runs, self.runs.module(candidate), self.inputs.of(candidate))
        return True

    def command(self, module, inputs):
        given = ["--input", inputs] if inputs else []
        if self.side.through_hlo:
            return command_line("compare", module, test=self.side, inputs=given)
        return command_line("run", module, backend=self.side, inputs=given)

    def describe(self) -> str:
        what = "ends by a signal" if self.crash else "reports an error"
        matching = f" matching {self.pattern.pattern!r}" if self.pattern is not None else ""
        runs = f", while {self.runs.label} runs it" if self.runs is not None else ""
        return f"{self.side.label} {what}{matching}{runs}"

    def wants(self) -> str:
        what = f"{self.side.label}'s process to end by a signal" if self.crash else \
            f"{self.side.label} to report an error"
        matching = f" matching {self.pattern.pattern!r}" if self.pattern is not None else ""
        runs = f", while {self.runs.label} runs it" if self.runs is not None else ""
        return f"{what}{matching}{runs}"


def _first_line(message: str) -> str:
    lines = message.strip().splitlines()
    return lines[0][:200] if lines else ""


# -- hg.reduce_module -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Reduction:
    """What `reduce_module` found: the reduced module (parameters named), the inputs it is
    interesting with (None when the interest runs nothing), the interest, and the
    search (hlogen.differential.Reduced: counts, time, whether it timed out)."""

    computation: Computation
    inputs: list | None
    interest: Interest
    search: Reduced

    @property
    def op_count(self) -> int:
        return self.search.op_count

    def command(self, module: str, inputs: str | None = None) -> str | None:
        """The command line that shows what is interesting about the module saved as
        `module` (and its inputs as `inputs`, an .npz: `npz`)."""
        return self.interest.command(module, inputs if self.inputs else None)

    def npz(self) -> bytes:
        return npz(self.computation, self.inputs or [])

    def seen(self, children: Children | None = None) -> str:
        """What the interest sees of the reduced module, in words: run again in
        `children` (a child process of its own, for None)."""
        with contextlib.ExitStack() as stack:
            interest = dataclasses.replace(self.interest, children=children or stack.enter_context(
                Children(self.interest.seconds)))
            try:
                return interest.seen(self.computation, self.inputs)
            except HlogenError as e:
                return str(e)


def reduce_module(module, interesting: Callable | None = None, *, test: str = "cpu",
           reference: str = "interpret", test_options=None, reference_options=None,
           inputs=None, seed: int = 0, large_range: bool = False, abs: float | None = None,
           rel: float | None = None, ulp: int | None = None, bitwise: bool = False,
           error: str | None = None, crash: bool = False, script=None,
           timeout: float | None = None, progress=None,
           run_seconds: float = RUN_SECONDS, interrupted_by: tuple = ()) -> Reduction:
    """The smallest module found that stays interesting (hlogen.differential.reduction's
    search), where interesting is, by the arguments given:
    - `interesting(candidate)`: a predicate of Computations;
    - `script`: an executable called with the candidate's file, C-Reduce's convention
      (exit status 0: still interesting; hlogen.differential.script_interest);
    - `error` (a regular expression): compiling or running on `test` (with
      `test_options`) fails with an error whose message matches it;
    - `crash`: `test`'s process ends by a signal (with `error`, its message matches);
    - otherwise a divergence: `compare` of `test` and `reference` (each with its XLA
      options) differs by XLA's Near (`abs`, `rel`), or `ulp`, or `bitwise`, the first
      difference of the same class as the original's (difference_class).
    Backends run in a child process, each run at most `run_seconds`; the inputs are
    `inputs` (one per parameter) or random ones from `seed` (`large_range`), and a
    parameter the reducer makes gets random values from the same seed (see Inputs).
    `seed` also orders the search; `timeout` (seconds) bounds it, its runs included;
    `progress(hlogen.progress.Progress)` follows it; `interrupted_by` (exception
    classes, such as KeyboardInterrupt) end it early with the best module so far, the
    exception in `search.interrupted` (the caller saves the module, then raises it
    again). hg.InputError when the module is not interesting to begin with."""
    original = module if isinstance(module, Computation) else load(module)
    chosen = [name for name, given in (("interesting", interesting is not None),
                                       ("script", script is not None),
                                       ("error/crash", error is not None or crash)) if given]
    if len(chosen) > 1:
        raise InputError(f"reduce: give one interest, got {' and '.join(chosen)}")
    pattern = _pattern(error)
    with Children(run_seconds) as children:
        if interesting is not None or script is not None:
            interest = Predicate(interesting or script_interest(script, timeout=run_seconds),
                                 None if script is None else str(script), run_seconds)
            start = original
        else:
            given = Inputs(original, inputs, seed, large_range)
            start = given.tagged(original)
            test_side = Side.of(test, test_options)
            if error is not None or crash:
                interest = Failure(test_side, pattern, crash, given, children, run_seconds)
            else:
                divergence = Divergence(test_side, Side.of(reference, reference_options),
                                        Tolerance.chosen(abs, rel, ulp, bitwise), given, children,
                                        run_seconds)
                interest = dataclasses.replace(
                    divergence, kind=difference_class(divergence.compare(start)))
        return reduce_with(start, interest, seed=seed, timeout=timeout, progress=progress,
                           interrupted_by=interrupted_by)


def reduce_with(start: Computation, interest: Interest, *, seed: int = 0,
                timeout: float | None = None, progress=None,
                interrupted_by: tuple = ()) -> Reduction:
    """`reduce_module`'s search with an Interest, on `start` (tagged by its Inputs when it has
    some)."""
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise HlogenError(f"reduce: timeout must be a positive number of seconds, got {timeout!r}")
    # the original is judged whole (`interest`), the candidates by the search's deadline
    bounded = interest if timeout is None else \
        dataclasses.replace(interest, deadline=time.monotonic() + timeout)
    judged = []

    def judge(candidate: Computation) -> bool:
        judging = bounded if judged else interest
        judged.append(True)
        return judging(candidate)

    try:
        search = shrink(start, judge, seed=seed, timeout=timeout, progress=progress,
                               interrupted_by=interrupted_by)
    except NotInteresting:  # what it showed, then what the interest wants (not as a fact)
        raise NotInteresting(f"{start.source or start.name}: not interesting to begin with: "
                             f"{interest.observed}; the interest wants {interest.wants()}: "
                             f"nothing to reduce") from None
    best = search.computation
    if not interest.uses_inputs:
        return Reduction(best, None, interest, search)
    given = interest.inputs
    return Reduction(given.named(best), given.of(best), interest, search)


def _pattern(error: str | None) -> re.Pattern | None:
    if error is None:
        return None
    try:
        return re.compile(error)
    except re.error as e:
        raise InputError(f"error pattern {error!r} is not a regular expression: {e}") from None


def _gist(message: str) -> list:
    """An error message's first line after the module's name and location, and the next
    line after its location where the first only announces it ("the reference
    interpreter failed:")."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    parts = [re.sub(r"^[^:\s]*(?::\d+:\d+)?: ", "", lines[0])] if lines else [""]
    if parts[0].endswith(":") and len(lines) > 1:
        parts.append(re.sub(r"^[^:]*:\d+:\d+: (?:error: )?", "", lines[1]))
    return parts


def message_pattern(message: str) -> re.Pattern:
    """A pattern of an error message's gist (its first line after the module's name and
    location, and the next where the first only announces it), with every number
    standing for any number (shapes and names change as a module is reduced)."""
    return re.compile("(?s)" + ".*?".join(re.sub(r"\d+", r"\\d+", re.escape(part))
                                          for part in _gist(message)))


def message_gist(message: str) -> str:
    """The gist message_pattern looks for, in one line, each number N but those of
    names (f32, S64, %arg0): a dimension of a shape, a location, a size."""
    return re.sub(r"(?<![A-Za-z\d])\d+|(?<=\dx)\d+(?=x)", "N", " ".join(_gist(message)))
