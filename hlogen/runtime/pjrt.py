"""Compiling and running computations with jaxlib's PJRT client.

Executables are cached in memory by the computation's fingerprint, the backend (and
a plugin's identity), the devices and the XLA options. Calling one takes numpy arrays
and returns numpy arrays; the first call with given argument types goes through Python
(checks, device_put, execute), later ones through jax's C++ dispatch path (see
_jaxlib.fast_path).
"""
from __future__ import annotations

import collections
import os
import threading
import time

import numpy as np

from hlogen import backends, dynamism, sharding
from hlogen import types as T
from hlogen.backends import Backend
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, HlogenError, InputError, UnsupportedError
from hlogen.ops.collectives import MAX_REPLICAS
from hlogen.runtime import _jaxlib
from hlogen.runtime import xla_options as _xla_options
from hlogen.runtime.arrays import (check_signature, flatten_arguments,
                                   native, replica_lists, replicated_call_error,
                                   structure_results)
from hlogen.runtime import execution
from hlogen.runtime.execution import prepare

_cache: collections.OrderedDict = collections.OrderedDict()  # least recently used first
_CACHE_KEPT = 256
_cache_lock = threading.Lock()
_swap_x64 = _jaxlib.swap_x64
# XLA's words for an XLA option it refuses (an unknown name, a value of the wrong type)
_BAD_OPTION = ("No such compile option", "While setting option")


# How many CPU devices hlogen starts the CPU backend with, unless the user chose
# (jax's jax_num_cpu_devices or XLA_FLAGS): enough for replicated programs to run
# on one machine; starting 8 costs what starting 1 does. HLOGEN_CPU_DEVICES overrides.
CPU_DEVICES = 8


def cpu_devices_wanted(num_replicas: int = 1) -> int:
    text = os.environ.get("HLOGEN_CPU_DEVICES") or str(CPU_DEVICES)
    if not text.isdigit() or not 1 <= int(text) <= MAX_REPLICAS:
        raise HlogenError(f"HLOGEN_CPU_DEVICES must be a number of devices in [1, {MAX_REPLICAS}], "
                          f"got {text!r}")
    return max(int(text), num_replicas)


def client(platform: str | None, num_replicas: int = 1):
    """The PJRT client of `platform` (a PJRT backend's declared platform: "cpu", "gpu";
    None for jax's default).

    The one place where a backend starts: before the first one does, the CPU backend
    is given cpu_devices_wanted(num_replicas) devices.
    """
    try:
        return _jaxlib.backend(platform, cpu_devices_wanted(num_replicas))
    except RuntimeError as e:
        raise UnsupportedError(f"backend {platform!r} is not available here: {e}") from None


def declaration(pjrt) -> Backend:
    """The declaration (hlogen.backends) of the backend whose client is `pjrt` (a plugin's
    platform may be "cpu" too: a plugin is known by its client)."""
    return backends.get(_jaxlib.plugin_name(pjrt) or pjrt.platform)


def replica_devices(pjrt, num_replicas: int, backend: Backend, what: str = "replicas") -> list:
    """The device of each replica (or partition, `what`): the first local devices of each
    process in turn, the same number per process (so that replicas span every process)."""
    by_process: dict = {}
    for d in sorted(pjrt.devices(), key=lambda d: (d.process_index, d.id)):
        by_process.setdefault(d.process_index, []).append(d)
    processes = len(by_process)
    if num_replicas % processes:
        raise HlogenError(f"num_replicas={num_replicas} must be a multiple of the number of "
                          f"processes ({processes}): each process runs as many replicas")
    per_process = num_replicas // processes
    have = min(len(ds) for ds in by_process.values())
    if per_process > have:
        raise UnsupportedError(_too_few_devices(pjrt, num_replicas, have * processes, backend,
                                                what))
    return [d for p in sorted(by_process) for d in by_process[p][:per_process]]


def _too_few_devices(pjrt, num_replicas: int, have: int, backend: Backend,
                     what: str = "replicas") -> str:
    count = f"num_{what}={num_replicas}"
    if backend.identity:  # a plugin: its devices are its own
        return (f"{count} needs {num_replicas} devices; {backend.words} "
                f"has {have} ({what[:-1]} count above the devices available)")
    message = (f"{count} needs {num_replicas} {pjrt.platform} devices; "
               f"{have} are available ({what[:-1]} count above the devices available)")
    if _jaxlib.is_jaxlib_cpu(pjrt):
        chosen = _jaxlib.cpu_device_count_chosen()
        message += (f": the CPU backend had already started with {have} device(s), set by "
                    f"{chosen or 'hlogen (HLOGEN_CPU_DEVICES)'}; start it with more (e.g. "
                    f"HLOGEN_CPU_DEVICES={num_replicas} in the environment, or "
                    f"jax.config.update(\"jax_num_cpu_devices\", {num_replicas}) before jax's "
                    f"first use) before the first compile, or compile the "
                    f"{'partitioned' if what == 'partitions' else 'replicated'} computation first")
    return message


