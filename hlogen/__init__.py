"""hlogen: the XLA client library for the StableHLO era.

Build computations with XLA's operation semantics, emit StableHLO, run pass
pipelines, and execute with jaxlib's PJRT client or the StableHLO reference
interpreter:

    import numpy as np
    import hlogen as hg
    from hlogen import ops

    b = hg.Builder("matvec")
    x = b.parameter(hg.f32[2, 3], "x")
    v = b.parameter(hg.f32[3], "v")
    comp = b.build(ops.add(x, v, broadcast_dimensions=[1]))
    hg.compile(comp)(np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32))
"""
import os

# XLA's INFO log lines are noise for users; read when jaxlib first loads.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

from hlogen import distributed, graph, ops, passes  # (graph: a Computation's notebook view)
from hlogen.builder import Builder, Op
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, HlogenError, InputError, ShapeError, UnsupportedError
from hlogen.runtime.custom_calls import register_custom_call
from hlogen.function import Function, function
from hlogen.loading import load
from hlogen.ops.convolution import ConvDimensionNumbers
from hlogen.ops.elementwise import ResultAccuracy
from hlogen.ops.linalg import DotDimensionNumbers
from hlogen.runtime import compile, interpret, load_plugin
from hlogen.sharding import global_program
from hlogen.types import (ELEMENT_TYPES, ElementType, Shape, TokenShape,
                          TupleShape, element_type, token, tuple_shape)
from hlogen.types import (bf16, c64, c128, f4e2m1fn, f6e2m3fn, f6e3m2fn,
                          f8e3m4, f8e4m3, f8e4m3b11fnuz, f8e4m3fn, f8e4m3fnuz, f8e5m2,
                          f8e5m2fnuz, f8e8m0fnu, f16, f32, f64, pred, s2, s4, s8, s16, s32,
                          s64, u2, u4, u8, u16, u32, u64)

__version__ = "0.1.0"

# Imported when first used, not by `import hlogen` (its start-up): differential testing.
_LATER = {"differential": "hlogen.differential", "random_inputs": "hlogen.differential",
          "zero_inputs": "hlogen.differential", "reduce_module": "hlogen.differential.interests",
          "fuzz": "hlogen.fuzz"}


def __getattr__(name: str):
    if name not in _LATER:
        raise AttributeError(f"module 'hlogen' has no attribute {name!r}")
    import importlib  # here, not at the top: start-up (only a late name needs it)
    module = importlib.import_module(_LATER[name])
    value = module if module.__name__ == f"hlogen.{name}" else getattr(module, name)
    globals()[name] = value
    return value

__all__ = [
    "Builder", "Op", "Computation", "Function", "load", "compile", "interpret", "load_plugin",
    "function", "global_program",
    "ops", "passes", "distributed", "graph", "differential", "random_inputs", "zero_inputs",
    "reduce_module", "fuzz",
    "HlogenError", "ShapeError", "InputError", "UnsupportedError",
    "ExecutionError", "ELEMENT_TYPES", "ElementType", "Shape", "TupleShape", "TokenShape",
    "element_type", "token", "tuple_shape", "ConvDimensionNumbers", "DotDimensionNumbers",
    "ResultAccuracy", "register_custom_call",
    *ELEMENT_TYPES,
]
