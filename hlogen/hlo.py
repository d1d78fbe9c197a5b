"""XLA's HLO in: HLO text as XLA prints it, XLA's dump protos (`xla.HloProto`) and bare
serialized `HloModuleProto`s, recognized by content, made StableHLO by jaxlib's
HLO-to-StableHLO converter (hlogen.native).

What the converter leaves outside StableHLO is legalized (`LEGALIZED`, e.g. XLA's `topk`
becomes chlo.top_k, then StableHLO) or refused with the op's name. Optimized modules
(XLA's `*after_optimizations*` dumps, `compile().as_text()`: scheduled, fused, with
layouts) are read as the plain HLO that computes the same values (`plain_hlo`); their
XLA-internal custom calls (TopK, __onednn$...) convert, and the preflight refuses to run
them. What XLA's HLO parser is known to abort on (parameter numbers that are not 0..N-1)
is refused before native code sees it. Other malformed HLO
can still end the process in XLA's parser (it CHECKs its shape rules while it reads):
`isolated=True` runs the native part in a child process, as the command line does.
Parameter names come from the HLO (jax's argument names, kept in dumps as metadata, or
the instructions' names) and are kept in hlogen's name attribute.
"""
from __future__ import annotations

import math
import re
import signal

import numpy as np
from jaxlib.mlir import ir

from hlogen import errors, mlir, native
from hlogen import types as T
from hlogen.computation import given_names, main_of, set_names
from hlogen.errors import InputError, UnsupportedError

# -- recognizing HLO -----------------------------------------------------------------------

# HLO text starts with its module header, after blank lines and comments
_HEADER = re.compile(rb"\A(?:\s+|//[^\n]*\n|/\*.*?\*/)*HloModule\s", re.S)


def is_text(data: bytes) -> bool:
    return _HEADER.match(data[:4096]) is not None


def proto_fields(data: bytes):
    """(field number, wire type, value) of each field of a protobuf message; ValueError
    where `data` is not one (the wire format: varints, 64-bit, length-delimited, 32-bit).
    (hlogen.runtime.xla_options reads XLA's DebugOptions descriptor with it too.)"""
    i, n = 0, len(data)
    while i < n:
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == 0:
            value, i = _varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            size, i = _varint(data, i)
            value, i = data[i:i + size], i + size
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        if i > n:
            raise ValueError("truncated")
        yield number, wire, value


def _varint(data: bytes, i: int):
    value = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[i]
        value |= (b & 0x7F) << shift
        i += 1
        shift += 7
        if not b & 0x80:
            return value, i


def module_proto(data: bytes) -> bytes | None:
    """The serialized HloModuleProto `data` is or holds (an `xla.HloProto`, as XLA's
    dumps write, keeps it in field 1; an `xla.HloSnapshot`, `*.snapshot.N.pb`, keeps such
    an HloProto in field 1), or None when `data` is none of them."""
    found = _nested_module(data)
    return found[0] if found else None


def _nested_module(data: bytes):
    """(the HloModuleProto, how deep it lies: 0 itself, 1 in an HloProto, 2 in an
    HloSnapshot) or None."""
    for depth in range(3):
        if not data.startswith(b"\x0a"):  # each begins with field 1, length-delimited
            return None
        try:
            fields = list(proto_fields(data))
            first = fields[0][2]
            # HloModuleProto's field 1 is its name; an HloProto's (a snapshot's) is a
            # message that itself begins with field 1
            if first.startswith(b"\x0a") and list(proto_fields(first)):
                data = first
                continue
            first.decode("utf-8")
        except (ValueError, UnicodeDecodeError, IndexError):
            return None
        # a module has computations (field 3, messages)
        return (data, depth) if any(n == 3 and w == 2 for n, w, _ in fields) else None
    return None


# -- HloSnapshot: a module with the arguments it ran with --------------------------------------