def available(backend: Backend) -> bool:
    """Whether `backend`'s client starts here (a GPU is present, a plugin loads)."""
    try:
        client(backend.platform)
    except HlogenError:
        return False
    return True


def compile(computation: Computation, backend: Backend | str | None = None,
            disk_cache=None, num_replicas: int = 1, xla_options: tuple = (),
            num_partitions: int | None = None) -> "Executable":
    """An Executable of `computation` on `backend` (a PJRT backend's declaration or its
    name; None for jax's default device). `disk_cache`: an ExecutableCache (hlogen.runtime.cache) to read
    and write serialized executables; the command line passes one, the library does not.
    `xla_options`: (name, value) pairs checked by hlogen.runtime.xla_options.check, on top
    of the backend's own (Backend.with_options).

    A sharded module (hlogen.sharding) is compiled for its partitions, partition p on
    device p, with XLA's SPMD partitioner; `num_partitions` asserts or supplies their
    count (None: as the module says)."""
    check_signature(computation)
    backend = None if backend is None else backends.get(backend)
    if backend is not None and not backend.compiles:
        raise HlogenError(f"pjrt.compile: {backend.name} is {backend.words}, not a PJRT "
                          f"backend (hg.compile runs every backend)")
    where = computation.source or computation.name
    partitioning = sharding.partitions_to_compile(computation.module, num_partitions, where)
    if partitioning is not None and (partitioning.num_replicas > 1 or num_replicas > 1):
        replicas = max(partitioning.num_replicas, num_replicas)
        raise UnsupportedError(f"{where}: {replicas} replicas of a module partitioned "
                               f"{partitioning.num_partitions} ways: hlogen runs a partitioned "
                               f"module as one replica")
    devices_needed = partitioning.num_partitions if partitioning else num_replicas
    pjrt = client(None if backend is None else backend.platform, devices_needed)
    backend = backend or declaration(pjrt)
    devices = [pjrt.local_devices()[0]] if devices_needed == 1 else \
        replica_devices(pjrt, devices_needed, backend, "partitions" if partitioning else "replicas")
    xla_options = _xla_options.merged(backend.xla_options, xla_options)
    key = (computation.fingerprint, backend.name, backend.identity_key(),
           tuple(d.id for d in devices), xla_options, partitioning)  # (Executable.key)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    found = Executable(computation, backend, pjrt, devices, disk_cache, xla_options,
                       partitioning)  # compiles: outside the lock
    with _cache_lock:
        found = _cache.setdefault(key, found)
        while len(_cache) > _CACHE_KEPT:
            _cache.popitem(last=False)
    return found


