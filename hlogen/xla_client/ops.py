"""xla_client.ops: the ops of XlaBuilder's Python binding (jaxlib 0.4-0.6), by their
CamelCase names, argument order, keyword names and defaults, over hlogen.ops.

Each op maps onto the hlogen op of the same meaning, which owns its shape rules and
errors. What XLA built from several ops in its client library is built here from
hlogen ops (Square, Reciprocal, Conj, Reshape with dimensions, ApproxTopK, the LU
permutation), from CHLO's decompositions of the same functions (the table _CHLO), or
from jaxlib's LAPACK kernels (QR, Eigh, SVD, LU: hlogen.xla_client._linalg). Ops that
have no such form are refused with an UnsupportedError that says why (_REFUSED).

XLA returns several values as one tuple-shaped XlaOp (Sort of several operands, TopK,
RngBitGenerator, a variadic Reduce...); QR, Eigh, SVD, LU and QrDecomposition return a
Python tuple of XlaOps, as the binding did.
"""
from __future__ import annotations

import builtins
import dataclasses
import math

import numpy as np

from hlogen import ops as _ops
from hlogen import types as T
from hlogen.builder import Op, apply
from hlogen.errors import ShapeError, UnsupportedError
from hlogen.ops._common import (COMPLEX, FLOAT, array_operand, check_dimension, check_kind,
                                full_like)
from hlogen.ops.convolution import ConvDimensionNumbers
from hlogen.ops import elementwise
from hlogen.ops.elementwise import ACCURACY_OPS, ResultAccuracy
from hlogen.ops.linalg import DotDimensionNumbers
from hlogen.xla_client import _linalg, _special
from hlogen.xla_client._builder import XlaBuilder, as_built, computation_of, xla_op
from hlogen.xla_client._protos import (ChannelHandle_ChannelType, CustomCallApiVersion,
                                       CustomCallSchedule, FftType, Precision, RandomAlgorithm,
                                       ResultAccuracy_Mode,
                                       TriangularSolveOptions_Transpose, enum_value,
                                       make_convolution_dimension_numbers,
                                       make_dot_dimension_numbers)
from hlogen.xla_client._types import PrimitiveType, element_type, hg_shape

__all__ = ["TriangularSolveOptions_Transpose", "RandomAlgorithm", "CustomCallSchedule",
           "CustomCallApiVersion"]


def _public(fn):
    __all__.append(fn.__name__)
    return fn


# -- arguments as XLA's binding took them --------------------------------------------------

def _builder(builder, op_name: str) -> XlaBuilder:
    if not isinstance(builder, XlaBuilder):
        raise ShapeError(f"{op_name}: builder must be an xla_client.XlaBuilder, got "
                         f"{type(builder).__name__} {builder!r}")
    return builder


def _ops_list(values, op_name: str, arg: str) -> list:
    if isinstance(values, Op):
        return [values]
    if not isinstance(values, (list, tuple)):
        raise ShapeError(f"{op_name}: {arg} must be a list of XlaOps, got {values!r}")
    return list(values)


def _one_or_tuple(results, builder) -> Op:
    """XLA's form of several results: one value, or a tuple-shaped XlaOp."""
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    return results[0] if len(results) == 1 else _ops.tuple(results, builder=builder)


def _tuple(results, builder) -> Op:
    return _ops.tuple(list(results), builder=builder)


# XLA's windows (MakeWindow) take an empty list of strides, padding or dilations for
# the default: strides and dilations 1, no padding; hlogen's take None or "VALID".

def _window(values):
    return None if isinstance(values, (list, tuple)) and not values else values


def _pairs(padding, op_name: str):
    try:
        pairs = [(int(lo), int(hi)) for lo, hi in padding]
    except (TypeError, ValueError):
        raise ShapeError(f"{op_name}: padding must be (low, high) pairs, got {padding!r}") from None
    return pairs or "VALID"


def _precision(config, op_name: str):
    """hlogen's precision_config of XLA's PrecisionConfig (None or no precisions: none)."""
    if config is None or not config.operand_precision:
        return None
    values = [enum_value(Precision, p, f"{op_name}: precision_config.operand_precision").name
              for p in config.operand_precision]
    if len(values) != 2:
        raise ShapeError(f"{op_name}: precision_config has {len(values)} operand precisions; "
                         f"it needs one per operand (2)")
    return tuple(values)


def _preferred(preferred_element_type, op_name: str):
    if preferred_element_type is None:
        return None
    return element_type(preferred_element_type, f"{op_name}: preferred_element_type")


def _groups(replica_groups):
    """Lists of replica ids of ReplicaGroups (or of lists); None for every replica."""
    groups = [list(getattr(g, "replica_ids", g)) for g in (replica_groups or [])]
    return groups or None


def _channel(channel_id, op_name: str):
    if channel_id is None or isinstance(channel_id, (int, np.integer)):
        return channel_id
    kind = enum_value(ChannelHandle_ChannelType, getattr(channel_id, "type", 1),
                      f"{op_name}: channel_id.type")
    return _ops.ChannelHandle(int(channel_id.handle), kind.name.lower())


def _default_layout(shape, what: str) -> None:
    """Refuses a layout other than XLA's default (major to minor): hlogen's arrays are
    row-major, and XLA chooses physical layouts."""
    if shape is None:
        return
    shapes = shape.tuple_shapes() if shape.is_tuple() else [shape]
    for s in shapes:
        if s.is_tuple():
            _default_layout(s, what)
        elif s.is_array() and s.layout().minor_to_major() not in ((), tuple(reversed(range(s.rank())))):
            raise UnsupportedError(f"{what}: the layout {s} is not row-major; hlogen's arrays are "
                                   f"row-major (XLA picks physical layouts itself)")


# -- element-wise ------------------------------------------------------------------------------