# PrimitiveType (xla/xla_data.proto) -> (element type, the LiteralProto field of its values,
# how they are stored: packed varints, packed little-endian words, or bytes as the
# element type's own little-endian values, one per byte for types narrower than a byte)
_LITERAL_FIELDS = {
    1: ("pred", 2, "varint"), 26: ("s2", 26, "bytes"), 21: ("s4", 21, "bytes"),
    2: ("s8", 15, "bytes"), 3: ("s16", 17, "bytes"), 4: ("s32", 4, "varint"),
    5: ("s64", 5, "varint"), 27: ("u2", 27, "bytes"), 22: ("u4", 22, "bytes"),
    6: ("u8", 3, "bytes"), 7: ("u16", 16, "bytes"), 8: ("u32", 6, "varint"),
    9: ("u64", 7, "varint"), 10: ("f16", 11, "bytes"), 16: ("bf16", 13, "bytes"),
    11: ("f32", 8, "words"), 12: ("f64", 9, "words"), 15: ("c64", 12, "words"),
    18: ("c128", 18, "words"), 19: ("f8e5m2", 19, "bytes"), 20: ("f8e4m3fn", 20, "bytes"),
    23: ("f8e4m3b11fnuz", 23, "bytes"), 24: ("f8e5m2fnuz", 24, "bytes"),
    25: ("f8e4m3fnuz", 25, "bytes"), 28: ("f8e4m3", 28, "bytes"), 29: ("f8e3m4", 29, "bytes"),
    32: ("f4e2m1fn", 32, "bytes"), 33: ("f8e8m0fnu", 33, "bytes"),
}
_TUPLE = 13  # PrimitiveType TUPLE: the literal's elements are LiteralProtos (field 10)


def snapshot_arguments(data: bytes, where: str) -> list | None:
    """The arguments an HloSnapshot (XLA's `xla_dump_hlo_snapshots=true` dumps,
    `*.snapshot.N.pb`: the module, the arguments it ran with, its result) recorded, as
    numpy arrays (a tuple for a tuple argument); None where `data` is no snapshot."""
    found = _nested_module(data)
    if found is None or found[1] != 2:
        return None
    try:
        return [_literal(value) for number, wire, value in proto_fields(data)
                if number == 2 and wire == 2]
    except (ValueError, KeyError, IndexError) as e:
        raise InputError(f"{where}: an HloSnapshot whose recorded arguments do not read "
                         f"({e or type(e).__name__})") from None


def _literal(proto: bytes):
    """A LiteralProto as a numpy array (a tuple of them for a tuple)."""
    fields = list(proto_fields(proto))
    shape = next(v for n, _, v in fields if n == 1)
    shape_fields = list(proto_fields(shape))
    kind = next((v for n, w, v in shape_fields if n == 2 and w == 0), 0)
    if kind == _TUPLE:
        return tuple(_literal(v) for n, _, v in fields if n == 10)
    if kind not in _LITERAL_FIELDS:
        raise ValueError(f"element type {kind} of xla_data.proto's PrimitiveType, which "
                         f"hlogen does not read from a literal")
    name, field, how = _LITERAL_FIELDS[kind]
    et = T.ELEMENT_TYPES[name]
    dims = _varints(shape_fields, 3)
    layout = next((v for n, _, v in shape_fields if n == 5), None)
    minor_to_major = _varints(list(proto_fields(layout)), 1) if layout is not None else []
    parts = [(w, v) for n, w, v in fields if n == field]
    if how == "varint":
        raw = np.array(_varints([(field, w, v) for w, v in parts], field), np.uint64)
        values = raw.view(np.int64).astype(et.dtype) if et.kind == T.SIGNED else raw.astype(et.dtype)
    else:
        blob = b"".join(v for _, v in parts)
        base = et.component.dtype if et.kind == T.COMPLEX else et.dtype
        values = np.frombuffer(blob, np.dtype(base).newbyteorder("<")).astype(base)
        if et.kind == T.COMPLEX:
            values = values.view(et.dtype)
    size = int(np.prod(dims, dtype=np.int64))
    if values.size != size:
        raise ValueError(f"{size} values of {et.name}{list(dims)} expected, {values.size} found")
    # the values lie in the layout's order: the most major dimension first
    order = list(reversed(minor_to_major)) or list(range(len(dims)))
    physical = values.reshape([dims[d] for d in order])
    return np.ascontiguousarray(physical.transpose([order.index(d) for d in range(len(dims))]))


def _varints(fields: list, number: int) -> list:
    """The integers of field `number` (repeated: packed, or one field per value)."""
    out = []
    for n, wire, value in fields:
        if n != number:
            continue
        if wire == 0:
            out.append(value)
            continue
        i = 0
        while i < len(value):
            v, i = _varint(value, i)
            out.append(v)
    return out


