"""The one place that creates the MLIR context and registers dialects and passes.

Everything else asks this module for the context, for MLIR types of hlogen
shapes (cached: emission is on the hot path), for locations, and for dense
attributes made from numpy arrays.
"""
from __future__ import annotations

import os
import re
import sys
import threading

import numpy as np
from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import chlo, sdy, stablehlo
from jaxlib.mlir._mlir_libs import _jax_mlir_ext, _stablehlo

from hlogen import types as T
from hlogen.errors import HlogenError, InputError, ShapeError

_lock = threading.Lock()
_context: ir.Context | None = None
_ir_types: dict = {}
_locations: dict = {}
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def context() -> ir.Context:
    """The process-wide MLIR context with the StableHLO, CHLO and func dialects (and the
    reference interpreter's, whose run_parallel runs replicas)."""
    global _context
    if _context is None:
        with _lock:
            if _context is None:
                ctx = ir.Context()
                registry = ir.DialectRegistry()
                # A bare Context cannot create func.func or stablehlo ops: jaxlib's
                # registry carries the dialects XLA understands.
                _jax_mlir_ext.register_dialects(registry)
                ctx.append_dialect_registry(registry)
                ctx.load_all_available_dialects()
                stablehlo.register_dialect(ctx)
                chlo.register_dialect(ctx)
                sdy.register_dialect(ctx)  # Shardy: jax's exports carry sdy attributes and ops
                _stablehlo.register_interpreter_dialect(ctx)
                _stablehlo.register_stablehlo_passes()
                _context = ctx
    return _context


def ir_type(shape) -> ir.Type:
    """The MLIR type of an hlogen shape (tensor, tuple or token)."""
    # keyed by a plain tuple for arrays: its hash and equality run in C (emission hot path)
    key = (shape.element_type, shape.dimensions) if type(shape) is T.Shape else shape
    found = _ir_types.get(key)
    if found is None:
        ctx = context()
        if isinstance(shape, T.Shape):
            found = ir.RankedTensorType.get(shape.dimensions, element_ir_type(shape.element_type),
                                            loc=ir.Location.unknown(context=ctx))
        elif isinstance(shape, T.TupleShape):
            found = ir.TupleType.get_tuple([ir_type(s) for s in shape.elements], context=ctx)
        elif isinstance(shape, T.TokenShape):
            found = stablehlo.TokenType.get(context=ctx)
        else:
            raise ShapeError(f"expected a shape, got {shape!r}")
        _ir_types[key] = found
    return found


def element_ir_type(et: T.ElementType) -> ir.Type:
    found = _ir_types.get(et)
    if found is None:
        found = _ir_types[et] = ir.Type.parse(et.mlir, context=context())
    return found


_TENSOR = re.compile(r"tensor<(?:([0-9x?]*)x)?([^<>]+(?:<[^<>]+>)?)>$")


def shape_of_type(t: ir.Type):
    """The hlogen shape of an MLIR type (the inverse of `ir_type`)."""
    text = str(t)
    if text == "!stablehlo.token":
        return T.token
    if text.startswith("tuple<"):
        tt = ir.TupleType(t)
        return T.TupleShape(tuple(shape_of_type(tt.get_type(i)) for i in range(tt.num_types)))
    m = _TENSOR.match(text)
    if m is None:
        raise ShapeError(f"hlogen handles ranked tensors, tuples and tokens, not {text}")
    dims = m.group(1)
    if dims and "?" in dims:
        raise ShapeError(f"dynamic dimensions are not supported: {text}")
    return T.Shape(T.element_type_of_mlir(m.group(2)),
                   tuple(int(d) for d in dims.split("x")) if dims else ())


def location(filename: str, line: int) -> ir.Location:
    key = (filename, line)
    found = _locations.get(key)
    if found is None:
        found = _locations[key] = ir.Location.file(filename, line, 0, context=context())
    return found


_FILE_LINE_COL = re.compile(r'"((?:[^"\\]|\\.)*)":(\d+):(\d+)')


