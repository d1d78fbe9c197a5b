"""Pass bisection (hlogen.differential.bisection) on a module of about a thousand StableHLO
ops whose divergence one HLO pass explains (log(exp(x)), which XLA's algebraic
simplifier makes x, in a long element-wise chain): the compiles it takes against the
bound 2 * ceil(log2(P)) + 3 for the P passes that ran, and against the P compiles of a
one-by-one sweep; the time, with the time of one compile and run of the module.
"""
from __future__ import annotations

import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import jax
import jax.numpy as jnp
import numpy as np

import hlogen as hg
from hlogen import mlir
from hlogen.differential import bisect, run_on
from hlogen.runtime import pjrt
from _timing import machine

LINKS = 120  # about eight StableHLO ops each (constants and broadcasts with them)


def chain(x, y):
    for i in range(LINKS):
        x = jnp.tanh(x * 0.999 + y) - 0.001 * i
    return jnp.log(jnp.exp(y * 400.0)) + x  # exp overflows where y = 0.25: CPU is finite


def main():
    pjrt.client("cpu")  # hlogen's backend first (jax's lowering would start it too)
    args = [np.full(8, 0.5, np.float32), np.full(8, 0.25, np.float32)]
    comp = hg.load(jax.jit(chain).lower(*args).as_text())
    ops = len(mlir.walk(comp.module))
    start = time.perf_counter()
    run_on("cpu", comp, args)  # the first compile of the module in this process
    one = time.perf_counter() - start
    start = time.perf_counter()
    verdict = bisect(comp, args)
    seconds = time.perf_counter() - start
    p = verdict.pass_count
    limit = 2 * math.ceil(math.log2(p)) + 3
    print(f"## bisect: a {ops}-op module, one pass explaining its divergence ({machine()})\n")
    print("| passes that ran (P) | compiles | bound 2*ceil(log2 P)+3 | one by one | bisect | one compile and run |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| {p} | {verdict.compiles} | {limit} | {p} | {seconds:.1f} s | {one:.2f} s |")
    print(f"\nverdict: {verdict.stage} {verdict.passes}; {verdict.compiles} compiles "
          f"(bound {limit}, {'met' if verdict.compiles <= limit else 'NOT met'})")


if __name__ == "__main__":
    main()