def proto_damage(data: bytes) -> str | None:
    """Why `data`, which begins as XLA's HLO protos do (a serialized HloModuleProto: field
    1, its name; an `xla.HloProto`, as dumps' .hlo.pb: field 1, such a module) but is not
    one, does not read as one ("truncated", ...); None where it does not begin so (text
    that begins with a line break does not: no name follows), or reads."""
    if not data.startswith(b"\x0a"):
        return None
    try:
        size, i = _varint(data, 1)
        if data[i:i + 1] == b"\x0a":  # an HloProto: its module, whose name comes first
            size, i = _varint(data, i + 1)
    except ValueError:
        return None
    if not 0 < size < 4096 or not _NAME.fullmatch(data[i:i + size]):
        return None
    try:
        list(proto_fields(data))
    except ValueError as e:
        return "it ends inside a field (truncated)" if str(e) == "truncated" else \
            f"it does not read as protobuf fields ({e})"
    return None


_NAME = re.compile(rb"[\w.\-]+")


# -- optimized modules as plain HLO ----------------------------------------------------------

# an instruction: "%name = SHAPE opcode(operands), attributes" (a shape holds no " x(")
_INSTRUCTION = re.compile(
    r"^([ \t]*(?:ROOT\s+)?)%?([^\s=%]+) = ([^=\n]*?) ([a-z][a-z0-9-]*)\((.*)$", re.M)
_ARRAY_SHAPE = re.compile(r"([a-z][a-z0-9]*)\[([\d,]*)\](?:\{([\d,]*)\})?")
_OPERAND = re.compile(r"(?:[^%)]*?\s)?%?([^\s,%)]+)\)(.*)")


def plain_hlo(text: str, where: str) -> str:
    """An optimized module (XLA's `*after_optimizations*` dumps, `compile().as_text()`)
    as plain HLO that computes the same values, which the converter reads: a fusion
    becomes a call of its fused computation, and a bitcast, which reads its operand's
    bytes in the layout of its result, the transposes and reshape that read them so
    (and a bitcast-convert between element types of one width). Layouts change no other
    value. Text without either comes back as it is."""
    if " fusion(" not in text and " bitcast(" not in text:
        return text
    shapes = {m.group(2): m.group(3) for m in _INSTRUCTION.finditer(text)}

    def plain(m):
        head, name, shape, opcode, rest = m.groups()
        if opcode == "fusion":
            rest = re.sub(r",\s*kind=k\w+", "", rest).replace("calls=", "to_apply=", 1)
            return f"{head}%{name} = {shape} call({rest}"
        if opcode == "bitcast":
            try:
                return _bitcast(head, name, shape, rest, shapes)
            except ValueError as e:
                line = text.count("\n", 0, m.start()) + 1
                raise UnsupportedError(f"{where}:{line}: {e}") from None
        return m.group(0)

    return _INSTRUCTION.sub(plain, text)


def _bitcast(head: str, name: str, shape: str, rest: str, shapes: dict) -> str:
    """The instructions of a bitcast (see plain_hlo), the last one named as it was;
    ValueError for one hlogen does not read."""
    operand = _OPERAND.match(rest)
    source = shapes.get(operand.group(1), "") if operand else ""
    to, of = _array(shape), _array(source)
    if to is None or of is None or to[0].bits != of[0].bits or \
            math.prod(to[1]) != math.prod(of[1]):
        raise ValueError(f"bitcast of {source or 'its operand'} to {shape}: hlogen reads "
                         f"bitcasts between arrays of one size and element width only")
    (et, dims, order), (source_et, source_dims, source_order) = to, of
    physical = _listed(dims[d] for d in order)  # major to minor
    inverse = [order.index(d) for d in range(len(order))]
    # (shape, opcode and attributes) of each step; those that change nothing left out
    steps = []
    if source_order != sorted(source_order):  # the operand in the order of its bytes
        steps.append((f"{source_et.name}[{_listed(source_dims[d] for d in source_order)}]",
                      "transpose", f", dimensions={{{_listed(source_order)}}}"))
    if [source_dims[d] for d in source_order] != [dims[d] for d in order]:
        steps.append((f"{source_et.name}[{physical}]", "reshape", ""))
    if et != source_et:
        steps.append((f"{et.name}[{physical}]", "bitcast-convert", ""))
    if inverse != sorted(inverse):  # the bytes in the result's order
        steps.append((shape, "transpose", f", dimensions={{{_listed(inverse)}}}"))
    elif steps:
        steps[-1] = (shape, *steps[-1][1:])
    else:
        steps = [(shape, "reshape", "")]  # a copy
    names = [f"{name}.hlogen.{k}" for k in range(len(steps) - 1)] + [name]
    operands = [operand.group(1)] + names[:-1]
    made = [f"%{n} = {s} {opcode}(%{o}){attributes}"
            for n, o, (s, opcode, attributes) in zip(names, operands, steps)]
    made[-1] = ("ROOT " if "ROOT" in head else "") + made[-1] + operand.group(2)
    # one line, the bitcast's (XLA's parser reads instructions, not lines), so that the
    # lines its messages give stay the file's
    return re.match(r"[ \t]*", head).group(0) + " ".join(made)


