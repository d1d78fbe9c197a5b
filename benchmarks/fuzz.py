"""Fuzz throughput (hg.fuzz.run, `hlogen fuzz`): programs per second at 20 ops, through the
whole loop.

`PROGRAMS` random programs of 20 ops (the default bounds) run through the fuzzer with a
fixed seed: generated, checked by the preflight for both backends, given random inputs,
run on XLA CPU and on the interpreter in a child process, compared by XLA's rule; each
finding reduced (at most 30 s) and written. The reference, in the same process: the same
programs compiled and run (with the same inputs) on PJRT CPU and interpreted in this process, as
benchmarks/generate.py times them (what the loop costs without its isolation, its
comparison and its bookkeeping).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import hlogen as hg
from _timing import machine
from hlogen.differential import random_inputs
from hlogen.fuzz import LARGE_RANGE_SHARE, generate, large_range_of, program_seed_of

PROGRAMS = 60
SEED = 11


def main():
    with tempfile.TemporaryDirectory() as out:
        run = hg.fuzz.run("cpu", "interpret", out=out, seconds=3600, seed=SEED, programs=PROGRAMS,
                      reduce_seconds=30)
    reducing = run.reducing
    start = time.perf_counter()
    for k in range(0, PROGRAMS):
        seed = program_seed_of(SEED, k)
        comp = generate(seed)
        args = random_inputs(comp, seed=seed,
                             large_range=large_range_of(seed, LARGE_RANGE_SHARE))
        try:
            hg.compile(comp)(*args)
            hg.interpret(comp, *args)
        except hg.HlogenError:
            pass
    in_process = (time.perf_counter() - start) / PROGRAMS
    print(f"## fuzz: programs of 20 ops through the whole loop ({machine()})\n")
    print("| what | programs per second | per program |")
    print("| --- | --- | --- |")
    rows = [("hg.fuzz, the whole loop (findings reduced)", run.seconds / run.programs),
            ("hg.fuzz, without the reductions", (run.seconds - reducing) / run.programs),
            ("in this process: PJRT compile + run, and the interpreter", in_process)]
    for name, seconds in rows:
        print(f"| {name} | {1 / seconds:.2f} | {seconds * 1e3:.0f} ms |")
    print(f"\n{run.programs} programs, {len(run.findings)} signatures ({sum(f.seen for f in run.findings)} "
          f"programs with a finding, {reducing:.1f} s reducing them); skipped: "
          f"{run.skipped}")
    print(f"the loop without reductions / in this process: {(run.seconds - reducing) / run.programs / in_process:.2f}x")


if __name__ == "__main__":
    main()
