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
"""
from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import hlogen as hg
from _timing import machine
from hlogen.fuzz import triage

PROGRAMS = 24
SEED = 11
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 1


def once() -> tuple:
    """(programs per second, the run, programs that differed, the 1-minute load average
    as the run began)."""
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        run = hg.fuzz.run("cpu", "interpret", out=out, seconds=3600, seed=SEED,
                          programs=PROGRAMS, reduce_seconds=10)
    differing = PROGRAMS - run.agreed - sum(run.skipped.values())
    return run.programs / (run.seconds - run.reducing), run, differing, load


def main():
    judged = triage.Triage.origin
    rows = {"with the arbiter": [], "without": []}
    for _ in range(ROUNDS):
        triage.Triage.origin = judged
        rows["with the arbiter"].append(once())
        triage.Triage.origin = lambda self, candidate, inputs, probed=None: None
        rows["without"].append(once())
    triage.Triage.origin = judged
    print(f"## fuzz with the arbiter (issue 35): {PROGRAMS} programs of 20 ops, seed {SEED} "
          f"({machine()})\n")
    print("| fuzz loop | " + " | ".join(f"round {k + 1}, programs/s" for k in range(ROUNDS))
          + " | signatures | allowed |")
    print("| --- |" + " --- |" * (ROUNDS + 2))
    for name, done in rows.items():
        print(f"| {name} | " + " | ".join(f"{r[0]:.2f} (load {r[3]:.1f})" for r in done)
              + f" | {len(done[-1][1].findings)} | {sum(done[-1][1].allowed.values())} |")
    mean = {name: sum(r[0] for r in done) / len(done) for name, done in rows.items()}
    print(f"\nwith / without: {mean['with the arbiter'] / mean['without']:.3f} "
          f"({100 * (1 - mean['with the arbiter'] / mean['without']):.1f}% slower)")


if __name__ == "__main__":
    main()
