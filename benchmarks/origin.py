"""What finding the origin of a difference costs (hlogen.differential.origin.find_origin)
against `compare` on the same module and inputs: a 1,000-op module whose difference is born
in its second op (XLA's integer power, 0**64 = 1) and passed on by the 1,000 ops after it.
Target: find_origin at most 2x compare.

find_origin runs each side once with every intermediate value as an output, then only the
ops it must run alone (here one: the power, given identical operands by the module).
Timed warm (executables compiled, as a second look at a finding is) with interleaved
medians, and cold (each in a fresh process with its backends started, compiles
included: a first look, as `hlogen compare` makes it).

`python benchmarks/origin.py --options`: whether an XLA option cuts the compile of the
probed module (every intermediate an output) without changing its values: the first call
(compile and run) of the probed 1,004-op module under each of `OPTIONS`, interleaved, and
each probed value compared bit for bit with the default compile's, on that module and on
`FUZZED` random programs of the fuzzer (20 ops, every other one with large-range inputs).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np

from hlogen import loading

N = 64        # elements of each value
CHAIN = 1000  # ops after the power and its conversion


def thousand_ops():
    """(the module, its inputs): power -> convert -> 1,000 ops of add, multiply, subtract
    and negate (which keep a difference as it is: none shrinks it away), the result."""
    lines = [f"func.func @main(%a: tensor<{N}xi32>, %b: tensor<{N}xi32>, "
             f"%x: tensor<{N}xf32>) -> tensor<{N}xf32> {{",
             f"  %half = stablehlo.constant dense<0.5> : tensor<{N}xf32>",
             f"  %two = stablehlo.constant dense<2.0> : tensor<{N}xf32>",
             f"  %p = stablehlo.power %a, %b : tensor<{N}xi32>",
             f"  %v0 = stablehlo.convert %p : (tensor<{N}xi32>) -> tensor<{N}xf32>"]
    steps = ["stablehlo.add %v{i}, %x", "stablehlo.multiply %v{i}, %two",
             "stablehlo.subtract %v{i}, %x", "stablehlo.multiply %v{i}, %half",
             "stablehlo.negate %v{i}"]
    for i in range(CHAIN):
        lines.append(f"  %v{i + 1} = " + steps[i % 5].format(i=i) + f" : tensor<{N}xf32>")
    lines += [f"  return %v{CHAIN} : tensor<{N}xf32>", "}"]
    rng = np.random.default_rng(0)
    a = rng.integers(0, 3, N).astype(np.int32)
    b = np.where(rng.random(N) < 0.5, 64, rng.integers(0, 5, N)).astype(np.int32)
    x = rng.uniform(-1, 1, N).astype(np.float32)
    return loading.load_bytes("\n".join(lines).encode(), "thousand.mlir"), [a, b, x]


def _cold(which: str) -> float:
    """Seconds of one call of `which` in a fresh process whose backends have started
    (compiles included)."""
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); import time; "
            "import numpy as np; import hlogen as hg; from hlogen import ops; "
            "from origin import thousand_ops; from hlogen.differential import compare; "
            "from hlogen.differential.origin import find_origin; "
            # jax's CPU client and the interpreter started, as a command's process has them
            "b = hg.Builder('start'); x = b.parameter(hg.f32[2], 'x'); small = b.build(ops.neg(x)); "
            "compare(small, [np.ones(2, np.float32)]); "
            "comp, inputs = thousand_ops(); t = time.perf_counter(); "
            + ("compare(comp, inputs)" if which == "compare" else
               "find_origin(comp, inputs, 'cpu', 'interpret')")
            + "; print(time.perf_counter() - t)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return float(done.stdout.split()[-1])


OPTIONS = {"default": None,
           "xla_backend_optimization_level=0": {"xla_backend_optimization_level": 0},
           "xla_backend_optimization_level=1": {"xla_backend_optimization_level": 1},
           "xla_llvm_disable_expensive_passes": {"xla_llvm_disable_expensive_passes": True},
           "both": {"xla_backend_optimization_level": 0,
                    "xla_llvm_disable_expensive_passes": True}}
FUZZED = 40


def probed_options(repeats: int = 3):
    """Per option: the median seconds of the probed module's first call, and how many
    of the probed runs (the 1,004-op module, then the fuzzed programs) gave values other
    than the default compile's."""
    from _timing import machine

    from hlogen.differential.comparison import Side
    from hlogen.differential.inputs import random_inputs
    from hlogen.differential.origin import _probed  # (find_origin's probed module)
    from hlogen.fuzz.generators import generate
    from hlogen.runtime import pjrt

    def first_call(side, module, inputs):
        pjrt._cache.clear()  # (compiled again: the executables are cached by options too)
        start = time.perf_counter()
        values = side.run(side.module(module), inputs)
        return time.perf_counter() - start, [np.asarray(v) for v in values]

    def same(a, b):
        return len(a) == len(b) and all(x.dtype == y.dtype and x.shape == y.shape and
                                        x.tobytes() == y.tobytes() for x, y in zip(a, b))

    sides = {name: Side.of("cpu", options) for name, options in OPTIONS.items()}
    comp, inputs = thousand_ops()
    module = _probed(comp, distinct=True)[0]
    seconds = {name: [] for name in OPTIONS}
    values = {}
    for _ in range(repeats):
        for name, side in sides.items():
            took, values[name] = first_call(side, module, inputs)
            seconds[name].append(took)
    other = {name: int(not same(values["default"], values[name])) for name in OPTIONS}
    fuzzed = {name: 0.0 for name in OPTIONS}
    where: dict = {name: [] for name in OPTIONS}
    for seed in range(FUZZED):
        program = generate(seed, ops=20)
        args = random_inputs(program, seed, large_range=bool(seed % 2))
        module = _probed(program, distinct=True)[0]
        got = {}
        for name, side in sides.items():
            took, got[name] = first_call(side, module, args)
            fuzzed[name] += took
        for name in OPTIONS:
            if not same(got["default"], got[name]):
                other[name] += 1
                where[name].append(seed)
    print(f"## XLA options for the probed module (issue 35; {machine()})\n")
    print(f"| option | 1,004-op probed module: first call, median of {repeats} | "
          f"{FUZZED} fuzzed programs' probed modules: first calls | runs whose values "
          f"differ from the default's (of {FUZZED + 1}) |")
    print("| --- | --- | --- | --- |")
    for name in OPTIONS:
        print(f"| {name} | {sorted(seconds[name])[repeats // 2]:.3f} s | {fuzzed[name]:.2f} s | "
              f"{other[name]}" + (f" (programs {', '.join(map(str, where[name]))})"
                                  if where[name] else "") + " |")


