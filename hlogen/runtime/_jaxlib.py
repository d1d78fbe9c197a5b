"""Every private jax/jaxlib import of hlogen, in one module (jax is pinned to 0.10.x),
but for the MLIR layer's: hlogen.mlir, below the runtime, takes jaxlib's dialect registry
and jax's inliner from `_jax_mlir_ext` (the StableHLO bindings' own functions, the
interpreter and portable artifacts among them, are public: jaxlib.mlir.dialects.stablehlo).

What is used, and why:
- `xla_client` (CompileOptions, DeviceList): compiling StableHLO with the PJRT client;
- `batched_device_put`: numpy -> device arrays without jax's Python dispatch;
- `_jax.pjit` with `MeshExecutableFastpathData`: jax's C++ dispatch fast path,
  given our own executable, so that calling a compiled computation from numpy
  costs what `jax.jit` costs (see benchmarks/dispatch.py);
- the x64 flag, switched on for the duration of each call (thread-locally) so
  that 64-bit arguments are neither canonicalized to 32 bits nor refused;
- `xla_bridge` and the `jax_num_cpu_devices` option: how many CPU devices the CPU
  backend starts with (replicas), which only counts before any backend starts;
- `xla_bridge.register_plugin` and its backend factories: PJRT plugins (the client of
  one hlogen loads is started here and kept apart from jax's backends; the ones jax's
  own discovery registered are read from its tables);
- `jaxlib._hlo`: XLA's optimized HLO modules as objects (instructions, operands) and
  XLA's own DOT renderer of them (hlogen.runtime.inspection draws them);
- for hlogen.xla_client (the removed XlaBuilder API): `xla_client`'s Shape,
  ProgramShape, XlaComputation, PrimitiveType, OpSharding, HloSharding, CompileOptions
  and DeviceAssignment, and `_jax.mlir.mlir_module_to_xla_computation`, XLA's converter
  of StableHLO to an HLO module; the names jaxlib 0.6's xla_client passed through from
  jax's runtime (Traceback, the shardings, layouts) and the switch of tracebacks.
"""
from __future__ import annotations

import ctypes
import os
import threading
import typing

import jax  # initializes jax's config and backends
import jaxlib
import jaxlib._hlo as _hlo
import jaxlib._jax as _jax
import numpy as np
from jax._src import config as _config
from jax._src import core as _core
from jax._src import sharding_impls as _sharding_impls
from jax._src import tree_util as _tree_util
from jax._src import xla_bridge as _xla_bridge
from jax._src.interpreters import pxla as _pxla
from jax._src.lib import lapack as _lapack
from jax._src.lib import xla_client
from jax.extend.backend import get_backend
from jax.sharding import Mesh, NamedSharding, PartitionSpec, SingleDeviceSharding

JaxRuntimeError = jax.errors.JaxRuntimeError
# DLPack capsules of device arrays and back, and XLA's cost analysis of an HLO module
# (jaxlib 0.6's xla_client._xla had them)
buffer_to_dlpack_managed_tensor = _jax.buffer_to_dlpack_managed_tensor
dlpack_managed_tensor_to_buffer = _jax.dlpack_managed_tensor_to_buffer
hlo_module_cost_analysis = _jax.hlo_module_cost_analysis
# whether arrays and executables record the Python stack (xla_client.tracebacks)
tracebacks_enabled = _jax.tracebacks_enabled
set_tracebacks_enabled = _jax.set_tracebacks_enabled
# swap_x64(True) -> previous value: x64 on or off for the calling thread only.
swap_x64 = _config.enable_x64.swap_local


def backend(platform: str | None, cpu_devices: int | None = None):
    """The PJRT client for `platform` ("cpu", "gpu"/"cuda", or None for jax's default).

    `cpu_devices`: how many devices the CPU backend starts with, when no backend has
    started yet and the user has not chosen (jax's option or XLA_FLAGS' device count).
    """
    if cpu_devices is not None and not backends_started() and cpu_device_count_chosen() is None:
        jax.config.update("jax_num_cpu_devices", cpu_devices)
    found = _plugin_clients.get(platform)
    return found if found is not None else get_backend(platform)


# -- PJRT plugins --------------------------------------------------------------------------

_plugin_clients: dict = {}  # name -> the client of a PJRT plugin that hlogen loaded