def _array(text: str):
    """(element type, dimensions, dimensions major to minor) of an array shape with its
    layout ("f32[2,3]{0,1}"; none given: row-major), or None."""
    m = _ARRAY_SHAPE.fullmatch(text.strip())
    if m is None or m.group(1) not in T.ELEMENT_TYPES:
        return None
    dims = [int(d) for d in m.group(2).split(",") if d]
    minor_to_major = [int(d) for d in m.group(3).split(",") if d] if m.group(3) is not None \
        else list(reversed(range(len(dims))))
    if sorted(minor_to_major) != list(range(len(dims))):
        return None
    return T.ELEMENT_TYPES[m.group(1)], dims, minor_to_major[::-1]


def _listed(values) -> str:
    return ",".join(map(str, values))


# XLA's topk of the smallest elements: the converter's mhlo.topk reads back without its
# `largest` (see LEGALIZED), so it would silently become the largest
_SMALLEST_TOPK = re.compile(r"\btopk\([^\n]*\blargest=false")


def refusals(text: str, where: str) -> None:
    """What hlogen refuses of an HLO module before XLA's code sees it (its text)."""
    m = _SMALLEST_TOPK.search(text)
    if m:
        line = text.count("\n", 0, m.start()) + 1
        raise UnsupportedError(f"{where}:{line}: topk with largest=false: hlogen legalizes "
                               f"XLA's topk of the largest elements only; negate the operand "
                               f"and the values instead")


# a computation's first line: unindented (instructions are), ending with its opening brace
_COMPUTATION = re.compile(r"^(?=[^\s}])(?:ENTRY\s+)?%?([^\s(]+)[^\n]*\{[ \t]*$", re.M)
# (a literal first, which the regex engine finds fast; the opcode follows the shape's space)
_PARAMETER = re.compile(r" parameter\((\d+)\)")


def check_parameter_numbers(text: str, where: str) -> None:
    """Each computation's parameters must be numbered 0..N-1 once each: XLA's HLO parser
    ends the process otherwise."""
    heads = list(_COMPUTATION.finditer(text))
    for k, head in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        numbers = sorted(int(m.group(1)) for m in _PARAMETER.finditer(text, head.end(), end))
        if numbers != list(range(len(numbers))):
            line = text.count("\n", 0, head.start()) + 1
            raise InputError(f"{where}:{line}: computation {head.group(1)}: its parameters "
                             f"are numbered {numbers}; HLO numbers them 0..N-1, once each")


# -- conversion ------------------------------------------------------------------------------

def stablehlo_module(data: bytes, kind: str, where: str, isolated: bool = False) -> ir.Module:
    """The StableHLO module of HLO `data` (`kind` "text", or "proto": a serialized
    HloModuleProto). `isolated`: XLA's native code runs in a child process (its HLO
    parser ends the process on some malformed modules; see stablehlo_bytecode)."""
    bytecode = (_bytecode_in_child(data, kind, where) if isolated
                else stablehlo_bytecode(data, kind, where))
    module = _parse(bytecode, where)
    _untuple_custom_calls(module)
    main = main_of(module, where)
    set_names(main, parameter_names(given_names(main)))
    return module


