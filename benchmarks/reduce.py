"""Reducing a divergence (hlogen.differential.reduction), in one process.

A jax program of about 1,000 ops as jax lowers it (tests.helpers.residual_stack: 66
residual blocks, each a call of a jitted function, with an RMS norm after each, and
log(exp(x)) at the middle layer), reduced while XLA CPU and the reference interpreter
disagree on inputs of 100 (tests.helpers.results_differ). Target: at most 2 minutes on
this machine's 2 cores. The reference, in the same process: one judgment of the
original (PJRT compile and run, and the interpreter), which every candidate pays for on
its own, smaller module.

Then the command line's path: `hlogen reduce` (a process of its own, as a user runs it)
of the same program carrying the round-to-integer trick instead, on random inputs: the
interest of `hlogen compare`, every candidate run in a child process that may die.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from _timing import machine
from hlogen.differential import op_count, shrink
from tests.helpers import residual_stack, results_differ

LAYERS = 66


def main():
    comp = residual_stack(LAYERS)
    start = time.perf_counter()
    assert results_differ(comp)
    judged = time.perf_counter() - start
    start = time.perf_counter()
    reduced = shrink(comp, results_differ)
    seconds = time.perf_counter() - start
    assert reduced.op_count <= 4 and not reduced.timed_out
    print(f"## reduce: a divergence in a {op_count(comp)}-op jax program ({machine()})\n")
    print("| what | time | |")
    print("| --- | --- | --- |")
    print(f"| one judgment of the original (compile, run, interpret) | {judged:.2f} s | |")
    print(f"| reduce, to {reduced.op_count} ops | {seconds:.1f} s | {reduced.tried} candidates "
          f"judged, {reduced.accepted} accepted |")
    print(f"\nreduce / one judgment of the original: {seconds / judged:.1f}x; "
          f"{seconds:.1f} s (target <= 120 s)")
    print(f"\n{_command_line()}")


def _command_line() -> str:
    """`hlogen reduce` of the program with the round-to-integer trick, timed whole."""
    hlogen = os.path.join(os.path.dirname(sys.executable), "hlogen")
    with tempfile.TemporaryDirectory() as folder:
        stack = os.path.join(folder, "stack.mlir")
        with open(stack, "w") as f:
            f.write(residual_stack(LAYERS, rewrite="round to integer").as_text())
        start = time.perf_counter()
        done = subprocess.run([hlogen, "reduce", stack, "-o", os.path.join(folder, "small.mlir"),
                               "--seed", "0"], capture_output=True, text=True, check=True)
        seconds = time.perf_counter() - start
    said = re.search(r"(\d+) ops -> (\d+) in ([\d.]+) s, (\d+) candidates \((\d+) accepted",
                     done.stderr)
    ops, reduced, searched, tried, accepted = said.groups()
    return (f"hlogen reduce (command line, random inputs, the round-to-integer trick): "
            f"{ops} ops -> {reduced} in {seconds:.1f} s whole ({searched} s searching, {tried} "
            f"candidates, {accepted} accepted; target <= 120 s)")


if __name__ == "__main__":
    main()