def platform_taken(name: str) -> bool:
    """Whether jax knows a platform `name` already (its own, an alias, a plugin's)."""
    return _xla_bridge.is_known_platform(name)


def load_plugin(name: str, library_path: str):
    """Registers the PJRT C API library at `library_path` with jax as plugin `name` and
    starts its client: (client, the PJRT_Api capsule). jax's own backends have started
    (hlogen.runtime.plugins starts them first): jax keeps the plugin's client out of them."""
    _xla_bridge.backends()
    c_api = _xla_bridge.register_plugin(name, library_path=library_path, priority=-100)
    client = _xla_bridge._backend_factories[name].factory()
    _plugin_clients[name] = client
    return client, c_api


def plugin_name(client) -> str | None:
    """The name of the PJRT plugin whose client is `client` (hlogen's or jax's), or None."""
    for name, found in _plugin_clients.items():
        if found is client:
            return name
    for name, found in _xla_bridge.backends().items():
        if found is client and _xla_bridge._backend_factories[name].c_api is not None:
            return name
    return None


def jax_plugins() -> dict:
    """The PJRT plugins jax's own discovery (jax_plugins packages and entry points) registered
    and started: name -> (client, PJRT_Api capsule). jax's GPU plugins are hlogen's "gpu"."""
    started = _xla_bridge.backends()
    return {name: (client, _xla_bridge._backend_factories[name].c_api)
            for name, client in started.items()
            if _xla_bridge._backend_factories[name].c_api is not None
            and name not in _xla_bridge._platform_aliases and name not in _plugin_clients}