# XLA's name: hlogen's op, for the binary ops (lhs, rhs, broadcast_dimensions=None): every
# row of hlogen.ops.elementwise's tables, by its spec name (XLA's)
_BINARY = {
    **{xla: getattr(_ops, name) for name, (xla, _) in elementwise.COMPARISONS.items()},
    **{row.spec: getattr(_ops, name) for name, row in elementwise.BINARY_ARITHMETIC.items()},
}

# The element-wise ops of hlogen that XLA's binding (xla/python/ops.cc) has no function for
_NOT_IN_BINDING = {"RoundNearestEven"}  # the binding has Round only (ties away from zero)

# XLA's name: hlogen's op, for the unary ops (operand)
_UNARY = {
    **{row.spec: getattr(_ops, name) for name, row in elementwise.UNARY.items()
       if row.spec not in _NOT_IN_BINDING},
    "OptimizationBarrier": _ops.optimization_barrier,
    # XLA's client library defines these by the ops they are made of
    "Square": lambda x: _ops.mul(x, x),
    "Reciprocal": lambda x: _ops.div(1, x),
    "Conj": lambda x: _ops.complex(_ops.real(x), _ops.neg(_ops.imag(x))),
}

# The ops of hlogen.ops that no function here builds, and why (tests/test_recipes.py: every
# op is built here, where XLA's binding has it, or named here)
_NOT_BUILT = {
    "batch_norm_training": "not yet: XLA's binding has BatchNormTraining; a function is welcome",
    "batch_norm_inference": "not yet: XLA's binding has BatchNormInference; a function is "
                            "welcome",
    "batch_norm_grad": "not yet: XLA's binding has BatchNormGrad; a function is welcome",
    "conv": "the binding has ConvGeneralDilated only",
    "conv_with_general_padding": "the binding has ConvGeneralDilated only",
    "call": "Call applies an XlaComputation (hlogen.builder.apply), not a Python function",
    "composite_call": "the binding has no composite call",
    "send": "not yet: a transfer between programs over a channel",
    "recv": "not yet: a transfer between programs over a channel",
}

# XLA's client-library functions that CHLO decomposes the same way (jaxlib's CHLO
# legalization, for both backends): XLA's name -> (CHLO op, operand count, element kinds)
_REAL = frozenset({FLOAT})
_CHLO_TYPES = {FLOAT: ("f16", "bf16", "f32", "f64"), COMPLEX: ("c64", "c128")}
_CHLO = {
    "Erfc": ("chlo.erfc", 1, _REAL), "ErfInv": ("chlo.erf_inv", 1, _REAL),
    "Lgamma": ("chlo.lgamma", 1, _REAL), "Digamma": ("chlo.digamma", 1, _REAL),
    "BesselI1e": ("chlo.bessel_i1e", 1, _REAL),
    "Acos": ("chlo.acos", 1, _REAL | {COMPLEX}), "Asin": ("chlo.asin", 1, _REAL | {COMPLEX}),
    "Atan": ("chlo.atan", 1, _REAL | {COMPLEX}), "Acosh": ("chlo.acosh", 1, _REAL | {COMPLEX}),
    "Asinh": ("chlo.asinh", 1, _REAL | {COMPLEX}), "Atanh": ("chlo.atanh", 1, _REAL | {COMPLEX}),
    "Cosh": ("chlo.cosh", 1, _REAL | {COMPLEX}), "Sinh": ("chlo.sinh", 1, _REAL | {COMPLEX}),
    "Zeta": ("chlo.zeta", 2, _REAL),
}
# NextAfter steps through the bits, for 8-bit floats as well; not f8e8m0fnu, which has
# neither sign nor zero (XLA's own test skips it: its results mismatch)
_NEXT_AFTER_F8 = ("f8e3m4", "f8e4m3", "f8e4m3fn", "f8e4m3fnuz", "f8e4m3b11fnuz", "f8e5m2",
                  "f8e5m2fnuz")

# The ops refused, with the binding's argument names and why: XLA's client-library
# functions that neither StableHLO, CHLO nor hlogen has, and transfers to the host, which
# no queue of jaxlib's PJRT client carries.
_SERIES = ("XLA computes it with series and continued fractions in its client math library "
           "(xla/client/lib/math.cc); neither StableHLO, CHLO nor hlogen has it")
_NO_QUEUE = ("jaxlib's PJRT client has no outfeed or host transfer queue to read, so a "
             "computation with it could not run")
_REFUSED = {
    "BesselI0e": (("x",), "XLA computes it with Chebyshev expansions in its client math "
                          "library; CHLO has only BesselI1e"),
    "Igamma": (("a", "x"), _SERIES), "Igammac": (("a", "x"), _SERIES),
    "IgammaGradA": (("a", "x"), _SERIES), "RandomGammaGrad": (("a", "x"), _SERIES),
    "OutfeedWithToken": (("operand", "token", "shape_with_layout", "outfeed_config"), _NO_QUEUE),
    "SendToHost": (("operand", "token", "shape_with_layout", "handle"), _NO_QUEUE),
    "RecvFromHost": (("token", "shape", "handle"), _NO_QUEUE),
}


def _make_binary(op):
    def binary(lhs, rhs, broadcast_dimensions=None):
        return op(lhs, rhs, () if broadcast_dimensions is None else broadcast_dimensions)
    return binary


def _accuracy(result_accuracy, op_name: str):
    """hlogen's ResultAccuracy of XLA's (None or any object with its fields)."""
    if result_accuracy is None:
        return None
    mode = enum_value(ResultAccuracy_Mode, getattr(result_accuracy, "mode", 0),
                      f"{op_name}: result_accuracy.mode")
    return ResultAccuracy(mode.name, getattr(result_accuracy, "atol", 0.0),
                          getattr(result_accuracy, "rtol", 0.0), getattr(result_accuracy, "ulps", 0))


