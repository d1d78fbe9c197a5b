"""The fuzzer behind `hlogen fuzz` (`hg.fuzz.run`): programs run on two backends until they
disagree, each disagreement reduced, named by its cause and kept once.

Each program is random (hlogen.fuzz.generators: hlogen's op library, its shape
rules, bounded sizes and depth, and its dictionary of idioms compilers rewrite) or, with a
corpus, one of its modules (a module of a file of StableHLO, made runnable as the
conformance runner makes it: checks become results, constants parameters with the file's
values; hlogen.conformance.module), as it is the first time and mutated
(hlogen.fuzz.mutation) after. It runs on the test and the reference side in a
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
  hlogen.differential.origin.probed: by the rule, or, where no op differs by it, by 3
  ULP and the relative bound), named as the module writes it (a chlo op, not its
  decomposition), and the side exact math finds wrong there (or, where it cannot
  judge and a third side runs, `also`, the side the two others agree against: "cpu
  wrong (by majority with iree)", or "all three apart"); where that op's values on one
  side are the other side's with subnormals (of its operands, the op run alone on them,
  and of its results) made zeros, the cause is the side's flushing of subnormals, whatever the op: one
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

import random
import time
from typing import Callable

from hlogen import files
from hlogen.differential.comparison import Side, third_side
from hlogen.differential.isolated import Children
from hlogen.differential.near import Tolerance
from hlogen.errors import InputError
from hlogen.fuzz.corpus import corpus_of
from hlogen.fuzz.findings import (JUNIT, SUMMARY, Fuzzed, Outputs, junit, kept,
                                  known_signatures, save, summary)
from hlogen.fuzz.generators import generate
from hlogen.fuzz.program import DEFAULT_ELEMENT_TYPES, checked_options
from hlogen.fuzz.triage import Triage, reduce_finding
from hlogen.progress import Progress, fuzzing

LARGE_RANGE_SHARE = 0.5  # of the programs, by default, whose inputs span the exponent range
_PROGRAM_SEED = 1_000_003


def run(test="cpu", reference="interpret", *, out, seconds: float = 60, seed: int = 0,
         corpus=(), ops: int = 20, max_rank: int = 3, max_dim: int = 8, depth: int = 2,
         element_types=DEFAULT_ELEMENT_TYPES, large_range: bool | float = LARGE_RANGE_SHARE,
         test_options=None, reference_options=None, abs: float | None = None, rel: float | None = None,
         ulp: int | None = None, bitwise: bool = False, reduce_seconds: float = 60,
         run_seconds: float = 30, programs: int | None = None,
         progress: Callable[[Progress], None] | None = None,
         interrupted_by: tuple = (), also=None, also_options=None) -> Fuzzed:
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
    `progress(Progress)` follows it. `interrupted_by` (exception classes, such as
    KeyboardInterrupt) end the run early: what it found so far is saved (summary.json,
    junit.xml, a reduction under way as far as it got) and the exception is in
    `Fuzzed.interrupted`, for the caller to raise again.
    `also` (a backend name or Side, under `also_options`): a third side, as compare's;
    where exact math cannot judge the op where a difference is born (the arbiter's
    "undetermined"), the three sides run the program and the two that agree name the
    third wrong in the signature ("cpu wrong (by majority with iree)"; "all three apart
    (with iree)" where no two agree). It runs only on programs whose sides differ."""
    folder = files.folder(out, "-o", "fuzz writes its findings into a folder", made=True)
    tolerance = Tolerance.chosen(abs, rel, ulp, bitwise)
    sides = Side.of(test, test_options), Side.of(reference, reference_options)
    third = third_side(also, also_options, "fuzz")
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
    entries = corpus_of(corpus)
    folder.mkdir(exist_ok=True)
    known = known_signatures(folder)
    outputs = Outputs(folder)
    run = Fuzzed(sides[0], sides[1], tolerance, seed, third=third)
    start = time.monotonic()
    found: dict = {}  # signature -> Finding
    try:
        with Children(run_seconds) as children:
            fuzzer = Triage(sides, tolerance, children, run_seconds, third=third)

            def tell(**more):
                if progress is not None:
                    progress(fuzzing(run.programs, len(found), sum(f.new for f in found.values()),
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
                    elif outcome.startswith("allowed"):  # by the spec, at its origin
                        run.allowed[outcome] = run.allowed.get(outcome, 0) + 1
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
                reduced = reduce_finding(program, interest, signature, where, program_seed,
                                  reduce_seconds, fuzzer,
                                  lambda p, s=str(signature): tell(reducing=s,
                                                                   reduced_ops=p.op_count),
                                  interrupted_by)
                if reduced is None or isinstance(reduced, str):
                    why = reduced or "not seen again"
                    run.skipped[why] = run.skipped.get(why, 0) + 1
                elif reduced[0].signature in found:
                    found[reduced[0].signature].seen += 1
                else:
                    finding = reduced[0]
                    finding.new = finding.signature not in known
                    found[finding.signature] = finding
                    stopped = reduced[1].search.interrupted
                    # (a reduction cut short is saved as far as it got, without its report)
                    try:
                        if not kept(finding, known):
                            save(outputs, finding, reduced[1], None if stopped else sides,
                                 tolerance, third)
                    finally:  # (its report's time counted with its reduction's)
                        run.reducing += time.monotonic() - started
                    if stopped is not None:
                        raise stopped
                if reduced is None or isinstance(reduced, str) or found.get(
                        reduced[0].signature) is not reduced[0]:
                    run.reducing += time.monotonic() - started
                tell()
    except tuple(interrupted_by) as e:  # what was found so far is written all the same
        run.interrupted = e
    run.seconds = time.monotonic() - start
    run.findings = list(found.values())
    outputs.write(SUMMARY, summary(run, known))
    outputs.write(JUNIT, junit(run))
    return run


def program_seed_of(seed: int, k: int) -> int:
    """The seed of program k (its generation, mutation and inputs) in a run of `seed`."""
    return seed * _PROGRAM_SEED + k


def large_range_of(program_seed: int, share: float) -> bool:
    """Whether program `program_seed`'s random inputs span the exponent range, for a run
    that gives the share `share` of its programs such inputs."""
    return random.Random(f"{program_seed} large range").random() < share


