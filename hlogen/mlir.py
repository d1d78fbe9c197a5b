"""The one place that creates the MLIR context and registers dialects and passes.

Everything else asks this module for the context, for MLIR types of hlogen
shapes (cached: emission is on the hot path), for locations, for dense
attributes made from numpy arrays, for the structure of a module (its functions,
an op's defining op, a custom call's target, inlining a call), for attributes of
parsed ops, and for the guard on MLIR text that the parser would die on.
"""
from __future__ import annotations

import ast
import os
import re
import sys
import threading

import numpy as np
from jaxlib.mlir import ir, passmanager
from jaxlib.mlir.dialects import chlo, sdy, stablehlo
from jaxlib.mlir._mlir_libs import _jax_mlir_ext

from hlogen import types as T
from hlogen.errors import HlogenError, InputError, ShapeError

_lock = threading.Lock()
_context: ir.Context | None = None
_ir_types: dict = {}
_locations: dict = {}
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def per_module(kept: int):
    """A decorator: `function(module)` computed once per module object, for the last
    `kept` modules (a pass over a module is asked for again by each step that runs it;
    modules are not hashable, and identity is what is asked)."""
    def decorate(function):
        read: list = []

        def remembered(module):
            for module_seen, found in read:
                if module_seen is module:
                    return found
            found = function(module)
            read.insert(0, (module, found))
            del read[kept:]
            return found
        remembered.__doc__, remembered.__name__ = function.__doc__, function.__name__
        return remembered
    return decorate


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
                stablehlo.register_interpreter_dialect(ctx)
                stablehlo.register_stablehlo_passes()
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
    if "?" in text and text.startswith("tensor<"):
        # a bounded dynamic dimension has its bound as its size (hlogen.dynamism)
        return T.Shape(_element_of(t), static_dimensions(t))
    m = _TENSOR.match(text)
    if m is None:
        raise ShapeError(f"hlogen handles ranked tensors, tuples and tokens, not {text}")
    dims = m.group(1)
    return T.Shape(T.element_type_of_mlir(m.group(2)),
                   tuple(int(d) for d in dims.split("x")) if dims else ())


def _element_of(t: ir.Type) -> T.ElementType:
    return T.element_type_of_mlir(str(ir.RankedTensorType(t).element_type))


DYNAMIC = -9223372036854775808  # MLIR's size of a dynamic dimension (ShapedType.get_dynamic_size)


def bounds(t: ir.Type) -> tuple | None:
    """Per dimension of a ranked tensor type, None for a static one and the bound of a
    dynamic one (DYNAMIC where it has none); None for a static type (or no tensor)."""
    try:
        tt = ir.RankedTensorType(t)
    except ValueError:
        return None
    if not tt.has_static_shape:
        try:
            known = list(stablehlo.TypeExtensions(tt.encoding).bounds)
        except (ValueError, TypeError):  # no encoding, or another one: no bounds
            known = [DYNAMIC] * tt.rank
        return tuple(None if size != DYNAMIC else known[d] for d, size in enumerate(tt.shape))
    return None


def static_dimensions(t: ir.Type) -> tuple:
    """The dimensions of a ranked tensor type with each bounded dynamic one at its bound;
    a dimension with no bound is a ShapeError naming it."""
    tt = ir.RankedTensorType(t)
    dims = []
    for d, (size, bound) in enumerate(zip(tt.shape, bounds(t) or [None] * tt.rank)):
        if size == DYNAMIC and bound == DYNAMIC:
            raise ShapeError(f"dimension {d} of {t} is dynamic with no bound: give inputs "
                             f"whose shapes refine it (stablehlo-refine-shapes), or a bound")
        dims.append(bound if size == DYNAMIC else size)
    return tuple(dims)


