"""Computation: a built StableHLO module with an entry function `main`.

Its signature (parameter and result shapes, parameter names) is read from
`main`, so a Computation loaded from a file is the same kind of object as one
a Builder made. Serialization: text, MLIR bytecode, and StableHLO portable
artifacts (versioned VHLO bytecode, readable by later StableHLO releases).
"""
from __future__ import annotations

import functools
import hashlib
import io
import os
import re
import signal
import subprocess
import sys

from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _stablehlo

from hlogen import mlir, preflight
from hlogen.errors import HlogenError, InputError

_BYTECODE_MAGIC = b"ML\xefR"
# a name location, loc("x") or loc("x"(...)); not a file location, loc("f.mlir":1:2)
_NAME_LOC = re.compile(r'loc\("((?:[^"\\]|\\.)*)"(?:\(|\)$)')


class Computation:
    """A built computation: `.module`, `.as_text()`, `.to_bytecode()`, `.to_portable()`."""

    def __init__(self, module: ir.Module, source: str | None = None):
        self.module = module
        self.source = source  # the file (or "<text>") it was loaded from; None when built
        self._main = _find_main(module, source)

    @property
    def name(self) -> str:
        attr = self.module.operation.attributes
        return ir.StringAttr(attr["sym_name"]).value if "sym_name" in attr else "main"

    @functools.cached_property
    def parameter_shapes(self) -> list:
        return [mlir.shape_of_type(t) for t in self._function_type.inputs]

    @functools.cached_property
    def result_shapes(self) -> list:
        return [mlir.shape_of_type(t) for t in self._function_type.results]

    @functools.cached_property
    def parameter_names(self) -> list[str]:
        """Names given to `Builder.parameter`, read back from the argument locations."""
        names = []
        for i, arg in enumerate(self._main.regions[0].blocks[0].arguments):
            m = _NAME_LOC.match(str(arg.location))
            names.append(m.group(1) if m else f"arg{i}")
        return names

    @property
    def _function_type(self) -> ir.FunctionType:
        return ir.FunctionType(ir.TypeAttr(self._main.attributes["function_type"]).value)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of the module (without locations): the key of executable caches."""
        return hashlib.sha256(self.as_text().encode()).hexdigest()

    def signature(self) -> str:
        params = ", ".join(f"{n}: {s}" for n, s in zip(self.parameter_names, self.parameter_shapes))
        results = ", ".join(map(str, self.result_shapes))
        return f"{self.name}({params}) -> ({results})"

    def __repr__(self) -> str:
        return f"<Computation {self.signature()}>"

    # -- serialization --------------------------------------------------------------

    def as_text(self, debug_info: bool = False) -> str:
        """The StableHLO text; `debug_info=True` adds the locations (file and line of each op)."""
        return self.module.operation.get_asm(enable_debug_info=debug_info)

    __str__ = as_text

    def to_bytecode(self) -> bytes:
        """MLIR bytecode of the module (same jaxlib version to read it back)."""
        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        return buf.getvalue()

    def to_portable(self, target_version: str | None = None) -> bytes:
        """A StableHLO portable artifact (VHLO), for `target_version` (default: the current one).

        CHLO ops have no portable form: the module is legalized to StableHLO first.
        """
        from hlogen import passes
        version = target_version or _stablehlo.get_current_version()
        minimum = _stablehlo.get_minimum_version()
        if not re.fullmatch(r"\d+\.\d+\.\d+", str(version)):
            raise HlogenError(f"to_portable: target_version must look like 1.9.0, got {version!r}")
        try:
            text = passes.run(self, "legalize").as_text()
            return _stablehlo.serialize_portable_artifact_str(text, version)
        except Exception as e:
            raise HlogenError(
                f"to_portable: cannot serialize for StableHLO {version} (this jaxlib writes "
                f"{minimum} to {_stablehlo.get_current_version()}): {e}") from None

    def clone(self) -> "Computation":
        """An independent copy (passes change modules in place)."""
        return Computation(ir.Module.parse(self.to_bytecode(), context=mlir.context()), self.source)


def _find_main(module: ir.Module, source) -> ir.Operation:
    for op in module.body.operations:
        if op.operation.name == "func.func" and \
                ir.StringAttr(op.attributes["sym_name"]).value == "main":
            return op.operation
    raise InputError(f"{source or 'the module'}: the module has no function @main: hlogen runs "
                     f"the function named main")


def load(source) -> Computation:
    """A Computation from a file path, StableHLO text, MLIR bytecode or a portable artifact."""
    where = "<text>"
    if isinstance(source, os.PathLike) or (isinstance(source, str) and _looks_like_path(source)):
        where = os.fspath(source)
        try:
            with open(where, "rb") as f:
                source = f.read()
        except OSError as e:
            raise InputError(f"{where}: cannot read: {e.strerror}") from None
    elif isinstance(source, str):
        source = source.encode()
    elif not isinstance(source, (bytes, bytearray)):
        raise InputError(f"load takes a path, MLIR text or bytes, got {type(source).__name__}")
    module = parse_module(bytes(source), where)
    preflight.check_module(module, where)
    return Computation(module, where)


def _looks_like_path(text: str) -> bool:
    if os.path.exists(text):
        return True
    return "\n" not in text and "{" not in text and not re.match(r"\s*(module|func\.func)\b", text)


def parse_module(data: bytes, where: str = "<text>") -> ir.Module:
    """Parses text, bytecode or a portable artifact; errors name file, line and column."""
    ctx = mlir.context()
    bytecode = data.startswith(_BYTECODE_MAGIC)
    if bytecode:
        _check_bytecode_in_child(data, where)
    else:
        _check_utf8(data, where)
        preflight.check_text(data, where)
    # diagnostics are collected, not printed: the error message carries them
    with mlir.collected_diagnostics() as messages:
        if bytecode:
            try:  # a portable artifact is VHLO bytecode; plain bytecode fails this
                return _stablehlo.deserialize_portable_artifact(ctx, data)
            except Exception:
                messages.clear()
        try:
            module = ir.Module.parse(data, context=ctx)
        except ir.MLIRError as e:
            raise InputError(_parse_error(e, where)) from None
        except Exception as e:  # e.g. bytecode the reader rejects before any diagnostic
            detail = "; ".join(messages) or f"{type(e).__name__}: {e}"
            raise InputError(f"{where}: cannot read this module: {detail}") from None
    return module


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
import resource, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file when the reader aborts
from hlogen import mlir
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _stablehlo
data = sys.stdin.buffer.read()
with mlir.collected_diagnostics():
    try:
        _stablehlo.deserialize_portable_artifact(mlir.context(), data)
    except Exception:
        try:
            ir.Module.parse(data, context=mlir.context())
        except Exception:
            pass
"""


