"""Named pass pipelines, and raw MLIR pipelines.

- `legalize`: CHLO (e.g. chlo.erf) and shape-dialect ops to StableHLO: what the
  reference interpreter needs, and what every execution path runs;
- `canonicalize`: MLIR's canonicalizer and common-subexpression elimination;
- `default`: both; its output holds only StableHLO and func ops;
- `xla-semantics`: hlogen's rewrites, which give ops whose result StableHLO leaves
  open XLA's definition (hlogen.rewrites.XLA_SEMANTICS); every backend applies them.
A comma-separated list of names runs them in order; a string that starts with
`builtin.module(` is an MLIR pass pipeline run as it is.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir, preflight, rewrites
from hlogen import types as T
from hlogen.builder import InsertingBuilder
from hlogen.computation import Computation
from hlogen.errors import HlogenError, ShapeError

PIPELINES = {
    "legalize": mlir.LEGALIZE,
    "canonicalize": "func.func(canonicalize),cse",
}
PIPELINES["default"] = f"{PIPELINES['legalize']},{PIPELINES['canonicalize']}"


# Named steps that are not MLIR passes: hlogen's rewrites (hlogen.rewrites), which
# every backend applies after `legalize`; named here so that they can be shown.
REWRITES = {"xla-semantics": lambda module: rewrites.rewrite_module(module, rewrites.XLA_SEMANTICS)}


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


def single_passes(pipeline: str) -> list[str]:
    """A pipeline as one step per pass (named pipelines expanded), for dumps after each."""
    text = pipeline.strip()
    if text.startswith("builtin.module(") and text.endswith(")"):
        return [f"builtin.module({p})" for p in _passes_of(text[len("builtin.module("):-1])]
    steps(text)  # unknown names are refused here, with the list of known ones
    out = []
    for name in [n.strip() for n in text.split(",") if n.strip()]:
        if name in PIPELINES:
            out += [f"builtin.module({p})" for p in _passes_of(PIPELINES[name])]
        else:
            out.append(name)
    return out


def _passes_of(body: str) -> list[str]:
    """'func.func(a,b),c' -> ['func.func(a)', 'func.func(b)', 'c']."""
    out = []
    for item in mlir.split_top_level(body):
        m = item.find("(")
        brace = item.find("{")
        if m > 0 and (brace < 0 or m < brace) and item.endswith(")"):
            anchor = item[:m]
            out += [f"{anchor}({p})" for p in _passes_of(item[m + 1:-1])]
        elif item:
            out.append(item)
    return out


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


# -- unbounded dynamism: refined from the inputs given --------------------------------------

REFINE = ("builtin.module(stablehlo-refine-shapes,func.func(stablehlo-canonicalize-dynamism),"
          "stablehlo-refine-shapes)")


# Ops whose result shape is an operand's value: refinement makes them static ops where
# that value is a constant; left over, XLA's translation ends the process on them.
SHAPE_FROM_VALUES = frozenset("stablehlo." + n for n in (
    "dynamic_broadcast_in_dim", "dynamic_conv", "dynamic_gather", "dynamic_iota",
    "dynamic_pad", "dynamic_reshape", "real_dynamic_slice"))


def unbounded(module, cached: bool = False, source: str | None = None) -> str | None:
    """The first dimension of `module` that is dynamic with no bound (`tensor<?xf32>`),
    named (op or parameter, dimension, type; an op at its line in `source`, the file the
    text was read from), or the first op whose result's shape is an operand's value
    (SHAPE_FROM_VALUES); None when there is none. `cached`: a module that has not changed
    since preflight's checks read it."""
    if cached:  # most modules: decided from the types and op names preflight has seen
        found = preflight.inventory(module)
        if not (SHAPE_FROM_VALUES & found.by_name.keys()) and \
                not any(_unbounded_dimension(t) is not None for t in found.types):
            return None
    for op in mlir.walk(module):
        if op.name in SHAPE_FROM_VALUES:
            return f"the result of {op.name}{_at(op, source)} (its shape is a value)"
        for region in op.regions:
            for block in region.blocks:
                for i, arg in enumerate(block.arguments):
                    found = _unbounded_dimension(arg.type)
                    if found is not None:
                        what = f"parameter {i} of @{mlir.symbol_name(op)}" \
                            if op.name == "func.func" else f"an argument of {op.name}'s region"
                        return f"dimension {found} of {what} ({arg.type})"
        for k, t in enumerate(op.results.types):
            found = _unbounded_dimension(t)
            if found is not None:
                return f"dimension {found} of result {k} of {op.name}{_at(op, source)} ({t})"
    return None