def _untuple_custom_calls(module: ir.Module) -> None:
    """HLO gives a custom call of several results one tuple result, read with
    get-tuple-element; StableHLO (and jax) give it several results. The converter keeps
    the tuple, which the reference interpreter cannot take from a custom call: a call whose
    tuple is only read element by element becomes one of several results."""
    calls = [op for op in mlir.walk(module) if op.name == "stablehlo.custom_call"]
    for op in calls:  # (collected first: the loop erases ops)
        if len(op.results) != 1 or not isinstance(op.results[0].type, ir.TupleType):
            continue
        tuple_type = ir.TupleType(op.results[0].type)
        types = [tuple_type.get_type(i) for i in range(tuple_type.num_types)]
        uses = [use.owner for use in op.results[0].uses]
        if any(u.name != "stablehlo.get_tuple_element" for u in uses):
            continue
        with ir.InsertionPoint(op), op.location:
            untupled = ir.Operation.create(
                "stablehlo.custom_call", results=types, operands=list(op.operands),
                attributes={name: op.attributes[name] for name in op.attributes})
        for use in uses:
            use.results[0].replace_all_uses_with(
                untupled.results[ir.IntegerAttr(use.attributes["index"]).value])
            use.erase()
        op.erase()


def stablehlo_bytecode(data: bytes, kind: str, where: str) -> bytes:
    """The converter's StableHLO bytecode of HLO `data`, after the refusals of what XLA
    is known to fail or abort on. Other malformed HLO can still end the process (XLA's
    parser CHECKs its shape rules): the command line reads HLO in a child process."""
    if kind == "text":
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{where}: HLO text that is not UTF-8 (byte {e.start})") from None
        refusals(text, where)
        check_parameter_numbers(text, where)
        proto = _proto_of(plain_hlo(text, where), where)
    else:
        proto = data
        text = _native("hlo_proto_to_text", where, "not an HloModuleProto XLA can read", proto)
        refusals(text, where)
        plain = plain_hlo(text, where)
        if plain != text:
            proto = _proto_of(plain, where)
    return _native("hlo_to_stablehlo", where, "XLA's HLO-to-StableHLO converter refused it",
                   proto)


def _proto_of(text: str, where: str) -> bytes:
    """HLO text as a serialized HloModuleProto (XLA's HLO parser)."""
    try:
        return native.call("hlo_text_to_proto", text)
    except Exception as e:  # jaxlib's JaxRuntimeError
        m = _PARSER_AT.search(str(e))
        if m:  # XLA's parser says where: file:line:col, as MLIR's errors are given
            raise InputError(f"{where}:{m.group(1)}:{m.group(2)}: {m.group(3)}") from None
        raise InputError(f"{where}: XLA's HLO parser refused it: {_short(e)}") from None


_PARSER_AT = re.compile(r"was parsing (\d+):(\d+): error: ([^\n]*)")
# stablehlo_bytecode in a child process: the bytecode on stdout, or an hlogen error
# (its class, then its message) on stderr with status 3
_CHILD = """
import sys
from hlogen import errors, hlo
try:
    out = hlo.stablehlo_bytecode(sys.stdin.buffer.read(), sys.argv[1], sys.argv[2])
except errors.HlogenError as e:
    sys.stderr.write(f"{type(e).__name__}\\n{e}")
    sys.exit(3)
sys.stdout.buffer.write(out)
"""
_CHILD_SECONDS = 600


def _bytecode_in_child(data: bytes, kind: str, where: str) -> bytes:
    child = native.run_child(_CHILD, data, [kind, where], _CHILD_SECONDS)
    if child is None:
        raise InputError(f"{where}: XLA did not finish reading this HLO in {_CHILD_SECONDS} s")
    if child.returncode == 0:
        return child.stdout
    said = child.stderr.decode("utf-8", errors="replace")
    if child.returncode == 3:
        kind_of_error, _, message = said.partition("\n")
        raise getattr(errors, kind_of_error, InputError)(message)
    if child.returncode < 0:
        fatal = native.FATAL.search(said)
        raise InputError(f"{where}: XLA's HLO reader ended the process on it "
                         f"({signal.Signals(-child.returncode).name}): "
                         f"{fatal.group(1) if fatal else 'a malformed module'}")
    raise InputError(f"{where}: XLA could not read this HLO: {said.strip()[-2000:]}")


