"""Loading: a Computation from what a user brings, checked before native code sees it.

`load` takes a path or the bytes (or text) of a module in any of these forms, recognized
by content, not by name:
- StableHLO/MLIR text, MLIR bytecode, a StableHLO portable artifact (what jax's
  `.lower(...).as_text()` / `compiler_ir()` and hlogen write);
- XLA's HLO: text as XLA prints it, dump protos (`*.hlo.pb`), serialized
  HloModuleProtos (hlogen.hlo);
- jax.export's serialized `Exported` (hlogen.exports).
`parse_module` is the one parser of MLIR every reader uses (errors name file, line and
column). Every module loaded passes hlogen.preflight's structural checks, and keeps its
parameters' names in an argument attribute (hlogen.computation.NAME_ATTRIBUTE).
"""
from __future__ import annotations

import os
import re
import signal

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import exports, hlo, mlir, native, preflight
from hlogen.computation import Computation, given_names, is_public, main_of, set_names
from hlogen.errors import ExecutionError, InputError

# The forms read_module recognizes, in words: the command line's help texts say them
# (hlogen_cli/options.py's MODULE_FORMATS, the copy its parent reads without importing
# hlogen: tests/test_recipes.py checks that it says these)
FORMATS = ("StableHLO text, bytecode or a portable artifact",
           "XLA's HLO text or protos as XLA dumps them",
           "a serialized jax Exported")


def load(source, *, isolated: bool = False) -> Computation:
    """A Computation from a file path, or the text or bytes of a module in any form the
    module docstring lists. `isolated=True` reads HLO with XLA's native code in a child
    process: XLA's HLO parser ends the process on some malformed modules (a reshape to
    another element count, a tuple index out of range) instead of reporting an error;
    the command line reads this way. Otherwise only what is known to end it is refused
    up front (hlogen.hlo)."""
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        where = os.fspath(source)
        try:
            with open(where, "rb") as f:
                data = f.read()
        except OSError as e:
            raise InputError(f"{where}: cannot read: {e.strerror}") from None
        return load_bytes(data, where, isolated=isolated, file=where)
    if isinstance(source, str):
        source = source.encode()
    elif not isinstance(source, (bytes, bytearray)):
        raise InputError(f"load takes a path, MLIR text or bytes, got {type(source).__name__}")
    return load_bytes(bytes(source), "<text>", isolated=isolated)


def load_bytes(data: bytes, where: str, *, isolated: bool = False,
               file: str | None = None) -> Computation:
    """A Computation from the bytes of a module in any form; `where` names them in errors
    (`isolated`: as `load` says; `file`: as `parse_module` says)."""
    module = read_module(data, where, isolated=isolated, file=file)
    preflight.check_module(module, where)
    main = main_of(module, where)
    names = given_names(main)
    if any(names):  # kept in an attribute: text printed without locations keeps them
        set_names(main, names)
    return Computation(module, where)


def with_entry(comp: Computation, name: str | None, where: str) -> Computation:
    """`comp` with its public function `name` as the entry function (main), as IREE's
    tools run any public function: the functions are renamed (a copy), calls included."""
    if name in (None, "main"):
        return comp
    module = comp.clone().module
    functions = mlir.functions(module)
    public = [n for n, op in functions.items() if is_public(op)]
    if name not in functions or not is_public(functions[name]):
        what = "is private" if name in functions else "is not defined"
        raise InputError(f"{where}: @{name} {what}; --function names a public function of the "
                         f"module: {', '.join(public) or '(none)'}")
    if "main" in functions:  # the former entry keeps working under another name
        other = next(f"main_{i}" for i in range(len(functions) + 1) if f"main_{i}" not in functions)
        _rename(module, functions["main"], "main", other)
        functions["main"].attributes["sym_visibility"] = ir.StringAttr.get("private", module.context)
    _rename(module, functions[name], name, "main")
    return Computation(module, comp.source)


def _rename(module, op, old: str, new: str) -> None:
    ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
    ir.SymbolTable.set_symbol_name(op, new)


def read_module(data: bytes, where: str, *, isolated: bool = False,
                file: str | None = None) -> ir.Module:
    """The StableHLO module of `data`, in whichever form it comes (see the docstring)."""
    if not data.startswith(mlir.BYTECODE_MAGIC):
        if hlo.is_text(data):
            return hlo.stablehlo_module(data, "text", where, isolated)
        proto = hlo.module_proto(data)
        if proto is not None:  # (its bytes fields, e.g. backend configs, become strings)
            module = hlo.stablehlo_module(proto, "proto", where, isolated)
            _check_strings(module, where)
            return module
        if exports.is_exported(data):
            parts = exports.exported_parts(data, where)
            module = parse_module(parts["module"], where)
            exports.wrap(module, parts, where)
            return module
        damage = hlo.proto_damage(data) if not _is_utf8(data) else None
        if damage:  # (MLIR text is UTF-8; XLA's .hlo.pb is not)
            raise InputError(f"{where}: not MLIR text or bytecode; it begins as XLA's HLO protos "
                             f"(.hlo.pb) do, but {damage}")
    return parse_module(data, where, file=file)


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _looks_like_path(text: str) -> bool:
    if os.path.exists(text):
        return True
    return "\n" not in text and "{" not in text and not re.match(r"\s*(module|func\.func)\b", text)


