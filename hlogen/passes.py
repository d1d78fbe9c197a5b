"""Named pass pipelines, and raw MLIR pipelines.

- `legalize`: CHLO (e.g. chlo.erf) and shape-dialect ops to StableHLO: what the
  reference interpreter needs, and what every execution path runs;
- `canonicalize`: MLIR's canonicalizer and common-subexpression elimination;
- `default`: both; its output holds only StableHLO and func ops;
- `xla-semantics`: hlogen's rewrites, which give ops whose result StableHLO leaves
  open XLA's definition (hlogen.semantics); every execution path applies them.
A comma-separated list of names runs them in order; a string that starts with
`builtin.module(` is an MLIR pass pipeline run as it is.

Functions of a module, for what rebuilds modules (the conformance runner, the reducer):
`functions`, `inline_calls` (jax's inliner: MLIR's `inline` pass has no interface for
these dialects here), `drop_unused_functions`.
"""
from __future__ import annotations

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _jax_mlir_ext

from hlogen import mlir, semantics
from hlogen.computation import Computation
from hlogen.errors import HlogenError

PIPELINES = {
    "legalize": mlir.LEGALIZE,
    "canonicalize": "func.func(canonicalize),cse",
}
PIPELINES["default"] = f"{PIPELINES['legalize']},{PIPELINES['canonicalize']}"


# Named steps that are not MLIR passes: hlogen's rewrites (hlogen.semantics), which
# every execution path applies after `legalize`; named here so that they can be shown.
REWRITES = {"xla-semantics": semantics.rewrite_module}


def steps(pipeline: str) -> list:
    """The steps of a pipeline: MLIR pass pipeline texts and rewrite functions."""
    if not isinstance(pipeline, str):
        raise HlogenError(f"a pipeline is a string (a name, names separated by commas, or "
                          f"'builtin.module(...)'), got {type(pipeline).__name__} {pipeline!r}")
    pipeline = pipeline.strip()
    if pipeline.startswith("builtin.module("):
        return [pipeline]
    names = [n.strip() for n in pipeline.split(",") if n.strip()]
    unknown = [n for n in names if n not in PIPELINES and n not in REWRITES]
    if not names or unknown:
        raise HlogenError(f"unknown pipeline {pipeline!r}: use {', '.join([*PIPELINES, *REWRITES])}, "
                          f"a comma-separated list of those, or 'builtin.module(...)'")
    result: list = []
    for name in names:
        if name in REWRITES:
            result.append(REWRITES[name])
        elif result and isinstance(result[-1], list):
            result[-1].append(PIPELINES[name])
        else:
            result.append([PIPELINES[name]])
    return [f"builtin.module({','.join(s)})" if isinstance(s, list) else s for s in result]


def run(computation: Computation, pipeline: str = "default") -> Computation:
    """A new Computation: `computation` after `pipeline` (the original is unchanged)."""
    if not isinstance(computation, Computation):
        raise HlogenError(f"passes.run takes a Computation, got {type(computation).__name__}")
    todo = steps(pipeline)
    result = computation.clone()
    for step in todo:
        if isinstance(step, str):
            mlir.run_pipeline(result.module, step)
        else:
            step(result.module)
    return result


def foreign_ops(computation: Computation) -> list[str]:
    """Names of ops in the module that are neither StableHLO nor func."""
    return [n for n in mlir.op_names(computation.module) if not n.startswith(("stablehlo.", "func."))]


# -- functions of a module -------------------------------------------------------------------

def functions(module: ir.Module) -> dict:
    """The module's func.func ops by name."""
    return {ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
            for op in module.body.operations if op.operation.name == "func.func"}


def inline_calls(block: ir.Block, table: dict) -> None:
    """Inlines every func.call of `block` (not of its ops' regions), the calls the inlined
    bodies make too; `table` is `functions(module)`."""
    for _ in range(64):  # callees may call functions in turn
        calls = [op.operation for op in block.operations if op.operation.name == "func.call"]
        if not calls:
            return
        for call in calls:
            callee = table[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]
            with ir.InsertionPoint(call), call.location:
                values = _jax_mlir_ext.inlined_func_call(callee, list(call.operands))
            for old, new in zip(call.results, values):
                old.replace_all_uses_with(new)
            call.erase()


# Attributes that name functions. Only these are read: reading every attribute from
# Python reads complex constants too, which ends the process.
_SYMBOL_ATTRIBUTES = ("callee", "decomposition", "called_computations", "programs")


def _symbols(attr: ir.Attribute) -> list:
    """Symbol names an attribute refers to (a callee, a decomposition, nested in lists)."""
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return [attr.value]
    if isinstance(attr, ir.ArrayAttr):
        return [name for a in attr for name in _symbols(a)]
    return []


def drop_unused_functions(module: ir.Module, main: ir.Operation) -> None:
    """Erases the functions main does not refer to, directly or through others."""
    table = functions(module)
    used, todo = set(), [main]
    while todo:
        names = []

        def visit(op):
            for name in _SYMBOL_ATTRIBUTES:
                if name in op.attributes:
                    names.extend(_symbols(op.attributes[name]))
            return ir.WalkResult.ADVANCE

        todo.pop().walk(visit)
        for name in names:
            if name in table and name not in used:
                used.add(name)
                todo.append(table[name])
    for name, op in table.items():
        if op != main and name not in used:
            op.erase()
