"""Conformance speed and pass rates: StableHLO's testdata folder on PJRT CPU and on the
reference interpreter, with 2 workers (the issue's setting), as a markdown table.

    python benchmarks/conformance.py [PATH] [--backend cpu|interpret|both] [-j 2]

The load average of the machine is printed with the results: the machine is shared.
"""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import platform
import resource
import statistics
import sys
import time

from hlogen import conformance
from hlogen.conformance.check import FAILING

DEFAULT = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo" / "testdata"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("path", nargs="?", default=str(DEFAULT))
    parser.add_argument("--backend", choices=["cpu", "interpret", "both"], default="both")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8, help="PJRT modules per executable")
    args = parser.parse_args()
    backends = ["cpu", "interpret"] if args.backend == "both" else [args.backend]
    print(f"{args.path}, {args.jobs} workers, batches of {args.batch}, Python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}")
    print()
    print("| backend | files (module runs) | pass | known | other | pass rate (judged) | "
          "skipped or known | wall | median per module | workers' CPU time | load before / after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for backend in backends:
        before = os.getloadavg()[0]
        cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
        run = conformance.run([args.path], [backend], jobs=args.jobs, batch=args.batch)
        after = os.getloadavg()[0]
        cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
        worker_cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
        records = [r for r in run.records if r["backend"] == backend]
        counts = collections.Counter(r["status"] for r in records)
        judged = counts["pass"] + counts["known"] + sum(counts[s] for s in FAILING)
        other = ", ".join(f"{n} {s}" for s, n in counts.items() if s not in ("pass", "known")) or "0"
        median = statistics.median(r["seconds"] for r in records) * 1e3
        rate = 100 * counts["pass"] / judged if judged else 0
        aside = 100 * (counts["skipped"] + counts["known"]) / len(records)  # the issue's <= 1% target
        files = len({r["file"] for r in run.records})
        print(f"| {backend} | {files} ({len(run.records)}) | {counts['pass']} | {counts['known']} | "
              f"{other} | {rate:.2f}% of {judged} | {aside:.2f}% | {run.seconds:.1f} s | "
              f"{median:.1f} ms | {worker_cpu:.1f} s | "
              f"{before:.2f} / {after:.2f} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
