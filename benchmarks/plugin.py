"""A PJRT plugin as a backend (OpenXLA's xla-cpu-pjrt): dispatch and conformance speed,
each against its reference in the same process, as markdown for RESULTS.md.

- dispatch: f32[8] + f32[8] from numpy to numpy through an hlogen executable on the
  plugin and through jax.jit on the same plugin device (target: within 1.10x), and the
  same pair on jaxlib's cpu for comparison;
- conformance: `hlogen.conformance.run` over a sample of StableHLO's testdata files on
  the plugin and on jaxlib's cpu, 2 workers, rounds alternating (target: the plugin's
  throughput within 10% of cpu's).

    python benchmarks/plugin.py [--every N] [--rounds R]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import jax
import numpy as np
from jax.sharding import SingleDeviceSharding

import hlogen as hg
from hlogen import backends, conformance, ops
from _timing import interleaved_medians, machine, print_table

PLUGIN = "xla_cpu_pjrt"
CALLS = 2000
TESTDATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo" / "testdata"


def dispatch() -> None:
    b = hg.Builder("tiny")
    comp = b.build(ops.add(b.parameter(hg.f32[8], "x"), b.parameter(hg.f32[8], "y")))
    x, y = np.arange(8, dtype=np.float32), np.ones(8, np.float32)
    candidates, pairs = {}, []
    for backend in (PLUGIN, "cpu"):
        exe = hg.compile(comp, backend=backend)
        on = SingleDeviceSharding(exe.device)  # jax.jit on the executable's own device
        jitted = jax.jit(lambda x, y: x + y, in_shardings=(on, on), out_shardings=on)
        out = jitted(x, y)
        assert out.devices() == {exe.device} and exe.device.client is \
            next(iter(out.devices())).client  # the same client: the plugin's, or jaxlib's
        np.testing.assert_array_equal(exe(x, y), np.asarray(out))
        mine, theirs = f"hlogen executable on {backend}", f"jax.jit on {backend}"
        candidates[mine] = lambda exe=exe: exe(x, y)
        candidates[theirs] = lambda jitted=jitted: np.asarray(jitted(x, y))
        pairs.append((backend, mine, theirs))
    medians = interleaved_medians(candidates, repeats=15, inner=CALLS)
    print_table("plugin dispatch: f32[8] + f32[8] from numpy to numpy", medians)
    print()
    for backend, mine, theirs in pairs:
        print(f"- {backend}: hlogen / jax.jit {medians[mine] / medians[theirs]:.2f}x"
              + (" (target <= 1.10x)" if backend == PLUGIN else ""))
    print()


def conformance_speed(every: int, rounds: int) -> None:
    sample = sorted(str(p) for p in TESTDATA.glob("*.mlir"))[::every]
    seconds: dict = {PLUGIN: [], "cpu": []}
    outcomes: dict = {}
    for _ in range(rounds):
        for backend in seconds:
            start = time.perf_counter()
            run = conformance.run(sample, [backend], jobs=2)
            seconds[backend].append(time.perf_counter() - start)
            outcomes[backend] = sorted((r["file"], r["status"], r.get("was")) for r in run.records)
    print(f"## plugin conformance throughput: every {every}th testdata file ({len(sample)} "
          f"files), 2 workers, {rounds} rounds alternating ({machine()}, load "
          f"{os.getloadavg()[0]:.2f})\n")
    print("| backend | median wall | modules per second | pass |")
    print("| --- | --- | --- | --- |")
    for backend, times in seconds.items():
        wall = statistics.median(times)
        passed = sum(1 for _, status, _ in outcomes[backend] if status == "pass")
        print(f"| {backend} | {wall:.1f} s | {len(outcomes[backend]) / wall:.1f} | {passed} |")
    ratio = statistics.median(seconds["cpu"]) / statistics.median(seconds[PLUGIN])
    print(f"\n{PLUGIN} throughput / cpu's: {ratio:.2f} (target >= 0.90)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=int, default=8, help="every Nth testdata file")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    identity = backends.get(PLUGIN).identity
    print(f"{PLUGIN} {identity['version']}: {identity['library']}, PJRT C API "
          f"{identity['pjrt_c_api']}, {identity['devices']} {identity['device_kind']} devices\n")
    dispatch()
    conformance_speed(args.every, args.rounds)


if __name__ == "__main__":
    main()
