"""The op library, named in snake_case after the spec (see API.md for the index)."""
from hlogen.ops.conversion import bitcast_convert_type, convert_element_type, reduce_precision
from hlogen.ops.elementwise import *  # noqa: F401,F403 - generated from the op tables
from hlogen.ops.elementwise import __all__ as _elementwise
from hlogen.ops.shaping import broadcast, broadcast_in_dim, iota
from hlogen.ops.tuples import get_tuple_element, tuple

__all__ = sorted(_elementwise + [
    "bitcast_convert_type", "convert_element_type", "reduce_precision",
    "broadcast", "broadcast_in_dim", "iota", "get_tuple_element", "tuple"])