def bounded_type(shape: T.Shape, dynamic) -> ir.Type:
    """The type of `shape` with the dimensions in `dynamic` dynamic, bounded by their sizes
    (`tensor<?xf32, #stablehlo.bounds<10>>`); the static type when `dynamic` is empty."""
    if not dynamic:
        return ir_type(shape)
    with context(), ir.Location.unknown():
        encoding = stablehlo.TypeExtensions.get(
            [n if d in dynamic else DYNAMIC for d, n in enumerate(shape.dimensions)])
        return ir.RankedTensorType.get(
            [DYNAMIC if d in dynamic else n for d, n in enumerate(shape.dimensions)],
            element_ir_type(shape.element_type), encoding)


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


def walk_op(op, found: list | None = None) -> list[ir.Operation]:
    """`op` and every op nested in it, in order (appended to `found`, when given).

    MLIR's own walk, in C++ (not Python's recursion, which modules can nest deeper than),
    calling back for each op: a third of the cost of iterating the blocks in Python.
    """
    found = [] if found is None else found
    append, advance = found.append, ir.WalkResult.ADVANCE

    def visit(inner):
        append(inner)
        return advance

    op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
    return found


def walk(module: ir.Module) -> list[ir.Operation]:
    """Every op nested in `module`, in order (the module itself excluded)."""
    found: list = []
    for op in module.body.operations:
        walk_op(op, found)
    return found


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


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """`text` split on `sep` outside brackets (an arrow's `>` is no bracket), each part
    stripped."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "[({<":
            depth += 1
        elif c in "])}>" and not (c == ">" and text[i - 1] == "-"):
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


# -- the structure of a module -------------------------------------------------------------

def symbol_name(op) -> str:
    """The symbol name of a function (or module): "main" of `func.func @main`."""
    return ir.StringAttr(op.operation.attributes["sym_name"]).value


def functions(module: ir.Module) -> dict:
    """The func.func ops of `module` by name, in order."""
    return {symbol_name(op): op.operation for op in module.body.operations
            if op.operation.name == "func.func"}


def function_type(function) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)


def defining_op(value, name: str | None = None) -> ir.Operation | None:
    """The op that makes `value` (only if it is a `name` op, when given); None for an
    argument of a block."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner is None:
        return None
    owner = owner.operation if hasattr(owner, "operation") else owner
    return owner if name is None or owner.name == name else None


def call_target(op) -> str | None:
    """The target a stablehlo.custom_call calls; None for any other op."""
    if op.name != "stablehlo.custom_call":
        return None
    return ir.StringAttr(op.attributes["call_target_name"]).value


def inline_call(callee, operands: list, ip: ir.InsertionPoint, loc: ir.Location) -> list:
    """The results of `callee` (a func.func) on `operands`, its body inlined at `ip`
    (jax's inliner: MLIR's `inline` pass does nothing for func here)."""
    with ip, loc:
        return list(_jax_mlir_ext.inlined_func_call(callee, list(operands)))


def inline_calls(block: ir.Block, table: dict) -> None:
    """Inlines every func.call of `block` (not of its ops' regions), the calls the inlined
    bodies make too; `table` is `functions(module)`."""
    for _ in range(64):  # callees may call functions in turn
        calls = [op.operation for op in block.operations if op.operation.name == "func.call"]
        if not calls:
            return
        for call in calls:
            callee = table[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]
            values = inline_call(callee, call.operands, ir.InsertionPoint(call), call.location)
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
    """Erases the functions `main` does not refer to, directly or through others."""
    table = functions(module)
    used, todo = set(), [main]
    while todo:
        names: list = []

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


