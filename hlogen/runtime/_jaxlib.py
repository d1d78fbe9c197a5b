"""Every private jax/jaxlib import of hlogen, in one module (jax is pinned to 0.10.x).

What is used, and why:
- `xla_client` (CompileOptions, DeviceList): compiling StableHLO with the PJRT client;
- `batched_device_put`: numpy -> device arrays without jax's Python dispatch;
- `_jax.pjit` with `MeshExecutableFastpathData`: jax's C++ dispatch fast path,
  given our own executable, so that calling a compiled computation from numpy
  costs what `jax.jit` costs (see benchmarks/dispatch.py);
- the x64 flag, switched on for the duration of each call (thread-locally) so
  that 64-bit arguments are neither canonicalized to 32 bits nor refused.
"""
from __future__ import annotations

import jax  # noqa: F401 - initializes jax's config and backends
import jaxlib._jax as _jax
from jax._src import config as _config
from jax._src import core as _core
from jax._src import tree_util as _tree_util
from jax._src.interpreters import pxla as _pxla
from jax._src.lib import xla_client
from jax.extend.backend import get_backend
from jax.sharding import SingleDeviceSharding

JaxRuntimeError = jax.errors.JaxRuntimeError
# swap_x64(True) -> previous value: x64 on or off for the calling thread only.
swap_x64 = _config.enable_x64.swap_local


def backend(platform: str | None):
    """The PJRT client for `platform` ("cpu", "gpu"/"cuda", or None for jax's default)."""
    return get_backend(platform)


def compile(client, code: bytes, device):
    """A LoadedExecutable of StableHLO `code` (text or bytecode) on one device."""
    return client.compile_and_load(code, xla_client.DeviceList((device,)),
                                   xla_client.CompileOptions())


def compile_options_key() -> str:
    """What the compile options are, for the key of the persistent cache."""
    options = xla_client.CompileOptions()
    return f"replicas={options.num_replicas},partitions={options.num_partitions}"


def jaxlib_version() -> str:
    import jaxlib
    return jaxlib.__version__


def serialize(loaded) -> bytes:
    """XLA's serialized executable (what the persistent cache stores)."""
    return loaded.client.serialize_executable(loaded)


def deserialize(client, data: bytes, device):
    """A LoadedExecutable from `serialize`'s bytes. Only for bytes this process can trust:
    XLA's loader is not hardened against corrupt input (the cache checks a digest first)."""
    return client.deserialize_executable(data, xla_client.DeviceList((device,)),
                                         xla_client.CompileOptions())


def optimized_hlo(loaded) -> str:
    return "\n".join(m.to_string() for m in loaded.hlo_modules())


def cost_analysis(loaded) -> dict:
    return dict(loaded.cost_analysis())


class Placement:
    """How arrays of one shape go to and come back from one device."""

    def __init__(self, shape_dims, dtype, device):
        self.aval = _core.ShapedArray(shape_dims, dtype)
        self.sharding = SingleDeviceSharding(device)
        self.devices = [device]

    def put(self, array):
        return _jax.batched_device_put(self.aval, self.sharding, [array], self.devices)


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
