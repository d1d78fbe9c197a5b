"""The removed client idioms over jaxlib's current PJRT client: Client.compile of an
XlaComputation (or MLIR / HLO text) with CompileOptions, buffer_from_pyval, execute
with one buffer per result (a tuple root's elements one each), replicas and SPMD
partitions by execute_sharded_on_local_devices, Buffer.to_py, channel handles.

The client is the CPU (or GPU) backend hlogen runs on (jax's): make_cpu_client and
get_local_backend return it rather than a second one. Computations are compiled as
hg.compile compiles them (hlogen's preflight, legalization and XLA's semantics), then
with the caller's compile options; buffers are jax arrays on one device each.
"""
from __future__ import annotations

import itertools
import re
import weakref

import numpy as np

from hlogen import backends
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, InputError, UnsupportedError
from hlogen.loading import load
from hlogen.runtime import _jaxlib, pjrt
from hlogen.runtime.arrays import check_array, check_signature, native
from hlogen.runtime.execution import prepare
from hlogen.xla_client._builder import XlaComputation
from hlogen.xla_client._protos import ChannelHandle, ChannelHandle_ChannelType
from hlogen.xla_client._types import xla_shape

_xc = _jaxlib.xla_client


class XlaRuntimeError(ExecutionError):
    """Compiling or running failed in XLA (the removed API raised XlaRuntimeError)."""


def _xla_failure(what: str, error: Exception) -> Exception:
    cls = UnsupportedError if str(error).startswith("UNIMPLEMENTED") else XlaRuntimeError
    return cls(f"{what}: {error}")


# -- compile options ---------------------------------------------------------------------------

def _device_ids(assignment) -> np.ndarray:
    """A [replica, partition] array of device ids from nested lists, an array or a
    DeviceAssignment."""
    if isinstance(assignment, _xc.DeviceAssignment):
        per_partition = [[int(d) for d in ids.split()] for ids in
                         re.findall(r"Computation\d+\{([\d ]*)\}", repr(assignment))]
        return np.array(per_partition, np.int64).T.reshape(assignment.replica_count(),
                                                          assignment.computation_count())
    ids = np.asarray(assignment)
    if ids.ndim != 2 or ids.dtype.kind not in "iu" or ids.size == 0:
        raise InputError(f"device assignment must be a 2-D array (or nested lists) of device "
                         f"ids, indexed [replica][partition], got {assignment!r}")
    return ids


class DeviceAssignment(_xc.DeviceAssignment):
    """XLA's device assignment; `create` takes nested lists as well as arrays."""

    @staticmethod
    def create(assignment) -> "_xc.DeviceAssignment":
        return _xc.DeviceAssignment.create(_device_ids(assignment).astype(np.int32))


class CompileOptions(_xc.CompileOptions):
    """jaxlib's CompileOptions; `device_assignment` also takes nested lists or an array
    of device ids, [replica][partition]."""

    @property
    def device_assignment(self):
        return _xc.CompileOptions.device_assignment.__get__(self)

    @device_assignment.setter
    def device_assignment(self, assignment):
        if not isinstance(assignment, _xc.DeviceAssignment):
            assignment = DeviceAssignment.create(assignment)
        _xc.CompileOptions.device_assignment.__set__(self, assignment)


ExecutableBuildOptions = type(_xc.CompileOptions().executable_build_options)


# -- devices and buffers -----------------------------------------------------------------------

class Device:
    """A device of the client (jax's), with the removed methods."""

    __slots__ = ("_device",)

    def __init__(self, device):
        self._device = device

    def __getattr__(self, name):
        return getattr(self._device, name)

    def __eq__(self, other) -> bool:  # jaxlib's device of it too (its methods return those)
        return _raw_device(other) == self._device

    def __hash__(self) -> int:
        return hash(self._device)

    def __repr__(self) -> str:
        return repr(self._device)

    def synchronize_all_activity(self) -> None:
        """Waits until every array on this device is computed: no work left in flight."""
        for array in self._device.client.live_arrays():
            if self._device in array.devices():
                array.block_until_ready()

    def get_stream_for_external_ready_events(self):
        """The device's stream (DLPack's consumers ask for it); XLA's error, as jaxlib 0.6
        raised it, where the device has none (CPUs)."""
        try:
            return self._device.get_stream_for_external_ready_events()
        except _jaxlib.JaxRuntimeError as e:
            raise XlaRuntimeError(str(e)) from None

    def transfer_to_infeed(self, literal) -> None:
        raise UnsupportedError("transfer_to_infeed: jaxlib's PJRT client has no infeed queue "
                               "to fill")

    def transfer_from_outfeed(self, shape):
        raise UnsupportedError("transfer_from_outfeed: jaxlib's PJRT client has no outfeed "
                               "queue to read")


