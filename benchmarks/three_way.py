"""IREE as the fast reference (issue 36 item 5): `hlogen compare` of a module of about
1,000 ops in which XLA's algebraic simplifier rewrites one expression (log(exp(x)) -> x,
or (x + 12582912) - 12582912 -> x), against IREE and against the reference interpreter;
and the three-way verdict that names XLA the odd one out, with IREE as the reference and
XLA without the simplifier (`--also cpu --also-flag xla_disable_hlo_passes=algsimp`) as
the third side. Whole commands timed from start to exit (a child process, compiles,
runs, the rule), one run each (the interpreter's takes minutes).

Run: python benchmarks/three_way.py [BATCH [REWRITE...]] (needs the extra hlogen[iree]);
BATCH (8 by default) sets the work of each of the 124 dots (BATCH x 128 x 128): the
interpreter's time grows with it, IREE's compile does not.
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import jax
import jax.numpy as jnp
import numpy as np

import hlogen as hg
from hlogen.differential import op_count
from _timing import machine

LAYERS = 124  # 8 ops each (dot, scale, bias and their broadcasts, tanh): about 1,000 ops
WIDTH = 128
BATCH = int(sys.argv[1]) if len(sys.argv) > 1 else 8  # rows of x: the work of each dot
ONLY = sys.argv[2:]  # the rewrites to run (their names), all by default
REWRITES = {
    "log(exp(x))": lambda z: jnp.log(jnp.exp(z * 100.0)) / 100.0,
    "(x + 12582912) - 12582912": lambda z: (z + 12582912.0) - 12582912.0,
}


SIDES = (["--test", "cpu", "--reference", "iree"],
         ["--test", "cpu", "--reference", "iree", "--also", "cpu",
          "--also-flag", "xla_disable_hlo_passes=algsimp"],
         ["--test", "cpu", "--reference", "interpret"])


def network(rewrite):
    """A deep tanh network whose last layer's pre-activation goes through `rewrite`."""
    def f(x, w, b):
        h = x
        for i in range(LAYERS - 1):
            h = jnp.tanh(h @ w * (1.0 + i / LAYERS) + b)
        return rewrite(h @ w + b).sum(axis=1)
    return f


def hlogen(*args, cache) -> tuple[float, float, subprocess.CompletedProcess]:
    """`hlogen ARGS` with an empty cache (every compile counted): wall seconds, CPU seconds
    of it and its children (the machine is shared: CPU time is the steadier figure), and
    what it did."""
    command = [os.path.join(os.path.dirname(sys.executable), "hlogen"), *args]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True,
                          env={**os.environ, "HLOGEN_CACHE_DIR": cache})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done


def main():
    print(f"## IREE as the fast reference: compare of a 1,000-op module (issue 36; {machine()}, "
          f"IREE {hg.backends.IREE_VERSION})\n")
    print("| module | sides | verdict | exit | wall time | CPU time |")
    print("| --- | --- | --- | --- | --- | --- |")
    spec = (np.zeros((BATCH, WIDTH), np.float32), np.zeros((WIDTH, WIDTH), np.float32),
            np.zeros(WIDTH, np.float32))
    with tempfile.TemporaryDirectory() as folder:
        for name, rewrite in REWRITES.items():
            if ONLY and name not in ONLY:
                continue
            path = os.path.join(folder, "net.mlir")
            with open(path, "w") as f:
                f.write(jax.jit(network(rewrite)).lower(*spec).as_text())
            ops = op_count(hg.load(path))
            inputs = ["--random-inputs", "--seed", "1"]
            for sides in SIDES:
                wall, cpu, done = hlogen("compare", path, *sides, *inputs,
                                       cache=os.path.join(folder, f"cache{time.time()}"))
                verdict = next((line.split(": ", 1)[1] for line in done.stdout.splitlines()
                                if line.startswith("result 0: ")), done.stdout.splitlines()[0]
                               .split(": ", 1)[-1] if done.stdout else done.stderr.strip())
                print(f"| {name} ({ops} ops, x {BATCH}x{WIDTH}) | {' '.join(sides)} | {verdict} | {done.returncode} | "
                      f"{wall:.1f} s | {cpu:.1f} s |", flush=True)


if __name__ == "__main__":
    main()
