"""Each side's accuracy per element-wise function and type, measured against mpmath.

    .venv/bin/python benchmarks/accuracy.py [--count N] [--seed S]

For each function of hlogen.differential.allowed's ACCURACY that is not correctly
rounded, and each of f64, f32, f16 and bf16: N random inputs from two distributions (a
typical range for the function, and run_hlo_module's large range: a random sign times
2^uniform(the type's exponents), inside the domain), run on XLA CPU and on the StableHLO
interpreter, each element's error in ULPs of the type from the exact value
(hlogen.differential.exact: mpmath at 256 bits and more). Elements whose input or exact
result is subnormal are left out: XLA CPU flushes them to zero (a deviation of its own,
not the function's accuracy). Prints a markdown table: the largest error of each side.
"""
from __future__ import annotations

import argparse
import math
import sys

import ml_dtypes
import numpy as np

import hlogen as hg
from hlogen import ops
from hlogen.differential import exact

TYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}

# op -> (builder function, number of operands, typical range per operand, domain)
FUNCTIONS = {
    "stablehlo.exponential": (ops.exp, 1, [(-10, 10)], "all"),
    "stablehlo.exponential_minus_one": (ops.expm1, 1, [(-2, 2)], "all"),
    "stablehlo.log": (ops.log, 1, [(0.01, 10)], "positive"),
    "stablehlo.log_plus_one": (ops.log1p, 1, [(-0.9, 2)], "positive"),
    "stablehlo.logistic": (ops.logistic, 1, [(-12, 12)], "all"),
    "stablehlo.sine": (ops.sin, 1, [(-10, 10)], "all"),
    "stablehlo.cosine": (ops.cos, 1, [(-10, 10)], "all"),
    "stablehlo.tan": (ops.tan, 1, [(-10, 10)], "all"),
    "stablehlo.tanh": (ops.tanh, 1, [(-5, 5)], "all"),
    "stablehlo.rsqrt": (ops.rsqrt, 1, [(0.01, 100)], "positive"),
    "stablehlo.cbrt": (ops.cbrt, 1, [(-100, 100)], "all"),
    "stablehlo.atan2": (ops.atan2, 2, [(-10, 10), (-10, 10)], "all"),
    "stablehlo.power": (ops.pow, 2, [(0.1, 4), (-8, 8)], "positive"),
    "stablehlo.sqrt": (ops.sqrt, 1, [(0.01, 100)], "positive"),
}


def inputs(rng, dtype, count: int, typical, domain: str) -> np.ndarray:
    info = ml_dtypes.finfo(dtype)
    low, high = typical
    half = count // 2
    near = rng.uniform(low, high, half)
    exponent = rng.uniform(int(info.minexp), int(info.maxexp) - 1, count - half)
    sign = np.ones(count - half) if domain == "positive" else rng.choice([-1.0, 1.0], count - half)
    wide = sign * np.exp2(exponent)
    return np.concatenate([near, wide]).astype(dtype)


def errors(name: str, args: list, values: np.ndarray, dtype) -> list:
    fmt = exact.float_format(dtype)
    smallest = float(2.0 ** fmt.emin)
    found = []
    for i in range(values.size):
        operands = [a[i] for a in args]
        if any(0 < abs(float(v)) < smallest for v in operands):
            continue
        want = exact.real(name, [exact.fraction(v) for v in operands])
        if isinstance(want, float) or want == 0 or abs(want) < smallest or \
                abs(want) > fmt.largest:
            continue
        found.append(exact.ulps(values[i], want, dtype))
    return found


def measure(count: int, seed: int) -> list:
    rows = []
    for name, (function, arity, ranges, domain) in FUNCTIONS.items():
        for type_name, dtype in TYPES.items():
            rng = np.random.default_rng(seed)
            t = getattr(hg, type_name)
            if name == "stablehlo.power":  # the exponent in a range that keeps it finite
                args = [inputs(rng, dtype, count, ranges[0], domain),
                        rng.uniform(*ranges[1], count).astype(dtype)]
            else:
                args = [inputs(rng, dtype, count, r, domain) for r in ranges[:arity]]
            b = hg.Builder()
            params = [b.parameter(t[count]) for _ in range(arity)]
            alone = b.build(function(*params))
            with np.errstate(all="ignore"):
                xla = hg.compile(alone, backend="cpu")(*args)
                interpreter = hg.interpret(alone, *args)
            e_xla, e_ref = errors(name, args, xla, dtype), errors(name, args, interpreter, dtype)
            rows.append((name, type_name, max(e_xla, default=0.0), max(e_ref, default=0.0),
                         len(e_xla)))
            print(f"{name} {type_name}: xla {rows[-1][2]:.3g}, interpreter {rows[-1][3]:.3g} "
                  f"({len(e_xla)} elements)", file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args()
    rows = measure(options.count, options.seed)
    print("| op | type | XLA CPU, max ULP | interpreter, max ULP | elements |")
    print("| --- | --- | --- | --- | --- |")
    for name, type_name, x, r, n in rows:
        show = lambda e: "inf" if math.isinf(e) else f"{e:.3g}"
        print(f"| {name} | {type_name} | {show(x)} | {show(r)} | {n} |")


if __name__ == "__main__":
    main()
