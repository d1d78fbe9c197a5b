"""Registers hlogen.runtime._jaxlib's readers of modules made elsewhere (XLA's HLO,
jax's Exported) in hlogen.native, for the loading layer below."""
from __future__ import annotations

from hlogen import native


def _calling(name: str):
    def call(*args):
        # start-up time: _jaxlib starts jax, needed only when such a module is read
        from hlogen.runtime import _jaxlib
        return getattr(_jaxlib, name)(*args)
    call.__name__ = name
    return call


for _name in native.NAMES:
    native.register(_name, _calling(_name))
