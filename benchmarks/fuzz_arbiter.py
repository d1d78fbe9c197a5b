"""What the arbiter costs the fuzzer (issue 35): programs per second of hg.fuzz.run with
and without the origin and the arbiter judging each difference.

The same `PROGRAMS` random programs (the default bounds, a fixed seed) run through the
whole loop twice, interleaved, `ROUNDS` times: as it is (each program that differs gets
its origin, hlogen.differential.origin, and the arbiter's verdict there, and the
reductions keep them), and with `Triage.origin` finding none (the signature of the op
where the sides first differ, as before issue 35). Programs per second are counted
without the reductions and the reports of the findings (whose length is their time
limit's and bisection's, not the loop's).

The triage's probed run (every top-level value on both sides: for the spec's allowances
and for flushing, as before issue 35) is the one the origin follows (origin.probed_run),
so "without" still runs it: it is the loop before issue 35, and "with" adds only what the
origin and the arbiter do on top (the candidate ops run alone, exact math). `ROUNDS` on
the command line (default 1).

A first run of `WARM_UP` programs is not counted (the first run in a process pays for
imports and caches), and which of the two runs first alternates from round to round. The
machine is shared: wall time swings with the load of others, so each run also counts the
CPU seconds the triage spends per program (this process's, and its child's, where
each side compiles and runs; measured around Triage.observe, so without the reductions),
which the load moves much less.
"""
from __future__ import annotations

import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import hlogen as hg
from _timing import machine
from hlogen.fuzz import triage

PROGRAMS = 24
SEED = 11
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1
WARM_UP = 4  # programs of a first run, not counted
_TICK = os.sysconf("SC_CLK_TCK")


def _cpu(children) -> float:
    """CPU seconds so far of this process, of its children that ended, and of the
    triage's live child (each run's compile and execution happen there)."""
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = time.process_time() + ended.ru_utime + ended.ru_stime
    worker = children._worker
    if worker is not None and worker.alive:
        try:
            with open(f"/proc/{worker.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            seconds += (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime
        except OSError:
            pass
    return seconds


def once(programs: int = PROGRAMS) -> tuple:
    """(programs per second, the run, programs that differed, the 1-minute load average
    as the run began, CPU seconds of the triage per program)."""
    load = os.getloadavg()[0]
    cpu = [0.0]
    observe = triage.Triage.observe

    def counted(self, *args, **kwargs):
        start = _cpu(self.children)
        try:
            return observe(self, *args, **kwargs)
        finally:
            cpu[0] += _cpu(self.children) - start

    triage.Triage.observe = counted
    try:
        with tempfile.TemporaryDirectory() as out:
            run = hg.fuzz.run("cpu", "interpret", out=out, seconds=3600, seed=SEED,
                              programs=programs, reduce_seconds=10)
    finally:
        triage.Triage.observe = observe
    differing = programs - run.agreed - sum(run.skipped.values())
    return (run.programs / (run.seconds - run.reducing), run, differing, load,
            cpu[0] / run.programs)


def main():
    judged = triage.Triage.origin
    found_none = lambda self, candidate, inputs, probed=None: None
    once(WARM_UP)  # (the process's first run pays for imports and the child's start)
    rows = {"with the arbiter": [], "without": []}
    for k in range(ROUNDS):  # which goes first alternates
        for name in sorted(rows, reverse=k % 2 == 1):
            triage.Triage.origin = judged if name == "with the arbiter" else found_none
            rows[name].append(once())
    triage.Triage.origin = judged
    print(f"## fuzz with the arbiter (issue 35): {PROGRAMS} programs of 20 ops, seed {SEED} "
          f"({machine()})\n")
    print("| fuzz loop | " + " | ".join(f"round {k + 1}: programs/s (load), CPU s/program"
                                        for k in range(ROUNDS))
          + " | signatures | allowed |")
    print("| --- |" + " --- |" * (ROUNDS + 2))
    for name, done in rows.items():
        print(f"| {name} | " + " | ".join(f"{r[0]:.2f} ({r[3]:.1f}), {r[4]:.3f}" for r in done)
              + f" | {len(done[-1][1].findings)} | {sum(done[-1][1].allowed.values())} |")
    for k, what in ((0, "programs/s"), (4, "CPU s/program")):
        mean = {name: sum(r[k] for r in done) / len(done) for name, done in rows.items()}
        ratio = mean["with the arbiter"] / mean["without"]
        if k == 4:
            ratio = 1 / ratio  # as programs per CPU second
        print(f"\nwith / without, by {what}: {ratio:.3f} ({100 * (1 - ratio):.1f}% slower)")


if __name__ == "__main__":
    main()
