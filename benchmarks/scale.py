"""Scale: large modules made by jax, at about 1k, 10k and 100k lines, in one process.

1. hlogen's own work on a loaded module, against MLIR's own parse of the same text:
   the preflight (hlogen.preflight: structure, types, replicas, the backend's ops), the
   signature (parameter and result shapes and names) and the rewrites the cpu backend's
   declaration lists (hlogen.rewrites: XLA's semantics): what
   hlogen.runtime.execution.prepare runs besides MLIR's own legalize pipeline.
   Target: at most 1.5x the parse at 100k lines, growing linearly (the same time per
   line at every size). For reference, the table also gives all of
   `hg.load` (parse included) and all of `prepare` (MLIR's pipeline and a clone
   included) against the parse.
2. Running an HLO dump (the text jax's `compiler_ir("hlo")` prints, as XLA dumps it
   before optimizations): `hg.load` + `hg.compile` + one call, against jaxlib's own path
   (HLO parser, HLO-to-StableHLO converter, PJRT compile, execute). Target: at most 1.10x.
   On a shared machine XLA's compile time (most of both) moves by tens of percent from
   one run to the next: the CPU time of the process is given too, which other processes
   disturb less.

The modules: a chain of sin/multiply/add/maximum/subtract/where on f32[8] (jax's text,
as `.lower(...).as_text()` prints it, where `where` is a private function called each
time).
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import jax
import jax.numpy as jnp
import numpy as np
from jaxlib.mlir import ir

import hlogen as hg
from hlogen import backends, mlir, preflight, rewrites
from hlogen.computation import Computation
from hlogen.runtime import _jaxlib, execution, pjrt
from _timing import machine

# ops of the chain -> about 1k, 10k and 100k lines (StableHLO text: ~3 lines per op;
# HLO text: ~2.5)
STABLEHLO_OPS = {"1k": 333, "10k": 3333, "100k": 33333}
HLO_OPS = {"1k": 400, "10k": 4000, "100k": 40000}
REPEATS = {"1k": 15, "10k": 7, "100k": 3}
RUN_REPEATS = {"1k": 9, "10k": 5, "100k": 3}
X = np.linspace(-1, 1, 8, dtype=np.float32)


def chain(n: int):
    def f(x, y):
        for i in range(n):
            k = i % 4
            if k == 0:
                x = jnp.sin(x) * y
            elif k == 1:
                x = x + jnp.float32(i)
            elif k == 2:
                x = jnp.maximum(x, y) - y
            else:
                x = jnp.where(x > 0, x, -x)
        return x
    return jax.jit(f).lower(X, X)


def own_work(module: ir.Module) -> None:
    """What hlogen itself does to a parsed module between loading and compiling."""
    preflight.check_module(module, "scale")
    comp = Computation(module, "scale")
    comp.signature()  # parameter and result shapes, names
    preflight.check_replicas(module, 1, "scale")
    rewrites.rewrite_module(module, backends.CPU.rewrites, 1)
    _fresh_inventories()  # prepare checks the backend's ops on its rewritten clone
    preflight.check_backend(module, backends.CPU, "scale")


def _fresh_inventories():
    preflight._inventories.clear()  # each repetition walks as a first load does


def loaded_work(text: bytes, repeats: int) -> dict:
    """Medians of: MLIR's parse, hlogen's own work, hg.load, prepare (rounds interleaved),
    in CPU time: all four run on one thread, and other processes of a shared machine
    move wall-clock time by tens of percent."""
    ctx = mlir.context()
    samples = {"parse": [], "own": [], "load": [], "prepare": []}
    clock = time.process_time
    for _ in range(repeats):
        start = clock()
        module = ir.Module.parse(text, context=ctx)
        samples["parse"].append(clock() - start)
        _fresh_inventories()
        start = clock()
        own_work(module)
        samples["own"].append(clock() - start)
        _fresh_inventories()
        start = clock()
        comp = hg.load(text)
        samples["load"].append(clock() - start)
        start = clock()
        execution.prepare(comp, backends.CPU)
        samples["prepare"].append(clock() - start)
    return {k: statistics.median(v) for k, v in samples.items()}


def run_paths(hlo_text: str, repeats: int) -> dict:
    """Medians of running the HLO text once, by jaxlib's own path and by hlogen's."""
    client = pjrt.client("cpu")
    device = client.local_devices()[0]
    expected = None

    def jaxlib_path():
        proto = _jaxlib.hlo_text_to_proto(hlo_text)
        exe = _jaxlib.compile(client, _jaxlib.hlo_to_stablehlo(proto), [device])
        args = [jax.device_put(X, device), jax.device_put(X, device)]
        return np.asarray(_jaxlib.execute(exe, args, 1)[0]), exe

    def hlogen_path():
        exe = hg.compile(hg.load(hlo_text))
        return exe(X, X), exe

    samples = {"jaxlib": [], "hlogen": [], "jaxlib_cpu": [], "hlogen_cpu": []}
    for _ in range(repeats):
        for name, path in (("jaxlib", jaxlib_path), ("hlogen", hlogen_path)):
            pjrt._cache.clear()  # hlogen compiles every time, as jaxlib's path does
            _fresh_inventories()
            start, start_cpu = time.perf_counter(), time.process_time()
            out, keep = path()
            samples[name].append(time.perf_counter() - start)
            samples[f"{name}_cpu"].append(time.process_time() - start_cpu)
            del keep  # (freeing the executable and modules is left out of both)
            if expected is None:
                expected = out
            np.testing.assert_allclose(out, expected, rtol=1e-5)
    return {k: statistics.median(v) for k, v in samples.items()}


def _lines(text) -> int:
    return text.count(b"\n" if isinstance(text, bytes) else "\n")


def main(sizes=("1k", "10k", "100k")):
    print(f"## scale: hlogen's own work on a loaded jax module, CPU time ({machine()})\n")
    print("| lines | MLIR parse | hlogen's own work | own / parse | own per line | "
          "hg.load / parse | prepare / parse |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for size in sizes:
        text = chain(STABLEHLO_OPS[size]).as_text().encode()
        m = loaded_work(text, REPEATS[size])
        lines = _lines(text)
        print(f"| {lines} | {m['parse'] * 1e3:.1f} ms | {m['own'] * 1e3:.1f} ms | "
              f"{m['own'] / m['parse']:.2f}x (target <= 1.5x) | "
              f"{m['own'] / lines * 1e6:.2f} us | {m['load'] / m['parse']:.2f}x | "
              f"{m['prepare'] / m['parse']:.2f}x |", flush=True)
    print(f"\n## scale: running an HLO dump, hlogen vs jaxlib's own path ({machine()})\n")
    print("| HLO lines | jaxlib (parse, convert, compile, execute) | hlogen (load, compile, "
          "call) | hlogen / jaxlib | CPU time: jaxlib, hlogen, ratio |")
    print("| --- | --- | --- | --- | --- |")
    for size in sizes:
        hlo_text = chain(HLO_OPS[size]).compiler_ir("hlo").as_hlo_text()
        m = run_paths(hlo_text, RUN_REPEATS[size])
        print(f"| {_lines(hlo_text)} | {m['jaxlib']:.3f} s | {m['hlogen']:.3f} s | "
              f"{m['hlogen'] / m['jaxlib']:.3f}x (target <= 1.10x) | {m['jaxlib_cpu']:.3f} s, "
              f"{m['hlogen_cpu']:.3f} s, {m['hlogen_cpu'] / m['jaxlib_cpu']:.3f}x |", flush=True)


if __name__ == "__main__":
    main(tuple(sys.argv[1:]) or ("1k", "10k", "100k"))