def _make_unary(op):
    if op.__name__ in ACCURACY_OPS:
        def accurate(operand, result_accuracy=None):
            return op(operand, result_accuracy=_accuracy(result_accuracy, op.__name__))
        return accurate

    def unary(operand):
        return op(operand)
    return unary


def _make_chlo(name, mlir_name, arity, kinds, more_types=()):
    def chlo(*operands):
        if len(operands) != arity:
            raise TypeError(f"{name} takes {arity} operand(s), got {len(operands)}")
        types = [t for kind in (FLOAT, COMPLEX) if kind in kinds for t in _CHLO_TYPES[kind]]
        types += more_types
        for i, o in enumerate(operands):
            if check_kind(name, f"operand {i}", o, kinds).name not in types:
                raise ShapeError(f"{name}: operand {i} is {o.shape}; XLA computes {name} for "
                                 f"{', '.join(types)}")
            if o.shape != operands[0].shape:
                raise ShapeError(f"{name}: the operands must have one shape, got "
                                 f"{', '.join(str(x.shape) for x in operands)}")
        return operands[0].builder.add_op(mlir_name, operands[0].shape, list(operands))
    return chlo


def _make_refused(name, arguments, reason):
    def refused(*args, **kwargs):
        raise UnsupportedError(f"{name}: {reason}")
    refused.__doc__ = f"{name}({', '.join(arguments)}): refused: {reason}."
    return refused


def _publish(name, function, results=1):
    function.__name__ = function.__qualname__ = name
    globals()[name] = xla_op(results)(function)
    __all__.append(name)


for _name, _op in _BINARY.items():
    _publish(_name, _make_binary(_op))
for _name, _op in _UNARY.items():
    _publish(_name, _make_unary(_op))
for _name, (_mlir, _arity, _kinds) in _CHLO.items():
    _publish(_name, _make_chlo(_name, _mlir, _arity, _kinds))
_next_after = _make_chlo("NextAfter", "chlo.next_after", 2, _REAL, _NEXT_AFTER_F8)


def _next_after_function(x1, x2):
    result = _next_after(x1, x2)
    if result.shape.element_type.name.endswith("fnuz"):
        # CHLO steps from the negative number nearest zero toward it onto the bits of -0,
        # which types without -0 (fnuz) read as NaN: the step is to 0
        stray = _ops.and_(_ops.ne(result, result),
                          _ops.and_(_ops.eq(x1, x1), _ops.eq(x2, x2)))
        result = _ops.select(stray, full_like(result, 0), result)
    return result


_publish("NextAfter", _next_after_function)
for _name, (_arguments, _reason) in _REFUSED.items():
    _publish(_name, _make_refused(_name, _arguments, _reason))


@_public
@xla_op()
def Select(pred, on_true, on_false):  # XLA's names, here and below
    return _ops.select(pred, on_true, on_false)


@_public
@xla_op()
def Clamp(min, operand, max):
    return _ops.clamp(min, operand, max)


@_public
@xla_op()
def ConvertElementType(operand, new_element_type):
    return _ops.convert_element_type(operand, element_type(new_element_type, "new_element_type"))


@_public
@xla_op()
def BitcastConvertType(operand, new_element_type):
    return _ops.bitcast_convert_type(operand, element_type(new_element_type, "new_element_type"))


