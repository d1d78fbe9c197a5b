"""The op library, named in snake_case after the spec (see API.md for the index)."""
from hlogen.builder import install_operators
from hlogen.ops.batch_norm import batch_norm_grad, batch_norm_inference, batch_norm_training
from hlogen.ops.collectives import (ChannelHandle, all_gather, all_reduce, all_to_all,
                                    collective_permute, cross_replica_sum, infeed, recv,
                                    reduce_scatter, replica_id, send)
from hlogen.ops.computations import map, reduce, reduce_window, select_and_scatter
from hlogen.ops.control import (after_all, call, composite_call, conditional, create_token,
                                optimization_barrier, while_loop)
from hlogen.ops.custom_call import custom_call
from hlogen.ops.convolution import conv, conv_general_dilated, conv_with_general_padding
from hlogen.ops.conversion import bitcast_convert_type, convert_element_type, reduce_precision
from hlogen.ops.elementwise import *  # generated from the op tables
from hlogen.ops.elementwise import __all__ as _elementwise
from hlogen.ops.fft import fft
from hlogen.ops.indexing import dynamic_slice, dynamic_update_slice, gather, scatter
from hlogen.ops.linalg import cholesky, dot, dot_general, triangular_solve
from hlogen.ops.movement import (collapse, concatenate, get_dimension_size, pad, reshape, rev,
                                 set_dimension_size, slice, slice_in_dim, transpose)
from hlogen.ops.random import rng_bit_generator, rng_normal, rng_uniform
from hlogen.ops.shaping import broadcast, broadcast_in_dim, iota
from hlogen.ops.sorting import sort, top_k
from hlogen.ops.tuples import get_tuple_element, tuple

__all__ = sorted(_elementwise + [
    "bitcast_convert_type", "convert_element_type", "reduce_precision",
    "broadcast", "broadcast_in_dim", "iota", "get_tuple_element", "tuple",
    "collapse", "concatenate", "get_dimension_size", "pad", "reshape", "rev",
    "set_dimension_size", "slice", "slice_in_dim", "transpose",
    "dynamic_slice", "dynamic_update_slice", "gather", "scatter", "sort", "top_k",
    "map", "reduce", "reduce_window", "select_and_scatter",
    "after_all", "call", "composite_call", "conditional", "create_token",
    "optimization_barrier", "while_loop", "rng_bit_generator", "rng_normal", "rng_uniform",
    "batch_norm_grad", "batch_norm_inference", "batch_norm_training", "conv",
    "conv_general_dilated", "conv_with_general_padding", "fft", "cholesky", "dot", "dot_general",
    "triangular_solve", "custom_call", "all_gather", "all_reduce", "all_to_all",
    "collective_permute", "cross_replica_sum", "infeed", "recv", "reduce_scatter", "replica_id",
    "send"])

# Op's Python operators (XlaOp's C++ ones) are these ops: installed from here, since the
# builder sits below the ops.
install_operators(
    binary={"add": add, "sub": sub, "mul": mul, "truediv": div, "mod": rem, "pow": pow,
            "and": and_, "or": or_, "xor": xor, "lshift": shift_left,
            "rshift": shift_right_arithmetic},
    comparisons={"lt": lt, "le": le, "gt": gt, "ge": ge},
    unary={"neg": neg, "invert": not_})
