"""Reducing a module: the smallest module found that stays "interesting".

`shrink(module, interesting)` keeps shrinking a StableHLO module while a predicate of a
Computation holds (a divergence between backends, an error whose message matches, a
user's script), with these strategies, repeated until none makes progress:
- trim results: keep a subset of main's results;
- remove ops: delta debugging (ddmin) over the ops of every function and region; each
  result of a removed op becomes an operand of the op of the same type (the op is
  bypassed), else a new parameter of main (in main's body), else zeros; then, one op at
  a time, main returns an op's operands instead of its result, and an op is bypassed by
  each of its operands of its type;
- inline calls (jax's inliner, hlogen.passes);
- simplify regions: a while loop that runs once or never, a branch of an if or a case
  (the regions of WHOLE's ops are not edited inside: reducers, comparators, loops);
- fold constants: an op of constants becomes the constant of its value (computed by the
  reference interpreter); merge constants: one that equals an earlier one of its block
  gives way to it;
- simplify constants (zeros, ones) and attributes (optional ones and other dialects');
- shrink shapes: every dimension of one size halved, where the module still verifies;
- drop unused parameters.
Every candidate is built on a copy of the best module so far, has its dead ops and
unused functions removed, and must pass MLIR's verifier and hlogen.preflight.check_module before the predicate
sees it; a candidate is accepted only when it is smaller (fewer functions, then fewer
ops, then fewer elements, then shorter text), so the search ends. The same module,
predicate and seed (which orders delta debugging's tries) give the same result; a
`timeout` ends the search with the best module so far.

`script_interest(path)` makes a predicate of a user's test script, with C-Reduce's
convention: exit status 0 means "still interesting".
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import random
import select
import signal
import subprocess
import tempfile
import time
from typing import Callable

from jaxlib.mlir import ir

from hlogen import mlir, native
from hlogen.computation import Computation, main_of
from hlogen.differential.edits import (Skip, WHERE, attributes_of, bypass_op, bypasses,
                                       constant_op, constants_not, delete_attributes,
                                       dimension_sizes, drop_parameters, fix_signature, foldable,
                                       folded_value, halve, inline_calls, merge_constants,
                                       op_alone, ops_of, region_variants, removable,
                                       remove_dead_ops, remove_ops, repeated_constants, results_of,
                                       return_operand, returnable, set_constants, simplify_region,
                                       size_of, trim_results, unused_parameters, valid,
                                       with_regions)
from hlogen.errors import HlogenError, InputError
from hlogen.loading import load
from hlogen.progress import Progress, reducing as searched



def op_count(module) -> int:
    """The ops of a module's functions (a Computation or an ir.Module), without the
    functions and their terminators."""
    return len(ops_of(module.module if isinstance(module, Computation) else module))


@dataclasses.dataclass(frozen=True)
class Reduced:
    """The result of `shrink`: the smallest interesting module found, and the search."""

    computation: Computation
    op_count: int
    original_op_count: int
    tried: int
    accepted: int
    seconds: float
    timed_out: bool
    interrupted: BaseException | None = None  # what ended the search early (interrupted_by)


class _OutOfTime(Exception):
    pass


class NotInteresting(InputError):
    """The module given is not interesting to begin with: there is nothing to reduce."""


def shrink(module_or_computation, interesting: Callable[[Computation], bool], *, seed: int = 0,
           timeout: float | None = None,
           progress: Callable[[Progress], None] | None = None,
           interrupted_by: tuple = ()) -> Reduced:
    """The smallest module found that stays interesting (see the module docstring).

    `module_or_computation`: a Computation, or what hg.load takes. `interesting(comp)`
    says whether a candidate still shows what is being reduced; it is called on
    candidates that verify, and an hg.HlogenError it raises counts as "not interesting"
    (other exceptions end the search). `seed` orders delta debugging's tries; `timeout`
    (seconds) bounds the whole search, checked before each candidate; `progress` is
    called after each candidate judged; `interrupted_by` (exception classes, such as
    KeyboardInterrupt) end the search as the timeout does, the exception kept in the
    result's `interrupted` for the caller to raise again once it has saved the best
    module. Raises hg.InputError when the module is not interesting to begin with (and
    what the predicate raises on it: also an interruption while the original is judged,
    when there is nothing to keep)."""
    original = module_or_computation if isinstance(module_or_computation, Computation) \
        else load(module_or_computation)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise HlogenError(f"reduce: seed must be an int, got {seed!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise HlogenError(f"reduce: timeout must be a positive number of seconds, got {timeout!r}")
    search = _Search(original, interesting, seed, timeout, progress)
    if not interesting(original):  # (an error it raises says why, here)
        raise NotInteresting(f"{original.source or original.name}: the module is not "
                             f"interesting to begin with (the predicate returns False on it): "
                             f"nothing to reduce")
    timed_out, interrupted = False, None
    try:
        search.run()
    except _OutOfTime:
        timed_out = True
    except tuple(interrupted_by) as e:  # (search.best is always a whole module)
        interrupted = e
    return Reduced(search.best_computation(), op_count(search.best_module()),
                   op_count(original), search.tried, search.accepted,
                   time.monotonic() - search.start, timed_out, interrupted)


class _Search:
    def __init__(self, original: Computation, interesting, seed: int, timeout, progress):
        self.source = original.source
        self.interesting, self.progress = interesting, progress
        self.rng = random.Random(seed)
        self.start = time.monotonic()
        self.deadline = None if timeout is None else self.start + timeout
        self.best = original.to_bytecode()
        self.best_size = size_of(original.module, original.module.operation.get_asm())
        self.tried = self.accepted = 0
        self.seen: set = set()
        self.folded: dict = {}  # a folded op's module text -> its value's attribute

    def best_module(self) -> ir.Module:
        return ir.Module.parse(self.best, context=mlir.context())

    def best_computation(self) -> Computation:
        return Computation(self.best_module(), self.source)

    # -- judging candidates ---------------------------------------------------------------

    def judge(self, computation: Computation, strategy: str, size: tuple) -> bool:
        self.tried += 1
        try:
            verdict = bool(self.interesting(computation))
        except HlogenError:
            verdict = False
        if verdict:
            self.accepted += 1
            self.best, self.best_size = computation.to_bytecode(), size
        if self.progress is not None:
            self.progress(searched(strategy, self.best_size[1], self.tried, self.accepted,
                                   time.monotonic() - self.start))
        return verdict

    def attempt(self, strategy: str, edit) -> bool:
        """Whether `edit` (of a copy of the best module, in place, or returning a new
        module) makes a smaller module that stays interesting; it becomes the best."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfTime
        module = self.best_module()
        with mlir.context(), ir.Location.unknown():
            try:
                module = edit(module) or module
            except Skip:
                return False
            main = main_of(module, WHERE)
            remove_dead_ops(module)
            mlir.drop_unused_functions(module, main)
            fix_signature(main)
        if not valid(module):
            return False
        text = module.operation.get_asm(assume_verified=True)
        size = size_of(module, text)
        digest = hashlib.sha256(text.encode()).digest()
        if size >= self.best_size or digest in self.seen:
            return False
        self.seen.add(digest)
        return self.judge(Computation(module, self.source), strategy, size)

    def ddmin(self, strategy: str, changes, apply) -> bool:
        """Delta debugging over a list of changes: `changes(module)` lists them (keys) on
        the best module, `apply(module, keys)` makes some of them on a copy. Tries all at
        once, then halves, quarters, ... (in an order the seed shuffles), and starts again
        on the new list whenever a candidate is accepted."""
        items = changes(self.best_module())
        n, progressed = 1, False
        while items:
            n = min(n, len(items))
            chunks = [items[len(items) * i // n:len(items) * (i + 1) // n] for i in range(n)]
            order = list(range(n))
            self.rng.shuffle(order)
            for k in order:
                if self.attempt(strategy, lambda m, chunk=chunks[k]: apply(m, chunk)):
                    progressed = True
                    items = changes(self.best_module())
                    n = max(n - 1, 1)
                    break
            else:
                if n >= len(items):
                    break
                n = min(2 * n, len(items))
        return progressed

    def each(self, strategy: str, changes, variants, apply) -> bool:
        """One change at a time: for each key of `changes(module)`, its `variants(module,
        key)` in order until one is accepted."""
        progressed, position = False, 0
        while True:
            module = self.best_module()
            keys = changes(module)
            if position >= len(keys):
                return progressed
            key = keys[position]
            for variant in variants(module, key):
                if self.attempt(strategy, lambda m, v=variant: apply(m, key, v)):
                    progressed = True
                    break
            else:
                position += 1

    # -- the strategies, in the order a round runs them -----------------------------------

    def run(self) -> None:
        while True:
            progressed = [
                self.ddmin("trim results", results_of, trim_results),
                self.ddmin("remove ops", removable, remove_ops),
                self.each("return operands", results_of, returnable, return_operand),
                self.each("bypass ops", removable, bypasses, bypass_op),
                self.attempt("inline calls", inline_calls),
                self.each("simplify regions", with_regions, region_variants, simplify_region),
                self.ddmin("fold constants", foldable, self.fold),
                self.ddmin("merge constants", repeated_constants, merge_constants),
                self.ddmin("simplify constants", constants_not(0), set_constants(0)),
                self.ddmin("simplify constants", constants_not(1), set_constants(1)),
                self.ddmin("simplify attributes", attributes_of, delete_attributes),
                self.each("shrink shapes", dimension_sizes, lambda m, s: ("types", "arrays"), halve),
                self.ddmin("drop unused parameters", unused_parameters, drop_parameters),
            ]
            if not any(progressed):
                return

    def fold(self, module: ir.Module, keys: list) -> None:
        """The ops at `keys` (whose operands are constants) replaced by constants of their
        values, computed by the reference interpreter (once per op)."""
        ops = ops_of(module)
        for key in keys:
            op = ops[key]
            alone = op_alone(op)
            text = alone.operation.get_asm()
            if text not in self.folded:
                self.folded[text] = folded_value(alone, op)
            if self.folded[text] is None:
                raise Skip
            with ir.InsertionPoint(op), op.location:
                for result, attr in zip(op.results, self.folded[text]):
                    result.replace_all_uses_with(constant_op(attr, result.type))
            op.erase()


# -- a user's script as the predicate -------------------------------------------------------

def script_interest(path, *, timeout: float | None = 60.0,
                    filename: str = "candidate.mlir") -> Callable[[Computation], bool]:
    """A predicate that runs the executable `path` on each candidate, with C-Reduce's
    convention: exit status 0 means the candidate is still interesting, any other status
    (a signal, a timeout after `timeout` seconds) that it is not. The candidate is
    written as StableHLO text to `filename` in a new temporary folder, which is the
    script's working folder, and the script gets its path as its one argument (as
    mlir-reduce passes it). mlir-reduce reads its scripts the other way round (a non-zero
    status is interesting); hlogen follows C-Reduce because 0 is what `grep -q`, `test`
    and most commands return when what they look for is there.

    The script runs in a process group of its own (a session), killed whole (SIGKILL)
    when the script exits, when its time is up, and when the caller is stopped (an
    exception such as KeyboardInterrupt): nothing it started outlives its candidate, whose
    folder is deleted; and the kernel kills the script when this process dies
    (hlogen.native.ending_with_parent). The predicate takes `timeout=` too: the limit of
    one call (the reducer's, which bounds a call by the search's --timeout)."""
    script = os.path.abspath(os.fspath(path))
    if not os.path.isfile(script) or not os.access(script, os.X_OK):
        raise InputError(f"{path}: the interestingness script must be an executable file")
    if os.sep in filename or not filename:
        raise InputError(f"script_interest: filename must be a file name, got {filename!r}")
    _check_runs(script, path)
    limit = timeout

    def interesting(computation: Computation, timeout: float | None = limit) -> bool:
        with tempfile.TemporaryDirectory(prefix="hlogen-reduce-") as folder:
            candidate = os.path.join(folder, filename)
            with open(candidate, "w") as f:
                f.write(computation.as_text())
            try:
                child = subprocess.Popen(native.ending_with_parent([script, candidate]),
                                         cwd=folder, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
            except OSError as e:  # (setpriv gone since)
                raise InputError(f"{path}: cannot run the interestingness script: "
                                 f"{e.strerror}") from None
            try:
                ended = _ends(child.pid, timeout)
            finally:
                # its group, before the script is reaped (its id cannot be taken again
                # until then): what it left running, or all of it at the time limit or
                # when this process is stopped
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            code = child.returncode
            interesting.outcome = (
                f"exits with status {code}" if ended and code >= 0 else
                f"ends by {signal.Signals(-code).name}" if ended else
                f"is still running after {timeout:g} s (killed)")
            return ended and code == 0
    interesting.outcome = "was not run"  # what the script did with the last candidate
    return interesting


def _check_runs(script: str, path) -> None:
    """Refuses a script the kernel cannot run: a program (ELF) or a file whose #! line
    names an executable (it runs through a launcher that would only see it fail)."""
    with open(script, "rb") as f:
        head = f.read(512)
    if head.startswith(b"\x7fELF"):
        return
    words = head[2:].split(b"\n", 1)[0].split() if head.startswith(b"#!") else []
    interpreter = os.fsdecode(words[0]) if words else None
    if interpreter is None or not os.path.isfile(interpreter) or \
            not os.access(interpreter, os.X_OK):
        why = f"its #! line names {interpreter}, which is not an executable file" \
            if interpreter else "it is not a program and has no #! line"
        raise InputError(f"{path}: cannot run the interestingness script: {why}")


def _ends(pid: int, seconds: float | None) -> bool:
    """Whether the child `pid` ends within `seconds` (None: however long it takes),
    leaving it to be reaped."""
    deadline = None if seconds is None else time.monotonic() + seconds
    try:  # (a pidfd is readable once the process has ended)
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            ready, _, _ = select.select([fd], [], [], seconds)
            return bool(ready)
        finally:
            os.close(fd)
    pause = 0.001  # (no pidfd: Linux before 5.3) polled
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 0.05)
    return True
