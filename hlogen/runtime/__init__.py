"""Execution: PJRT (pjrt.py) and its plugins (plugins.py), the reference interpreter
(interpreter.py), host arrays."""
from __future__ import annotations

import importlib

from hlogen import backends
from hlogen.backends import Kind
from hlogen.computation import Computation
from hlogen.errors import HlogenError, UnsupportedError
from hlogen.ops.collectives import MAX_REPLICAS
from hlogen.runtime import plugins
from hlogen.runtime import readers  # fills hlogen.native (HLO, jax exports)
from hlogen.runtime import xla_options as _xla_options

# a backend name not declared makes hlogen.backends look for PJRT plugins (once)
backends.on_discovery(plugins.discover)
load_plugin = plugins.load_plugin

# The compilers: each kind of backend (hlogen.backends.Kind) -> the runtime module that
# compiles for it, with `compile(computation, backend, disk_cache, num_replicas,
# xla_options)` giving an hlogen.runtime.executable.Executable and `available(backend)`.
# Imported when first asked (start-up time: PJRT's starts jax). A new compiler is one
# module, one declaration in hlogen.backends and one row here.
COMPILERS = {
    Kind.PJRT: "hlogen.runtime.pjrt",
    Kind.INTERPRETER: "hlogen.runtime.interpreter",
    Kind.IREE: "hlogen.runtime.iree",
}
DEFAULT_KIND = Kind.PJRT  # what compiles for jax's default device (backend None)


def compiler(backend):
    """The runtime module that compiles for `backend` (a Backend, or None)."""
    return importlib.import_module(COMPILERS[DEFAULT_KIND if backend is None else backend.kind])


def compile(computation, backend=None, num_replicas=1, num_partitions=1, xla_options=None):
    """An executable of `computation` on `backend`: a name that hlogen.backends declares
    ("cpu", "gpu", "interpret": the reference interpreter, each PJRT plugin installed or
    loaded with `load_plugin`: hlogen.runtime.plugins), a Backend, or None for jax's
    default device.

    The executable takes numpy arrays (one per parameter) and returns numpy arrays
    (a tuple for several results). Executables are cached by module, backend, replica
    devices and XLA options.

    `xla_options`: XLA's DebugOptions fields for this compile, by name (a dict, or
    "NAME=VALUE" strings), e.g. {"xla_disable_hlo_passes": "algsimp"}; checked before
    anything compiles (hlogen.runtime.xla_options). They override XLA_FLAGS.

    `num_replicas=N` runs N replicas, one per device (on the CPU, hlogen starts the
    backend with enough devices: see pjrt.client); run them with
    `.run_replicated([[args of replica 0], [args of replica 1], ...])`.
    """
    if not isinstance(computation, Computation):
        raise HlogenError(f"compile takes a Computation, got {type(computation).__name__}")
    declared = None if backend is None else backends.get(backend)
    if type(num_replicas) is not int or not 1 <= num_replicas <= MAX_REPLICAS:
        raise HlogenError(f"num_replicas must be a positive int (at most {MAX_REPLICAS}), got "
                          f"{num_replicas!r}")
    if num_partitions != 1:
        raise UnsupportedError(f"num_partitions={num_partitions}: hlogen runs replicas, "
                               f"one partition each (SPMD partitioning is not supported)")
    options = _xla_options.check(xla_options, declared and declared.library)
    return compiler(declared).compile(computation, declared, num_replicas=num_replicas,
                                      xla_options=options)


def available(backend) -> bool:
    """Whether `backend` (a declaration or its name) runs here: the interpreter always, a
    PJRT backend when its client starts (a GPU is present, a plugin loads)."""
    declared = backends.get(backend)
    return compiler(declared).available(declared)


def interpret(computation, *arrays):
    """Runs `computation` on the StableHLO reference interpreter: numpy in, numpy out."""
    return compile(computation, backend=backends.INTERPRET)(*arrays)
