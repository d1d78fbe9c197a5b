"""The backend a command names and compiling for it, shared by the commands that compile
or run (run, compile, graph --optimized, check, compare, bisect): the backend's declaration
(`declaration`, `compiling`: a plugin probed first, an unknown name exit 2), XLA's options
given on the command line (`checked_xla_flags`, `compile_options`), and an executable
through the persistent executable cache or from a compiled file (`compiled`), done in the
child process that isolation.py watches.
"""
from __future__ import annotations

import dataclasses
import os

import click

import hlogen as hg
from hlogen import backends as declared_backends
from hlogen import runtime
from hlogen.errors import ExecutionError, InputError, UnsupportedError
from hlogen.runtime import plugins
from hlogen.runtime import xla_options as options_of
from hlogen.runtime.cache import ExecutableCache
from hlogen_cli import isolation


def declaration(name: str, option: str = "--backend"):
    """The backend declared as `name`; a plugin's name finds the plugins, each probed in
    a child process first (one that ends the process is refused, naming the signal). An
    unknown name is exit 2, naming `option` and the backends there are."""
    if name not in declared_backends.BACKENDS:
        plugins.discover(isolate=True)
    try:
        return declared_backends.get(name)
    except InputError:
        raise InputError(f"{option} {name}: the backend must be one of "
                         f"{', '.join(declared_backends.names())} (hlogen devices lists them)") \
            from None


def compiling(name: str | None):
    """The PJRT backend that `compile` and `graph --optimized` compile for (None: jax's
    default device); one that compiles nothing (the interpreter) is exit 2."""
    if name is None:
        return None
    declared = declaration(name)
    if not declared.compiles:  # (IREE compiles, but not with XLA: no HLO, no analyses)
        said = "is not XLA" if declared.takes_flags else "compiles nothing"
        raise InputError(f"--backend {name}: {declared.words} {said}; XLA compiles "
                         f"for a PJRT backend: cpu, gpu or a plugin (hlogen devices lists them)")
    return declared


def checked_xla_flags(values, option: str = "--xla-flag") -> tuple:
    """XLA's options given as `option NAME=VALUE` (repeatable), checked by
    hlogen.runtime.xla_options: a bad one is exit 2, naming it as given (an unknown name
    with the closest known ones)."""
    for value in values:
        try:
            options_of.check([value])
        except InputError as e:
            raise InputError(f"{option} {value}: {e}") from None
    try:
        return options_of.check(values)
    except InputError as e:  # a name given twice
        raise InputError(f"{option}: {e}") from None



def compile_options(asked: tuple, no_hlo_passes: bool = False, from_file=None) -> tuple:
    """The XLA options of a compile: --xla-flag's (`asked`, checked), with every HLO pass
    disabled for --no-hlo-passes; a compiled file's own, which --xla-flag may only repeat."""
    if no_hlo_passes:
        asked = options_of.merged(asked, options_of.NO_HLO_PASSES)
    if from_file is None:
        return asked
    if asked and asked != from_file.xla_options:
        raise InputError(f"{from_file.where}: compiled with XLA options "
                         f"{options_of.text(from_file.xla_options) or '(none)'}; this run asks "
                         f"for {options_of.text(asked)}: compile it again with them (hlogen "
                         f"compile --xla-flag ...), or run the module it came from")
    return from_file.xla_options



class _Cache(ExecutableCache):
    """The executable cache, telling whether what it was given to store was stored (a
    cache folder that cannot be written is skipped: the run does not depend on it), and
    keeping what it loaded: serializing an executable that XLA deserialized loses its
    compiled kernels (this jaxlib's CPU client), so a compiled file takes these bytes."""

    stored = None
    loaded = None

    def load(self, key, jaxlib_version):
        self.loaded = super().load(key, jaxlib_version)
        return self.loaded

    def store(self, key, payload, **info) -> bool:
        self.stored = super().store(key, payload, **info)
        return self.stored


@dataclasses.dataclass
class Compiled:
    executable: object  # a PJRT Executable or the interpreter's
    how: str  # what was done, in words: "compiled, stored in the cache", ...
    jaxlib_version: str = ""
    options: str = ""  # the compile options, as the executable cache keys them
    cached: bytes | None = None  # the serialized executable the cache held

    def serialized(self) -> bytes:
        return self.cached if self.cached is not None else self.executable.serialize()


def compiled(comp, backend: str | None, no_cache: bool, num_replicas: int = 1,
             from_file=None, xla_options: tuple = ()) -> Compiled:
    """An executable for `backend` (the interpreter included), compiled with `xla_options`
    (checked): loaded from `from_file` (a compiled file), else through the persistent
    executable cache unless `no_cache` (the options are part of its key)."""
    isolation.status("compile", backend=backend)
    declared = None if backend is None else declaration(backend)
    if declared is not None and not declared.compiles:  # no XLA options; IREE's disk cache
        if xla_options:
            hg.compile(comp, backend=declared, xla_options=xla_options)  # its refusal
        exe = runtime.compiler(declared).compile(comp, declared, None if no_cache else _Cache(),
                                                 num_replicas=num_replicas)
        return Compiled(exe, {None: "prepared", "off": "compiled", "hit": "loaded from the cache",
                              "miss": "compiled, stored in the cache"}[exe.cache_outcome])
    # jax loads here, not at the top: the child's start-up (0.5 s of jax) waits until the
    # module and the inputs are checked, so that bad input is refused at once (start-up)
    from hlogen.runtime import _jaxlib
    cache = from_file.as_cache() if from_file else None if no_cache else _Cache()
    try:  # (the options are checked: the compiler's entry, not hg.compile, which checks them)
        exe = runtime.compiler(declared).compile(comp, declared, cache,
                                                 num_replicas=num_replicas,
                                                 xla_options=xla_options)
    except (ExecutionError, UnsupportedError) as e:
        if not dict(xla_options).get("xla_disable_all_hlo_passes"):
            raise
        raise type(e)(f"{e}\n(with every HLO pass disabled, XLA compiles a module only as its "
                      f"passes would have left it, such as an *after_optimizations* dump: "
                      f"run it without --no-hlo-passes)") from None
    how = {"off": "compiled", "hit": "loaded from the cache",
           "miss": "compiled, stored in the cache"}[exe.cache_outcome]
    if from_file is not None:
        how = f"loaded from {from_file.where}" if exe.cache_outcome == "hit" else \
            f"compiled (this XLA could not load the executable of {from_file.where})"
    elif exe.cache_outcome == "miss" and not cache.stored:
        how = f"compiled; not stored: the cache folder {cache.folder} cannot be written"
    return Compiled(exe, how, _jaxlib.jaxlib_version(), exe.options_key,
                    cache.loaded if isinstance(cache, _Cache) and exe.cache_outcome == "hit" else None)


def options_in_force(exe) -> None:
    """Says (stderr) the XLA options a PJRT executable was compiled with, and XLA_FLAGS,
    where there are any."""
    said = [f"XLA options {options_of.text(exe.xla_options)}"] if exe.xla_options else []
    if os.environ.get("XLA_FLAGS"):
        said.append(f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
    if said:
        click.echo(f"{exe.backend}: {'; '.join(said)}", err=True)

