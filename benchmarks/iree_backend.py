"""IREE as a backend (the extra hlogen[iree]): its compile cache, and `hlogen check
--backend iree` over a sample of StableHLO's testdata files, as markdown for RESULTS.md.

- cache: a 64-op module compiled for iree with a disk cache (hlogen.runtime.cache): the
  miss (iree-compile), then hits as a new process sees them (the module read again and
  the in-memory cache emptied: its fingerprint, the vmfb read from disk, the carriers
  worked out; no pipeline, no compile), and the
  in-memory hit; target: a hit within 20 ms;
- check (`--check`): `hlogen check --backend iree` over the 150 files of the shared notes'
  sample (random.Random(5).sample of testdata's sorted names), 2 workers; target: within
  5 minutes on 2 cores. `make test-iree` runs this too, and fails where a module fails
  that is not a known deviation (hlogen check's exit status).

    python benchmarks/iree_backend.py [--check] [--calls N]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

import hlogen as hg
from hlogen import backends, ops
from hlogen.runtime import iree
from hlogen.runtime.cache import ExecutableCache
from _timing import machine

TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo" / "testdata"
HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")


def sample(count: int = 150, seed: int = 5) -> list[pathlib.Path]:
    """The shared notes' sample: random.Random(seed).sample of testdata's sorted names."""
    names = sorted(p.name for p in TESTDATA.glob("*.mlir"))
    return [TESTDATA / n for n in random.Random(seed).sample(names, count)]


def cache(calls: int) -> None:
    b = hg.Builder("chain")
    x = b.parameter(hg.f32[256], "x")
    y = x
    for i in range(64):
        y = ops.tanh(y) if i % 2 else ops.mul(y, x)
    comp = b.build(y)
    declared = backends.get("iree")
    with tempfile.TemporaryDirectory() as folder:
        disk = ExecutableCache(folder)
        start = time.perf_counter()
        first = iree.compile(comp, declared, disk)
        miss = time.perf_counter() - start
        assert first.cache_outcome == "miss"
        hits, text = [], comp.as_text()
        for _ in range(calls):
            iree._memory.clear()  # as a new process finds it: the module read again (its
            again = hg.load(text)  # fingerprint not yet worked out), nothing in memory
            start = time.perf_counter()
            exe = iree.compile(again, declared, disk)
            hits.append(time.perf_counter() - start)
            assert exe.cache_outcome == "hit"
        memory = []
        for _ in range(calls):
            start = time.perf_counter()
            iree.compile(comp, declared, disk)
            memory.append(time.perf_counter() - start)
    print(f"{machine()}; {iree.version()}\n")
    print("| 64-op module (f32[256]) on iree | time |\n| --- | --- |")
    print(f"| compile, cache miss (iree-compile) | {miss * 1e3:.0f} ms |")
    print(f"| cache hit from disk (median of {calls}; target <= 20 ms) | "
          f"{statistics.median(hits) * 1e3:.2f} ms (max {max(hits) * 1e3:.2f}) |")
    print(f"| cache hit in memory (median of {calls}) | {statistics.median(memory) * 1e3:.3f} ms |")


def check(jobs: int = 2) -> int:
    with tempfile.TemporaryDirectory() as folder:
        for path in sample():
            os.symlink(path, os.path.join(folder, path.name))
        start = time.perf_counter()
        done = subprocess.run([str(HLOGEN), "check", folder, "--backend", "iree", "-j", str(jobs)],
                              capture_output=True, text=True)
        seconds = time.perf_counter() - start
    print(done.stdout.replace(folder + "/", ""))
    print(f"`hlogen check --backend iree` over 150 files, {jobs} workers: {seconds:.1f} s "
          f"(target: within 300 s); exit status {done.returncode}")
    return done.returncode


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="check over the 150-file sample")
    parser.add_argument("--calls", type=int, default=50)
    arguments = parser.parse_args()
    sys.exit(check() if arguments.check else cache(arguments.calls))
