"""Timing helpers shared by the benchmarks: interleaved repetitions, medians."""
from __future__ import annotations

import platform
import statistics
import time


def interleaved_medians(candidates: dict, repeats: int, inner: int = 1) -> dict:
    """Median seconds per call of each candidate; rounds alternate between candidates
    so that the machine's background noise falls on all of them alike."""
    samples = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(s) for name, s in samples.items()}


def machine() -> str:
    import jax
    import numpy
    return (f"Python {platform.python_version()}, jax/jaxlib {jax.__version__}, numpy "
            f"{numpy.__version__}, {platform.machine()}, {time.strftime('%Y-%m-%d')}")


def duration(seconds: float) -> str:
    return f"{seconds * 1e6:.2f} us" if seconds < 1e-3 else f"{seconds * 1e3:.3f} ms"


def print_table(title: str, medians: dict, label: str = "caller", per_op: int | None = None):
    """A section of RESULTS.md: one row per candidate with its median (and its time per op
    when `per_op` says how many ops one call builds)."""
    print(f"## {title} ({machine()})\n")
    print(f"| {label} | median |" + (" per op |" if per_op else ""))
    print("| --- | --- |" + (" --- |" if per_op else ""))
    for name, seconds in medians.items():
        print(f"| {name} | {duration(seconds)} |"
              + (f" {seconds / per_op * 1e6:.2f} us |" if per_op else ""))
