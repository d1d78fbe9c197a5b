"""The arbiter's cost (hlogen.differential.arbiter.arbitrate) on the ops of fuzz programs.

    .venv/bin/python benchmarks/arbiter.py [PROGRAMS]

The fuzzer's own programs (hlogen.fuzz.generate, 20 ops, seeds as `hlogen fuzz --seed 11`
draws them) with its random inputs: every top-level op's values on XLA CPU and on the
interpreter (hlogen.differential.localize.probed); for each op whose values differ, the op
alone (edits.op_alone, its operands parameters) run on both sides with the reference's
operands, as the origin finder gives it, and the arbiter timed on it: per op, and per
program with a difference (the sum over its differing ops, an upper bound of what one
finding's origin costs). Beside it, a few ops of the sizes findings have, each timed alone
with its default cap (LIMIT = 16 differing elements) and with `limit=8`.
"""
from __future__ import annotations

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import numpy as np
from jaxlib.mlir import ir

import hlogen as hg
from _timing import machine
from hlogen import mlir, ops
from hlogen.computation import Computation
from hlogen.differential import random_inputs
from hlogen.differential.arbiter import arbitrate
from hlogen.differential.edits import op_alone
from hlogen.differential.localize import probed
from hlogen.fuzz import LARGE_RANGE_SHARE, generate, large_range_of, program_seed_of

SEED = 11


def values_of(results: list, probes: list) -> dict:
    return {op.results[index]: np.asarray(results[k]) for k, (op, index, _) in enumerate(probes)}


def operand_values(op, block, arguments, reference: dict) -> list | None:
    found = []
    for v in op.operands:
        if isinstance(v.owner, ir.Block):
            if v.owner != block:
                return None
            found.append(np.asarray(arguments[ir.BlockArgument(v).arg_number]))
        elif v in reference:
            found.append(reference[v])
        else:
            constant = mlir.constant_of(v)
            if constant is None:
                return None
            found.append(np.asarray(constant))
    return found


def differing_ops(programs: int) -> tuple[list, float]:
    """(program, the op alone, operands, test, reference) of each differing top-level op,
    and the seconds per program of running it as benchmarks/fuzz.py's in-process figure
    does (PJRT compile + run, and the interpreter), under this run's load."""
    cases, running = [], 0.0
    for k in range(programs):
        seed = program_seed_of(SEED, k)
        comp = generate(seed)
        args = random_inputs(comp, seed=seed, large_range=large_range_of(seed, LARGE_RANGE_SHARE))
        start = time.perf_counter()
        try:
            with np.errstate(all="ignore"):
                hg.compile(comp)(*args)
                hg.interpret(comp, *args)
        except hg.HlogenError:
            pass
        running += time.perf_counter() - start
        try:
            module, probes = probed(comp)
            with np.errstate(all="ignore"):
                test = hg.compile(module, backend="cpu")(*args)
                reference = hg.interpret(module, *args)
        except hg.HlogenError:
            continue
        test = list(test) if isinstance(test, tuple) else [test]
        reference = list(reference) if isinstance(reference, tuple) else [reference]
        with mlir.context():
            given = values_of(reference, probes)
            block = module.main.regions[0].blocks[0]
            for j, (op, index, _) in enumerate(probes):
                a, b = np.asarray(test[j]), np.asarray(reference[j])
                if a.shape == b.shape and a.tobytes() == b.tobytes():
                    continue
                operands = operand_values(op, block, args, given)
                if operands is None:
                    continue
                try:  # (an op whose module alone does not verify is left out)
                    with ir.Location.unknown():
                        alone = Computation(op_alone(op, parameters=True))
                    with np.errstate(all="ignore"):
                        alone_test = hg.compile(alone, backend="cpu")(*operands)
                        alone_reference = hg.interpret(alone, *operands)
                except (hg.HlogenError, ir.MLIRError):
                    continue
                pick = (lambda out: out[index] if isinstance(out, tuple) else out)
                cases.append((k, op.name, alone, operands, pick(alone_test),
                              pick(alone_reference), index))
    return cases, running / programs


