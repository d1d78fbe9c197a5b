"""What `compare` costs over the two runs it makes (hlogen.differential.comparison): the
same computation and inputs run on the test and the reference side by `run_on` alone,
and through `compare` (the runs, XLA's rule on every result, the report), executables
compiled beforehand. Target: compare at most 10% over the two runs.

Two pairs: CPU against the StableHLO interpreter (what differential testing runs), and
CPU against CPU with other XLA options on a bigger array (both runs fast, results that
differ in their last bits: the rule's own cost shows most).

On the command line: `hlogen compare IN` against `hlogen run IN --check-interpret
--no-cache`, which does the same work (a child process, a compile for CPU, both runs,
XLA's rule on the results), whole commands timed from start to exit.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

import jax
import jax.numpy as jnp
import numpy as np

import hlogen as hg
from hlogen.differential import Side, compare, run_on
from _timing import interleaved_medians, machine


def module(shape) -> hg.Computation:
    f = lambda x: jnp.tanh(x) * 2 + jnp.log(jnp.exp(x)) / 3
    return hg.load(jax.jit(f).lower(np.zeros(shape, np.float32)).as_text())


def case(title, comp, test, reference, repeats):
    inputs = hg.random_inputs(comp, seed=0)
    sides = Side.of(*test), Side.of(*reference)

    def runs():
        for side in sides:
            run_on(side.backend, comp, inputs, side.xla_options)

    def compared():
        return compare(comp, inputs, test=sides[0], reference=sides[1])

    compared()  # compiles both
    medians = interleaved_medians({"the two runs (run_on)": runs, "compare": compared},
                                  repeats=repeats)
    ratio = medians["compare"] / medians["the two runs (run_on)"]
    print(f"| {title} | {medians['the two runs (run_on)'] * 1e3:.2f} ms | "
          f"{medians['compare'] * 1e3:.2f} ms | {ratio:.3f}x |")
    return ratio


def main():
    print(f"## compare over the two runs it makes ({machine()})\n")
    print("| pair | two runs | compare | ratio |")
    print("| --- | --- | --- | --- |")
    ratios = [
        case("cpu vs interpret, f32[128,128]", module((128, 128)), ("cpu",), ("interpret",), 7),
        case("cpu vs cpu without algsimp, f32[1024,1024]", module((1024, 1024)), ("cpu",),
             ("cpu", {"xla_disable_hlo_passes": "algsimp"}), 15),
    ]
    print(f"\ncompare / two runs: {', '.join(f'{r:.3f}x' for r in ratios)} (target <= 1.10x)")
    command_line()


def command_line(repeats: int = 5):
    hlogen = pathlib.Path(sys.executable).with_name("hlogen")
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "m.mlir"
        path.write_text(module((128, 128)).as_text())
        given = ["--input", "128x128xf32=0.5"]

        def timed(*args):
            return lambda: subprocess.run([str(hlogen), *args], check=False,
                                          capture_output=True)

        medians = interleaved_medians(
            {"hlogen run --check-interpret --no-cache": timed("run", str(path), *given,
                                                               "--check-interpret", "--no-cache"),
             "hlogen compare": timed("compare", str(path), *given)}, repeats=repeats)
    print("\n| command, f32[128,128], cpu vs interpret | median |\n| --- | --- |")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds:.3f} s |")
    ratio = medians["hlogen compare"] / medians["hlogen run --check-interpret --no-cache"]
    print(f"\nhlogen compare / hlogen run --check-interpret: {ratio:.3f}x")


if __name__ == "__main__":
    main()