def file_location(location: ir.Location, source: str | None = None):
    """(file, line, column) of the first file location `location` holds, or None. Text
    parsed from memory is named "-" (or "") there: its file is then `source`, where
    hlogen read the text."""
    m = _FILE_LINE_COL.search(str(location))
    if m is None:
        return None
    file = source if m.group(1) in ("-", "") and source else m.group(1)
    return file, int(m.group(2)), int(m.group(3))


def user_location() -> ir.Location:
    """The location of the first caller outside the hlogen package: the user's line."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame = frame.f_back
    if frame is None:
        return ir.Location.unknown(context=context())
    key = (frame.f_code.co_filename, frame.f_lineno)
    found = _locations.get(key)
    return found if found is not None else location(*key)


def dense_attr(array: np.ndarray, shape: T.Shape) -> ir.DenseElementsAttr:
    """A DenseElementsAttr of `shape` holding `array` (a splat when all values are equal)."""
    array = np.ascontiguousarray(array, dtype=shape.dtype)
    flat = array.reshape(-1)
    if flat.size > 1 and _all_equal(flat):
        array = flat[:1]  # MLIR reads a one-element buffer as a splat of `shape`
    return ir.DenseElementsAttr.get(array, type=element_ir_type(shape.element_type),
                                    shape=shape.dimensions, context=context())


def _all_equal(flat: np.ndarray) -> bool:
    # Compare bit patterns, so that -0.0/+0.0 and different NaNs stay distinct.
    bits = flat.view(np.uint8).reshape(flat.size, -1) if flat.dtype.itemsize else flat
    return bool((bits == bits[0]).all())


def diagnostics(error: ir.MLIRError) -> str:
    """The messages of an MLIRError, one per line, with their locations."""
    lines = []
    for d in getattr(error, "error_diagnostics", []) or []:
        lines.append(f"{d.location}: {d.message}")
        lines.extend(f"  {n.location}: note: {n.message}" for n in d.notes)
    return "\n".join(lines) or str(error)


def walk(module: ir.Module) -> list[ir.Operation]:
    """Every op nested in `module`, in order (the module itself excluded).

    MLIR's own walk, in C++ (not Python's recursion, which modules can nest deeper than),
    calling back for each op: a third of the cost of iterating the blocks in Python.
    """
    found = []
    append, advance = found.append, ir.WalkResult.ADVANCE

    def visit(op):
        append(op)
        return advance

    for op in module.body.operations:
        op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that makes `value`; None for an argument of a block."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if hasattr(owner, "operation") else owner


def nested_in(op: ir.Operation, names) -> bool:
    """Whether `op` is in a region of an op named in `names` (within its function)."""
    parent = op.parent
    while parent is not None and parent.name not in ("func.func", "builtin.module"):
        if parent.name in names:
            return True
        parent = parent.parent
    return False


def op_names(module: ir.Module) -> list[str]:
    """The names of every op nested in `module`, in order (the module itself excluded)."""
    return [op.name for op in walk(module)]


# -- attributes of parsed ops -------------------------------------------------------------

def int_attribute(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def ints_attribute(op: ir.Operation, name: str) -> list[int]:
    """An array attribute's integers, flattened ([] when the op has none)."""
    if name not in op.attributes:
        return []
    attr = op.attributes[name]
    try:
        return list(ir.DenseI64ArrayAttr(attr))
    except ValueError:  # a DenseIntElementsAttr (padding, older forms)
        return [int(x) for x in np.array(ir.DenseIntElementsAttr(attr)).reshape(-1)]


def enum_attribute(op: ir.Operation, name: str) -> str:
    """The value of a StableHLO enum attribute: "ADJOINT" of #stablehlo<transpose ADJOINT>."""
    return str(op.attributes[name]).split()[-1].rstrip(">")


# how MLIR bytecode (and so a StableHLO portable artifact) begins
BYTECODE_MAGIC = b"ML\xefR"


# CHLO and shape-dialect ops to StableHLO (a func.func pipeline): what a portable
# artifact and the reference interpreter need; hlogen.passes names it `legalize`.
LEGALIZE = "func.func(chlo-legalize-to-stablehlo,shape-legalize-to-stablehlo)"