def timed(fn, repeats: int = 3) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return min(samples)


def typical() -> list:
    rng = np.random.default_rng(0)
    rows = []

    def single(fn, *shapes):
        b = hg.Builder()
        return b.build(fn(*[b.parameter(s) for s in shapes]))
    x = rng.uniform(-3, 3, (8, 8)).astype(np.float32)
    y = rng.standard_normal((8, 16)).astype(np.float32)
    w = rng.standard_normal((16, 8)).astype(np.float32)
    h = rng.standard_normal((1, 4, 8, 8)).astype(np.float16)
    k = rng.standard_normal((4, 4, 3, 3)).astype(np.float16)
    cases = [
        ("tan f32[8,8]", single(ops.tan, hg.f32[8, 8]), [x]),
        ("logistic bf16[8,8]", single(ops.logistic, hg.bf16[8, 8]),
         [x.astype(hg.bf16.dtype)]),
        ("power s32[8,8]", single(ops.pow, hg.s32[8, 8], hg.s32[8, 8]),
         [np.zeros((8, 8), np.int32), np.full((8, 8), 64, np.int32)]),
        ("dot f32[8,16]x[16,8]", single(ops.dot, hg.f32[8, 16], hg.f32[16, 8]), [y, w]),
        ("convolution f16[1,4,8,8]*[4,4,3,3]",
         single(lambda a, b: ops.conv(a, b, [1, 1], "VALID"), hg.f16[1, 4, 8, 8],
                hg.f16[4, 4, 3, 3]), [h, k]),
    ]
    for name, alone, operands in cases:
        with np.errstate(all="ignore"):
            test, reference = hg.compile(alone, backend="cpu")(*operands), \
                hg.interpret(alone, *operands)
        if name.startswith("tan"):  # a difference in every element, as amplified ones are
            test = np.nextafter(reference, np.float32(np.inf))
        differing = int(np.count_nonzero(test != reference))
        full = timed(lambda: arbitrate(alone, operands, test, reference))
        cheap = timed(lambda: arbitrate(alone, operands, test, reference, limit=8))
        verdict = arbitrate(alone, operands, test, reference).verdict.value
        rows.append((name, differing, verdict, full, cheap))
    return rows


def main():
    programs = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    print(f"## arbiter: cost per finding ({machine()})\n")
    print("| op | differing elements | verdict | arbitrate (limit 16, the default) | limit 8 |")
    print("| --- | --- | --- | --- | --- |")
    for name, differing, verdict, full, cheap in typical():
        print(f"| {name} | {differing} | {verdict} | {full * 1e3:.1f} ms | {cheap * 1e3:.1f} ms |")
    cases, running = differing_ops(programs)
    per_op, per_program = [], {}
    verdicts = {}
    for k, name, alone, operands, test, reference, index in cases:
        seconds = timed(lambda: arbitrate(alone, operands, test, reference, result=index),
                        repeats=1)
        judgement = arbitrate(alone, operands, test, reference, result=index)
        verdicts[judgement.verdict.value] = verdicts.get(judgement.verdict.value, 0) + 1
        per_op.append(seconds)
        per_program[k] = per_program.get(k, 0.0) + seconds
    print(f"\n{programs} fuzz programs (seed {SEED}): {len(per_program)} with a differing op, "
          f"{len(per_op)} differing ops; verdicts {verdicts}")
    if per_op:
        print(f"arbitrate per differing op: median {statistics.median(per_op) * 1e3:.1f} ms, "
              f"max {max(per_op) * 1e3:.1f} ms; per program with a difference (all its "
              f"differing ops): median {statistics.median(per_program.values()) * 1e3:.1f} ms, "
              f"max {max(per_program.values()) * 1e3:.1f} ms; over all {programs} programs: "
              f"{sum(per_op) / programs * 1e3:.1f} ms per program")
        print(f"running each program (PJRT compile + run, and the interpreter, in this process, "
              f"the same load): {running * 1e3:.0f} ms; the arbiter over all its differing ops "
              f"is {sum(per_op) / programs / running * 100:.1f}% of it")


if __name__ == "__main__":
    main()
