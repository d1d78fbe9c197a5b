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

from hlogen import mlir, rewrites
from hlogen.computation import Computation
from hlogen.errors import HlogenError

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
