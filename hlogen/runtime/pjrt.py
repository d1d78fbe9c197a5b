"""Compiling and running computations with jaxlib's PJRT client.

Executables are cached in memory by the computation's fingerprint, the backend
and the device. Calling one takes numpy arrays and returns numpy arrays; the
first call with given argument types goes through Python (checks, device_put,
execute), later ones through jax's C++ dispatch path (see _jaxlib.fast_path).
"""
from __future__ import annotations

import collections
import threading
import time

import numpy as np

from hlogen.computation import Computation
from hlogen.errors import ExecutionError, UnsupportedError
from hlogen.runtime import _jaxlib
from hlogen.runtime.arrays import (check_signature, flatten_arguments, leaf_shapes,
                                   native, structure_results)
from hlogen.runtime.execution import prepare

_cache: collections.OrderedDict = collections.OrderedDict()  # least recently used first
_CACHE_KEPT = 256
_cache_lock = threading.Lock()
_swap_x64 = _jaxlib.swap_x64


def client(backend: str | None):
    """The PJRT client of `backend` ("cpu", "gpu" or None for the default)."""
    try:
        return _jaxlib.backend(backend)
    except RuntimeError as e:
        raise UnsupportedError(f"backend {backend!r} is not available here: {e}") from None


def compile(computation: Computation, backend: str | None = None,
            disk_cache=None) -> "Executable":
    """`disk_cache`: an ExecutableCache (hlogen.runtime.cache) to read and write
    serialized executables; the command line passes one, the library does not."""
    check_signature(computation)
    pjrt = client(backend)
    device = pjrt.local_devices()[0]
    key = (computation.fingerprint, pjrt.platform, device.id)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    found = Executable(computation, pjrt, device, disk_cache)  # compiles: outside the lock
    with _cache_lock:
        found = _cache.setdefault(key, found)
        while len(_cache) > _CACHE_KEPT:
            _cache.popitem(last=False)
    return found


class Executable:
    """A compiled computation: call it with numpy arrays, get numpy arrays back."""

    def __init__(self, computation: Computation, pjrt, device, disk_cache=None):
        self.computation = computation
        self.backend = pjrt.platform
        self.device = device
        self._prepared = prepare(computation, for_interpreter=False)
        self.cache_outcome = "off"  # or "hit", "miss": what the disk cache did
        start = time.perf_counter()
        self._loaded = self._load_or_compile(pjrt, device, disk_cache)
        self.compile_seconds = time.perf_counter() - start
        flat_in = leaf_shapes(computation.parameter_shapes)
        self._in = [_jaxlib.Placement(s.dimensions, s.dtype, device) for s in flat_in]
        self._out = [_jaxlib.Placement(s.dimensions, s.dtype, device)
                     for s in leaf_shapes(self._prepared.computation.result_shapes)]
        # One array result, read as it is (the common case), travels bare: no tuple.
        self._one_plain_result = len(computation.result_shapes) == 1 and self._prepared.plain_results
        # Tuple parameters are passed as Python tuples, which jax's dispatch would flatten
        # on its own terms: those calls stay on the Python path.
        self._dispatch = (_jaxlib.fast_path(computation.name, self._run_and_describe)
                          if len(flat_in) == len(computation.parameter_shapes) else self._run)

    def __repr__(self) -> str:
        return f"<Executable {self.computation.signature()} on {self.backend}>"

    def _load_or_compile(self, pjrt, device, disk_cache):
        key = None
        if disk_cache is not None:
            version = _jaxlib.jaxlib_version()
            key = disk_cache.key(self._prepared.computation.fingerprint,
                                 _jaxlib.compile_options_key(), version, pjrt.platform,
                                 device.device_kind)
            payload = disk_cache.load(key, version)
            if payload is not None:
                try:
                    loaded = _jaxlib.deserialize(pjrt, payload, device)
                    self.cache_outcome = "hit"
                    return loaded
                except _jaxlib.JaxRuntimeError:
                    pass  # written by an XLA that serializes differently: compile again
            self.cache_outcome = "miss"
        try:
            loaded = _jaxlib.compile(pjrt, self._prepared.computation.to_bytecode(), device)
        except _jaxlib.JaxRuntimeError as e:
            raise ExecutionError(f"{self.computation.name}: the {self.backend} backend cannot "
                                 f"compile it: {e}") from None
        if key is not None:
            disk_cache.store(key, _jaxlib.serialize(loaded), jaxlib=_jaxlib.jaxlib_version(),
                             backend=pjrt.platform, device_kind=device.device_kind,
                             module=self.computation.name)
        return loaded

    def optimized_hlo(self) -> str:
        """XLA's optimized HLO module(s), as text."""
        return _jaxlib.optimized_hlo(self._loaded)

    def cost_analysis(self) -> dict:
        """XLA's cost analysis: flops, bytes accessed, ..."""
        return _jaxlib.cost_analysis(self._loaded)

    def serialize(self) -> bytes:
        """XLA's serialized executable (same jaxlib and device kind to load it)."""
        return _jaxlib.serialize(self._loaded)

    def __call__(self, *args):
        # jax's C++ dispatch takes arrays as they are (check_array is not on its path):
        # other byte orders are converted here. Inline, not a call: this is the hot path.
        for a in args:
            if type(a) is np.ndarray and not a.dtype.isnative:
                args = tuple(native(x) if isinstance(x, np.ndarray) else x for x in args)
                break
        # x64 on for this thread during the call: 64-bit arguments stay 64-bit in jax's dispatch
        previous = _swap_x64(True)
        try:
            raw = self._dispatch(*args)
        finally:
            _swap_x64(previous)
        if self._one_plain_result:
            return np.asarray(raw)
        return structure_results(self.computation.result_shapes, self._prepared.read_results(raw))

    def _call_flat(self, *args) -> list:
        arrays = flatten_arguments(self.computation, args)
        device_arrays = [p.put(a) for p, a in zip(self._in, arrays)]
        try:
            return _jaxlib.execute(self._loaded, device_arrays, len(self._out))
        except _jaxlib.JaxRuntimeError as e:
            raise ExecutionError(f"{self.computation.name} failed on {self.backend}: {e}") from None

    def _run(self, *args):
        """The Python path: the bare result array, or a tuple of raw results."""
        outs = self._call_flat(*args)
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
