"""RngUniform, RngNormal, RngBitGenerator.

The rules are plain functions of shapes (`rng_shape`, `rng_bit_generator_shapes`); each
op checks, then emits. What XLA CPU (jaxlib 0.10) accepts was measured, each case in a
child process: RngUniform of pred, s8, u8, s16, u16 or f8 values and RngNormal of f8
values end the process (SIGABRT), so they are refused here as the spec's "CPU and GPU
support only F64, F32, F16, BF16, S64, U64, S32 and U32" says. RngBitGenerator needs a
u64 state of 2 words (THREE_FRY) or 2 or 3 (PHILOX; DEFAULT is PHILOX on CPU); other
sizes or element types fail XLA's compilation.

The reference interpreter implements none of these ops. It runs RngBitGenerator
rewritten, bit for bit as XLA CPU generates it (hlogen.random_bits); RngUniform and
RngNormal, whose state is XLA's, it refuses with an hg.UnsupportedError (its
declaration in hlogen.backends).
"""
from __future__ import annotations

import functools

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Op, same_builder
from hlogen.errors import ShapeError, UnsupportedError
from hlogen.ops._common import FLOAT, PRED, SIGNED, UNSIGNED, COMPLEX, array_operand

# The element types XLA CPU and GPU generate for RngUniform / RngNormal (the spec's list;
# XLA CPU aborts on the others).
UNIFORM_TYPES = frozenset({"f64", "f32", "f16", "bf16", "s64", "u64", "s32", "u32"})
NORMAL_TYPES = frozenset({"f64", "f32", "f16", "bf16"})

# algorithm -> the sizes of the u64 state XLA accepts. DEFAULT is implementation-defined;
# XLA expands it as PHILOX (the same bits on CPU), which takes 2 or 3 words.
STATE_SIZES = {"DEFAULT": (2, 3), "THREE_FRY": (2,), "PHILOX": (2, 3)}



def _result_shape(op_name: str, shape, like: T.ElementType | None) -> T.Shape:
    """`shape` as an array Shape: a Shape (or (element type, dims)), or dimension sizes
    that take the element type `like` (None: a Shape is required)."""
    if isinstance(shape, (list, tuple)) and not (
            len(shape) == 2 and isinstance(shape[1], (list, tuple))) and like is not None:
        try:
            return T.Shape(like, tuple(shape))
        except ShapeError as e:
            raise ShapeError(f"{op_name}: shape={shape!r}: {e}") from None
    try:
        result = T.as_shape(shape)
    except ShapeError as e:
        raise ShapeError(f"{op_name}: shape: {e}") from None
    if not isinstance(result, T.Shape):
        raise ShapeError(f"{op_name}: shape must be an array shape, got {result}")
    return result


# -- RngUniform, RngNormal ------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def rng_shape(op_name: str, first: str, a: T.Shape, second: str, b: T.Shape,
              shape: T.Shape) -> T.Shape:
    """RngUniform / RngNormal: scalars `first` and `second` and the output all of one
    element type T; uniform takes pred, integers and floats, normal floats only; XLA
    generates only UNIFORM_TYPES / NORMAL_TYPES."""
    where = f"{op_name}: {first} {a}, {second} {b}, shape {shape}"
    for name, s in ((first, a), (second, b)):
        if s.rank != 0:
            raise ShapeError(f"{where}: {name} must be a scalar (rank 0), got {s}")
    et = shape.element_type
    for name, s in ((first, a), (second, b)):
        if s.element_type != et:
            raise ShapeError(f"{where}: {name} must have the output's element type {et}, "
                             f"got {s.element_type}")
    normal = op_name == "rng_normal"
    kinds = {FLOAT} if normal else {PRED, SIGNED, UNSIGNED, FLOAT}
    if et.kind not in kinds:
        raise ShapeError(f"{where}: {op_name} generates "
                         f"{'floating-point' if normal else 'pred, integer or floating-point'} "
                         f"numbers, not {et}")
    supported = NORMAL_TYPES if normal else UNIFORM_TYPES
    if et.name not in supported:
        raise UnsupportedError(f"{where}: XLA's CPU and GPU backends generate {op_name} "
                               f"numbers only of {', '.join(sorted(supported))} (XLA CPU "
                               f"aborts on {et})")
    return shape


