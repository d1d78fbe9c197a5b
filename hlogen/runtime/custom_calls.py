"""Custom-call targets: registering native functions, and the names and places XLA refuses.

A custom call (`ops.custom_call`) names a target that XLA looks up when it compiles:
a native function registered for the platform. `register_custom_call` loads one
from a shared library and registers it through jax's public FFI API
(`jax.ffi.register_ffi_target`), numbering API versions as StableHLO does:

| api_version | XLA's name | the function on the CPU |
| --- | --- | --- |
| 4 (default) | API_VERSION_TYPED_FFI | a handler defined with `XLA_FFI_DEFINE_HANDLER_SYMBOL` (`jax.ffi.include_dir()`) |
| 3 | API_VERSION_STATUS_RETURNING_UNIFIED | `void f(void* out, const void** in, const char* opaque, size_t opaque_len, XlaCustomCallStatus* status)` |
| 2 | API_VERSION_STATUS_RETURNING | `void f(void* out, const void** in, XlaCustomCallStatus* status)` |
| 1 | API_VERSION_ORIGINAL | `void f(void* out, const void** in)` (the spec's form) |

(jax's own `register_ffi_target` numbers them differently: its api_version=1 is the
typed FFI, 0 every legacy form.) XLA CPU in jaxlib 0.10.2 runs all four; it logs
that versions 1 and 2 are deprecated.

What makes XLA end the process instead of reporting an error is refused before: target
names XLA's compiler handles itself (hlogen.ops.custom_call.reserved_reason, also for
ops.custom_call and the preflight), and here a second legacy registration of a name
with another function.
"""
from __future__ import annotations

import ctypes
import os
import threading

from hlogen.errors import HlogenError, InputError
from hlogen.ops.custom_call import API_VERSIONS, TYPED_FFI, reserved_reason

_PLATFORMS = {"cpu": "Host", "gpu": "CUDA"}  # jax's platform name -> XLA's registry name


# -- registration ------------------------------------------------------------------------

_lock = threading.Lock()
_registered: dict = {}   # (platform, name, typed) -> function address, by this module
_libraries: dict = {}    # path -> ctypes.CDLL, kept so that registered functions stay loaded


def register_custom_call(name, library, symbol=None, *, platform="cpu", api_version=TYPED_FFI):
    """Registers `symbol` of shared library `library` as custom-call target `name`.

    `library` is a path or a loaded `ctypes.CDLL`; `symbol` (default: `name`) is the
    exported function: a typed-FFI handler (`XLA_FFI_DEFINE_HANDLER_SYMBOL`) for
    api_version=4, or an `extern "C"` function of the legacy signature for 1, 2 or 3
    (the module docstring lists them). Computations then call it with
    `ops.custom_call(name, ..., api_version=api_version)`. Registering the same function
    again is a no-op; registering another function under a registered name is an error.
    """
    if not isinstance(name, str) or not name:
        raise HlogenError(f"register_custom_call: name must be a non-empty string, got {name!r}")
    reason = reserved_reason(name)
    if reason is not None:
        raise HlogenError(f"register_custom_call: name {reason}")
    symbol = name if symbol is None else symbol
    if not isinstance(symbol, str) or not symbol:
        raise HlogenError(f"register_custom_call: symbol must be a non-empty string, got "
                          f"{symbol!r}")
    if platform not in _PLATFORMS:
        raise HlogenError(f"register_custom_call: platform must be one of "
                          f"{', '.join(map(repr, _PLATFORMS))}, got {platform!r}")
    if isinstance(api_version, bool) or api_version not in API_VERSIONS:
        raise HlogenError(f"register_custom_call: api_version must be one of "
                          f"{', '.join(f'{v} ({n})' for v, n in API_VERSIONS.items())}, "
                          f"got {api_version!r}")
    function = _function(_load(library), symbol)
    address = ctypes.cast(function, ctypes.c_void_p).value
    typed = api_version == TYPED_FFI

    # imported here, not at the top: `import hlogen` must not start jax (start-up time)
    import jax.ffi
    from hlogen.runtime import pjrt  # start-up time, as above
    # The backend must exist first: before, jax defers registrations to its start, where
    # an error would surface far from this call.
    pjrt.client(platform)
    with _lock:
        # XLA keeps typed handlers and legacy functions in two registries
        previous = (_registered.get((platform, name, typed))
                    or _registry_address(platform, name, typed))
        if previous is not None:
            if previous == address:
                return  # the same function again: XLA accepts it, nothing to do
            kind = "typed-FFI handler" if typed else "legacy function"
            raise HlogenError(
                f"register_custom_call: {name!r} is already registered for {platform} with "
                f"another {kind}; XLA refuses a second typed-FFI handler and ends the process "
                f"on a second legacy function under one name: choose another name")
        try:
            jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(function), platform=platform,
                                        api_version=1 if typed else 0)
        except Exception as e:  # jax's JaxRuntimeError: XLA refused the registration
            raise HlogenError(f"register_custom_call: XLA refused {name!r} for {platform}: "
                              f"{e}") from None
        _registered[(platform, name, typed)] = address


def _load(library) -> ctypes.CDLL:
    if isinstance(library, ctypes.CDLL):
        return library
    if not isinstance(library, (str, os.PathLike)):
        raise HlogenError(f"register_custom_call: library must be a path or a ctypes.CDLL, "
                          f"got {type(library).__name__} {library!r}")
    path = os.path.abspath(os.fspath(library))
    found = _libraries.get(path)
    if found is None:
        if not os.path.isfile(path):
            raise InputError(f"{path}: no such shared library")
        try:
            found = _libraries[path] = ctypes.CDLL(path)
        except OSError as e:
            raise InputError(f"{path}: cannot load it as a shared library: {e}") from None
    return found


def _function(library: ctypes.CDLL, symbol: str):
    try:
        return getattr(library, symbol)
    except AttributeError:
        raise InputError(f"{library._name}: no exported symbol {symbol!r} (C++ functions need "
                         f"extern \"C\"; XLA_FFI_DEFINE_HANDLER_SYMBOL exports its name)") from None


def _registry_address(platform: str, name: str, typed: bool):
    """The function address of `name` in XLA's registry of that kind, or None (absent).

    jaxlib has no public query; its listing is reached through runtime._jaxlib, the
    module that holds hlogen's private jax imports. Without it, hlogen's own record is
    all there is.
    """
    from hlogen.runtime import _jaxlib  # here, not at the top: it starts jax (start-up time)
    try:
        entry = _jaxlib.xla_client.custom_call_targets(_PLATFORMS[platform]).get(name)
    except Exception:  # a jaxlib without the listing
        return None
    if entry is None or isinstance(entry, dict) != typed:
        return None
    try:
        return _capsule_pointer(entry.get("execute") if typed else entry, None) or -1
    except (ValueError, TypeError):  # a named capsule: its address is unknown, so it differs
        return -1


# a prototype of our own: setting restype on ctypes.pythonapi's would change it for everyone
_capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
