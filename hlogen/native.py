"""jaxlib's readers of modules made elsewhere (XLA's HLO parser and HLO-to-StableHLO
converter, jax.export's deserializer), as a registry the runtime fills.

They live in hlogen.runtime._jaxlib, the one module of private jax imports, which starts
jax: hlogen.runtime registers them here (importing jax only when one is first called),
and the loading layer calls them by name, below the runtime.
"""
from __future__ import annotations

# name -> what it does (hlogen.runtime._jaxlib defines each)
NAMES = {
    "hlo_text_to_proto": "HLO text -> serialized HloModuleProto (XLA's HLO parser)",
    "hlo_proto_to_text": "serialized HloModuleProto -> HLO text",
    "hlo_to_stablehlo": "serialized HloModuleProto -> StableHLO bytecode (XLA's converter)",
    "exported_parts": "jax.export's serialized Exported -> a dict of its parts",
}
_registered: dict = {}


def register(name: str, function) -> None:
    if name not in NAMES:
        raise ValueError(f"no native reader named {name!r}; known: {', '.join(NAMES)}")
    _registered[name] = function


def call(name: str, *args):
    """Calls reader `name`; its exceptions are the caller's to turn into hlogen errors."""
    function = _registered.get(name)
    if function is None:  # only when hlogen.runtime was never imported
        raise RuntimeError(f"{NAMES[name]}: not registered (import hlogen, not hlogen.loading alone)")
    return function(*args)
