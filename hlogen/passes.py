"""Named pass pipelines, and raw MLIR pipelines.

- `legalize`: CHLO (e.g. chlo.erf) and shape-dialect ops to StableHLO: what the
  reference interpreter needs, and what every execution path runs;
- `canonicalize`: MLIR's canonicalizer and common-subexpression elimination;
- `default`: both; its output holds only StableHLO and func ops.
A comma-separated list of names runs them in order; a string that starts with
`builtin.module(` is an MLIR pass pipeline run as it is.
"""
from __future__ import annotations

from hlogen import mlir
from hlogen.computation import Computation
from hlogen.errors import HlogenError

PIPELINES = {
    "legalize": "func.func(chlo-legalize-to-stablehlo,shape-legalize-to-stablehlo)",
    "canonicalize": "func.func(canonicalize),cse",
}
PIPELINES["default"] = f"{PIPELINES['legalize']},{PIPELINES['canonicalize']}"


def mlir_pipeline(pipeline: str) -> str:
    """The MLIR pass pipeline text of a named pipeline, a list of names, or raw MLIR."""
    pipeline = pipeline.strip()
    if pipeline.startswith("builtin.module("):
        return pipeline
    names = [n.strip() for n in pipeline.split(",") if n.strip()]
    unknown = [n for n in names if n not in PIPELINES]
    if not names or unknown:
        raise HlogenError(f"unknown pipeline {pipeline!r}: use {', '.join(PIPELINES)}, a "
                          f"comma-separated list of those, or 'builtin.module(...)'")
    return f"builtin.module({','.join(PIPELINES[n] for n in names)})"


def run(computation: Computation, pipeline: str = "default") -> Computation:
    """A new Computation: `computation` after `pipeline` (the original is unchanged)."""
    text = mlir_pipeline(pipeline)
    result = computation.clone()
    mlir.run_pipeline(result.module, text)
    return result


def foreign_ops(computation: Computation) -> list[str]:
    """Names of ops in the module that are neither StableHLO nor func."""
    return [n for n in mlir.op_names(computation.module) if not n.startswith(("stablehlo.", "func."))]
