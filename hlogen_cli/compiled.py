"""Compiled files: what `hlogen compile -o f.hlx` writes and `hlogen run f.hlx` runs.

A compiled file is a header line (JSON: the backend, device kind, jaxlib version and
compile options it was compiled for, XLA's options among them (`hlogen compile
--xla-flag`, which `run` compiles with again), sizes and the SHA-256 of what follows), the
user's module as MLIR bytecode (its signature: parameters, names, results; and what
--check-interpret runs on the interpreter) and XLA's serialized executable. `run`
checks the header against this machine and jaxlib before XLA's loader sees a byte
(that loader is not hardened against other input), and then runs the executable
without compiling: what the executable cache does, for one file the user keeps.
"""
from __future__ import annotations

from hlogen.computation import Computation
from hlogen.loading import load_bytes
from hlogen.errors import InputError
from hlogen.runtime import cache

MAGIC = b"hlogen-compiled 1\n"
# what the header must agree on, and how it is said
_CHECKED = {"backend": "backend", "device_kind": "device kind", "jaxlib": "jaxlib",
            "options": "compile options (replicas, devices, XLA options and XLA_FLAGS, a PJRT "
                       "plugin's identity)"}


def is_compiled(data: bytes) -> bool:
    return data.startswith(MAGIC)


def pack(comp: Computation, exe, payload: bytes, jaxlib_version: str, options: str) -> bytes:
    """The compiled file of `exe`, a PJRT executable of `comp` (hlogen.runtime.pjrt)
    serialized as `payload`, compiled with `options` (the cache's key of them) by jaxlib
    `jaxlib_version`."""
    module = comp.to_bytecode()
    header = {"backend": exe.backend, "device_kind": exe.device.device_kind,
              "jaxlib": jaxlib_version, "options": options, "module_size": len(module),
              "xla_options": [list(o) for o in exe.xla_options]}
    return cache.frame(MAGIC, header, module + payload)


class CompiledFile:
    """A compiled file read back: `computation`, `backend`, and `as_cache()`, what
    pjrt.compile takes as its disk cache to load the executable instead of compiling."""

    def __init__(self, data: bytes, where: str):
        self.where = where
        header, body = cache.unframe(MAGIC, data)
        if header is None:
            raise InputError(f"{where}: a compiled file (hlogen compile -o) that is not whole: "
                             f"its header, size or digest does not match; compile it again")
        self.header = header
        module_bytes = body[:header["module_size"]]
        self._payload = body[header["module_size"]:]
        self.computation = load_bytes(module_bytes, where)
        self.backend = header["backend"]
        # XLA's options it was compiled with (checked, as hlogen.runtime.xla_options gives them)
        self.xla_options = tuple(tuple(o) for o in header.get("xla_options", []))

    def as_cache(self) -> "_OneEntry":
        return _OneEntry(self)


class _OneEntry:
    """The disk cache interface of hlogen.runtime.cache.ExecutableCache over one
    compiled file: its key refuses another backend, device kind, jaxlib or compile
    options (an InputError naming both); nothing is stored."""

    def __init__(self, compiled: CompiledFile):
        self._compiled = compiled

    def key(self, module_digest, options, jaxlib_version, backend, device_kind) -> str:
        here = {"backend": backend, "device_kind": device_kind, "jaxlib": jaxlib_version,
                "options": options}
        header = self._compiled.header
        for field, words in _CHECKED.items():
            if header.get(field) != here[field]:
                raise InputError(
                    f"{self._compiled.where}: compiled for {words} {header.get(field)!r}; this "
                    f"run has {here[field]!r}: compile it again here (hlogen compile -o), or run "
                    f"the module it came from")
        return module_digest

    def load(self, key, jaxlib_version) -> bytes:
        return self._compiled._payload

    def store(self, key, payload, **info) -> bool:
        return False  # (reached only when this XLA could not load the executable: compiled again)