def parse_attribute(text, where: str) -> ir.Attribute:
    """An attribute from its text, behind check_text (MLIR's parser recurses once per
    bracket); InputError naming `where` when it does not parse."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    try:
        source = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{where}: {text!r} is not UTF-8 text") from None
    check_text(data, where)
    try:
        return ir.Attribute.parse(source, context=context())
    except (ir.MLIRError, ValueError) as e:
        detail = diagnostics(e) if isinstance(e, ir.MLIRError) else str(e)
        raise InputError(f"{where}: {detail}") from None


# Element types numpy reads from MLIR attributes as they are: the interpreter's results
# and constants of other types are converted inside the module or decoded from their text
# (reading a complex attribute from Python can end the process).
ATTRIBUTE_READABLE = frozenset({"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                                "f16", "f32", "f64"})


# -- attributes made (emission: hlogen.ops, hlogen.semantics, the runtime's wrapper) --------

_i64_arrays: dict = {}


def i64_array(values) -> ir.Attribute:
    key = tuple(values)
    found = _i64_arrays.get(key)
    if found is None:
        if len(_i64_arrays) > 4096:  # attributes live in the context anyway; this is a shortcut
            _i64_arrays.clear()
        found = _i64_arrays[key] = ir.DenseI64ArrayAttr.get(list(key), context=context())
    return found


def int_attr(value: int, bits: int = 64) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(bits, context=context()), value)


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


# -- constants decoded (the conformance runner's lifted constants, the fuzzer's probes) -----

_HEX = re.compile(r'dense<"0x([0-9A-Fa-f]*)">')
_LITERAL = re.compile(r"dense<(.*)>\s*:\s*tensor<", re.S)


def decode_constant(op: ir.Operation) -> np.ndarray | None:
    """The value of a `stablehlo.constant` as a numpy array, or None when it cannot be
    decoded exactly (it then stays a constant)."""
    shape = shape_of_type(op.results[0].type)
    if not isinstance(shape, T.Shape):
        return None
    et = shape.element_type
    dims = tuple(shape.dimensions)
    if et.name in ATTRIBUTE_READABLE:  # the others: decoded from the printed hex
        array = np.array(op.attributes["value"])
        return np.broadcast_to(array, dims).astype(et.dtype) if array.shape != dims else array
    text = op.get_asm()
    m = _HEX.search(text)
    if m:
        raw = bytes.fromhex(m.group(1))
        count = int(np.prod(dims, dtype=np.int64))
        itemsize = et.dtype.itemsize
        if len(raw) == itemsize:  # a splat
            return np.broadcast_to(np.frombuffer(raw, et.dtype), dims).copy()
        if len(raw) != count * itemsize:
            return None
        return np.frombuffer(raw, et.dtype).reshape(dims).copy()
    m = _LITERAL.search(text)
    if not m:
        return None
    literal = m.group(1).replace("true", "True").replace("false", "False")
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError):
        return None
    try:
        array = _from_literal(value, et)
    except (TypeError, ValueError, OverflowError):
        return None
    return np.broadcast_to(array, dims).copy() if array.shape != dims else array


def _from_literal(value, et: T.ElementType) -> np.ndarray:
    """MLIR prints floats with a point or an exponent, and floats it cannot print exactly
    (NaN, infinities) as hex bit patterns: an int in a float literal is a bit pattern."""
    if et.kind not in (T.FLOAT, T.COMPLEX):
        return np.array(value, dtype=et.dtype)
    component = np.dtype(et.dtype).type(0).real.dtype if et.kind == T.COMPLEX else np.dtype(et.dtype)
    bits_type = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[component.itemsize]

    def real(v):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("not a number")
        if isinstance(v, int):
            return np.array([v], bits_type).view(component)[0]
        return component.type(v)

    def convert(v):
        if isinstance(v, list):
            return [convert(x) for x in v]
        if isinstance(v, tuple):
            return complex(real(v[0]), real(v[1]))
        return real(v)

    return np.array(convert(value), dtype=et.dtype)


def constant_of(value) -> np.ndarray | None:
    """The array of a `stablehlo.constant` that makes `value` (decode_constant), or None."""
    op = defining_op(value)
    return decode_constant(op) if op is not None and op.name == "stablehlo.constant" else None


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
                line, col = _line_column(text, m.start())
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
            line, col = _line_column(text, m.start())
            raise InputError(f"{where}:{line}:{col}: all_to_all has no replica groups "
                             f"(tensor<0x...>), which StableHLO's verifier divides by; name "
                             f"the groups, e.g. dense<[[0, 1, ..., N-1]]>")


def _line_column(text: str, offset: int) -> tuple[int, int]:
    """The line and column (from 1) of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


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
