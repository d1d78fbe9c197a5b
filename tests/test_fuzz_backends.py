"""Fuzzing XLA CPU against the StableHLO interpreter for a few minutes: `make
fuzz-backends` (marked slow: `make test` leaves it out; pyproject's pytest options).

hlogen fuzz runs, with its defaults (random programs with their dictionary of idioms,
half of them with inputs over the whole exponent range) and the modules of StableHLO's
interpreter tests (../shared/conformance/stablehlo/tests/interpret: as they are, then
mutated), told nothing of what to look for. Each finding is then checked here, on its
own, by means the fuzzer does not use:
- it is real: its reduced module and inputs, compiled and run here on XLA CPU and
  interpreted, differ by XLA's rule stated here (or, for an error or a crash, `hlogen run`
  of its command fails so); and not as the spec allows: not every differing element is
  within the bound the conformance runner allows a sum in another order
  (hlogen.conformance.bounds' `reassociation`, for the op that makes the result); no
  false divergence;
- what explains it, when the project knows it: XLA's algebraic simplifier or its
  constant folder (compiled again without that pass, XLA CPU agrees with the
  interpreter: DIFFERENTIAL_NOTES' rewrites, docs/differential-library.md's CountLeadingZeros), subnormals
  flushed to zero (every differing element has a subnormal on a side or in an input of
  its shape, or the interpreter agrees with XLA CPU once subnormal inputs and constants
  are zeros), or an entry of the conformance runner's known deviations
  (hlogen/conformance/known_deviations.json, matched by its own rules);
no finding is one exact math allows (the arbiter's `allowed` is counted, not found); and
every finding the fuzzer reports as an XLA bug (verdict `test wrong`) is checked again
by exact math written here, none of hlogen's judging code: the op where it is born
(hlogen's origin, which must name the signature's op), its operands' values, the exact
result by Python integers or mpmath at 300 bits, XLA CPU's value beyond the op's
accuracy (0.5 ULP for the correctly rounded ops, 4 for the others, exact for integers)
where the interpreter's is within it. Each cause is reported once: one signature per
cause (per kind, for a deviation that is both an error and a divergence); and, where
the run had the programs for it (ENOUGH), it must rediscover what is known: the textbook
rewrites (`log(exp(x))`, `sqrt(x*x)`, `(x*c)/c`, `(x + 12582912) - 12582912`: a rewrite
at log, sqrt, divide and subtract), subnormal flushing, and the known deviations the
corpus shows (complex maximum and minimum, bitcast_convert of pred, dynamic_conv).
The findings and the table of signatures with their verdicts are printed (`-s`):
benchmarks/RESULTS.md records a run.
"""
from __future__ import annotations

import collections
import os
import pathlib
import re

import ml_dtypes
import mpmath
import numpy as np
import pytest
from click.testing import CliRunner

import hlogen as hg
from hlogen import mlir
from hlogen.conformance import known
from hlogen.differential import allowed
from hlogen.differential.origin import find_origin
from hlogen.conformance.module import Case
from hlogen.mlir import constant_of
from hlogen_cli.main import main

pytestmark = pytest.mark.slow

SECONDS = float(os.environ.get("HLOGEN_FUZZ_SECONDS", "240"))
SEED = int(os.environ.get("HLOGEN_FUZZ_SEED", "28"))
CORPUS = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo" \
    / "tests" / "interpret"
if not CORPUS.is_dir():  # a worktree under /work/wt
    CORPUS = pathlib.Path("/work/shared/conformance/stablehlo/tests/interpret")
# the passes whose absence makes XLA CPU agree with the interpreter, and what they are
PASSES = {"algsimp": "XLA's algebraic simplifier", "constant_folding": "XLA's constant folder"}
REWRITES = {"stablehlo.log", "stablehlo.sqrt", "stablehlo.divide", "stablehlo.subtract"}
# the known deviations StableHLO's interpreter tests show XLA CPU, by their files
DEVIATIONS = {"maximum.mlir", "minimum.mlir", "bitcast_convert.mlir", "dynamic_conv.mlir"}
ENOUGH = 1000  # programs after which each of them must have come again