def _native(name: str, where: str, what: str, *args):
    try:
        return native.call(name, *args)
    except Exception as e:  # jaxlib's errors: JaxRuntimeError, ValueError
        raise InputError(f"{where}: {what}: {_short(e)}") from None


def _short(error: Exception) -> str:
    text = str(error).strip()
    return text if len(text) < 2000 else text[:2000] + " ..."


_UNIQUIFIED = re.compile(r"\.\d+$")


def parameter_names(names: list) -> list:
    """The converter names parameters by their metadata's op_name (jax writes the
    argument's name there) or else the instruction's name, which XLA makes unique
    across the module (x -> x.2): the suffix goes where the names stay distinct."""
    plain = [_UNIQUIFIED.sub("", n) if n else n for n in names]
    given = [n for n in plain if n]
    return plain if len(set(given)) == len(given) else names


def _parse(bytecode: bytes, where: str) -> ir.Module:
    ctx = mlir.context()
    with mlir.collected_diagnostics() as messages:
        try:
            return ir.Module.parse(bytecode, context=ctx)
        except ir.MLIRError as e:
            said = _all(messages) or mlir.diagnostics(e)
            if "dialect 'mhlo' is unknown" not in said:
                raise InputError(f"{where}: the converted module does not verify: "
                                 f"{said}") from None
    return _legalize_mhlo(bytecode, where)


def _all(messages) -> str:
    return "; ".join(messages)


# mhlo op the converter leaves -> (its StableHLO-side form, rewriting its generic text)
LEGALIZED = {
    # XLA's topk (largest first, as jax's top_k): chlo.top_k, which the CHLO legalization
    # turns into a sort and slices; the generic form prints its k as <K : i64>
    "mhlo.topk": (re.compile(r'"mhlo\.topk"\((%[^)]*)\) <(\d+) : i64>'),
                  r'"chlo.top_k"(\1) {k = \2 : i64}'),
    # a copy (optimized modules copy between layouts; values do not change): a reshape to
    # its own shape, which canonicalization removes
    # (its properties print as <...>, its attributes as {...}: layouts, XLA's frontend
    # attributes; none is a reshape's)
    "mhlo.copy": (re.compile(r'"mhlo\.copy"\((%[^)]*)\)(?: <[^>\n]*>)?(?: \{[^\n]*\})? : \('),
                  r'"stablehlo.reshape"(\1) : ('),
}
_MHLO_OP = re.compile(r'"(mhlo\.[\w.]+)"\(')
_FROM_OPTIMIZED = {"mhlo.fusion", "mhlo.bitcast"}


def _legalize_mhlo(bytecode: bytes, where: str) -> ir.Module:
    """Reads the converter's output with MHLO ops as unregistered ones, rewrites those
    LEGALIZED knows, and refuses the others by name."""
    ctx = mlir.context()
    with mlir.collected_diagnostics() as messages:
        ctx.allow_unregistered_dialects = True
        try:
            module = ir.Module.parse(bytecode, context=ctx)
            text = module.operation.get_asm(print_generic_op_form=True, enable_debug_info=True)
        except ir.MLIRError:
            raise UnsupportedError(
                f"{where}: XLA's converter made MHLO (not StableHLO) that this jaxlib cannot "
                f"read back: {_all(messages)}") from None
        finally:
            ctx.allow_unregistered_dialects = False
    for pattern, replacement in LEGALIZED.values():
        text = pattern.sub(replacement, text)
    left = sorted(set(_MHLO_OP.findall(text)))
    if left:
        hint = ("they come from optimized modules: run the one XLA dumped before optimizations"
                if set(left) & _FROM_OPTIMIZED else "neither backend can run them")
        raise UnsupportedError(f"{where}: XLA's converter leaves {', '.join(left)} outside "
                               f"StableHLO, and hlogen has no StableHLO form of them (it "
                               f"legalizes {', '.join(LEGALIZED)}): {hint}")
    with mlir.collected_diagnostics() as messages:
        try:
            module = ir.Module.parse(text, context=ctx)
        except ir.MLIRError as e:
            raise InputError(f"{where}: the converted module does not verify: "
                             f"{_all(messages) or mlir.diagnostics(e)}") from None
    mlir.run_pipeline(module, f"builtin.module({mlir.LEGALIZE})")
    return module
