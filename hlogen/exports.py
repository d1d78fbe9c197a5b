"""jax.export's serialized `Exported` in: the bytes of `Exported.serialize()`, read by jax's
own deserializer (hlogen.native), made a Computation called as `exp.call` is called.

The module inside (`mlir_module_serialized`, a portable artifact) follows jax's calling
convention: a first platform-index argument when exported for several platforms, a token
per ordered effect (in and out), and only the arguments the function uses
(`module_kept_var_idx`). `main` is wrapped so that it takes the flat arguments a user
gives `exp.call` (every leaf of its pytree of arguments, in order) and returns the flat
results: the platform index is the CPU's, tokens are made and dropped inside.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func, stablehlo

from hlogen import mlir, native, sharding
from hlogen import types as T
from hlogen.computation import given_names, main_of, set_names
from hlogen.errors import InputError, UnsupportedError

_INNER = "_hlogen_exported_main"
_TOKEN = "!stablehlo.token"


def is_exported(data: bytes) -> bool:
    """Whether `data` looks like `Exported.serialize()`'s bytes (a flatbuffer, whose
    first 4 bytes point at its root table, holding a portable artifact, which starts with
    MLIR's bytecode magic)."""
    if len(data) < 16 or data.startswith(mlir.BYTECODE_MAGIC):
        return False
    root = int.from_bytes(data[:4], "little")
    return 4 <= root < len(data) and mlir.BYTECODE_MAGIC in data


def exported_parts(data: bytes, where: str) -> dict:
    """What hlogen needs of a serialized Exported (hlogen.runtime._jaxlib.exported_parts),
    refused where hlogen cannot run it. Its portable artifact, `parts["module"]`, is for
    hlogen.loading's one parser to read, and `wrap` to wrap."""
    try:
        parts = native.call("exported_parts", data)
    except Exception as e:  # jax's reader: flatbuffers' IndexError, struct.error, ...
        raise InputError(f"{where}: not a serialized jax Exported jax can read: "
                         f"{type(e).__name__}: {e}") from None
    polymorphic = [f"{i}: {dims}" for i, (_, dims) in enumerate(parts["in_avals"])
                   if not all(isinstance(d, (int, np.integer)) for d in dims)]
    if polymorphic:
        raise UnsupportedError(f"{where}: a shape-polymorphic export (argument {polymorphic[0]}"
                               f"): hlogen runs static shapes; export it with concrete shapes")
    return parts  # nr_devices > 1: a sharded module (hlogen.sharding), whose text says so


def wrap(module: ir.Module, parts: dict, where: str) -> None:
    """Wraps `main` of `module` (read from `parts["module"]`) to take and return what
    `exp.call` does (the module docstring says how)."""
    ctx = mlir.context()
    inner = main_of(module, where)
    inner_type = ir.FunctionType(ir.TypeAttr(inner.attributes["function_type"]).value)
    inputs, results = list(inner_type.inputs), list(inner_type.results)
    platforms = parts["platforms"]
    leading = 1 if len(platforms) > 1 else 0  # the platform index
    tokens = sum(1 for t in inputs[leading:] if str(t) == _TOKEN)
    token_results = sum(1 for t in results if str(t) == _TOKEN)
    kept = parts["kept"]
    if len(inputs) != leading + tokens + len(kept):
        raise UnsupportedError(f"{where}: @main takes {len(inputs)} arguments where jax's "
                               f"calling convention (version {parts['calling_convention_version']}"
                               f") says {leading + tokens + len(kept)}: dimension variables of "
                               f"a shape-polymorphic export are not supported")
    names = given_names(inner)[leading + tokens:]
    with ctx, ir.Location.unknown(context=ctx):
        types = [mlir.ir_type(T.Shape(T.element_type(dtype), tuple(dims)))
                 for dtype, dims in parts["in_avals"]]
        for k, i in enumerate(kept):
            if types[i] != inputs[leading + tokens + k]:
                raise InputError(f"{where}: argument {i} is {types[i]} in the export's "
                                 f"signature and {inputs[leading + tokens + k]} in its module")
        inner.attributes["sym_name"] = ir.StringAttr.get(_INNER)
        inner.attributes["sym_visibility"] = ir.StringAttr.get("private")
        wrapper = func.FuncOp("main", ir.FunctionType.get(types, results[token_results:]),
                              ip=ir.InsertionPoint.at_block_begin(module.body))
        block = wrapper.add_entry_block()
        with ir.InsertionPoint(block):
            args = []
            if leading:
                index = platforms.index("cpu") if "cpu" in platforms else 0
                index_type = ir.RankedTensorType(inputs[0])  # i32, or i64 under x64
                args.append(stablehlo.constant(ir.DenseElementsAttr.get(
                    np.array(index, np.int64 if index_type.element_type.width == 64 else
                             np.int32), type=index_type.element_type)))
            args += [stablehlo.after_all([]) for _ in range(tokens)]
            args += [block.arguments[i] for i in kept]
            call = func.CallOp(results, ir.FlatSymbolRefAttr.get(_INNER), args)
            func.ReturnOp(list(call.results)[token_results:])
        # a sharded export's shardings are its main's: the wrapper's, for XLA's partitioner
        sharding.carry_annotations(inner, wrapper.operation,
                                   {leading + tokens + k: i for k, i in enumerate(kept)},
                                   {token_results + j: j
                                    for j in range(len(results) - token_results)})
    # jax's names of the arguments the module takes (argument locations); the others,
    # which it drops, are arg<i>: known by position only
    by_kept = dict(zip(kept, names))
    set_names(wrapper.operation, [by_kept.get(i) for i in range(len(types))])