@_public
@xla_op()
def ReducePrecision(operand, exponent_bits, mantissa_bits):
    return _ops.reduce_precision(operand, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


# -- builder-first ops ---------------------------------------------------------------------------

@_public
@xla_op()
def Parameter(builder, parameter_number, shape, name="", replicated_at_leaf_buffers=()):
    """A parameter by number (parameters may be made in any order; build() wants 0..N-1).
    replicated_at_leaf_buffers is a hint XLA may use; hlogen does not need it."""
    return _builder(builder, "Parameter")._parameter(parameter_number, shape, name)


@_public
@xla_op()
def ConstantLiteral(builder, literal):
    """A constant of a numpy array or scalar (Python numbers as numpy makes them: int64,
    float64), or a tuple of them (a tuple constant)."""
    return _constant(_builder(builder, "ConstantLiteral"), literal)


def _constant(builder, literal):
    if isinstance(literal, tuple):
        return _tuple([_constant(builder, v) for v in literal], builder)
    return builder.constant(np.asarray(literal))


Constant = ConstantLiteral
__all__.append("Constant")


@_public
@xla_op()
def Iota(builder, shape=None, iota_dimension=None, *, type=None, size=None):
    """Iota(builder, shape, iota_dimension), or Iota(builder, type, size): a vector."""
    builder = _builder(builder, "Iota")
    if type is not None or isinstance(shape, PrimitiveType):  # Iota(builder, type, size)
        et = element_type(shape if type is None else type, "Iota: type")
        return _ops.iota(builder, T.Shape(et, (iota_dimension if size is None else size,)), 0)
    return _ops.iota(builder, hg_shape(shape, "Iota: shape"), iota_dimension)


@_public
@xla_op()
def CreateToken(builder):
    return _ops.create_token(_builder(builder, "CreateToken"))


@_public
@xla_op()
def AfterAll(builder, tokens):
    _builder(builder, "AfterAll")
    tokens = _ops_list(tokens, "AfterAll", "tokens")
    if not tokens:
        raise ShapeError("AfterAll requires at least one token (CreateToken makes a new one)")
    return _ops.after_all(tokens)


@_public
@xla_op()
def ReplicaId(builder):
    return _ops.replica_id(_builder(builder, "ReplicaId"))


@_public
@xla_op()
def Tuple(builder, elements):
    return _tuple(_ops_list(elements, "Tuple", "elements"), _builder(builder, "Tuple"))


@_public
@xla_op()
def GetTupleElement(tuple_data, index):
    return _ops.get_tuple_element(tuple_data, index)


@_public
@xla_op()
def ConcatInDim(builder, operands, dimension):
    _builder(builder, "ConcatInDim")
    return _ops.concatenate(_ops_list(operands, "ConcatInDim", "operands"), dimension)


@_public
@xla_op()
def Call(builder, computation, operands):
    builder = _builder(builder, "Call")
    callee = computation_of(computation, "Call", "computation")
    results = apply(builder, "Call", "computation", callee, _ops_list(operands, "Call", "operands"))
    return _tuple(results, builder) if getattr(computation, "tupled", False) else results[0]


@_public
@xla_op()
def Map(builder, operands, computation, dimensions, static_operands=()):
    if static_operands:
        raise UnsupportedError("Map: static_operands are not supported (XLA's Map does not "
                               "implement them either)")
    _builder(builder, "Map")
    return _ops.map(_ops_list(operands, "Map", "operands"),
                    computation_of(computation, "Map", "computation"), dimensions)


@_public
@xla_op()
def Reduce(builder, operands, init_values, computation, dimensions_to_reduce):
    builder = _builder(builder, "Reduce")
    return _one_or_tuple(_ops.reduce(
        _ops_list(operands, "Reduce", "operands"), _ops_list(init_values, "Reduce", "init_values"),
        computation_of(computation, "Reduce", "computation"), dimensions_to_reduce), builder)


@_public
@xla_op()
def Sort(builder, operands, comparator=None, dimension=-1, is_stable=False):
    """Sorts along `dimension`; without a comparator, ascending by the first operand in
    XLA's total order (-NaN < -Inf < ... < -0 < 0 < ... < Inf < NaN)."""
    builder = _builder(builder, "Sort")
    comparator = None if comparator is None else computation_of(comparator, "Sort", "comparator")
    return _one_or_tuple(_ops.sort(_ops_list(operands, "Sort", "operands"), comparator,
                                   dimension, is_stable), builder)


# -- ApproxTopK: computed exactly (recall 1), in the output size XLA gives ------------------------

_TPU_LANE_TILING, _TPU_CHUNK_TILING = 128, 1024  # rank >= 2, rank 1


@_public
def ApproxTopKReductionOutputSize(input_size, rank, top_k, recall_target, aggregate_to_topk=True,
                                  input_size_override=-1):
    """(the size of the reduced dimension, log2 of the reduction; -1 when aggregated)
    ApproxTopK gives, by XLA's formula (xla/client/lib/approx_topk_shape.cc)."""
    if aggregate_to_topk:
        return top_k, -1
    tiling = _TPU_CHUNK_TILING if rank == 1 else _TPU_LANE_TILING
    if input_size <= tiling:
        return input_size, 0
    if 0 <= input_size_override < input_size:
        raise ShapeError(f"ApproxTopKReductionOutputSize: reduction_input_size_override: "
                         f"{input_size_override} should be greater equals to "
                         f"operands[reduction_dim]: {input_size}")
    logical = input_size_override if input_size_override >= 0 else input_size
    if top_k == 1:
        return tiling, _log2_ceil(_ceil_ratio(logical, tiling))
    if recall_target == 1.0:
        return input_size, 0
    if not 0.0 < recall_target <= 1.0:
        raise ShapeError(f"ApproxTopKReductionOutputSize: recall_target should range in (0,1], "
                         f"got {recall_target}")
    m = min(max(int((1.0 - top_k) / math.log(recall_target)), tiling), input_size)
    log2_reduction = (logical // m).bit_length() - 1 if logical // m else 0
    if log2_reduction == 0:
        return input_size, 0
    log2_reduction = min(log2_reduction, _log2_ceil(input_size // tiling))
    return _ceil_ratio(_ceil_ratio(input_size, tiling), 1 << log2_reduction) * tiling, log2_reduction


def _log2_ceil(value: int) -> int:
    return 0 if value <= 1 else (value - 1).bit_length()


def _ceil_ratio(a: int, b: int) -> int:
    return -(-a // b)


def _approx_top_k(op_name, builder, operands, init_values, top_k, reduction_dim, comparator,
                  recall_target, aggregate_to_topk, reduction_input_size_override):
    """The operands sorted by `comparator` along reduction_dim, cut to the size
    ApproxTopKReductionOutputSize gives (top_k when aggregate_to_topk): a tuple. XLA's
    ApproxTopK (not the fallback) leaves a dimension it does not reduce as it is."""
    builder = _builder(builder, op_name)
    operands = _ops_list(operands, op_name, "operands")
    init_values = _ops_list(init_values, op_name, "init_values")
    if len(init_values) != len(operands) or any(
            v.shape != T.Shape(o.dtype, ()) for o, v in zip(operands, init_values)):
        raise ShapeError(f"{op_name}: init_values must be one scalar per operand, of its type; "
                         f"got {[v.shape for v in init_values]} for {[o.shape for o in operands]}")
    shape = operands[0].shape
    if not (isinstance(reduction_dim, int) and 0 <= reduction_dim < shape.rank):
        raise ShapeError(f"{op_name}: reduction_dim should range in [0,{shape.rank}), got "
                         f"{reduction_dim!r}")
    size, log2_reduction = ApproxTopKReductionOutputSize(
        shape.dimensions[reduction_dim], shape.rank, top_k, recall_target, aggregate_to_topk,
        reduction_input_size_override)
    if op_name == "ApproxTopK" and not aggregate_to_topk and log2_reduction == 0:
        return _tuple(operands, builder)
    ordered = _ops.sort(operands, computation_of(comparator, op_name, "comparator"),
                        reduction_dim)
    return _tuple([_ops.slice_in_dim(o, 0, size, 1, reduction_dim) for o in ordered], builder)


@_public
@xla_op()
def ApproxTopK(builder, operands, init_values, top_k, reduction_dim, comparator,
               recall_target=0.9, aggregate_to_topk=True, reduction_input_size_override=-1):
    return _approx_top_k("ApproxTopK", builder, operands, init_values, top_k, reduction_dim,
                         comparator, recall_target, aggregate_to_topk,
                         reduction_input_size_override)


@_public
@xla_op()
def ApproxTopKFallback(builder, operands, init_values, top_k, reduction_dim, comparator,
                       recall_target=0.9, aggregate_to_topk=True, reduction_input_size_override=-1):
    return _approx_top_k("ApproxTopKFallback", builder, operands, init_values, top_k,
                         reduction_dim, comparator, recall_target, aggregate_to_topk,
                         reduction_input_size_override)


# -- shapes and data movement ----------------------------------------------------------------------

@_public
@xla_op()
def Broadcast(operand, sizes):
    return _ops.broadcast(operand, sizes)


@_public
@xla_op()
def BroadcastInDim(operand, shape, broadcast_dimensions):
    return _ops.broadcast_in_dim(operand, shape, broadcast_dimensions)


@_public
@xla_op()
def Collapse(operand, dimensions):
    return _ops.collapse(operand, dimensions)


@_public
@xla_op()
def Reshape(operand, dimensions=None, new_sizes=None):
    """Reshape(operand, new_sizes), or Reshape(operand, dimensions, new_sizes): the
    operand's dimensions first transposed into the order `dimensions` gives."""
    if new_sizes is None:
        dimensions, new_sizes = None, dimensions
    if dimensions is not None:
        operand = _ops.transpose(operand, dimensions)
    return _ops.reshape(operand, new_sizes)


@_public
@xla_op()
def DynamicReshape(operand, dim_sizes, new_size_bounds, dims_are_dynamic):
    if any(dims_are_dynamic):
        raise UnsupportedError("DynamicReshape: dynamic dimensions are not supported (hlogen's "
                               "shapes are static)")
    return _ops.reshape(operand, new_size_bounds)


@_public
@xla_op()
def Transpose(operand, permutation):
    return _ops.transpose(operand, permutation)


@_public
@xla_op()
def Rev(operand, dimensions):
    return _ops.rev(operand, dimensions)


@_public
@xla_op()
def Slice(operand, start_indices, limit_indices, strides):
    return _ops.slice(operand, start_indices, limit_indices, strides)


@_public
@xla_op()
def SliceInDim(operand, start_index, limit_index, stride, dimno):
    return _ops.slice_in_dim(operand, start_index, limit_index, stride, dimno)


@_public
@xla_op()
def DynamicSlice(operand, start_indices, slice_sizes):
    return _ops.dynamic_slice(operand, start_indices, slice_sizes)


@_public
@xla_op()
def DynamicUpdateSlice(operand, update, start_indices):
    return _ops.dynamic_update_slice(operand, update, start_indices)


@_public
@xla_op()
def Pad(operand, padding_value, padding_config):
    """`padding_config` is a PaddingConfig (make_padding_config) or its triples."""
    dims = getattr(padding_config, "dimensions", padding_config)
    triples = [(d.edge_padding_low, d.edge_padding_high, d.interior_padding)
               if hasattr(d, "edge_padding_low") else builtins.tuple(d) for d in dims]
    return _ops.pad(operand, padding_value, triples)


@_public
@xla_op()
def GetDimensionSize(operand, dimension):
    return _ops.get_dimension_size(operand, dimension)


@_public
@xla_op()
def SetDimensionSize(operand, val, dimension):
    return _ops.set_dimension_size(operand, val, dimension)


@_public
@xla_op()
def RemoveDynamicDimension(operand, dimension):
    """XLA's: SetDimensionSize to the bound, the whole dimension again (the elements past
    the former size are the padding, whatever the backend holds there)."""
    shape = array_operand("RemoveDynamicDimension", "operand", operand)
    check_dimension("RemoveDynamicDimension", "dimension", dimension, shape.rank)
    return _ops.set_dimension_size(
        operand, operand.builder.constant(np.int32(shape.dimensions[dimension])), dimension)


@_public
@xla_op()
def Gather(a, start_indices, dimension_numbers, slice_sizes, indices_are_sorted=False):
    n = dimension_numbers
    return _ops.gather(a, start_indices, offset_dims=n.offset_dims,
                       collapsed_slice_dims=n.collapsed_slice_dims,
                       start_index_map=n.start_index_map, index_vector_dim=n.index_vector_dim,
                       slice_sizes=slice_sizes, indices_are_sorted=indices_are_sorted,
                       operand_batching_dims=getattr(n, "operand_batching_dims", ()),
                       start_indices_batching_dims=getattr(n, "start_indices_batching_dims", ()))


@_public
@xla_op()
def Scatter(input=None, scatter_indices=None, updates=None, update_computation=None,
            dimension_numbers=None, indices_are_sorted=False, unique_indices=False, *,
            inputs=None):
    """Scatter of one operand (`input`) or several (`inputs`, a list: a tuple result)."""
    operands = input if inputs is None else inputs
    n = dimension_numbers
    several = isinstance(operands, (list, tuple))
    results = _ops.scatter(
        list(operands) if several else operands, scatter_indices,
        list(updates) if several else updates,
        computation_of(update_computation, "Scatter", "update_computation"),
        update_window_dims=n.update_window_dims, inserted_window_dims=n.inserted_window_dims,
        scatter_dims_to_operand_dims=n.scatter_dims_to_operand_dims,
        index_vector_dim=n.index_vector_dim, indices_are_sorted=indices_are_sorted,
        unique_indices=unique_indices, input_batching_dims=getattr(n, "input_batching_dims", ()),
        scatter_indices_batching_dims=getattr(n, "scatter_indices_batching_dims", ()))
    return _one_or_tuple(results, results[0].builder) if several else results


# -- windows -------------------------------------------------------------------------------------

@_public
@xla_op()
def ReduceWindowWithGeneralPadding(operand=None, init_value=None, computation=None,
                                   window_dimensions=None, window_strides=None,
                                   base_dilations=None, window_dilations=None, padding=None, *,
                                   operands=None, init_values=None):
    """ReduceWindow of `operand` (or a list `operands`: a tuple result) with explicit
    (low, high) padding per dimension."""
    operand = operand if operands is None else operands
    init_value = init_value if init_values is None else init_values
    results = _ops.reduce_window(
        operand, init_value, computation_of(computation, "ReduceWindow", "computation"),
        window_dimensions, _window(window_strides), _pairs(padding, "ReduceWindow"),
        _window(base_dilations), _window(window_dilations))
    return _one_or_tuple(results, results[0].builder) if isinstance(results, builtins.tuple) \
        else results


@_public
@xla_op()
def SelectAndScatterWithGeneralPadding(operand, select, window_dimensions, window_strides, padding,
                                       source, init_value, scatter):
    return _ops.select_and_scatter(
        operand, computation_of(select, "SelectAndScatter", "select"), window_dimensions,
        _window(window_strides), _pairs(padding, "SelectAndScatter"), source, init_value,
        computation_of(scatter, "SelectAndScatter", "scatter"))


# -- linear algebra, convolution, FFT -----------------------------------------------------------

@_public
@xla_op()
def Dot(lhs, rhs, precision_config=None, preferred_element_type=None):
    return _ops.dot(lhs, rhs, _precision(precision_config, "Dot"),
                    _preferred(preferred_element_type, "Dot"))


@_public
@xla_op()
def DotGeneral(lhs, rhs, dimension_numbers, precision_config=None, preferred_element_type=None):
    numbers = _numbers(DotDimensionNumbers, make_dot_dimension_numbers(dimension_numbers))
    return _ops.dot_general(lhs, rhs, numbers, _precision(precision_config, "DotGeneral"),
                            _preferred(preferred_element_type, "DotGeneral"))


def _numbers(cls, proto):
    """hlogen's dimension numbers `cls` of XLA's (any object with the proto's fields,
    which are hlogen's)."""
    return cls(**{f.name: getattr(proto, f.name) for f in dataclasses.fields(cls)})


@_public
@xla_op()
def ConvGeneralDilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                       dimension_numbers, feature_group_count=1, batch_group_count=1,
                       precision_config=None, preferred_element_type=None, window_reversal=None):
    """The general convolution. `preferred_element_type` converts the operands first (the
    products and sums are then in that type, as XLA computes them); `window_reversal`
    reverses the kernel's spatial dimensions it marks. `precision_config` is checked but
    not carried: hlogen's convolution has none (XLA CPU computes at full precision)."""
    _precision(precision_config, "ConvGeneralDilated")
    numbers = _numbers(ConvDimensionNumbers,
                       make_convolution_dimension_numbers(dimension_numbers, lhs.shape.rank - 2))
    preferred = _preferred(preferred_element_type, "ConvGeneralDilated")
    if preferred is not None and preferred != lhs.dtype:
        if _family(preferred) != _family(lhs.dtype) or preferred.bits < lhs.dtype.bits:
            raise ShapeError(f"ConvGeneralDilated: preferred_element_type {preferred.name} must "
                             f"be of the operands' family and at least as wide as {lhs.dtype}")
        lhs, rhs = (_ops.convert_element_type(x, preferred) for x in (lhs, rhs))
    if window_reversal is not None and any(window_reversal):
        rhs = _ops.rev(rhs, [d for d, r in zip(numbers.kernel_spatial_dimensions, window_reversal)
                             if r])
    return _ops.conv_general_dilated(lhs, rhs, _window(window_strides),
                                     _pairs(padding, "ConvGeneralDilated"), _window(lhs_dilation),
                                     _window(rhs_dilation), numbers, feature_group_count,
                                     batch_group_count)


def _family(et: T.ElementType) -> str:
    return "integer" if et.is_integer else et.kind


@_public
@xla_op()
def Fft(operand, fft_type, fft_length):
    return _ops.fft(operand, enum_value(FftType, fft_type, "Fft: fft_type").name, fft_length)


@_public
@xla_op()
def RegularizedIncompleteBeta(a, b, x):
    """I_x(a, b), the regularized incomplete beta function (hlogen.xla_client._special)."""
    return _special.regularized_incomplete_beta(a, b, x)


@_public
@xla_op()
def Cholesky(a, lower=True):
    return _ops.cholesky(a, lower)


@_public
@xla_op()
def TriangularSolve(a, b, left_side, lower, unit_diagonal, transpose_a):
    transpose = enum_value(TriangularSolveOptions_Transpose, transpose_a,
                           "TriangularSolve: transpose_a")
    if transpose == TriangularSolveOptions_Transpose.TRANSPOSE_INVALID:
        raise ShapeError("TriangularSolve: transpose_a=TRANSPOSE_INVALID is not a transpose")
    return _ops.triangular_solve(a, b, left_side, lower, unit_diagonal, transpose.name)


@_public
@xla_op(results=2)
def QR(operand, full_matrices):
    """(q, r): q with orthonormal columns (m x m when full_matrices, else m x min(m, n)),
    r upper triangular, by jaxlib's LAPACK kernels (CPU)."""
    return _linalg.qr(operand, full_matrices)


@_public
@xla_op(results=2)
def QrDecomposition(operand):
    """(q_and_r, taus) in LAPACK's GEQRF form, as XLA's Qr gives them."""
    return _linalg.qr_decomposition(operand)


@_public
@xla_op()
def ProductOfElementaryHouseholderReflectors(a, taus):
    return _linalg.householder_product(a, taus)


@_public
@xla_op(results=2)
def Eigh(a, lower=True, max_iter=15, epsilon=1e-5, sort_eigenvalues=True):
    """(v, w): eigenvectors (columns) and ascending eigenvalues of each Hermitian matrix,
    by LAPACK's syevd/heevd (CPU). max_iter and epsilon tune XLA's Jacobi iteration; LAPACK
    converges without them, and sorts."""
    return _linalg.eigh(a, lower)


@_public
@xla_op(results=3)
def SVD(a, max_iter=100, epsilon=1e-6):
    """(u, d, v) with a = u[:, :k] diag(d) v[:, :k]^H, u m x m, v n x n, d descending and
    non-negative, by LAPACK's gesdd (CPU). max_iter and epsilon tune XLA's Jacobi."""
    return _linalg.svd(a)


@_public
@xla_op(results=3)
def LU(operand):
    """(lu, pivots, permutation): the packed LU factors with partial pivoting, the s32
    row swaps (0-based) and the permutation they make, by LAPACK's getrf."""
    return _linalg.lu(operand)


@_public
@xla_op()
def TopK(input, k):
    """(values, s32 indices) of the k largest elements along the last dimension: a tuple."""
    return _tuple(_ops.top_k(input, k), input.builder)


# -- control flow ---------------------------------------------------------------------------------

@_public
@xla_op()
def While(condition, body, init):
    return _ops.while_loop(as_built(condition, "While", "condition"),
                           as_built(body, "While", "body"), init)


_CONDITIONAL_PREDICATED = ("predicate", "true_operand", "true_computation", "false_operand",
                           "false_computation")
_CONDITIONAL_INDEXED = ("branch_index", "branch_computations", "branch_operands")


@_public
@xla_op()
def Conditional(*args, **kwargs):
    """Conditional(branch_index, branch_computations, branch_operands), or
    Conditional(predicate, true_operand, true_computation, false_operand, false_computation)."""
    if kwargs:
        names = _CONDITIONAL_PREDICATED if len(args) == 5 or set(kwargs) & set(
            _CONDITIONAL_PREDICATED) else _CONDITIONAL_INDEXED
        try:
            args = args + builtins.tuple(kwargs.pop(n) for n in names[len(args):])
        except KeyError as e:
            raise TypeError(f"Conditional is missing the argument {e}") from None
        if kwargs:
            raise TypeError(f"Conditional got unexpected keyword arguments {sorted(kwargs)}")
    if len(args) == 5:
        pred, true_operand, true_computation, false_operand, false_computation = args
        return _ops.conditional(pred, true_operand, as_built(true_computation, "Conditional",
                                                             "true_computation"),
                                false_operand, as_built(false_computation, "Conditional",
                                                        "false_computation"))
    if len(args) == 3:
        index, computations, operands = args
        return _ops.conditional(index, [as_built(c, "Conditional", f"branch_computations[{i}]")
                                        for i, c in enumerate(computations)], list(operands))
    raise TypeError(f"Conditional takes 3 or 5 arguments, got {len(args)}")


# -- random numbers -----------------------------------------------------------------------------

@_public
@xla_op()
def RngUniform(a, b, shape):
    return _ops.rng_uniform(a, b, hg_shape(shape, "RngUniform: shape"))


@_public
@xla_op()
def RngNormal(mu, sigma, shape):
    return _ops.rng_normal(mu, sigma, hg_shape(shape, "RngNormal: shape"))


@_public
@xla_op()
def RngBitGenerator(algorithm, initial_state, shape):
    """(new_state, data): a tuple."""
    name = enum_value(RandomAlgorithm, algorithm, "RngBitGenerator: algorithm").name
    state, data = _ops.rng_bit_generator(name.removeprefix("RNG_"), initial_state,
                                         hg_shape(shape, "RngBitGenerator: shape"))
    return _tuple([state, data], state.builder)


# -- collectives and channels ----------------------------------------------------------------------

@_public
@xla_op()
def AllReduce(operand, computation, replica_groups=(), channel_id=None, shape_with_layout=None,
              use_global_device_ids=None):
    _default_layout(shape_with_layout, "AllReduce: shape_with_layout")
    return _ops.all_reduce(operand, computation_of(computation, "AllReduce", "computation"),
                           _groups(replica_groups), _channel(channel_id, "AllReduce"),
                           bool(use_global_device_ids))


@_public
@xla_op()
def CrossReplicaSum(operand, replica_groups=()):
    return _ops.cross_replica_sum(operand, _groups(replica_groups))


@_public
@xla_op()
def AllGather(operand, all_gather_dimension, shard_count, replica_groups=(), channel_id=None,
              shape_with_layout=None, use_global_device_ids=None):
    _default_layout(shape_with_layout, "AllGather: shape_with_layout")
    return _ops.all_gather(operand, all_gather_dimension, shard_count,
                           _groups(replica_groups), _channel(channel_id, "AllGather"),
                           bool(use_global_device_ids))


@_public
@xla_op()
def ReduceScatter(operand, computation, scatter_dimension, shard_count, replica_groups=(),
                  channel_id=None, layout=None, use_global_device_ids=None):
    if layout is not None:
        raise UnsupportedError("ReduceScatter: layout: hlogen's arrays are row-major")
    return _ops.reduce_scatter(operand, computation_of(computation, "ReduceScatter", "computation"),
                               scatter_dimension, shard_count,
                               _groups(replica_groups),
                               _channel(channel_id, "ReduceScatter"), bool(use_global_device_ids))


@_public
@xla_op()
def AllToAll(operand, split_dimension, concat_dimension, split_count, replica_groups=(),
             layout=None, channel_id=None):
    if layout is not None:
        raise UnsupportedError("AllToAll: layout: hlogen's arrays are row-major")
    return _ops.all_to_all(operand, split_dimension, concat_dimension, split_count,
                           _groups(replica_groups), _channel(channel_id, "AllToAll"))


def _collective_permute(operand, source_target_pairs, channel_id, inplace, op_name):
    if inplace:
        raise UnsupportedError(f"{op_name}: inplace=True is not supported")
    return _ops.collective_permute(operand, source_target_pairs, _channel(channel_id, op_name))


@_public
@xla_op()
def CollectivePermute(operand, source_target_pairs, channel_id=None, inplace=False):
    return _collective_permute(operand, source_target_pairs, channel_id, inplace,
                               "CollectivePermute")


@_public
@xla_op()
def MultiCollectivePermute(operands, source_target_pairs, channel_id=None, inplace=False):
    """CollectivePermute of each operand with the same pairs: a tuple."""
    operands = _ops_list(operands, "MultiCollectivePermute", "operands")
    return _tuple([_collective_permute(o, source_target_pairs, channel_id, inplace,
                                       "MultiCollectivePermute") for o in operands],
                  operands[0].builder)


@_public
@xla_op()
def InfeedWithToken(token, shape, config=""):
    """(data, token): a tuple. Built as XLA builds it; PJRT cannot feed an infeed queue,
    so compiling it is an UnsupportedError (hlogen.preflight)."""
    if not isinstance(token, Op) or token.shape != T.token:
        raise ShapeError(f"InfeedWithToken: token must be a token XlaOp, got {token!r}")
    data = _ops.infeed(token.builder, hg_shape(shape, "InfeedWithToken: shape"), config)
    return _tuple([data, token], token.builder)


# -- custom calls -------------------------------------------------------------------------------

def _custom_call(op_name, builder, call_target_name, operands, shape, opaque, has_side_effect,
                 schedule, api_version, operand_layouts=None, result_layouts=None):
    builder = _builder(builder, op_name)
    name = call_target_name.decode() if isinstance(call_target_name, bytes) else call_target_name
    version = enum_value(CustomCallApiVersion, api_version, f"{op_name}: api_version")
    if enum_value(CustomCallSchedule, schedule, f"{op_name}: schedule") != \
            CustomCallSchedule.SCHEDULE_NONE:
        raise UnsupportedError(f"{op_name}: schedule={schedule!r}: hlogen's custom calls carry "
                               f"no scheduling hint")
    if version == CustomCallApiVersion.API_VERSION_TYPED_FFI and isinstance(opaque, bytes):
        opaque = opaque.decode() or "{}"  # the typed FFI's attributes, as MLIR text
    results = _ops.custom_call(name, _ops_list(operands, op_name, "operands"),
                               hg_shape(shape, f"{op_name}: shape"), builder=builder,
                               opaque=opaque, has_side_effect=has_side_effect,
                               api_version=int(version), operand_layouts=operand_layouts,
                               result_layouts=result_layouts)
    return _tuple(results, builder) if isinstance(results, builtins.tuple) else results


@_public
@xla_op()
def CustomCall(builder, call_target_name, operands, shape, opaque=b"", has_side_effect=False,
               schedule=CustomCallSchedule.SCHEDULE_NONE,
               api_version=CustomCallApiVersion.API_VERSION_ORIGINAL):
    """A call of a native target registered with XLA (hg.register_custom_call), which
    sees row-major arrays. api_version defaults to ORIGINAL, as in XLA."""
    return _custom_call("CustomCall", builder, call_target_name, operands, shape, opaque,
                        has_side_effect, schedule, api_version)


@_public
@xla_op()
def CustomCallWithLayout(builder, call_target_name, operands, shape_with_layout,
                         operand_shapes_with_layout, opaque=b"", has_side_effect=False,
                         schedule=CustomCallSchedule.SCHEDULE_NONE,
                         api_version=CustomCallApiVersion.API_VERSION_ORIGINAL):
    """CustomCall with the layouts the target reads and writes its arrays in."""
    return _custom_call_with_layout("CustomCallWithLayout", builder, call_target_name, operands,
                                    shape_with_layout, operand_shapes_with_layout, opaque,
                                    has_side_effect, schedule, api_version)


def _custom_call_with_layout(op_name, builder, call_target_name, operands, shape_with_layout,
                             operand_shapes_with_layout, opaque, has_side_effect, schedule,
                             api_version):
    return _custom_call(op_name, builder, call_target_name, operands, shape_with_layout, opaque,
                        has_side_effect, schedule, api_version,
                        [_layout(s) for s in operand_shapes_with_layout],
                        [_layout(s) for s in (shape_with_layout.tuple_shapes()
                                              if shape_with_layout.is_tuple() else [shape_with_layout])])


def _layout(shape):
    """The minor-to-major order of an array Shape's layout (none for a token)."""
    return tuple(shape.layout().minor_to_major()) if shape.is_array() else ()


@_public
@xla_op()
def CustomCallWithAliasing(builder, call_target_name, operands, shape_with_layout,
                           operand_shapes_with_layout, opaque=b"", has_side_effect=False,
                           output_operand_aliasing=(), literal=None,
                           schedule=CustomCallSchedule.SCHEDULE_NONE,
                           api_version=CustomCallApiVersion.API_VERSION_ORIGINAL):
    """CustomCallWithLayout; output/operand aliasing and a literal are not supported."""
    if output_operand_aliasing or literal is not None:
        raise UnsupportedError("CustomCallWithAliasing: output_operand_aliasing and literal are "
                               "not supported by hlogen's custom_call")
    return _custom_call_with_layout("CustomCallWithAliasing", builder, call_target_name, operands,
                                    shape_with_layout, operand_shapes_with_layout, opaque,
                                    has_side_effect, schedule, api_version)


@_public
@xla_op()
def CustomCallWithComputation(builder, call_target_name, operands, computation, shape, opaque=b"",
                              has_side_effect=False, output_operand_aliasing=(), literal=None,
                              schedule=CustomCallSchedule.SCHEDULE_NONE,
                              api_version=CustomCallApiVersion.API_VERSION_ORIGINAL):
    raise UnsupportedError("CustomCallWithComputation: hlogen's custom_call calls no "
                           "computation (XLA CPU's registered targets take none)")


del _name, _op, _mlir, _arity, _kinds, _arguments, _reason
