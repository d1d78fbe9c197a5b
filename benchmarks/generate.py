"""Random programs for fuzzing (hlogen.fuzz.generators), in one process.

Programs generated per second at 20 ops (the default bounds), against what a fuzzer does
with each one in the same process: compile it with PJRT CPU, run it, and run it on the
reference interpreter. Target: generating is a small part of the fuzz loop (at most 10%
of it), so that programs per second are those of the backends. Mutations of a generated
program (hlogen.differential.mutate) are timed too.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import hlogen as hg
from _timing import machine
from hlogen.fuzz import generate, mutate
from tests.test_generate import _arguments  # (test scaffolding: inputs)

PROGRAMS = 200   # generated, for the rate of generation
RUN = 40         # of them compiled and run on both backends


def main():
    generate(0)  # warm: the MLIR context, the op library
    start = time.perf_counter()
    programs = [generate(seed) for seed in range(PROGRAMS)]
    generating = (time.perf_counter() - start) / PROGRAMS

    start = time.perf_counter()
    mutants = [mutate(programs[seed], seed) for seed in range(PROGRAMS)]
    mutating = (time.perf_counter() - start) / len(mutants)

    start = time.perf_counter()
    for seed, comp in enumerate(programs[:RUN]):
        args = _arguments(comp, seed)
        hg.compile(comp)(*args)
        hg.interpret(comp, *args)
    running = (time.perf_counter() - start) / RUN

    print(f"## generate: random programs of 20 ops ({machine()})\n")
    print("| step | per program | programs per second |")
    print("| --- | --- | --- |")
    for name, seconds in (("generate (hg.Builder, hlogen.ops)", generating),
                          ("mutate (a copy with one change)", mutating),
                          ("PJRT compile + run, and the interpreter", running),
                          ("the fuzz loop: generate, then both backends", generating + running)):
        print(f"| {name} | {seconds * 1e3:.1f} ms | {1 / seconds:.1f} |")
    share = generating / (generating + running)
    print(f"\ngenerating / the fuzz loop: {share:.1%} (target <= 10%)")


if __name__ == "__main__":
    main()