def _near_differs(actual, expected, bound=1e-3):
    """XLA's Near, stated here (complex numbers part by part): an element differs when
    exactly one side is NaN, an infinity is not matched exactly, or its absolute and
    relative errors both pass the bound; integers and predicates exactly."""
    a, e = np.asarray(actual), np.asarray(expected)
    if a.shape != e.shape or a.dtype != e.dtype:
        return np.ones((), bool)
    if a.dtype.kind in "biu" or a.dtype.kind == "b":
        return a != e
    if a.dtype.kind == "c":
        return _near_differs(a.real, e.real, bound) | _near_differs(a.imag, e.imag, bound)
    a, e = a.astype(np.float64), e.astype(np.float64)
    nan = np.isnan(a) != np.isnan(e)
    infinite = (np.isinf(a) | np.isinf(e)) & (a != e) & ~np.isnan(a) & ~np.isnan(e)
    with np.errstate(all="ignore"):
        error = np.abs(a - e)
        far = np.isfinite(error) & (error > bound) & (error > bound * np.abs(e))
    return nan | infinite | far


def _leaves(result) -> list:
    return [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]


def _subnormal(a) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype.kind == "c":
        return _subnormal(a.real) | _subnormal(a.imag)
    try:
        tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
    except ValueError:  # not a float type
        return np.zeros(a.shape, bool)
    x = np.abs(a.astype(np.float64))
    return (x > 0) & (x < tiny)


def _zeroed(arrays: list) -> list:
    return [np.where(_subnormal(x), np.zeros_like(x), x) for x in arrays]


def _flushed(module, inputs) -> tuple:
    """A copy of `module` whose subnormal constants are zeros, and whether it or the
    inputs hold any subnormal."""
    copy = module.clone()
    changed = any(_subnormal(x).any() for x in inputs)
    with mlir.context():
        for op in mlir.walk(copy.module):
            value = constant_of(op.results[0]) if op.name == "stablehlo.constant" else None
            if value is not None and _subnormal(value).any():
                op.attributes["value"] = mlir.dense_attr(
                    _zeroed([value])[0], mlir.shape_of_type(op.results[0].type))
                changed = True
    return copy, changed


def _reproduced(finding, module, inputs) -> tuple:
    """(whether it shows again here, the differing masks of the results)."""
    if finding["kind"].startswith("divergence"):
        cpu = _leaves(hg.compile(module)(*inputs))
        interpreted = _leaves(hg.interpret(module, *inputs))
        masks = [_near_differs(a, e) for a, e in zip(cpu, interpreted)]
        return any(m.any() for m in masks), (cpu, interpreted, masks)
    ran = CliRunner().invoke(main, finding["command"].split()[1:], catch_exceptions=False)
    died = "aborted (SIG" in ran.stderr
    return ran.exit_code == 1 and died == finding["kind"].startswith("crash"), ran.stderr


def _order_allows(module, inputs, seen) -> bool:
    """Every differing element within the conformance runner's bound for a sum in another
    order, for the op that makes its result."""
    cpu, interpreted, masks = seen
    case = Case(module, inputs, [], [], [])
    return all(not m.any() or allowed.within("reassociation", case.computation, case.arguments, k, m, a, e)
               for k, (a, e, m) in enumerate(zip(cpu, interpreted, masks)))


def _file(program: str) -> str:
    """The corpus file a finding's program came from (as it is, or mutated)."""
    return re.sub(r"^mutate\(", "", program).split("#")[0].split(",")[0]