class Executable:
    """A compiled computation: call it with numpy arrays, get numpy arrays back
    (hlogen.runtime.executable.Executable, and XLA's analyses of it)."""

    def __init__(self, computation: Computation, backend: Backend, pjrt, devices: list,
                 disk_cache=None, xla_options: tuple = (), partitioning=None):
        self.computation = computation
        self.declaration = backend
        self.backend = backend.name
        self.xla_options = xla_options  # what XLA compiled it with, besides XLA_FLAGS
        # hlogen.sharding.Partitioning of a module compiled for its partitions, else None
        self.partitioning = partitioning
        self.num_partitions = partitioning.num_partitions if partitioning else 1
        self.devices = devices  # the device of each replica (or partition)
        self.device = devices[0]
        self.num_replicas = 1 if partitioning else len(devices)
        me = pjrt.process_index()
        # the replicas this process passes the inputs of and gets the results of
        self.local_replicas = [0] if partitioning else \
            [r for r, d in enumerate(devices) if d.process_index == me]
        self.cache_outcome = "off"  # or "hit", "miss": what the disk cache did
        self._spmd = _jaxlib.Spmd(*sharding.unsharded(computation.module),
                                  shardy=partitioning.form == "Shardy") if partitioning else None
        # why XLA ran hlogen's form of a module marked as written, and what that changed
        self.fallback: str | None = None
        # how the caches and compiled files key its compile options (whose XLA included)
        self.options_key = _jaxlib.compile_options_key(devices, xla_options,
                                                       backend.identity_key(), self._spmd)
        self.key = (computation.fingerprint, backend.name, backend.identity_key(),
                    tuple(d.id for d in devices), xla_options, partitioning)  # as compile's cache
        start = time.perf_counter()
        self._cut = None  # hlogen.dynamism.Cut: how results are cut to their runtime sizes
        if dynamism.present(computation.module, cached=True):
            disk_cache = None  # the cut comes from hlogen's pipeline, which a hit skips
        self._loaded = self._load_or_compile(pjrt, disk_cache)
        self.compile_seconds = time.perf_counter() - start
        # PJRT results are read as they are, one per leaf (execution.prepare's wrapper
        # flattens tuples): a disk cache hit needs nothing of the pipeline.
        flat_in = T.leaf_shapes(computation.parameter_shapes)
        flat_out = T.leaf_shapes(computation.result_shapes)
        self._one_plain_result = (len(computation.result_shapes) == 1 and
                                  not isinstance(computation.result_shapes[0], T.TupleShape))
        self._gather = None  # a partitioned executable's results: global arrays from shards
        self._staged = ()  # the parameters whose numpy arguments are copied once to be aliased
        if partitioning is not None:
            if self._cut is not None:
                raise UnsupportedError(f"{computation.name}: dynamic dimensions "
                                       f"(set_dimension_size) run on one device")
            ins, outs = _jaxlib.compiled_shardings(self._loaded)
            self._in = [_jaxlib.ShardedPlacement(s.dimensions, s.dtype, devices, o)
                        for s, o in zip(flat_in, ins)]
            self._out = [_jaxlib.ShardedPlacement(s.dimensions, s.dtype, devices, o)
                         for s, o in zip(flat_out, outs)]
            self._gather = self._global_results
            if len(flat_in) == len(computation.parameter_shapes):
                # jax's fast path puts numpy arguments itself, so they are staged before it
                self._staged = tuple(i for i, p in enumerate(self._in) if p.shares_copies)
                self._dispatch = _jaxlib.fast_path(computation.name, self._run_and_describe)
            else:
                self._dispatch = self._run
            return
        if self.num_replicas > 1:
            if self._cut is not None:
                raise UnsupportedError(f"{computation.name}: dynamic dimensions "
                                       f"(set_dimension_size) run on one replica")
            local = [devices[r] for r in self.local_replicas]
            self._in = [_jaxlib.ReplicatedPlacement(s.dimensions, s.dtype, devices, local)
                        for s in flat_in]
            self._dispatch = self._refuse_plain_call
            return
        self._in = [_jaxlib.Placement(s.dimensions, s.dtype, self.device) for s in flat_in]
        self._out = [_jaxlib.Placement(s.dimensions, s.dtype, self.device) for s in flat_out]
        if self._cut is not None:  # results cut on the host: jax's dispatch cannot
            self._dispatch = self._run
            return
        # Tuple parameters are passed as Python tuples, which jax's dispatch would flatten
        # on its own terms: those calls stay on the Python path.
        self._dispatch = (_jaxlib.fast_path(computation.name, self._run_and_describe)
                          if len(flat_in) == len(computation.parameter_shapes) else self._run)

    def __repr__(self) -> str:
        replicas = f" x {self.num_replicas} replicas" if self.num_replicas > 1 else ""
        return f"<Executable {self.computation.signature()} on {self.backend}{replicas}>"

    def _load_or_compile(self, pjrt, disk_cache):
        key = None
        if disk_cache is not None:
            # Keyed by the module before hlogen's pipeline (and hlogen's code, which
            # makes the pipeline), so that a hit skips the pipeline.
            version = _jaxlib.jaxlib_version()
            key = disk_cache.key(self.computation.fingerprint, self.options_key, version,
                                 self.backend, self.device.device_kind)
            payload = disk_cache.load(key, version)
            if payload is not None:
                try:
                    loaded = _jaxlib.deserialize(pjrt, payload, self.devices, self.xla_options,
                                                 self._spmd)
                    self.cache_outcome = "hit"
                    return loaded
                except _jaxlib.JaxRuntimeError:
                    pass  # written by an XLA that serializes differently: compile again
            self.cache_outcome = "miss"
        hlo_passes = not dict(self.xla_options).get("xla_disable_all_hlo_passes")
        prepared = prepare(self.computation, self.declaration, self.num_replicas,
                           num_partitions=self.num_partitions, hlo_passes=hlo_passes)
        try:
            loaded = _jaxlib.compile(pjrt, prepared.computation.to_bytecode(), self.devices,
                                     xla_options=self.xla_options, spmd=self._spmd)
        except _jaxlib.JaxRuntimeError as e:
            said = str(e)
            if prepared.as_written and not any(w in said for w in _BAD_OPTION):
                # XLA cannot compile the module as written: hlogen's form, and what it changed
                changed = execution.hlogen_changes(self.computation, self.declaration)
                self.fallback = (f"XLA cannot compile the module as written "
                                 f"({said.splitlines()[0][:200]}); it ran hlogen's form, where "
                                 + ("; ".join(changed) or "nothing was changed"))
                return self._compile_hlogen_form(pjrt, hlo_passes)
            error = (UnsupportedError if said.startswith("UNIMPLEMENTED") else
                     InputError if any(w in said for w in _BAD_OPTION) else ExecutionError)
            raise error(f"{self.computation.name}: the {self.backend} backend cannot "
                        f"compile it: {e}") from None
        self._cut = prepared.cut
        if key is not None:
            try:
                payload = _jaxlib.serialize(loaded)
            except _jaxlib.JaxRuntimeError:  # a plugin that serializes nothing: no entry
                return loaded
            disk_cache.store(key, payload, jaxlib=_jaxlib.jaxlib_version(), backend=self.backend,
                             device_kind=self.device.device_kind, module=self.computation.name,
                             **({"plugin": dict(self.declaration.identity)}
                                if self.declaration.identity else {}))
        return loaded

    def _compile_hlogen_form(self, pjrt, hlo_passes: bool):
        """The module in hlogen's form (legalized, rewritten), compiled, where XLA could not
        compile it as written."""
        prepared = prepare(execution.hlogen_form(self.computation), self.declaration,
                           self.num_replicas, num_partitions=self.num_partitions,
                           hlo_passes=hlo_passes)
        self._cut = prepared.cut
        try:
            return _jaxlib.compile(pjrt, prepared.computation.to_bytecode(), self.devices,
                                   xla_options=self.xla_options, spmd=self._spmd)
        except _jaxlib.JaxRuntimeError as e:
            error = UnsupportedError if str(e).startswith("UNIMPLEMENTED") else ExecutionError
            raise error(f"{self.computation.name}: the {self.backend} backend cannot compile "
                        f"it, as written nor in hlogen's form: {e}") from None

    def _capability(self, what: str, get, *args):
        """What `get(*args)` gives, or UnsupportedError naming the backend and `what`, where
        its PJRT client (a plugin's, above all) does not offer it."""
        try:
            return get(*args)
        except _jaxlib.JaxRuntimeError as e:
            raise UnsupportedError(f"{self.computation.name}: {self.declaration.words} "
                                   f"({self.backend}) does not give {what}: {e}") from None

    def refusal(self, what: str) -> str | None:
        return None  # XLA gives each; a plugin's client may not (_capability says so)

    def optimized_hlo(self) -> str:
        """XLA's optimized HLO module(s), as text."""
        return self._capability("optimized HLO", _jaxlib.optimized_hlo, self._loaded)

    def cost_analysis(self) -> dict:
        """XLA's cost analysis: flops, bytes accessed, ..."""
        return self._capability("a cost analysis", _jaxlib.cost_analysis, self._loaded)

    def hlo_modules(self) -> list:
        """XLA's optimized HLO modules, as objects (hlogen.runtime.inspection draws them)."""
        return self._capability("optimized HLO", _jaxlib.hlo_modules, self._loaded)

    def memory_stats(self) -> dict:
        """XLA's memory analysis, in bytes, by XLA's names (inspection.memory_analysis)."""
        return self._capability("a memory analysis", _jaxlib.memory_stats, self._loaded)

    def serialize(self) -> bytes:
        """XLA's serialized executable (same jaxlib, backend, device kind and, for a plugin,
        the same plugin to load it)."""
        return self._capability("serialization", _jaxlib.serialize, self._loaded)

    def __call__(self, *args):
        # jax's C++ dispatch takes arrays as they are (check_array is not on its path):
        # other byte orders are converted here. Inline, not a call: this is the hot path.
        for a in args:
            if type(a) is np.ndarray and not a.dtype.isnative:
                args = tuple(native(x) if isinstance(x, np.ndarray) else x for x in args)
                break
        if self._staged:  # copies on every device of one slice: one host array they alias
            args = tuple(self._in[i].host_array(a) if i in self._staged else a
                         for i, a in enumerate(args))
        # x64 on for this thread during the call: 64-bit arguments stay 64-bit in jax's dispatch
        previous = _swap_x64(True)
        try:
            raw = self._dispatch(*args)
        finally:
            _swap_x64(previous)
        if self._gather is not None:  # partitioned: shards put together
            raw = self._gather(raw)
        if self._one_plain_result:
            return np.asarray(raw)
        return structure_results(self.computation.result_shapes, [np.asarray(r) for r in raw])

    def _global_results(self, raw):
        """A partitioned executable's results (global jax Arrays of shards) as global numpy
        arrays; ExecutionError where two devices' copies of one slice differ."""
        arrays = raw if isinstance(raw, (tuple, list)) else (raw,)
        got = []
        for i, (placement, array) in enumerate(zip(self._out, arrays)):
            value, differ = placement.get(array)
            if differ is not None:
                raise ExecutionError(
                    f"{self.computation.name}: result {i} is replicated over partitions "
                    f"({placement.text}), and the copies on {differ[0]} and {differ[1]} differ: "
                    f"XLA's partitioned program gave two answers (a bug of the partitioner's, "
                    f"or of the backend's)")
            got.append(value)
        return got if isinstance(raw, (tuple, list)) else got[0]

    def how_it_runs(self) -> str:
        """One line: "sharded: 1 replica x 8 partitions on 8 cpu devices", for a
        partitioned executable; "" otherwise."""
        if self.partitioning is None:
            return ""
        return f"sharded: {self.partitioning.words(self.device.platform)}"

    def _refuse_plain_call(self, *args):
        raise replicated_call_error(self)

    def run_replicated(self, per_replica_args) -> list:
        """Runs every replica of this process: `per_replica_args` holds one list of
        arguments per replica (in replica order; in a multi-process run, the replicas
        of this process: `local_replicas`). Returns one result per replica, each as
        calling the executable returns it."""
        if self.num_replicas == 1:
            return [self(*args) for args in replica_lists(self, per_replica_args)]
        per_replica = [flatten_arguments(self.computation, args)
                       for args in replica_lists(self, per_replica_args)]
        previous = _swap_x64(True)  # 64-bit arguments stay 64-bit
        try:
            device_arrays = [p.put([flat[i] for flat in per_replica]) for i, p in enumerate(self._in)]
            try:
                outs = _jaxlib.execute_replicated(self._loaded, device_arrays)
            except _jaxlib.JaxRuntimeError as e:
                raise ExecutionError(f"{self.computation.name} failed on {self.backend}: "
                                     f"{e}") from None
        finally:
            _swap_x64(previous)
        results = [[np.asarray(per_result[r]) for per_result in outs]
                   for r in range(len(per_replica))]
        for flat in results:
            execution.check_results(self.computation, self.backend, flat)
        return [structure_results(self.computation.result_shapes, flat) for flat in results]

    def _call_flat(self, *args) -> list:
        arrays = flatten_arguments(self.computation, args)
        device_arrays = [p.put(a) for p, a in zip(self._in, arrays)]
        try:
            if self.partitioning is not None:
                return _jaxlib.execute_partitioned(self._loaded, device_arrays, self._out)
            if self._cut is not None:
                raw = _jaxlib.execute(self._loaded, device_arrays,
                                      len(self._out) + self._cut.hidden)
                return self._cut.apply([np.asarray(r) for r in raw], compact=True)
            return _jaxlib.execute(self._loaded, device_arrays, len(self._out))
        except _jaxlib.JaxRuntimeError as e:
            raise ExecutionError(f"{self.computation.name} failed on {self.backend}: {e}") from None

    def _run(self, *args):
        """The Python path: the bare result array, or a tuple of raw results, checked
        against the module's results (jax's fast path repeats only calls that passed)."""
        outs = self._call_flat(*args)
        execution.check_results(self.computation, self.backend, outs, self._cut)
        return outs[0] if self._one_plain_result else tuple(outs)

    def _run_and_describe(self, *args):
        """The Python path, plus what jax's dispatch needs to repeat calls like this one.

        Only calls whose arguments are all arrays (or numpy scalars) of the parameters'
        exact dtypes are repeated by jax's dispatch: Python numbers would be typed by
        jax's rules.
        """
        out = self._run(*args)
        exact = all(type(a) is np.ndarray or isinstance(a, np.generic) or _jaxlib.is_device_array(a)
                    for a in args)
        fast = _jaxlib.fast_path_data(self._loaded, self._in, self._out, out) if exact else None
        return out, fast