def api_address(c_api) -> int:
    """The address of the PJRT_Api struct in a capsule jax keeps of a plugin."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return get(c_api, b"pjrt_c_api")


def is_jaxlib_cpu(client) -> bool:
    """Whether `client` is jaxlib's own CPU client (a plugin's platform may be "cpu" too)."""
    return client.platform == "cpu" and "PJRT C API" not in client.platform_version


def backends_started() -> bool:
    return _xla_bridge.backends_are_initialized()


def cpu_device_count_chosen() -> str | None:
    """Where the user set the number of CPU devices, or None."""
    if _xla_bridge.num_cpu_devices.value >= 0:
        return "jax's jax_num_cpu_devices option"
    if "xla_force_host_platform_device_count" in os.environ.get("XLA_FLAGS", ""):
        return "XLA_FLAGS (--xla_force_host_platform_device_count)"
    return None


def join_distributed(coordinator: str, num_processes: int, process_id: int,
                     timeout_seconds: int) -> None:
    """jax's distributed runtime, with gloo for the CPU's collectives between processes."""
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id, initialization_timeout=timeout_seconds)


def replicated_sharding(devices: list):
    """A sharding that puts one whole array on each of `devices` (see ReplicatedPlacement)."""
    return NamedSharding(Mesh(devices, ("replica",)), PartitionSpec())


def _options(devices, xla_options: tuple = (), spmd=None) -> "xla_client.CompileOptions":
    options = xla_client.CompileOptions()
    # XLA's DebugOptions fields by name (hlogen.runtime.xla_options checked them)
    options.env_option_overrides = list(xla_options)
    if spmd is not None:  # one replica, one partition per device (partition p on devices[p])
        options.num_replicas, options.num_partitions = 1, len(devices)
        build = options.executable_build_options
        # as jax does (pxla.create_compile_options): the partitioner of the module's form
        # (Shardy's ignores GSPMD's strings: it runs every value replicated)
        build.use_spmd_partitioning = True
        build.use_shardy_partitioner = spmd.shardy
        # XLA chooses the sharding of a value the module leaves unsharded (else it makes
        # it replicated: the same values, after an all-gather jax does not do)
        build.allow_spmd_sharding_propagation_to_parameters = list(spmd.propagate_parameters)
        build.allow_spmd_sharding_propagation_to_output = list(spmd.propagate_results)
        options.device_assignment = xla_client.DeviceAssignment.create(
            np.array([[d.id for d in devices]]))
        return options
    if len(devices) > 1:  # one replica per device, in the order given
        options.num_replicas = len(devices)
        options.device_assignment = xla_client.DeviceAssignment.create(
            np.array([[d.id] for d in devices]))
    return options


def grid_options(num_replicas: int, num_partitions: int, devices: list):
    """Compile options of a per-process program on num_replicas x num_partitions devices
    (replica r's partition p on devices[r * num_partitions + p]): XLA wants SPMD
    partitioning on for more than one partition; the program's values are {manual}."""
    options = xla_client.CompileOptions()
    options.num_replicas = num_replicas
    options.num_partitions = num_partitions
    build = options.executable_build_options
    build.use_spmd_partitioning = num_partitions > 1
    build.use_shardy_partitioner = True  # as jax: it reads the GSPMD form too
    options.device_assignment = xla_client.DeviceAssignment.create(
        np.array([d.id for d in devices]).reshape(num_replicas, num_partitions))
    return options


def compile(client, code: bytes, devices: list, options=None, xla_options: tuple = (),
            spmd=None):
    """A LoadedExecutable of StableHLO `code` (text or bytecode): one replica per device,
    or with `spmd` (a Spmd) one partition per device, compiled with `xla_options` (XLA's
    DebugOptions fields by name), or as `options` (an xla_client.CompileOptions) say."""
    if _LAPACK_TARGET in code and is_jaxlib_cpu(client):
        _initialize_lapack()
    return client.compile_and_load(code, xla_client.DeviceList(tuple(devices)),
                                   _options(devices, xla_options, spmd) if options is None
                                   else options)


# jaxlib's LAPACK targets are named lapack_<type><routine>_ffi; a module that names one
# (in text or in bytecode's string table) needs the kernels initialized, which costs
# ~0.15 s (it loads scipy's LAPACK): only then.
_LAPACK_TARGET = b"lapack_"
_lapack_lock = threading.Lock()
_lapack_ready = False


def _initialize_lapack() -> None:
    global _lapack_ready
    with _lapack_lock:
        if not _lapack_ready:
            _lapack._lapack.initialize()
            _lapack_ready = True


# -- modules made elsewhere (registered in hlogen.native by hlogen.runtime) ------------

def hlo_text_to_proto(text: str) -> bytes:
    return _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()


def hlo_proto_to_text(proto: bytes) -> str:
    return _hlo.HloModule.from_serialized_hlo_module_proto(proto).to_string()


def hlo_computation(code: bytes, return_tuple: bool):
    """XLA's HLO module (an xla_client.XlaComputation) of StableHLO `code`, by XLA's own
    converter; `return_tuple`: the results as one tuple, the root XlaBuilder gives."""
    return _jax.mlir.mlir_module_to_xla_computation(code, return_tuple=return_tuple)


def hlo_to_stablehlo(proto: bytes) -> bytes:
    return _jax.mlir.hlo_to_stablehlo(proto)


def stablehlo_to_hlo(code: bytes) -> bytes:
    computation = _jax.mlir.mlir_module_to_xla_computation(code, use_tuple_args=False,
                                                           return_tuple=False)
    return computation.as_serialized_hlo_module_proto()


def exported_parts(data: bytes) -> dict:
    """What hlogen needs of jax.export's serialized `Exported` (jax's own reader)."""
    exp = jax.export.deserialize(bytearray(data))
    return {
        "module": bytes(exp.mlir_module_serialized),
        "in_avals": [(np.dtype(a.dtype), tuple(a.shape)) for a in exp.in_avals],
        "kept": sorted(exp.module_kept_var_idx),
        "platforms": tuple(exp.platforms),
        "calling_convention_version": exp.calling_convention_version,
        "nr_devices": exp.nr_devices,
    }


def compile_options_key(devices: list, xla_options: tuple = (), identity: str = "",
                        spmd=None) -> str:
    """What the compile options are, for the key of the persistent cache (XLA_FLAGS too:
    it changes what XLA compiles), and whose XLA compiles: `identity`, a PJRT plugin's
    (Backend.identity_key; "" for jaxlib's own)."""
    options = _options(devices, spmd=spmd)
    return (f"replicas={options.num_replicas},partitions={options.num_partitions},"
            + (f"spmd={spmd}," if spmd else "") +
            f"devices={[d.id for d in devices] if len(devices) > 1 else ''},"
            f"xla_options={list(xla_options)},XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}"
            + (f",plugin={identity}" if identity else ""))


def jaxlib_version() -> str:
    return jaxlib.__version__


def serialize(loaded) -> bytes:
    """XLA's serialized executable (what the persistent cache stores)."""
    return loaded.client.serialize_executable(loaded)


def deserialize(client, data: bytes, devices: list, xla_options: tuple = (), spmd=None):
    """A LoadedExecutable from `serialize`'s bytes. Only for bytes this process can trust:
    XLA's loader is not hardened against corrupt input (the cache checks a digest first)."""
    if _LAPACK_TARGET in data and is_jaxlib_cpu(client):  # as for compile: a cached
        _initialize_lapack()  # executable calls the kernels as well (without them, SIGSEGV)
    return client.deserialize_executable(data, xla_client.DeviceList(tuple(devices)),
                                         _options(devices, xla_options, spmd))


def optimized_hlo(loaded) -> str:
    return "\n".join(m.to_string() for m in loaded.hlo_modules())


def cost_analysis(loaded) -> dict:
    return dict(loaded.cost_analysis())


def hlo_modules(loaded) -> list:
    """XLA's optimized HLO modules (jaxlib._hlo.HloModule: computations(), to_string())."""
    return list(loaded.hlo_modules())


def hlo_dot(module) -> str:
    """XLA's own Graphviz rendering of an optimized HLO module (fusions as clusters)."""
    return _hlo.hlo_module_to_dot_graph(module)


def profiler_trace(directory: str):
    """jax's profiler around a block: a Perfetto trace (perfetto_trace.json.gz) and an
    XPlane (TensorBoard's) under DIRECTORY/plugins/profile/RUN/. Python's calls are left
    out (they would bury XLA's ops)."""
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    return jax.profiler.trace(directory, create_perfetto_trace=True, profiler_options=options)


def memory_stats(loaded) -> dict:
    """XLA's memory analysis of an executable: the fields of CompiledMemoryStats, in bytes."""
    stats = loaded.get_compiled_memory_stats()
    found = {name: getattr(stats, name) for name in dir(stats) if name.endswith("_in_bytes")}
    # CPU executables report no generated code there; the executable knows its size
    found["generated_code_size_in_bytes"] = (found.get("generated_code_size_in_bytes") or
                                             loaded.size_of_generated_code_in_bytes())
    return found


class Placement:
    """How arrays of one shape go to and come back from one device."""

    def __init__(self, shape_dims, dtype, device):
        self.aval = _core.ShapedArray(shape_dims, dtype)
        self.sharding = SingleDeviceSharding(device)
        self.devices = [device]

    def put(self, array):
        return _jax.batched_device_put(self.aval, self.sharding, [array], self.devices)


class ReplicatedPlacement:
    """How arrays of one shape go to the devices of several replicas, one array each.

    execute_sharded takes one jax Array per parameter holding a shard per device;
    each replica's shard is the whole parameter, so the joined array is declared
    replicated (PartitionSpec()) although its shards differ: it exists only to be
    passed to the executable, never read as one array. (batched_device_put would
    copy the first array to every device of a replicated sharding.)
    """

    def __init__(self, shape_dims, dtype, devices: list, local_devices: list):
        self.shape = tuple(shape_dims)
        self.sharding = replicated_sharding(devices)
        self._local = [Placement(shape_dims, dtype, d) for d in local_devices]

    def put(self, arrays: list):
        """One array per local replica, in replica order."""
        shards = [p.put(a) for p, a in zip(self._local, arrays)]
        return jax.make_array_from_single_device_arrays(self.shape, self.sharding, shards)


def join_shards(shards: list, devices: list):
    """One array per device (all of one shape) as the argument execute_sharded takes."""
    return jax.make_array_from_single_device_arrays(shards[0].shape, replicated_sharding(devices),
                                                    shards)


def execute_replicated(loaded, device_arrays: list) -> list:
    """Runs `loaded` on every local replica; per result, one jax array per local replica."""
    return loaded.execute_sharded(device_arrays).disassemble_into_single_device_arrays()


def execute(loaded, device_arrays: list, n_results: int) -> list:
    """Runs `loaded` on device arrays; returns one jax array per result."""
    results = loaded.execute_sharded(device_arrays)
    return results.consume_with_handlers([_first] * n_results)


def _first(per_device):
    return per_device[0]


def fast_path(name: str, slow_call):
    """A callable that dispatches through jax's C++ fast path.

    `slow_call(*args)` runs a call the slow way and returns (flat results,
    fast-path data or None); the fast path then serves later calls whose
    arguments have the same types and shapes without entering Python.
    """
    def cache_miss(*args):
        outs, fast = slow_call(*args)
        return outs, fast, False
    return _jax.pjit(name, None, cache_miss, [], [], _pxla.JitGlobalCppCacheKeys(),
                     _tree_util.dispatch_registry, _pxla.cc_shard_arg)


def fast_path_data(loaded, placements_in, placements_out, result):
    """What the C++ fast path needs to call `loaded` again without Python; `result`
    (one array or a tuple of them) is the structure later calls return."""
    leaves, treedef = _tree_util.dispatch_registry.flatten(result, None)
    n_in = len(placements_in)
    return _pxla.MeshExecutableFastpathData(
        loaded, treedef, [p.sharding for p in placements_in],
        [p.sharding for p in placements_out], [p.aval for p in placements_out],
        [True] * len(leaves), [True] * n_in, [None] * n_in, [])


def is_device_array(value) -> bool:
    return isinstance(value, jax.Array)


# -- partitioned (SPMD) executables ------------------------------------------------------

class Spmd(typing.NamedTuple):
    """How a module is compiled for partitions (one per device): per parameter and per
    result, whether XLA chooses its sharding (True where the module gives it none), and
    which partitioner reads its annotations (Shardy's for sdy, GSPMD's for mhlo.sharding:
    Shardy's ignores GSPMD's strings, and runs such a module replicated)."""
    propagate_parameters: tuple
    propagate_results: tuple
    shardy: bool


def compiled_shardings(loaded) -> tuple[list, list]:
    """The OpSharding of each parameter and result, as XLA compiled `loaded`."""
    return list(loaded.get_parameter_shardings() or []), list(loaded.get_output_shardings() or [])


def sharding_text(op_sharding) -> str:
    return str(xla_client.HloSharding.from_proto(op_sharding))


class ShardedPlacement:
    """How a global array of one shape is cut into the shards of a partitioned executable
    (by the sharding XLA compiled it with, jax's own cut) and put back together: each
    element from the first device that holds it, the devices holding copies of the same
    slice (a replicated dimension) compared with it byte for byte."""

    def __init__(self, shape_dims, dtype, devices: list, op_sharding):
        self.aval = _core.ShapedArray(tuple(shape_dims), dtype)
        self.shape, self.dtype = tuple(shape_dims), np.dtype(dtype)
        self.sharding = _sharding_impls.GSPMDSharding(devices, op_sharding)
        self.text = sharding_text(op_sharding)
        first: dict = {}  # the slice a device holds -> the first device holding it
        self._slot = {}  # device -> (its slice, the device it copies, or None)
        for device, index in self.sharding.devices_indices_map(self.shape).items():
            key = tuple((s.start, s.stop, s.step) for s in index)
            self._slot[device] = (index, first.setdefault(key, device) if key in first else None)
            first.setdefault(key, device)
        copies = [c for _, c in self._slot.values() if c is not None]
        self.replicated = len(copies) == len(self._slot) - 1 > 0
        # Devices holding copies of one slice, on the CPU: the copies alias one host array
        # (PJRT's CPU client aliases an aligned numpy array rather than copy it per device)
        self.shares_copies = (bool(copies) and devices[0].platform == "cpu"
                              and self.aval.size * self.dtype.itemsize >= _STAGED_FROM)

    def host_array(self, array):
        """`array` as it is put on the devices. Where devices hold copies of one slice on
        the CPU (shares_copies) and `array` is a numpy array PJRT would copy (not aligned
        to _ALIGNMENT, or not contiguous): one aligned copy, which every device then
        aliases instead of copying it once each. Safe: XLA writes into a parameter only
        when it is donated, and PJRT's CPU client gives the result new memory when the
        donated buffer aliases host memory (tests/test_sharded.py runs one), so no device
        clobbers another's copy; nothing else holds this one. Other arrays as they are."""
        if not self.shares_copies or type(array) is not np.ndarray or _aliased(array):
            return array
        return aligned_copy(array)

    def put(self, array):
        """A global numpy array -> one jax Array of its shards, one per device."""
        return jax.device_put(self.host_array(array), self.sharding)

    def join(self, per_device: list):
        """One array per device (as execute gives them) -> the global jax Array."""
        return jax.make_array_from_single_device_arrays(self.shape, self.sharding, per_device)

    def get(self, array) -> tuple[np.ndarray, tuple | None]:
        """The global numpy array of jax Array `array`, and (device, device) of two copies
        of one slice that differ (of the shards in order, the first copy that differs from
        its slice's first), or None."""
        shards = array.addressable_shards
        if len(shards) == 1:
            return np.asarray(shards[0].data), None
        out = None if self.replicated else np.empty(self.shape, self.dtype)
        held, copies_of = {}, {}  # first device -> its data; -> [(shard's place, device, data)]
        for place, shard in enumerate(shards):
            index, copies = self._slot[shard.device]
            data = np.asarray(shard.data)  # on the CPU a view of the device's buffer
            if copies is None:
                held[shard.device] = data
                if out is None:  # replicated: the first copy is the array (as jax's asarray)
                    out = data
                else:
                    out[index] = data
            else:
                copies_of.setdefault(copies, []).append((place, shard.device, data))
        differ = []  # (place, first device, device) of the first copy that differs, per slice
        for first, copies in copies_of.items():
            at = _first_differing(held[first], [data for _, _, data in copies])
            if at is not None:
                differ.append((copies[at][0], first, copies[at][1]))
        return out, (min(differ, key=lambda found: found[0])[1:] if differ else None)


# PJRT's CPU client aliases a numpy array whose data starts at a multiple of this (XLA's
# cpu_function_runtime::MinAlign) and copies any other
_ALIGNMENT = 64
# Below this many bytes, a copy per device costs little: such arguments are put as they are
_STAGED_FROM = 1 << 16
# Copies are compared this many bytes at a time, every copy against the first's chunk
# while it is in the cache: each copy's bytes are read once, the first's once in all
_CHUNK = 1 << 20


def _aliased(array: np.ndarray) -> bool:
    """Whether PJRT's CPU client would alias `array` rather than copy it."""
    return array.flags.c_contiguous and array.ctypes.data % _ALIGNMENT == 0


def aligned_copy(array: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `array` whose data is aligned to _ALIGNMENT bytes."""
    raw = np.empty(array.nbytes + _ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % _ALIGNMENT
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    np.copyto(out, array)
    return out


def _libc_memcmp():
    """libc's memcmp (several times numpy's comparison of two arrays, which writes an
    array of booleans first), or None where ctypes finds no C library."""
    try:
        memcmp = ctypes.CDLL(None).memcmp
    except (OSError, AttributeError):
        return None
    memcmp.restype, memcmp.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_void_p,
                                                    ctypes.c_size_t]
    return memcmp


_memcmp = _libc_memcmp()


def _first_differing(first: np.ndarray, copies: list) -> int | None:
    """The index of the first of `copies` whose bytes differ from `first`'s, or None."""
    if _memcmp is None or any(c.nbytes != first.nbytes for c in copies):  # (memcmp reads n)
        return next((i for i, c in enumerate(copies) if not _same_bytes(first, c)), None)
    first = np.ascontiguousarray(first)
    copies = [np.ascontiguousarray(c) for c in copies]  # kept alive while compared
    start, addresses, size = first.ctypes.data, [c.ctypes.data for c in copies], first.nbytes
    for offset in range(0, size, _CHUNK):
        n = min(_CHUNK, size - offset)
        for address in addresses:
            if _memcmp(start + offset, address + offset, n) != 0:
                # the first copy that differs anywhere, not the first found in this chunk
                return next(i for i, c in enumerate(copies) if not _same_bytes(first, c))
    return None


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = (np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in (a, b))
    if a.size % 8 == 0:  # compared 8 bytes at a time: ten times faster than by the byte
        a, b = a.view(np.uint64), b.view(np.uint64)
    return np.array_equal(a, b)


def execute_partitioned(loaded, device_arrays: list, placements_out: list) -> list:
    """Runs a partitioned `loaded` on global jax Arrays; one global jax Array per result."""
    results = loaded.execute_sharded(device_arrays).disassemble_into_single_device_arrays()
    return [p.join(per_device) for p, per_device in zip(placements_out, results)]