def _explanation(finding, module, inputs, seen, entries) -> tuple | None:
    """(what the project knows that explains the finding, a detail), or None."""
    ops = sorted({op.name for op in mlir.walk(module.module)})
    types = sorted({str(mlir.shape_of_type(t).element_type) for op in mlir.walk(module.module)
                    for t in [*op.results.types, *(v.type for v in op.operands)]
                    if str(t).startswith("tensor<")})
    if finding["kind"] == "divergence":
        cpu, interpreted, masks = seen
        for name, what in PASSES.items():
            without = _leaves(hg.compile(module, xla_options={"xla_disable_hlo_passes": name})(
                *inputs))
            if not any(_near_differs(a, e).any() for a, e in zip(without, interpreted)):
                return what, finding["at"]
        covered = all(a.shape == e.shape == m.shape and np.all((_subnormal(a) | _subnormal(e) | np.any(
            [_subnormal(x) for x in inputs if np.shape(x) == m.shape] or [np.zeros(m.shape, bool)],
            axis=0))[m]) for a, e, m in zip(cpu, interpreted, masks))
        flushed, changed = _flushed(module, inputs)
        if covered or (changed and not any(
                _near_differs(a, e).any()
                for a, e in zip(cpu, _leaves(hg.interpret(flushed, *_zeroed(inputs)))))):
            return "subnormals flushed to zero", None
        status = "fail"
    else:
        status = "crash" if finding["kind"].startswith("crash") else "error"
    record = {"backend": "cpu", "ops": ops, "types": types, "status": status,
              "message": finding["message"], "file": _file(finding["program"]), "traits": {}}
    for entry in entries:
        if entry.applies(record) and entry.explains(record):
            return "known deviation", entry.source, finding["kind"], record["file"]
    return None


def test_fuzzing_cpu_against_the_interpreter_rediscovers_what_is_known(tmp_path):
    run = hg.fuzz.run("cpu", "interpret", out=tmp_path / "found", seconds=SECONDS, seed=SEED,
                  corpus=[CORPUS], reduce_seconds=45)
    print("\n" + run.text())
    assert run.findings and len({f.signature for f in run.findings}) == len(run.findings)
    entries = known.load(known.DEFAULT)
    causes = collections.defaultdict(list)  # what explains them -> signatures
    table = []
    for f in run.findings:
        finding = f.to_json()
        module = hg.load(f.module)
        inputs = []
        if f.inputs:
            with np.load(f.inputs) as saved:
                inputs = [saved[name] for name in module.parameter_names]
            inputs = [a.view(s.dtype) if a.dtype.kind == "V" else a
                      for a, s in zip(inputs, module.parameter_shapes)]
        again, seen = _reproduced(finding, module, inputs)
        assert again, f"not seen again here (a false finding): {f.signature}\n{seen}"
        if f.kind == "divergence":
            assert not _order_allows(module, inputs, seen), \
                f"a sum in another order (the spec allows it): {f.signature}"
            assert f.verdict != "allowed", f"allowed by exact math, yet a finding: {f.signature}"
        why = _explanation(finding, module, inputs, seen, entries)
        causes[why].append(f.signature)
        checked = "-"
        if f.verdict == "test wrong":  # an XLA bug: born there, and wrong by exact math here
            origin = find_origin(module, inputs, "cpu", "interpret")
            assert origin is not None and origin.op == f.at, \
                f"{f.signature}: born elsewhere ({origin and origin.op})"
            wrong = _recheck(origin)
            if wrong is None:  # an op whose operands are not its result's shape
                checked = f"not re-checked here (no exact model of {origin.op} in this test)"
            else:
                assert wrong, f"{f.signature}: exact math here does not find XLA CPU wrong"
                index, got, exact = wrong[0]
                index = [int(i) for i in index]
                checked = f"XLA CPU {got} at {index}, exact {exact}"
        table.append((f.signature, f.verdict or "-", f.op_count,
                      (why[0] + (f" ({why[1]})" if why[1] else "")) if why
                      else "not known to the project", checked))
    print("\n| signature | verdict | ops | explained by | exact math in the test |")
    print("| --- | --- | --- | --- | --- |")
    for row in table:
        print("| " + " | ".join(f"`{row[0]}`" if k == 0 else str(v)
                                for k, v in enumerate(row)) + " |")
    # each known cause once; but an entry of the known deviations may hold several errors
    # of XLA's, each its own message (bitcast_convert of pred: a refusal to compile, and
    # a result of the wrong size: two bugs to report), each a signature of its own
    repeated = {why: found for why, found in causes.items() if why and len(found) > 1
                and not (why[0] == "known deviation" and why[2].startswith("error"))}
    assert not repeated, repeated
    # what is known comes again, where the run had the programs for it (the earlier
    # runs' 1,700 programs in 240 s: a loaded machine runs a tenth of them, and each
    # difference now costs its origin and exact math, each candidate of a reduction too)
    rewritten = {why[1] for why in causes if why and why[0] in PASSES.values()}
    deviations = {os.path.basename(why[3]) for why in causes if why and why[0] == "known deviation"}
    print(f"\nknown causes found again: rewrites {sorted(rewritten & REWRITES)}, flushing "
          f"{('subnormals flushed to zero', None) in causes}, deviations "
          f"{sorted(deviations & DEVIATIONS)} ({run.programs} programs)")
    if run.programs >= ENOUGH:
        assert REWRITES <= rewritten, causes
        assert ("subnormals flushed to zero", None) in causes, causes
        assert DEVIATIONS <= deviations, causes