def parse_module(data: bytes, where: str = "<text>", *, file: str | None = None) -> ir.Module:
    """Parses text, bytecode or a portable artifact; errors name file, line and column.
    `file`: the file `data` was read from; MLIR text is then parsed from it, so that its
    ops' locations name it (XLA's metadata and hlogen's messages then say where an op
    is), not "-" as for text parsed from memory."""
    ctx = mlir.context()
    bytecode = data.startswith(mlir.BYTECODE_MAGIC)
    if bytecode:
        _check_bytecode_in_child(data, where)
    else:
        _check_utf8(data, where)
        mlir.check_text(data, where)
    # diagnostics are collected, not printed: the error message carries them
    with mlir.collected_diagnostics() as messages:
        module = None
        if bytecode:
            try:  # a portable artifact is VHLO bytecode; plain bytecode fails this
                module = stablehlo.deserialize_portable_artifact(ctx, data)
            except Exception:
                messages.clear()
        if module is None:
            try:
                module = (ir.Module.parseFile(file, context=ctx) if file and not bytecode
                          else ir.Module.parse(data, context=ctx))
            except ir.MLIRError as e:
                raise InputError(_parse_error(e, where)) from None
            except Exception as e:  # e.g. bytecode the reader rejects before any diagnostic
                detail = "; ".join(messages) or f"{type(e).__name__}: {e}"
                raise InputError(f"{where}: cannot read this module: {detail}") from None
    if bytecode:
        _check_strings(module, where)
    return module


def _check_strings(module: ir.Module, where: str) -> None:
    """Bytecode may hold names and strings that are not UTF-8 (text was checked whole):
    every one is read as a Python string sooner or later (printing, fingerprints), and
    that conversion fails; so it happens here, once."""
    try:
        module.operation.get_asm()
    except RuntimeError as e:  # nanobind's conversion error
        raise InputError(f"{where}: cannot read this module: it holds text that is not UTF-8 "
                         f"({e})") from None


def _check_utf8(data: bytes, where: str) -> None:
    # MLIR quotes the text in its messages, and turning a message that is not UTF-8
    # into a Python string ends the process
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        raise InputError(f"{where}:{line}:{col}: the text is not UTF-8 (byte "
                         f"0x{data[e.start]:02x})") from None


_CHILD_SECONDS = 60
# Reads bytecode from stdin the way parse_module does; reports only by its exit status.
_CHILD = """
import sys
from hlogen import mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo
data = sys.stdin.buffer.read()
with mlir.collected_diagnostics():
    try:
        stablehlo.deserialize_portable_artifact(mlir.context(), data)
    except Exception:
        try:
            ir.Module.parse(data, context=mlir.context())
        except Exception:
            pass
"""


def _check_bytecode_in_child(data: bytes, where: str) -> None:
    """Reads `data` once in a child process first: corrupt bytecode can make MLIR's
    reader produce a message that is not UTF-8, and turning it into a Python string
    ends the process (SIGABRT). Nothing else in bytecode can be checked up front."""
    child = native.run_child(_CHILD, data, [], _CHILD_SECONDS)
    if child is None:
        raise InputError(f"{where}: cannot read this bytecode: MLIR's reader did not finish "
                         f"in {_CHILD_SECONDS} s")
    if child.returncode < 0:
        raise InputError(f"{where}: cannot read this bytecode: MLIR's reader ended the process "
                         f"on it ({signal.Signals(-child.returncode).name}); the file is corrupt")
    if child.returncode != 0:  # the child could not check (it reads every error itself)
        said = child.stderr.decode("utf-8", errors="replace").strip()
        raise ExecutionError(f"{where}: the check of this bytecode in a child process failed "
                             f"to run: {said[-2000:]}")


def _parse_error(error: ir.MLIRError, where: str) -> str:
    lines = []
    for d in getattr(error, "error_diagnostics", []) or []:
        found = mlir.file_location(d.location)  # the text hlogen parsed: `where`
        pos = f"{where}:{found[1]}:{found[2]}" if found else where
        lines.append(f"{pos}: {d.message}")
    return "\n".join(lines) or f"{where}: {error}"
