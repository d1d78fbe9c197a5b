"""Random inputs (hlogen.differential.random_inputs) for big parameters, against numpy's
own generator filling the same array (the floor: run_hlo_module's values cost at least
one draw per element). Target: at least 200 MB/s of inputs for a big float parameter.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import numpy as np

import hlogen as hg
from hlogen import ops
from _timing import interleaved_medians, machine

SHAPE = (4096, 4096)


def one_parameter(shape) -> hg.Computation:
    b = hg.Builder("big")
    return b.build(ops.neg(b.parameter(shape, "x")))


def main():
    f32 = one_parameter(hg.f32[SHAPE])
    n = f32.parameter_shapes[0].size
    rng = np.random.default_rng(0)
    candidates = {
        "numpy rng.random (f32, the floor)": (lambda: rng.random(n, dtype=np.float32), 4 * n),
        "random_inputs f32": (lambda: hg.random_inputs(f32, seed=1), 4 * n),
        "random_inputs f32, large_range": (lambda: hg.random_inputs(f32, seed=1, large_range=True),
                                           4 * n),
    }
    for name in ("bf16", "s32"):
        comp = one_parameter(hg.ELEMENT_TYPES[name][SHAPE])
        candidates[f"random_inputs {name}"] = (lambda c=comp: hg.random_inputs(c, seed=1),
                                               comp.parameter_shapes[0].dtype.itemsize * n)
    medians = interleaved_medians({k: fn for k, (fn, _) in candidates.items()}, repeats=5)
    print(f"## random inputs for a {SHAPE[0]}x{SHAPE[1]} parameter ({machine()})\n")
    print("| made by | median | MB/s |")
    print("| --- | --- | --- |")
    for name, seconds in medians.items():
        print(f"| {name} | {seconds * 1e3:.1f} ms | {candidates[name][1] / seconds / 1e6:.0f} |")
    rate = candidates["random_inputs f32"][1] / medians["random_inputs f32"] / 1e6
    floor = medians["numpy rng.random (f32, the floor)"] / medians["random_inputs f32"]
    print(f"\nrandom_inputs f32: {rate:.0f} MB/s (target >= 200 MB/s), {floor:.2f}x numpy's "
          f"generator alone")


if __name__ == "__main__":
    main()