# -- the XLA bugs, checked again by exact math written here ---------------------------------
# (Python integers and fractions, mpmath at 300 bits: none of hlogen's judging code, the
# arbiter's, is used; only hlogen's localization gives the op and its operands)

mpmath.mp.prec = 300
_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}
_FUNCTIONS = {
    "stablehlo.exponential": mpmath.exp, "stablehlo.log": mpmath.log,
    "stablehlo.sqrt": mpmath.sqrt, "stablehlo.rsqrt": lambda x: 1 / mpmath.sqrt(x),
    "stablehlo.sine": mpmath.sin, "stablehlo.cosine": mpmath.cos, "stablehlo.tan": mpmath.tan,
    "stablehlo.tanh": mpmath.tanh, "stablehlo.logistic": lambda x: 1 / (1 + mpmath.exp(-x)),
    "stablehlo.exponential_minus_one": mpmath.expm1, "stablehlo.log_plus_one": mpmath.log1p,
    "stablehlo.cbrt": mpmath.cbrt, "stablehlo.atan2": mpmath.atan2,
    "stablehlo.add": lambda a, b: a + b, "stablehlo.subtract": lambda a, b: a - b,
    "stablehlo.multiply": lambda a, b: a * b, "stablehlo.divide": lambda a, b: a / b,
    "stablehlo.negate": lambda a: -a, "stablehlo.abs": abs,
    "stablehlo.ceil": mpmath.ceil, "stablehlo.floor": mpmath.floor,
    "stablehlo.sign": lambda a: mpmath.sign(a),
    "stablehlo.power": lambda a, b: mpmath.nan if a < 0 and b != mpmath.floor(b) else
    mpmath.power(a, b) if a or b > 0 else (mpmath.inf if b < 0 else mpmath.mpf(1)),
    "stablehlo.maximum": max, "stablehlo.minimum": min,
}
# the ops IEEE 754 rounds correctly (0.5 ULP); the others are allowed a few ULP
_CORRECTLY_ROUNDED = {"stablehlo.ceil", "stablehlo.floor", "stablehlo.sign", "stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
                      "stablehlo.divide", "stablehlo.sqrt", "stablehlo.negate", "stablehlo.abs",
                      "stablehlo.maximum", "stablehlo.minimum"}
_FEW_ULPS = 4


def _integer_exact(name: str, values: list, bits: int, signed: bool):
    """The exact result of an integer op on Python integers, wrapped to the type, or None
    for an op this table does not have."""
    if name == "stablehlo.power":
        base, exponent = values
        if exponent < 0:
            exact = 1 if base == 1 else (-1) ** (exponent % 2) if base == -1 else 0
        else:
            exact = pow(base, exponent, 1 << bits)
    elif name == "stablehlo.count_leading_zeros":
        exact = bits - (values[0] % (1 << bits)).bit_length()
    elif name in ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply"):
        a, b = values
        exact = a + b if name.endswith("add") else a - b if name.endswith("subtract") else a * b
    elif name in ("stablehlo.and", "stablehlo.or", "stablehlo.xor"):
        a, b = values
        exact = a & b if name.endswith("and") else a | b if name.endswith("or") else a ^ b
    elif name in ("stablehlo.maximum", "stablehlo.minimum"):
        exact = max(values) if name.endswith("maximum") else min(values)
    else:
        return None
    exact %= 1 << bits
    return exact - (1 << bits) if signed and exact >= 1 << (bits - 1) else exact


