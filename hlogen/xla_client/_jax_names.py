"""The names of jaxlib 0.6's `xla_client` that are jax's runtime rather than XlaBuilder's
API: those with a meaning here (the array type results come back as, tracebacks, jaxlib's
shardings and layouts, ShapeIndex), and those without one, which still exist so that code
naming them imports, and raise hg.UnsupportedError saying why when used.
"""
from __future__ import annotations

import contextlib
import enum

from hlogen.errors import UnsupportedError
from hlogen.runtime import _jaxlib


class Refused:
    """A name of jaxlib 0.6's xla_client without a meaning here: calling it, reading an
    attribute of it or ordering it (`mlir_api_version >= 50`) raises UnsupportedError
    with `why`. Truth, equality and hashing are an object's (documentation tools and
    containers ask them)."""

    __slots__ = ("_name", "_why")

    def __init__(self, name: str, why: str):
        self._name = name
        self._why = why

    def _refuse(self, *args, **kwargs):
        raise UnsupportedError(f"xla_client.{self._name}: {self._why}")

    __call__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):  # copy, pickle and inspect ask for these
            raise AttributeError(attribute)
        self._refuse()

    def __repr__(self) -> str:
        return f"<xla_client.{self._name}: not available in hlogen: {self._why}>"


class ShapeIndex:
    """XLA's ShapeIndex: the path to a sub-shape of a tuple shape, one element index per
    level of nesting (jaxlib 0.6 had it for tuple-shaped layouts and aliases)."""

    __slots__ = ("_indices",)

    def __init__(self, indices=()):
        self._indices = tuple(int(i) for i in indices)

    def __eq__(self, other) -> bool:
        return isinstance(other, ShapeIndex) and other._indices == self._indices

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self._indices)

    def __iter__(self):
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)

    def __repr__(self) -> str:
        return "{" + ",".join(map(str, self._indices)) + "}"


class CustomCallTargetTraits(enum.IntFlag):
    DEFAULT = 0
    COMMAND_BUFFER_COMPATIBLE = 1


# jax's own objects, which jaxlib 0.6's xla_client passed through: the same objects today
Traceback = _jaxlib.xla_client.Traceback
Frame = _jaxlib.xla_client.Frame
PjRtLayout = _jaxlib.xla_client.PjRtLayout
Layout = _jaxlib.xla_client.Layout
AutotuneCacheMode = _jaxlib.xla_client.AutotuneCacheMode
DeviceList = _jaxlib.xla_client.DeviceList
Memory = _jaxlib.xla_client.Memory
Sharding = _jaxlib.xla_client.Sharding
NamedSharding = _jaxlib.xla_client.NamedSharding
SingleDeviceSharding = _jaxlib.xla_client.SingleDeviceSharding
GSPMDSharding = _jaxlib.xla_client.GSPMDSharding
ArrayCopySemantics = _jaxlib.xla_client.ArrayCopySemantics
custom_call_targets = _jaxlib.xla_client.custom_call_targets  # XLA's registry, by platform


@contextlib.contextmanager
def tracebacks(enabled=True):
    """Collects (or not) a Traceback of the Python stack with each array and executable
    made inside the block (jaxlib's switch, which jax also reads)."""
    saved = _jaxlib.tracebacks_enabled()
    _jaxlib.set_tracebacks_enabled(enabled)
    try:
        yield
    finally:
        _jaxlib.set_tracebacks_enabled(saved)


_RUNTIME = ("jax's runtime internals, which jaxlib's xla_client passed through to jax; "
            "hlogen.xla_client builds and runs computations (use jax for jax's runtime)")
_CLIENTS = ("hlogen's client of a platform is jax's backend: get_local_backend(platform); a "
            "PJRT plugin is loaded with hg.load_plugin(path, name) (or `--plugin PATH:NAME` on "
            "the command line) and runs XlaComputation.computation by hg.compile(..., "
            "backend=name)")
_PLUGINS = ("hlogen loads PJRT plugins itself: hg.load_plugin(path, name), or HLOGEN_PLUGINS / "
            "`--plugin PATH:NAME` on the command line")
_CUSTOM_CALLS = ("a target is registered from a shared library's function with "
                 "hg.register_custom_call(name, library, symbol) (jaxlib's PyCapsule "
                 "registration is not carried through hlogen's pipeline)")

# name -> why it has no meaning here
REFUSED = {
    "ifrt_programs": _RUNTIME, "profiler": "use jax.profiler (jax's profiler of the same runtime)",
    "mlir_api_version": ("the version of jaxlib 0.6's MLIR Python API; hlogen emits StableHLO "
                         "with jaxlib's current bindings and needs no version switch"),
    "DeviceTopology": _RUNTIME, "get_topology_for_devices": _RUNTIME,
    "make_tfrt_tpu_c_api_device_topology": _RUNTIME, "make_c_api_device_topology": _RUNTIME,
    "make_c_api_client": _CLIENTS, "make_tpu_client": _CLIENTS,
    "generate_pjrt_gpu_plugin_options": _CLIENTS,
    "pjrt_plugin_loaded": _PLUGINS, "load_pjrt_plugin_dynamically": _PLUGINS,
    "load_pjrt_plugin_with_c_api": _PLUGINS, "pjrt_plugin_initialized": _PLUGINS,
    "initialize_pjrt_plugin": _PLUGINS,
    "PmapSharding": "jax removed PmapSharding; NamedSharding is jax's sharding of arrays",
    "CustomCallHandler": _CUSTOM_CALLS, "register_custom_call_target": _CUSTOM_CALLS,
    "register_custom_call_handler": _CUSTOM_CALLS,
    "CustomTypeIdHandler": _CUSTOM_CALLS, "register_custom_type_id": _CUSTOM_CALLS,
    "register_custom_type_id_handler": _CUSTOM_CALLS,
    "register_custom_call_partitioner": _RUNTIME, "encode_inspect_sharding_callback": _RUNTIME,
    "hlo_sharding_util": _RUNTIME, "register_custom_call_as_batch_partitionable": _RUNTIME,
    "heap_profile": "use jax.profiler.device_memory_profile (jax's heap profile of the client)",
    "array_result_handler": _RUNTIME, "batched_copy_array_to_devices_with_sharding": _RUNTIME,
    "batched_device_put": _RUNTIME, "reorder_shards": _RUNTIME,
    "batched_block_until_ready": _RUNTIME, "check_and_canonicalize_memory_kind": _RUNTIME,
}