def _at(op, source: str | None) -> str:
    where = mlir.file_location(op.location, source)
    return " at {}:{}:{}".format(*where) if where else ""


def _unbounded_dimension(t) -> int | None:
    found = mlir.bounds(t)
    if not found:
        return None
    return next((d for d, b in enumerate(found) if b == mlir.DYNAMIC), None)


def refine(computation: Computation, arguments) -> Computation:
    """`computation` with its dimensions that have no bound refined from `arguments` (numpy
    arrays, one per parameter of main): each parameter takes its argument's shape, then
    StableHLO's stablehlo-refine-shapes and canonicalize-dynamism run; where dimensions
    stay dynamic, calls are inlined and each scalar integer parameter is read as its
    argument's value (jax's dimension variables) before they run again. A dimension
    that stays dynamic is a ShapeError naming it."""
    result = computation.clone()
    module = result.module
    if unbounded(module) is None:
        return result
    main = mlir.functions(module)["main"]
    block = main.regions[0].blocks[0]
    arguments = list(arguments)
    if len(arguments) != len(block.arguments):
        raise ShapeError(f"{computation.name} has dimensions with no bound: refining them takes "
                         f"one input per parameter ({len(block.arguments)}), got {len(arguments)}")
    with mlir.context():
        types = []
        for i, (arg, value) in enumerate(zip(block.arguments, arguments)):
            found = mlir.bounds(arg.type)
            if not found:
                types.append(str(arg.type))
                continue
            value = np.asarray(value)
            tt = ir.RankedTensorType(arg.type)
            fits = value.ndim == tt.rank and all(
                size in (mlir.DYNAMIC, n) and (bound in (None, mlir.DYNAMIC) or n <= bound)
                for size, bound, n in zip(tt.shape, found, value.shape))
            if not fits:
                raise ShapeError(f"parameter {i} of {computation.name} is {arg.type}: an input "
                                 f"of shape {list(value.shape)} does not fit it")
            types.append(str(mlir.ir_type(T.Shape(_element(tt), value.shape))))
        # (refine-arguments keeps the module valid meanwhile: a wrapper op the next removes)
        _refine(computation, module, f"builtin.module(stablehlo-refine-arguments{{types="
                                     f"{','.join(types)}}},{REFINE[len('builtin.module('):]}")
        if unbounded(module) is not None:  # sizes carried by values: jax's dimension variables
            mlir.inline_calls(block, mlir.functions(module))
            mlir.drop_unused_functions(module, main)
            first = block.operations[0].operation
            for arg, value in zip(block.arguments, arguments):
                shape = mlir.shape_of_type(arg.type)
                if shape.rank == 0 and shape.element_type.is_integer and len(list(arg.uses)):
                    b = InsertingBuilder(module, first, "a dimension variable")
                    arg.replace_all_uses_with(b.constant(np.asarray(value, shape.dtype)).value)
            _refine(computation, module, REFINE)
    left = unbounded(module, source=computation.source)
    if left is not None:
        raise ShapeError(f"{computation.name}: {left} stays dynamic once refined from the "
                         f"inputs' shapes and dimension values (stablehlo-refine-shapes): "
                         f"hlogen runs static shapes and bounded dynamic ones")
    mlir.drop_unused_functions(module, main)
    return Computation(module, computation.source)


def _refine(computation: Computation, module, pipeline: str) -> None:
    try:
        mlir.run_pipeline(module, pipeline)
    except HlogenError as e:  # StableHLO's passes refuse the module so refined
        raise ShapeError(f"{computation.name}: StableHLO's shape refinement fails on it with "
                         f"these inputs: {str(e).partition(' failed:')[2].strip() or e}") from None


def _element(tt) -> T.ElementType:
    return T.element_type_of_mlir(str(tt.element_type))