def _ulps_off(value, exact, dtype) -> float:
    """How far `value` (of a float type) is from the exact real `exact` (an mpf), in
    units of the last place of the type at `exact`; inf where one is not finite and the
    other is, 0 where both are the same infinity or NaN."""
    v = float(value)
    if not mpmath.isfinite(exact) or not np.isfinite(v):
        same = (mpmath.isnan(exact) and np.isnan(v)) or (mpmath.isinf(exact) and v == float(exact))
        return 0.0 if same else float("inf")
    bits = _BITS[np.dtype(dtype).name]
    tiny = float(ml_dtypes.finfo(dtype).smallest_normal)
    exponent = max(int(mpmath.floor(mpmath.log(abs(exact), 2))) if exact else -10**6,
                   int(np.log2(tiny)))
    ulp = mpmath.mpf(2) ** (exponent - bits + 1)
    return float(abs(mpmath.mpf(v) - exact) / ulp)


def _recheck(origin) -> list | None:
    """The elements where XLA CPU's value of the origin op is wrong by exact math
    written here (beyond what the op may be off), and the interpreter's is not: (index,
    XLA's value, the exact value) each; None for an op that is not element-wise (its
    operands are not of its result's shape), which this test has no exact math for."""
    op = list(origin.alone.main.regions[0].blocks[0].operations)[0].operation  # (main's one op)
    name = op.name
    test, reference = np.asarray(origin.test), np.asarray(origin.reference)
    if any(np.ndim(x) and np.shape(x) != test.shape for x in origin.operands):
        return None
    operands = [np.broadcast_to(np.asarray(x), test.shape) for x in origin.operands]
    dtype = test.dtype
    wrong = []
    for index in zip(*np.nonzero(~_same_bits(test, reference))):
        values = [x[index] for x in operands]
        if dtype.kind in "iub":
            bits = 1 if dtype.kind == "b" else dtype.itemsize * 8
            ints = [int(v) for v in values]
            if dtype.kind == "b" and name == "stablehlo.add":  # the spec's add of i1: or
                name_used = "stablehlo.or"
            else:
                name_used = name
            exact = _integer_exact(name_used, ints, bits, dtype.kind == "i")
            assert exact is not None, f"no exact check here for {name} of {dtype}"
            exact = bool(exact) if dtype.kind == "b" else exact
            if int(test[index]) != exact and int(reference[index]) == exact:
                wrong.append((index, test[index].item(), exact))
            continue
        if dtype.kind == "c":  # the spec's complex maximum and minimum: lexicographic
            if name not in ("stablehlo.maximum", "stablehlo.minimum"):
                return None  # (no exact math of complex functions here)
            pick = max if name == "stablehlo.maximum" else min
            exact = pick(values, key=lambda z: (z.real, z.imag))
            if test[index] != exact and reference[index] == exact:
                wrong.append((index, complex(test[index]), complex(exact)))
            continue
        assert name in _FUNCTIONS, f"no exact check here for {name}"
        exact = _FUNCTIONS[name](*[mpmath.mpf(float(v)) for v in values])
        bound = 0.5 if name in _CORRECTLY_ROUNDED else _FEW_ULPS
        if _ulps_off(test[index], exact, dtype) > bound >= _ulps_off(reference[index], exact,
                                                                      dtype):
            wrong.append((index, float(test[index]), mpmath.nstr(exact, 20)))
    return wrong


def _same_bits(a, b) -> np.ndarray:
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or a.dtype.type.__module__ == "ml_dtypes":
        x, y = a.astype(np.complex128), b.astype(np.complex128)
        return (x == y) | (np.isnan(x) & np.isnan(y))
    return a == b