def _check_bytecode_in_child(data: bytes, where: str) -> None:
    """Reads `data` once in a child process first: corrupt bytecode can make MLIR's
    reader produce a message that is not UTF-8, and turning it into a Python string
    ends the process (SIGABRT). Nothing else in bytecode can be checked up front.
    (A child process, not a fork: forking a process that runs XLA threads can hang.)"""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    try:
        child = subprocess.run([sys.executable, "-c", _CHILD], input=data, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=_CHILD_SECONDS)
    except subprocess.TimeoutExpired:
        raise InputError(f"{where}: cannot read this bytecode: MLIR's reader did not finish "
                         f"in {_CHILD_SECONDS} s") from None
    if child.returncode < 0:
        raise InputError(f"{where}: cannot read this bytecode: MLIR's reader ended the process "
                         f"on it ({signal.Signals(-child.returncode).name}); the file is corrupt")


def _parse_error(error: ir.MLIRError, where: str) -> str:
    lines = []
    for d in getattr(error, "error_diagnostics", []) or []:
        m = re.match(r'loc\("[^"]*":(\d+):(\d+)\)', str(d.location))
        pos = f"{where}:{m.group(1)}:{m.group(2)}" if m else where
        lines.append(f"{pos}: {d.message}")
    return "\n".join(lines) or f"{where}: {error}"