def _raw_device(device):
    return device._device if isinstance(device, Device) else device


class Buffer:
    """An array on one device (a jax array): `to_py()` (or np.asarray) copies it out."""

    __slots__ = ("_array", "client", "__weakref__")

    def __init__(self, array, client: "Client"):
        self._array = array
        self.client = client
        client._made.append(weakref.ref(self))

    def __getattr__(self, name):  # the rest is the jax array's (jaxlib 0.6 returned those)
        if name in Buffer.__slots__:  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self._array, name)

    def to_py(self) -> np.ndarray:
        return np.asarray(self._array)

    def __array__(self, dtype=None, copy=None):
        array = np.asarray(self._array)
        return array if dtype is None else array.astype(dtype)

    def __repr__(self) -> str:
        return f"Buffer({self.to_py()!r}, device={self.device()})"

    @property
    def shape(self) -> tuple:
        return tuple(self._array.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self._array.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def xla_shape(self):
        return xla_shape(T.Shape(T.element_type(self.dtype), self.shape))

    def device(self) -> Device:
        (device,) = self._array.devices()
        return Device(device)

    def block_until_ready(self) -> "Buffer":
        self._array.block_until_ready()
        return self

    def delete(self) -> None:
        self._array.delete()

    def is_deleted(self) -> bool:
        return self._array.is_deleted()

    def copy_to_host_async(self) -> None:
        self._array.copy_to_host_async()

    def clone(self) -> "Buffer":
        """Another Buffer of the same device array."""
        return Buffer(self._array, self.client)

    def copy_to_device(self, device) -> "Buffer":
        return self.client.buffer_from_pyval(self.to_py(), device)

    def on_device_size_in_bytes(self) -> int:
        return self._array.on_device_size_in_bytes()

    def unsafe_buffer_pointer(self) -> int:
        return self._array.unsafe_buffer_pointer()


def _put(value, device):
    """A jax array of `value` (numpy, a Python value or a Buffer) on `device`."""
    if isinstance(value, Buffer):
        value = value._array
    if _jaxlib.is_device_array(value) and value.devices() == {device}:
        return value
    if isinstance(value, tuple):
        raise InputError(f"a buffer holds one array, got the tuple {value!r}: PJRT has no "
                         f"tuple buffers, pass the elements")
    array = native(np.asarray(value))
    if array.dtype == object:
        raise InputError(f"a buffer holds an array of numbers, got {value!r}")
    previous = _jaxlib.swap_x64(True)  # 64-bit values stay 64-bit
    try:
        return _jaxlib.Placement(array.shape, array.dtype, device).put(array)
    finally:
        _jaxlib.swap_x64(previous)


# -- the client --------------------------------------------------------------------------------

_clients: dict = {}


def _client(backend: str | None, num_devices: int = 1) -> "Client":
    raw = pjrt.client(backend, num_devices)
    if raw not in _clients:
        _clients[raw] = Client(raw)
    return _clients[raw]


# make_cpu_client's options (jaxlib 0.4-0.10) that jax has chosen for its CPU client
_CPU_CLIENT_OPTIONS = frozenset({
    "use_tfrt", "asynchronous", "distributed_client", "node_id", "num_nodes", "collectives",
    "get_local_topology_timeout_minutes", "get_global_topology_timeout_minutes",
    "transfer_server_factory"})


def make_cpu_client(*, num_devices: int | None = None, **options) -> "Client":
    """The CPU client hlogen runs on (jax's CPU backend), with at least `num_devices`
    devices if it has not started yet. jaxlib's other options (asynchronous, collectives,
    ...) are those jax chose for its client."""
    unknown = sorted(set(options) - _CPU_CLIENT_OPTIONS)
    if unknown:
        raise TypeError(f"make_cpu_client() got unexpected keyword arguments {unknown}")
    return _client("cpu", num_devices or 1)


def get_local_backend(platform: str | None = None) -> "Client":
    """The client of `platform` ("cpu", "gpu"; None: jax's default)."""
    return _client({"host": "cpu", "cuda": "gpu", "rocm": "gpu"}.get(platform, platform))


class Client:
    """A PJRT client with the removed API: compile, buffer_from_pyval, channel handles.
    Everything else is jaxlib's client's."""

    def __init__(self, raw):
        self._raw = raw
        self._channels = itertools.count(1)
        self._made: list = []  # weak references to the buffers made through this client

    def live_buffers(self) -> list[Buffer]:
        """The buffers made through this client (buffer_from_pyval, execute) that are
        neither deleted nor freed, the newest first."""
        self._made = [r for r in self._made if r() is not None and not r().is_deleted()]
        return [r() for r in reversed(self._made)]

    def __getattr__(self, name):
        return getattr(self._raw, name)

    def __repr__(self) -> str:
        return f"<xla_client.Client {self._raw.platform} with {self._raw.device_count()} devices>"

    @property
    def platform(self) -> str:
        return self._raw.platform

    def devices(self) -> list[Device]:
        return [Device(d) for d in self._raw.devices()]

    def local_devices(self) -> list[Device]:
        return [Device(d) for d in self._raw.local_devices()]

    def get_default_device_assignment(self, num_replicas: int, num_partitions: int | None = None):
        """The first devices: a list per replica of its partitions' devices (or a list of
        devices, one per replica, without num_partitions)."""
        devices = self.local_devices()
        count = num_replicas * (num_partitions or 1)
        if count > len(devices):
            raise InputError(f"{num_replicas} replica(s) x {num_partitions or 1} partition(s) "
                             f"need {count} devices; this client has {len(devices)}")
        if num_partitions is None:
            return devices[:num_replicas]
        return [devices[r * num_partitions:(r + 1) * num_partitions] for r in range(num_replicas)]

    def buffer_from_pyval(self, argument, device=None, force_copy=False,
                          host_buffer_semantics=None) -> Buffer:
        """A buffer of `argument` (numpy array or value; Python numbers as numpy types
        them) on `device` (the first local device by default). As XLA's: with ZERO_COPY
        (the default) a CPU buffer may alias an aligned numpy array, which must then not
        change; other semantics, or `force_copy`, copy it first."""
        device = self._raw.local_devices()[0] if device is None else _raw_device(device)
        zero_copy = host_buffer_semantics in (None, _xc.HostBufferSemantics.ZERO_COPY)
        if isinstance(argument, np.ndarray) and (force_copy or not zero_copy):
            argument = argument.copy()  # jax's put aliases aligned arrays on the CPU
        return Buffer(_put(argument, device), self)

    def _channel(self, kind: ChannelHandle_ChannelType) -> ChannelHandle:
        return ChannelHandle(handle=next(self._channels), type=kind)

    def create_channel_handle(self) -> ChannelHandle:
        return self._channel(ChannelHandle_ChannelType.DEVICE_TO_DEVICE)

    def create_device_to_host_channel_handle(self) -> ChannelHandle:
        return self._channel(ChannelHandle_ChannelType.DEVICE_TO_HOST)

    def create_host_to_device_channel_handle(self) -> ChannelHandle:
        return self._channel(ChannelHandle_ChannelType.HOST_TO_DEVICE)

    def compile(self, computation, compile_options=None, host_callbacks=()) -> "LoadedExecutable":
        """An executable of an XlaComputation, hlogen Computation, jaxlib XlaComputation,
        or MLIR (StableHLO, MHLO) or HLO text or bytes, with `compile_options` (replicas,
        partitions, a device assignment, SPMD partitioning)."""
        if host_callbacks:
            raise UnsupportedError("compile: host_callbacks are not supported")
        comp = _computation(computation)
        check_signature(comp)
        options = _xc.CompileOptions.ParseFromString(  # a copy: the caller's stay as they are
            (compile_options or _xc.CompileOptions()).SerializeAsString())
        replicas, partitions = options.num_replicas, options.num_partitions
        if options.device_assignment is not None:
            ids = _device_ids(options.device_assignment)
        else:
            ids = np.arange(replicas * partitions).reshape(replicas, partitions)
            if ids.size > 1:
                options.device_assignment = _xc.DeviceAssignment.create(ids.astype(np.int32))
        by_id = {d.id: d for d in self._raw.devices()}
        missing = sorted(set(map(int, ids.flat)) - set(by_id))
        if missing:
            raise InputError(f"compile: the device assignment names device(s) {missing}; this "
                             f"client has {len(by_id)} ({', '.join(map(str, sorted(by_id)))})")
        devices = [by_id[int(i)] for i in ids.flat]
        prepared = prepare(comp, backends.get(self._raw.platform), num_replicas=replicas,
                           num_partitions=partitions)
        try:
            loaded = _jaxlib.compile(self._raw, prepared.computation.to_bytecode(), devices, options)
        except _jaxlib.JaxRuntimeError as e:
            raise _xla_failure(f"compile: {comp.name}", e) from None
        return LoadedExecutable(self, loaded, prepared, partitions)


def _computation(value) -> Computation:
    if isinstance(value, XlaComputation):
        return value.computation
    if isinstance(value, Computation):
        return value
    if isinstance(value, _xc.XlaComputation):
        return load(value.as_serialized_hlo_module_proto())
    if isinstance(value, (str, bytes)):
        return load(value)
    raise InputError(f"compile takes an XlaComputation or MLIR (or HLO) text, got "
                     f"{type(value).__name__}")


class LoadedExecutable:
    """A compiled computation on its devices: `execute` on one device,
    `execute_sharded_on_local_devices` on several (replicas, partitions). Results are
    one buffer per result of the computation (per element of a tuple root)."""

    def __init__(self, client: Client, loaded, prepared, partitions: int):
        self.client = client
        self._loaded = loaded
        self._computation = prepared.computation
        self._cut = prepared.cut  # results with dynamic dimensions: cut on the host
        self._devices = list(loaded.local_devices())
        self._parameters = T.leaf_shapes(prepared.computation.parameter_shapes)
        self._partitions = partitions

    def __getattr__(self, name):
        return getattr(self._loaded, name)

    def __repr__(self) -> str:
        return f"<LoadedExecutable {self._computation.signature()} on {len(self._devices)} device(s)>"

    def local_devices(self) -> list[Device]:
        return [Device(d) for d in self._devices]

    def _arguments(self, arguments, device) -> list:
        """The arguments as arrays on `device`, checked against the parameters (shards of
        them are not checked: SPMD partitions take parts of the parameters)."""
        arguments = list(arguments)
        names = self._computation.parameter_names
        if len(arguments) != len(self._parameters):
            raise InputError(f"{self._computation.name} takes {len(self._parameters)} "
                             f"argument(s), got {len(arguments)}")
        checked = []
        for name, shape, value in zip(names, self._parameters, arguments):
            raw = value._array if isinstance(value, Buffer) else value
            if _jaxlib.is_device_array(raw) and raw.is_deleted():
                raise XlaRuntimeError(f"parameter {name!r} of {self._computation.name}: the "
                                      f"buffer has been deleted")
            if self._partitions == 1 and not _jaxlib.is_device_array(raw):
                raw = check_array(f"parameter {name!r} of {self._computation.name}", shape, raw)
            elif self._partitions == 1 and (tuple(raw.shape) != shape.dimensions or
                                            np.dtype(raw.dtype) != shape.dtype):
                raise InputError(f"parameter {name!r} of {self._computation.name} expects "
                                 f"{shape}, got a buffer of {np.dtype(raw.dtype)}{list(raw.shape)}")
            checked.append(_put(raw, device))
        return checked

    def _run(self, joined: list) -> list:
        previous = _jaxlib.swap_x64(True)
        try:
            return _jaxlib.execute_replicated(self._loaded, joined)
        except _jaxlib.JaxRuntimeError as e:
            raise _xla_failure(f"{self._computation.name} failed", e) from None
        finally:
            _jaxlib.swap_x64(previous)

    def execute(self, arguments) -> list[Buffer]:
        """Runs on the executable's one device: one buffer per result."""
        if len(self._devices) != 1:
            raise InputError(f"execute runs an executable of one device; this one runs on "
                             f"{len(self._devices)} (replicas x partitions): use "
                             f"execute_sharded_on_local_devices")
        joined = self._arguments(arguments, self._devices[0])
        results = [per_device[0] for per_device in self._run(joined)]
        if self._cut is not None:  # XLA's dynamic results hold their elements first
            results = [_put(a, self._devices[0]) for a in
                       self._cut.apply([np.asarray(r) for r in results], compact=True)]
        return [Buffer(r, self.client) for r in results]

    def execute_with_token(self, arguments, device=None) -> tuple:
        """`execute`, and the token of the execution's completion."""
        results = self.execute(arguments)
        return results, ExecutionToken([results])

    def execute_sharded(self, arguments, with_tokens: bool = False) -> ExecuteResults:
        """`arguments[i]`: argument i, a list of one buffer per local device (or one
        buffer, on a one-device executable)."""
        return ExecuteResults(self.execute_sharded_on_local_devices(
            [a if isinstance(a, (list, tuple)) else [a] for a in arguments]))

    def execute_sharded_on_local_devices(self, arguments) -> list[list[Buffer]]:
        """`arguments[i][d]`: argument i of local device d (in local_devices() order).
        Returns `results[j][d]`: result j of device d."""
        arguments = [list(a) for a in arguments]
        if self._cut is not None:
            raise UnsupportedError(f"{self._computation.name}: dynamic dimensions "
                                   f"(set_dimension_size) run on one device (execute)")
        if any(len(a) != len(self._devices) for a in arguments):
            raise InputError(f"execute_sharded_on_local_devices: each argument needs one value "
                             f"per local device ({len(self._devices)}), got "
                             f"{[len(a) for a in arguments]}")
        per_device = [self._arguments([a[d] for a in arguments], device)
                      for d, device in enumerate(self._devices)]
        joined = [_jaxlib.join_shards([args[i] for args in per_device], self._devices)
                  for i in range(len(arguments))]
        return [[Buffer(a, self.client) for a in per_device] for per_device in self._run(joined)]


# -- DLPack and cost analysis (jaxlib 0.6's xla_client._xla) --------------------------------

def buffer_to_dlpack_managed_tensor(buffer, stream=None):
    """A DLPack capsule of the buffer's device memory (no copy)."""
    array = buffer._array if isinstance(buffer, Buffer) else buffer
    return _jaxlib.buffer_to_dlpack_managed_tensor(array, stream)


def dlpack_managed_tensor_to_buffer(tensor, device, stream=None):
    """The Buffer of a DLPack capsule on `device`; the old form (tensor, cpu_backend,
    gpu_backend) takes it on the CPU backend's first device."""
    if isinstance(device, Client):
        device = device.local_devices()[0]
        stream = None
    raw = _raw_device(device)
    return Buffer(_jaxlib.dlpack_managed_tensor_to_buffer(tensor, raw, stream),
                  _client(raw.platform))


def hlo_module_cost_analysis(client, module) -> dict:
    """XLA's cost analysis (flops, bytes accessed, ...) of an HLO module on `client`."""
    raw = client._raw if isinstance(client, Client) else client
    return _jaxlib.hlo_module_cost_analysis(raw, module)


class ExecutionToken:
    """The completion of an execution (jaxlib 0.6's execute_with_token and
    execute_sharded(with_tokens=True) returned one per run): `block_until_ready` waits for
    it; `get_token(d)` is the part of device d."""

    def __init__(self, per_device: list):
        self._per_device = per_device  # the result buffers of each device

    def block_until_ready(self) -> None:
        for buffers in self._per_device:
            for b in buffers:
                b.block_until_ready()

    def get_token(self, device: int) -> "ExecutionToken":
        return ExecutionToken([self._per_device[device]])


class ExecuteResults:
    """What `execute_sharded` returns (jaxlib 0.6's form, over which `execute` was built):
    the results of every device, and the token of the execution's completion."""

    def __init__(self, per_result: list):
        self._per_result = per_result

    def disassemble_into_single_device_arrays(self) -> list[list[Buffer]]:
        """`results[j][d]`: result j on device d."""
        return self._per_result

    def consume_token(self) -> ExecutionToken:
        return ExecutionToken([list(per_device) for per_device in zip(*self._per_result)])


def execute_with_python_values(executable, arguments, backend) -> list[np.ndarray]:
    """Runs on one device with host values in and out."""
    device = executable.local_devices()[0]
    buffers = [backend.buffer_from_pyval(a, device=device) for a in arguments]
    return [np.asarray(x) for x in executable.execute(buffers)]


def execute_with_python_values_replicated(executable, arguments, backend) -> list:
    """`arguments[r]`: the host values of replica r. Returns the results of each replica."""
    devices = executable.local_devices()
    inputs = [[backend.buffer_from_pyval(v, d) for v, d in zip(values, devices)]
              for values in zip(*arguments)]
    outputs = executable.execute_sharded_on_local_devices(inputs)
    return [[np.asarray(x) for x in per_replica] for per_replica in zip(*outputs)]
