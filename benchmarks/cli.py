"""`hlogen run` as a user runs it: a fresh process each time.

Modules: a 512x512 matmul, a 2000-op element-wise chain, and a tiny module. For each,
a cold run (empty executable cache) and a second run (the cache holds the executable),
as subprocesses; wall time of the whole command, and compile time as the child reports
it (`hlogen run -v`). Then where a cached run of the chain spends its time, step by
step in fresh processes: Python, the parent's imports, the child's reading of the
module, jax and the backend, the cache hit.

Python's bytecode is cached as an installed package has it (in a temporary
PYTHONPYCACHEPREFIX, warmed by one run first), even where PYTHONDONTWRITEBYTECODE is
set; --no-bytecode-cache measures with the environment as it is.

    python benchmarks/cli.py [--rounds N] [--no-bytecode-cache]
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
from _timing import machine


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


ENV = dict(os.environ)


def run_once(path, inputs, cache_dir) -> tuple[float, float]:
    """(wall seconds, compile seconds) of one `hlogen run -v`."""
    args = [*HLOGEN, "run", str(path), "-v", "--backend", "cpu"] + [a for i in inputs for a in ("--input", i)]
    start = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True,
                          env=dict(ENV, HLOGEN_CACHE_DIR=str(cache_dir)))
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"hlogen run failed: {done.stderr}")
    m = re.search(r"in ([\d.]+) ms", done.stderr)
    return wall, float(m.group(1)) / 1e3


def wall_of(code: str, env: dict) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=env)
    return time.perf_counter() - start


def steps(chain_path, cache_dir) -> dict:
    """Fresh-process code for each step of a cached run of the chain, cumulative."""
    read = (f"import hlogen_cli.run, hlogen as hg, pathlib; "
            f"comp = hg.load(pathlib.Path({str(chain_path)!r}))")
    backend = read + "; from hlogen.runtime import pjrt; pjrt.client('cpu')"
    hit = (backend + f"; from hlogen.runtime.cache import ExecutableCache; "
           f"exe = pjrt.compile(comp, 'cpu', ExecutableCache({str(cache_dir)!r})); "
           f"assert exe.cache_outcome == 'hit'")
    steps = {
        "python -c pass": "pass",
        "+ import hlogen_cli.main (the parent: all `hlogen --help` needs too)": "import hlogen_cli.main",
        "import hlogen + read the 2000-op module (the child, before any backend)": read,
        "+ import jax, start the CPU backend": backend,
        "+ the cache hit: key, read, deserialize": hit,
    }
    # each ends as the child does: without tearing jax down
    return {label: code + "; import os; os._exit(0)" for label, code in steps.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-bytecode-cache", action="store_true")
    options = parser.parse_args()
    rounds = options.rounds
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        if not options.no_bytecode_cache:
            ENV.pop("PYTHONDONTWRITEBYTECODE", None)
            ENV["PYTHONPYCACHEPREFIX"] = str(folder / "pycache")
        print(f"# {machine()}, load {os.getloadavg()[0]:.2f}, {rounds} rounds, medians, "
              f"bytecode {'as the environment has it' if options.no_bytecode_cache else 'cached'}")
        print("| module | cold run: wall | cold: compile | cached run: wall | cached: compile "
              "| compile speed-up | end-to-end speed-up |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        paths = {}
        for name, (text, inputs) in MODULES.items():
            paths[name] = path = folder / f"{name.replace(' ', '_')}.mlir"
            path.write_text(text)
            run_once(path, inputs, folder / "cache-warm-up")  # bytecode, page cache
            cold, warm = [], []
            for r in range(rounds):  # interleaved: noise falls on both alike
                cache = folder / f"cache-{name}-{r}"
                cold.append(run_once(path, inputs, cache))
                warm.append(run_once(path, inputs, cache))
            cw, cc = statistics.median(c[0] for c in cold), statistics.median(c[1] for c in cold)
            ww, wc = statistics.median(w[0] for w in warm), statistics.median(w[1] for w in warm)
            print(f"| {name} | {cw:.2f} s | {cc * 1e3:.0f} ms | {ww:.2f} s | {wc * 1e3:.1f} ms "
                  f"| {cc / wc:.0f}x | {cw / ww:.1f}x |")
        print(f"\nload after: {os.getloadavg()[0]:.2f}")
        print("\nwhere a cached run of the chain spends its time (fresh processes, medians):")
        env = dict(ENV, HLOGEN_CACHE_DIR=str(folder / "cache-warm-up"))
        for label, code in steps(paths["chain 2000"], folder / "cache-warm-up").items():
            print(f"- {label}: {statistics.median(wall_of(code, env) for _ in range(rounds)):.3f} s")


if __name__ == "__main__":
    main()
