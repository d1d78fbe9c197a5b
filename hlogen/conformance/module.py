"""A conformance module made runnable: checks turned into results, constants into inputs.

`load_case` parses one module (hlogen.loading.parse_module, the one parser) and
rewrites it in place so that `main`:
- has every `func.call` of its body inlined (jax's inliner, as hlogen.runtime does),
- returns, instead of its own results, the operands of its checks: first every
  actual value, then every expected value, in check order (judged on the host),
- for PJRT, takes its top-level constants as parameters, decoded directly from the
  module, so that XLA compiles the computation instead of folding it away.
Functions that `main` names (calls, a composite's decomposition) stay with it: each case
is a whole module of its own. A module whose checks read `interpreter.run_parallel`'s
results becomes its program, run on replicas (`Replicated`); a module without checks
is run for its own sake (StableHLO's runner passes it when it runs).
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.computation import Computation, is_public
from hlogen.loading import parse_module
from hlogen.conformance import files, judge
from hlogen.differential.near import Tolerance
from hlogen.errors import InputError, UnsupportedError

# Ops that are bookkeeping rather than what a module tests.
PLUMBING = {"func.func", "func.call", "func.return", "stablehlo.constant",
            "stablehlo.custom_call", "stablehlo.return", "builtin.module"}
# Operands that XLA needs as compile-time constants (shapes, sizes, paddings): integer
# constants used by these ops stay constants.
_STATIC_OPERANDS = {"stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_iota",
                    "stablehlo.dynamic_pad", "stablehlo.dynamic_reshape",
                    "stablehlo.real_dynamic_slice", "stablehlo.dynamic_gather",
                    "stablehlo.dynamic_conv", "stablehlo.rng"}


@dataclasses.dataclass
class Check:
    call: str        # expect_eq, expect_close, expect_almost_eq, eq
    rule: Tolerance  # how the check judges (hlogen.conformance.judge)


@dataclasses.dataclass
class Replicated:
    """What `interpreter.run_parallel` asked for: the program (the case's main) on `count`
    replicas x `partitions`; check k compares output `actual[k]` of the processes' outputs
    (process by process, replica-major, as run_parallel returns them) with the array
    `expected[k]`."""
    count: int
    actual: list
    expected: list
    partitions: int = 1  # each replica's; the program runs on count x partitions processes


@dataclasses.dataclass
class Case:
    computation: Computation | None  # None: the module holds no function
    arguments: list          # numpy arrays, one per parameter of main (per replica: lists)
    checks: list             # Check, in order; results are [actual..., expected...]
    ops: list                # op names of the module as written (what it tests)
    element_types: list      # element type names that appear in those ops
    quantized: bool = False
    replicated: Replicated | None = None

    @property
    def primary_op(self) -> str:
        return self.ops[0] if self.ops else "(none)"


_quant_loaded = False


def load_quant_dialect() -> None:
    """The quant dialect is loaded by reading any portable artifact (jaxlib registers it
    no other way): needed to parse `!quant.uniform` types."""
    global _quant_loaded
    if not _quant_loaded:
        text = "func.func @main() -> () { return }"
        data = _stablehlo.serialize_portable_artifact_str(text, _stablehlo.get_current_version())
        _stablehlo.deserialize_portable_artifact(mlir.context(), data)
        _quant_loaded = True


def load_case(text: str, where: str, lift_constants: bool) -> Case:
    """The module `text` (one module of a conformance file) made runnable; InputError when
    it cannot be read."""
    dialect_checks: list = []
    if "interpreter." in text:
        text = files.rewrite_interpreter_ops(text, where)
    if "check." in text:
        text, dialect_checks = files.rewrite_checks(text, where)
    quantized = "!quant." in text
    if quantized:
        load_quant_dialect()
    module = parse_module(text.encode(), where)
    with mlir.context():
        return _rewrite(module, where, dialect_checks, quantized, lift_constants)


def _rewrite(module, where, dialect_checks, quantized, lift_constants) -> Case:
    main = _entry(module, where)
    ops, element_types = _what_it_tests(module)
    if main is None:
        return Case(None, [], [], ops, element_types)
    if quantized:
        # StableHLO's own lowering of quantized types to integer math, for both backends
        mlir.run_pipeline(module, "builtin.module(func.func(stablehlo-legalize-quant-to-math))")
    mlir.inline_calls(main.regions[0].blocks[0], mlir.functions(module))
    found = _find_checks(main, dialect_checks, where)
    parallel = [op.operation for op in main.regions[0].blocks[0].operations
                if mlir.call_target(op.operation) == files.RUN_PARALLEL]
    if parallel:
        return _replicated(module, main, parallel, found, where, ops, element_types)
    checks = _checks_to_results(main, found)
    mlir.drop_unused_functions(module, main)
    arguments = _lift_constants(main) if lift_constants else []
    return Case(Computation(module, where), arguments, checks, ops, element_types, quantized)


def _entry(module: ir.Module, where: str) -> ir.Operation | None:
    """@main, or the one public function (renamed main); None when there is no function."""
    functions = mlir.functions(module)
    if not functions:
        return None
    if "main" in functions:
        return functions["main"]
    public = [f for f in functions.values() if is_public(f)]
    if len(public) != 1:
        raise UnsupportedError(f"{where}: no @main and {len(public)} public functions: this "
                               f"runner runs one entry function per module (StableHLO's "
                               f"interpreter refuses such a module too: 'module must have "
                               f"entry func with name main')")
    public[0].attributes["sym_name"] = ir.StringAttr.get("main")
    return public[0]


def _what_it_tests(module: ir.Module) -> tuple[list, list]:
    """Op names in program order (each once), and the element types of their values."""
    ops: dict = {}
    types: dict = {}
    for op in mlir.walk(module):
        name = op.name
        if name in PLUMBING:
            continue
        ops.setdefault(name, None)
        for v in list(op.operands) + list(op.results):
            types.setdefault(_element_name(v.type), None)
    types.pop(None, None)
    return list(ops), list(types)


def _element_name(t) -> str | None:
    text = str(t)
    m = re.match(r"tensor<(?:[0-9?]+x)*(.*)>$", text)
    if not m:
        return None
    inner = m.group(1)
    if inner.startswith("!quant"):
        return "quant"
    try:
        return T.element_type_of_mlir(inner).name
    except Exception:
        return inner




def _find_checks(main: ir.Operation, dialect_checks: list, where: str) -> list:
    """(op, Check) of every check of main's body, in order."""
    found = []
    for op in main.regions[0].blocks[0].operations:
        op = op.operation
        target = mlir.call_target(op)
        if target is None or not target.startswith("check."):
            continue
        call = target[len("check."):]
        params, from_dialect = {}, False
        if "backend_config" in op.attributes and dialect_checks:
            try:
                params = dialect_checks[int(ir.StringAttr(op.attributes["backend_config"]).value)]
                from_dialect = True
            except (ValueError, IndexError):
                pass
        try:
            rule = judge.rule_of(call, params, from_dialect)
        except ValueError as e:
            raise InputError(f"{where}: {e}") from None
        if len(op.operands) != 2:
            raise InputError(f"{where}: @check.{call} takes two operands, it has {len(op.operands)}")
        found.append((op, Check(call, rule)))
    return found


def _checks_to_results(main: ir.Operation, found: list) -> list:
    """main returns the operands of its checks (actual values, then expected values) and
    the checks are gone; a module without checks keeps its own results."""
    block = main.regions[0].blocks[0]
    if not found:
        return []
    values = [op.operands[0] for op, _ in found] + [op.operands[1] for op, _ in found]
    terminator = list(block.operations)[-1].operation
    with ir.InsertionPoint(terminator), terminator.location:
        ir.Operation.create("func.return", operands=values)
    terminator.erase()
    for op, _ in found:
        op.erase()
    inputs = [a.type for a in block.arguments]
    main.attributes["function_type"] = ir.TypeAttr.get(
        ir.FunctionType.get(inputs, [v.type for v in values]))
    for name in ("res_attrs",):
        if name in main.attributes:
            del main.attributes[name]
    return [c for _, c in found]


def _replicated(module, main, parallel, found, where, ops, element_types) -> Case:
    """The program `interpreter.run_parallel` runs, as the case's main on replicas; its
    checks compare the program's outputs with constants."""
    if len(parallel) != 1:
        raise UnsupportedError(f"{where}: {len(parallel)} {files.RUN_PARALLEL} ops in one "
                               f"module: this runner runs one")
    call = parallel[0]
    extra = [call.attributes[i].name for i in range(len(call.attributes))
             if call.attributes[i].name not in ("call_target_name", "programs")]
    if extra:
        raise UnsupportedError(f"{where}: {files.RUN_PARALLEL} with {', '.join(extra)} (queues "
                               f"only the interpreter's runner fills)")
    grid = [[ir.FlatSymbolRefAttr(p).value for p in ir.ArrayAttr(row)]
            for row in ir.ArrayAttr(call.attributes["programs"])]
    names = list(dict.fromkeys(name for row in grid for name in row))
    if len(names) != 1:
        raise UnsupportedError(f"{where}: {files.RUN_PARALLEL} runs different programs on its "
                               f"processes ({', '.join('@' + n for n in names)}): hlogen runs one "
                               f"program on every process")
    partitions = len(grid[0])  # (the interpreter's verifier: every row as long)
    program = mlir.functions(module)[names[0]]
    n_in = len(program.regions[0].blocks[0].arguments)
    arguments = [_constant_value(v, where, "an operand of " + files.RUN_PARALLEL)
                 for v in call.operands]
    per_replica = [arguments[k * n_in:(k + 1) * n_in] for k in range(len(grid) * partitions)]
    actual, expected, checks = [], [], []
    for op, check in found:
        got = op.operands[0]
        if mlir.defining_op(got) != call:
            raise UnsupportedError(f"{where}: a check of a value other than "
                                   f"{files.RUN_PARALLEL}'s results")
        actual.append(ir.OpResult(got).result_number)
        expected.append(_constant_value(op.operands[1], where, "an expected value"))
        checks.append(check)
    main.erase()
    program.attributes["sym_name"] = ir.StringAttr.get("main")
    if "sym_visibility" in program.attributes:
        del program.attributes["sym_visibility"]
    mlir.inline_calls(program.regions[0].blocks[0], mlir.functions(module))
    mlir.drop_unused_functions(module, program)
    return Case(Computation(module, where), per_replica, checks, ops, element_types,
                replicated=Replicated(len(grid), actual, expected, partitions))


def _constant_value(value, where: str, what: str) -> np.ndarray:
    array = mlir.constant_of(value)
    if array is None:
        raise UnsupportedError(f"{where}: {what} is not a constant this runner can read")
    return array


def _lift_constants(main: ir.Operation) -> list:
    block = main.regions[0].blocks[0]
    arguments = []
    for op in list(block.operations):
        op = op.operation
        if op.name != "stablehlo.constant":
            continue
        result = op.results[0]
        if _static_use(result):
            continue
        array = mlir.decode_constant(op)
        if array is None:
            continue
        arg = block.add_argument(result.type, op.location)
        result.replace_all_uses_with(arg)
        op.erase()
        arguments.append(array)
    if arguments:
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([a.type for a in block.arguments], ftype.results))
        if "arg_attrs" in main.attributes:
            del main.attributes["arg_attrs"]
    return arguments


def _static_use(value) -> bool:
    if "i" not in str(value.type).rsplit("x", 1)[-1]:  # not an integer tensor
        return False
    return any(use.owner.name in _STATIC_OPERANDS for use in value.uses)