def run_pipeline(module: ir.Module, pipeline: str) -> None:
    """Runs a textual MLIR pass pipeline on `module` in place."""
    try:
        pm = passmanager.PassManager.parse(pipeline, context=context())
    except (ValueError, ir.MLIRError) as e:
        raise HlogenError(f"invalid pass pipeline {pipeline!r}: {e}") from None
    try:
        pm.run(module.operation)
    except ir.MLIRError as e:
        raise HlogenError(f"pass pipeline {pipeline!r} failed:\n{diagnostics(e)}") from None


class collected_diagnostics:
    """Context manager collecting the context's error diagnostics as text lines."""

    def __enter__(self) -> list[str]:
        self.messages: list[str] = []

        def handler(d):
            self.messages.append(f"{d.location}: {d.message}")
            return True  # handled: do not print to stderr

        self._handler = context().attach_diagnostic_handler(handler)
        return self.messages

    def __exit__(self, *exc):
        self._handler.detach()


# -- MLIR text that the parser or StableHLO's verifier would die on ----------------------

# MLIR's parser crashes near 20,000 nested types and its printer recurses once per level;
# no real program comes near this bound.
MAX_TEXT_NESTING = 512


def check_text(data: bytes, where: str) -> None:
    """Refuses MLIR text whose brackets nest deeper than MAX_TEXT_NESTING, and text that
    StableHLO's verifier dies on (SIGFPE): an all_to_all with zero replica groups."""
    if b"all_to_all" in data:
        _check_all_to_all_groups(data.decode("utf-8", errors="replace"), where)
    opening = sum(data.count(c) for c in (b"{", b"(", b"<", b"["))
    if opening <= MAX_TEXT_NESTING:
        return  # cannot nest deeper than it has brackets
    if _deepest(data) <= MAX_TEXT_NESTING:
        return  # (the loop below finds where, when it is too deep)
    text = data.decode("utf-8", errors="replace")
    depth = 0
    for m in _BRACKETS.finditer(text):
        token = m.group()
        if token in "{(<[":
            depth += 1
            if depth > MAX_TEXT_NESTING:
                line = text.count("\n", 0, m.start()) + 1
                col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
                raise InputError(f"{where}:{line}:{col}: brackets nest deeper than "
                                 f"{MAX_TEXT_NESTING} levels; hlogen refuses such modules "
                                 f"(MLIR's parser would overflow its stack)")
        elif token in "})>]":
            depth = max(depth - 1, 0)


_NO_GROUPS = re.compile(r"replica_groups\s*=\s*dense<[^>]*>\s*:\s*tensor<0x")


def _check_all_to_all_groups(text: str, where: str) -> None:
    for m in re.finditer(r"all_to_all", text):
        arrow = text.find("->", m.end())  # the op's type, after its attributes
        if _NO_GROUPS.search(text, m.end(), arrow if arrow >= 0 else len(text)):
            line = text.count("\n", 0, m.start()) + 1
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            raise InputError(f"{where}:{line}:{col}: all_to_all has no replica groups "
                             f"(tensor<0x...>), which StableHLO's verifier divides by; name "
                             f"the groups, e.g. dense<[[0, 1, ..., N-1]]>")


# strings and arrows are skipped; every other bracket counts
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|->|[{}()<>\[\]]')
_SKIPPED = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|->')
_BRACKET_STEP = np.zeros(256, np.int8)  # byte -> +1 opens, -1 closes
_BRACKET_STEP[list(b"{(<[")] = 1
_BRACKET_STEP[list(b"})>]")] = -1


def _deepest(data: bytes) -> int:
    """How deep the brackets of `data` nest, counted as check_text's loop counts them
    (strings and arrows skipped, never below 0), in numpy: the loop costs ~3 us per
    bracket, which is most of loading a large module."""
    steps = _BRACKET_STEP[np.frombuffer(_SKIPPED.sub(b"", data), np.uint8)]
    depth = np.cumsum(steps[steps != 0], dtype=np.int64)
    # never below 0: subtract the lowest point reached so far, where it is negative
    return int((depth - np.minimum.accumulate(np.minimum(depth, 0))).max(initial=0))