def _rng(op_name: str, first: str, a, second: str, b, shape, distribution: str) -> Op:
    ops_given = [v for v in (a, b) if isinstance(v, Op)]
    if not ops_given:
        raise ShapeError(f"{op_name}: {first} or {second} must be an Op (the computation is "
                         f"built from its builder), got {a!r} and {b!r}")
    like = array_operand(op_name, first if isinstance(a, Op) else second, ops_given[0])
    result = _result_shape(op_name, shape, like.element_type)
    scalar = T.Shape(result.element_type, ())  # what a Python number becomes
    shapes = [array_operand(op_name, n, v) if isinstance(v, Op) else scalar
              for n, v in ((first, a), (second, b))]
    rng_shape(op_name, first, shapes[0], second, shapes[1], result)  # before converting numbers
    builder = ops_given[0].builder
    operands = [v if isinstance(v, Op) else builder.constant(
                    T.as_array(v, result.element_type, what=f"{op_name}: {n}"))
                for n, v in ((first, a), (second, b))]
    same_builder(op_name, *operands)
    # stablehlo.rng takes the output's dimensions as an operand
    dims = builder.constant(np.array(result.dimensions, np.int64))
    return builder.add_op("stablehlo.rng", result, operands + [dims],
                          {"rng_distribution": _attribute("rng_distribution", distribution)})


def rng_uniform(a, b, shape):
    """RngUniform(a, b, shape): numbers uniformly distributed in [a, b), of `shape`.

    `a` and `b` are scalar Ops of the output's element type (one may be a Python number);
    `shape` is a Shape such as hg.f32[3, 4] or, taking a's type, dimension sizes. The
    result for b <= a is implementation-defined. XLA draws from a generator state
    hidden in the process: every execution gives new numbers (use rng_bit_generator
    for numbers determined by a state). XLA CPU rounds f16/bf16 numbers to nearest, so
    they can equal b.
    """
    return _rng("rng_uniform", "a", a, "b", b, shape, "UNIFORM")


def rng_normal(mu, sigma, shape):
    """RngNormal(mu, sigma, shape): numbers drawn from N(mu, sigma), of `shape` (floats).

    As rng_uniform: every execution gives new numbers.
    """
    return _rng("rng_normal", "mu", mu, "sigma", sigma, shape, "NORMAL")


# -- RngBitGenerator ------------------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def rng_bit_generator_shapes(algorithm: str, state: T.Shape, shape: T.Shape) -> tuple:
    """RngBitGenerator: (new state, data). The state is u64[n] with n in
    STATE_SIZES[algorithm]; the data is of any integer or floating-point type (random
    bits: floats are bit patterns, NaNs included)."""
    where = f"rng_bit_generator: algorithm={algorithm}, initial_state {state}, shape {shape}"
    allowed = STATE_SIZES[algorithm]
    wanted = " or ".join(f"u64[{n}]" for n in allowed)
    if state.element_type != T.u64 or state.rank != 1 or state.dimensions[0] not in allowed:
        raise ShapeError(f"{where}: initial_state must be {wanted} for {algorithm}, got {state}")
    if shape.element_type.kind in (PRED, COMPLEX):
        raise ShapeError(f"{where}: the data must be of an integer or floating-point type, "
                         f"not {shape.element_type}")
    if shape.element_type.bits not in T.UNSIGNED_OF_WIDTH:  # f6: bits are made as integers
        raise ShapeError(f"{where}: no integer type has the {shape.element_type.bits} bits of "
                         f"{shape.element_type}; generate u8 bits and convert them")
    return state, shape


def rng_bit_generator(algorithm, initial_state, shape):
    """RngBitGenerator(algorithm, initial_state, shape) -> (new_state, data).

    `algorithm` is "DEFAULT", "THREE_FRY" or "PHILOX"; `initial_state` a u64[2] Op
    (THREE_FRY) or u64[2] / u64[3] (PHILOX, DEFAULT); `shape` the data's Shape (any
    integer or floating-point type). The data is a deterministic function of the state
    and the shape; pass new_state to the next call for fresh bits.
    """
    if not isinstance(algorithm, str) or algorithm not in STATE_SIZES:
        raise ShapeError(f"rng_bit_generator: algorithm={algorithm!r} must be one of "
                         f"{', '.join(map(repr, STATE_SIZES))}")
    state = array_operand("rng_bit_generator", "initial_state", initial_state)
    result = _result_shape("rng_bit_generator", shape, None)
    new_state, data = rng_bit_generator_shapes(algorithm, state, result)
    builder = initial_state.builder
    # Emitted as unsigned bits of the same width, bitcast after: XLA CPU types a float (or
    # signed) result as unsigned and computes the ops that use it as integer ops.
    bits = T.Shape(T.UNSIGNED_OF_WIDTH[data.element_type.bits], data.dimensions)
    operation = builder.emit("stablehlo.rng_bit_generator",
                             [mlir.ir_type(new_state), mlir.ir_type(bits)], [initial_state.value],
                             {"rng_algorithm": _attribute("rng_algorithm", algorithm)})
    state_op = Op(builder, operation.results[0], new_state)
    data_op = Op(builder, operation.results[1], bits)
    if bits != data:
        data_op = builder.add_op("stablehlo.bitcast_convert", data, [data_op])
    return state_op, data_op


@functools.lru_cache(maxsize=None)
def _attribute(kind: str, value: str) -> ir.Attribute:
    return ir.Attribute.parse(f"#stablehlo<{kind} {value}>", context=mlir.context())
