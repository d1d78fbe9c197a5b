"""`hlogen run` as a user runs it: a fresh process each time.

Modules: a 512x512 matmul, a 2000-op element-wise chain, and a tiny module. For each,
a cold run (empty executable cache) and a second run (the cache holds the executable),
as subprocesses; wall time of the whole command, and compile time as the child reports
it (`hlogen run -v`). Then where a cold run's time goes: Python and imports, jax and
the backend, compile.

    python benchmarks/cli.py [--rounds N]
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _timing import machine  # noqa: E402


def matmul_module() -> str:
    t = "tensor<512x512xf32>"
    return (f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : ({t}, {t}) -> {t}\n"
            f"  return %0 : {t}\n}}\n")


def chain_module(n: int = 2000) -> str:
    """n element-wise ops, each depending on the last and on the parameters (nothing
    for XLA to fold away)."""
    t = "tensor<64xf32>"
    ops = ["add", "multiply", "subtract", "maximum"]
    lines, last = [], "%x"
    for i in range(n):
        other = "%y" if i % 2 else "%x"
        lines.append(f"  %v{i} = stablehlo.{ops[i % 4]} {last}, {other} : {t}")
        last = f"%v{i}"
    return (f"func.func @main(%x: {t}, %y: {t}) -> {t} {{\n" + "\n".join(lines) +
            f"\n  return {last} : {t}\n}}\n")


TINY = ("func.func @main(%a: tensor<4xf32>) -> tensor<4xf32> {\n"
        "  %0 = stablehlo.add %a, %a : tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n")

MODULES = {  # name: (text, inputs)
    "matmul 512": (matmul_module(), ["512x512xf32=0.5", "512x512xf32=2"]),
    "chain 2000": (chain_module(), ["64xf32=1.5", "64xf32=0.25"]),
    "tiny": (TINY, ["4xf32=1,2,3,4"]),
}
HLOGEN = [sys.executable, "-m", "hlogen_cli.main"]


def run_once(path, inputs, cache_dir) -> tuple[float, float]:
    """(wall seconds, compile seconds) of one `hlogen run -v`."""
    args = [*HLOGEN, "run", str(path), "-v", "--backend", "cpu"] + [a for i in inputs for a in ("--input", i)]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True,
                          env=dict(os.environ, HLOGEN_CACHE_DIR=str(cache_dir)))
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"hlogen run failed: {done.stderr}")
    m = re.search(r"in ([\d.]+) ms", done.stderr)
    return wall, float(m.group(1)) / 1e3


def wall_of(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    print(f"# {machine()}, load {os.getloadavg()[0]:.2f}, {rounds} rounds, medians")
    print("| module | cold run: wall | cold: compile | cached run: wall | cached: compile "
          "| compile speed-up | end-to-end speed-up |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for name, (text, inputs) in MODULES.items():
            path = folder / f"{name.replace(' ', '_')}.mlir"
            path.write_text(text)
            cold, warm = [], []
            for r in range(rounds):  # interleaved: noise falls on both alike
                cache = folder / f"cache-{name}-{r}"
                cold.append(run_once(path, inputs, cache))
                warm.append(run_once(path, inputs, cache))
            cw, cc = statistics.median(c[0] for c in cold), statistics.median(c[1] for c in cold)
            ww, wc = statistics.median(w[0] for w in warm), statistics.median(w[1] for w in warm)
            print(f"| {name} | {cw:.2f} s | {cc * 1e3:.0f} ms | {ww:.2f} s | {wc * 1e3:.1f} ms "
                  f"| {cc / wc:.0f}x | {cw / ww:.1f}x |")
    print()
    print("where a cold run's time goes (each a fresh process, medians):")
    parts = {
        "python -c pass": "pass",
        "import hlogen_cli.main (hlogen --help)": "import hlogen_cli.main",
        "import hlogen (the parent's checks)": "import hlogen",
        "import hlogen + jax, start the CPU backend (the child)":
            "import hlogen, jax; jax.devices('cpu')",
    }
    for label, code in parts.items():
        print(f"- {label}: {statistics.median(wall_of(code) for _ in range(rounds)):.2f} s")


if __name__ == "__main__":
    main()
