"""The persistent executable cache of the command line (`hlogen run`, `hlogen compile`).

An entry is XLA's serialized executable (`Client.serialize_executable`), keyed by a
digest of the user's module (before hlogen's pipeline, without locations: a hit skips
the pipeline), a digest of hlogen's own code (which makes the pipeline), the compile
options (replica count and devices, XLA options and XLA_FLAGS, a PJRT plugin's identity:
_jaxlib.compile_options_key), the jaxlib version, the backend and the device kind. jax's own
persistent compilation cache serves `jax.jit`'s lowering path; hlogen compiles
StableHLO with the client directly, so it stores what that client serializes.

An entry file is a header line (JSON: key, jaxlib version, payload size and SHA-256)
and the payload. It is written to a temporary file and renamed, so readers see a whole
entry or none, and two processes writing the same entry both leave a whole one. An
entry whose header, size, digest, key or jaxlib version does not match is ignored
(and overwritten after compiling): XLA's loader never sees bytes that were not
written whole by this jaxlib.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import pathlib

from hlogen.files import replace

MAGIC = b"hlogen-executable 1\n"
SUFFIX = ".hlx"


def default_directory() -> pathlib.Path:
    """$HLOGEN_CACHE_DIR, else $XDG_CACHE_HOME/hlogen, else ~/.cache/hlogen."""
    if os.environ.get("HLOGEN_CACHE_DIR"):
        return pathlib.Path(os.environ["HLOGEN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "hlogen"


@dataclasses.dataclass
class Entry:
    path: pathlib.Path
    size: int
    status: str          # "valid", "stale" (another jaxlib), "corrupt"
    header: dict


class ExecutableCache:
    """Serialized executables on disk, one file per key."""

    def __init__(self, directory=None):
        self.directory = pathlib.Path(directory) if directory else default_directory()
        self.folder = self.directory / "executables"

    @staticmethod
    def key(module_digest: str, options: str, jaxlib_version: str, backend: str,
            device_kind: str) -> str:
        text = json.dumps([module_digest, code_digest(), options, jaxlib_version, backend,
                           device_kind])
        return hashlib.sha256(text.encode()).hexdigest()

    def _path(self, key: str) -> pathlib.Path:
        return self.folder / f"{key}{SUFFIX}"

    def load(self, key: str, jaxlib_version: str) -> bytes | None:
        """The payload stored under `key`, or None (missing, or not to be trusted)."""
        try:
            data = self._path(key).read_bytes()
        except OSError:
            return None
        header, payload = unframe(MAGIC, data)
        if header is None or header.get("key") != key or header.get("jaxlib") != jaxlib_version:
            return None
        return payload

    def store(self, key: str, payload: bytes, **info) -> bool:
        """Writes an entry atomically; whether it was written (a cache that cannot be
        written is skipped: the run does not depend on it)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)  # hlogen's own folder
            replace(self._path(key), frame(MAGIC, dict(info, key=key), payload))
            return True
        except OSError:
            return False

    def entries(self, jaxlib_version: str) -> list[Entry]:
        found = []
        for path in sorted(self.folder.glob(f"*{SUFFIX}")) if self.folder.is_dir() else []:
            if path.name.startswith("."):  # a writer's temporary file
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            header, _ = unframe(MAGIC, data)
            if header is None or header.get("key") != path.stem:
                status = "corrupt"
            elif header.get("jaxlib") != jaxlib_version:
                status = "stale"
            else:
                status = "valid"
            found.append(Entry(path, len(data), status, header or {}))
        return found

    def clear(self, only_invalid: bool = False, jaxlib_version: str | None = None) -> int:
        """Removes entries (with `only_invalid`, the stale and corrupt ones) and
        temporary files left by writers that died; returns how many entries went."""
        removed = 0
        if not self.folder.is_dir():
            return 0
        for path in self.folder.glob(f".*{SUFFIX}.*"):  # hlogen.files' temporary names
            _unlink(path)
        for entry in self.entries(jaxlib_version or ""):
            if only_invalid and entry.status == "valid":
                continue
            removed += _unlink(entry.path)
        return removed


@functools.lru_cache(maxsize=None)
def code_digest() -> str:
    """A digest of hlogen's Python sources: what turns a user's module into the one
    XLA compiles. Another hlogen (or an edited one) never reads this one's entries."""
    digest = hashlib.sha256()
    root = pathlib.Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] == "conformance":  # the conformance runner makes no modules
            continue
        digest.update(str(relative).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _unlink(path: pathlib.Path) -> int:
    try:
        path.unlink()
        return 1
    except OSError:
        return 0


def frame(magic: bytes, header: dict, payload: bytes) -> bytes:
    """A file of `payload` that `unframe` reads back whole or not at all: `magic`, the
    header as one line of JSON (with the payload's size and SHA-256 added), the payload.
    The cache's entries and the command line's compiled files are written this way."""
    header = dict(header, size=len(payload), sha256=hashlib.sha256(payload).hexdigest())
    return magic + json.dumps(header, sort_keys=True).encode() + b"\n" + payload


def unframe(magic: bytes, data: bytes):
    """(header, payload) of `frame`'s bytes, or (None, None) when they are not whole and
    intact."""
    if not data.startswith(magic):
        return None, None
    end = data.find(b"\n", len(magic))
    if end < 0:
        return None, None
    try:
        header = json.loads(data[len(magic):end])
    except (ValueError, UnicodeDecodeError):
        return None, None
    payload = data[end + 1:]
    if not isinstance(header, dict) or header.get("size") != len(payload) or \
            header.get("sha256") != hashlib.sha256(payload).hexdigest():
        return None, None
    return header, payload