def main():
    from _timing import interleaved_medians, machine

    from hlogen.differential import compare
    from hlogen.differential.origin import find_origin
    comp, inputs = thousand_ops()
    ops = len(list(comp.main.regions[0].blocks[0].operations)) - 1
    found = find_origin(comp, inputs, "cpu", "interpret")
    assert found.op == "stablehlo.power" and len(found.amplified_by) > 900
    assert not compare(comp, inputs).ok
    warm = interleaved_medians({
        "compare": lambda: compare(comp, inputs),
        "find_origin": lambda: find_origin(comp, inputs, "cpu", "interpret")}, repeats=5)
    cold = {w: sorted(_cold(w) for _ in range(3))[1] for w in ("compare", "find_origin")}
    print(f"## The origin of a difference in a {ops}-op module (issue 35; {machine()})\n")
    print("| | compare | find_origin | ratio |")
    print("| --- | --- | --- | --- |")
    for name, t in (("warm (compiled)", warm), ("cold (fresh process)", cold)):
        print(f"| {name} | {t['compare'] * 1e3:.0f} ms | {t['find_origin'] * 1e3:.0f} ms | "
              f"{t['find_origin'] / t['compare']:.2f}x |")
    print(f"\nfind_origin: born at {found.op} (op {found.position}), "
          f"{len(found.amplified_by)} ops amplify it; measured at {time.strftime('%H:%M')}")


if __name__ == "__main__":
    probed_options() if "--options" in sys.argv[1:] else main()
