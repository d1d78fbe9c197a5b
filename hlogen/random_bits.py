"""RngBitGenerator for the reference interpreter, bit for bit as XLA CPU generates it.

The interpreter has no RngBitGenerator; the spec leaves the bits to the implementation,
so the definition is XLA's: its RngBitGenerator expander (the state's word 0 is the
key, the rest the counter; DEFAULT is PHILOX on CPU) and the ThreeFry-2x32 (20 rounds)
and Philox-4x32 (10 rounds) generators of xla/hlo/builder/lib/prng.cc, with their
counters, output order and new state. Types narrower than 32 bits take the low bits
of 32-bit values generated for the same shape; floats and signed types are the bits of
the unsigned type of their width (bitcast).
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir, ops
from hlogen import types as T
from hlogen.builder import Op
from hlogen.mlir import enum_attribute
from hlogen.rewrites import RewriteBuilder, rule

RULES: list = []  # hlogen.rewrites entries: the interpreter's declaration lists them

_U32, _U64 = T.u32, T.u64
_MASK32 = 0xFFFFFFFF
_THREEFRY_ROTATIONS = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # the key's increments per round
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # the round multipliers


def _low_high(x: Op) -> tuple[Op, Op]:
    """The low and high 32-bit words of u64 `x`."""
    b = x.builder
    low = ops.convert_element_type(ops.and_(x, b.constant(_MASK32, _U64)), _U32)
    high = ops.convert_element_type(ops.shift_right_logical(x, b.constant(32, _U64)), _U32)
    return low, high


def _u64(low: Op, high: Op) -> Op:
    b = low.builder
    return ops.or_(ops.convert_element_type(low, _U64),
                   ops.shift_left(ops.convert_element_type(high, _U64), b.constant(32, _U64)))


def _threefry2x32(x: list[Op], key: tuple[Op, Op]) -> list[Op]:
    """ThreeFry-2x32 with 20 rounds of the words `x` under the u32 key words `key`."""
    b = x[0].builder
    ks = [key[0], key[1], ops.xor(ops.xor(b.constant(_THREEFRY_PARITY, _U32), key[0]), key[1])]
    x = [ops.add(x[0], ks[0]), ops.add(x[1], ks[1])]
    for group in range(5):
        for rotation in _THREEFRY_ROTATIONS[4 * (group % 2): 4 * (group % 2) + 4]:
            x0 = ops.add(x[0], x[1])
            rotated = ops.or_(ops.shift_left(x[1], b.constant(rotation, _U32)),
                              ops.shift_right_logical(x[1], b.constant(32 - rotation, _U32)))
            x = [x0, ops.xor(x0, rotated)]
        x = [ops.add(x[0], ks[(group + 1) % 3]),
             ops.add(ops.add(x[1], ks[(group + 2) % 3]), b.constant(group + 1, _U32))]
    return x


def _philox4x32(x: list[Op], key: tuple[Op, Op]) -> list[Op]:
    """Philox-4x32 with 10 rounds of the words `x` under the u32 key words `key`."""
    b = x[0].builder
    key = list(key)

    def mul_high_low(word: Op, multiplier: int) -> tuple[Op, Op]:
        low, high = _low_high(ops.mul(ops.convert_element_type(word, _U64),
                                      b.constant(multiplier, _U64)))
        return high, low

    for _ in range(10):
        high0, low0 = mul_high_low(x[0], _PHILOX_M[0])
        high1, low1 = mul_high_low(x[2], _PHILOX_M[1])
        x = [ops.xor(ops.xor(high1, x[1]), key[0]), low1,
             ops.xor(ops.xor(high0, x[3]), key[1]), low0]
        key = [ops.add(key[0], b.constant(_PHILOX_W[0], _U32)),
               ops.add(key[1], b.constant(_PHILOX_W[1], _U32))]
    return x


def _word(vector: Op, i: int) -> Op:
    return ops.reshape(ops.slice(vector, [i], [i + 1]), ())


def _threefry(key: Op, counter: Op, dims: tuple, bits: int) -> tuple[Op, Op]:
    """(bits of `dims`, new counter): XLA's ThreeFryRngBit32/64. `counter` is a u64 scalar."""
    key_words = _low_high(key)
    if bits == 64:
        words = _threefry2x32(list(_low_high(_counters(counter, dims))), key_words)
        return _u64(*words), _count_up(counter, int(np.prod(dims)))
    # 32 bits: two values per counter, split along the first even dimension (else the
    # largest), the pairs side by side along it
    if not dims:
        split, half = 0, (1,)
    else:
        even = [d for d, n in enumerate(dims) if n % 2 == 0]
        split = even[0] if even else max(range(len(dims)), key=lambda d: (dims[d], -d))
        half = dims[:split] + ((dims[split] + 1) // 2, 1) + dims[split + 1:]
    words = _threefry2x32(list(_low_high(_counters(counter, half))), key_words)
    if not dims:
        return ops.reshape(words[0], ()), _count_up(counter, 1)
    paired = ops.concatenate(words, split + 1)
    rounded = dims[:split] + (2 * half[split],) + dims[split + 1:]
    values = ops.reshape(paired, rounded)
    if rounded != dims:
        values = ops.slice(values, [0] * len(dims), list(dims))
    return values, _count_up(counter, int(np.prod(half)))


def _counters(counter: Op, dims: tuple) -> Op:
    """`counter` + the row-major index of each element of `dims` (u64, wrapping)."""
    b = counter.builder
    size = int(np.prod(dims))
    index = ops.reshape(ops.iota(b, T.Shape(_U64, (size,)), 0), dims)
    return ops.add(ops.broadcast(counter, dims), index)


def _count_up(counter: Op, n: int) -> Op:
    return ops.add(counter, counter.builder.constant(n, _U64))


def _add_u128(low: Op, high: Op, n: Op) -> tuple[Op, Op]:
    """(low, high) + n, u64 words of a 128-bit number (n broadcast like low)."""
    b = low.builder
    new_low = ops.add(low, n)
    carried = ops.add(high, b.constant(1, _U64))
    return new_low, ops.select(ops.lt(new_low, low), carried, high)


def _philox(key: Op, low: Op, high: Op, dims: tuple, bits: int) -> tuple[Op, tuple[Op, Op]]:
    """(bits of `dims`, new 128-bit counter): XLA's PhiloxRngBit32/64."""
    b = key.builder
    size = int(np.prod(dims))
    per_block = 4 if bits == 32 else 2  # one counter gives 128 bits
    blocks = -(-size // per_block)
    index = ops.iota(b, T.Shape(_U64, (blocks,)), 0)
    counters = _add_u128(ops.broadcast(low, (blocks,)), ops.broadcast(high, (blocks,)), index)
    x = [w for word in counters for w in _low_high(word)]
    out = _philox4x32(x, _low_high(key))
    if bits == 64:
        out = [_u64(out[0], out[1]), _u64(out[2], out[3])]
    # round-robin: block i gives values per_block * i + j
    values = ops.concatenate([ops.reshape(w, (blocks, 1)) for w in out], 1)
    values = ops.reshape(values, (blocks * per_block,))
    if blocks * per_block != size:
        values = ops.slice(values, [0], [size])
    return ops.reshape(values, dims), _add_u128(low, high, b.constant(blocks, _U64))


def _unsigned_of_bits(op: ir.Operation) -> T.ElementType | None:
    """The unsigned type of the random values' width (None for f6: no such integer type;
    the interpreter's declaration refuses f6 values: hlogen.backends)."""
    return T.UNSIGNED_OF_WIDTH.get(mlir.shape_of_type(op.results[1].type).element_type.bits)


@rule(RULES, "stablehlo.rng_bit_generator",
      "the interpreter has no implementation of it (the spec leaves the bits to the "
      "implementation: XLA CPU's are the definition)", _unsigned_of_bits)
def _rng_bit_generator(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    (state,) = operands
    data = mlir.shape_of_type(op.results[1].type)
    width = data.element_type.bits
    bits = 64 if width == 64 else 32  # narrower types take the low bits of 32
    key = _word(state, 0)
    if enum_attribute(op, "rng_algorithm") == "THREE_FRY":
        values, counter = _threefry(key, _word(state, 1), data.dimensions, bits)
        new_state = ops.concatenate([ops.reshape(key, (1,)), ops.reshape(counter, (1,))], 0)
    else:  # PHILOX, and DEFAULT as XLA CPU expands it
        words = state.shape.dimensions[0]
        # a u64[2] state is read reversed: the counter's low word is state[1], its high state[0]
        low, high = (_word(state, 1), _word(state, 2)) if words >= 3 else \
            (_word(state, 1), _word(state, 0))
        values, (new_low, new_high) = _philox(key, low, high, data.dimensions, bits)
        kept = [new_low, new_high] if words >= 3 else [new_low]
        new_state = ops.concatenate([ops.reshape(w, (1,)) for w in [key] + kept], 0)
    unsigned = _unsigned_of_bits(op)
    if width < 32:
        values = ops.convert_element_type(
            ops.and_(values, b.constant((1 << width) - 1, _U32)), unsigned)
    if unsigned != data.element_type:
        values = ops.bitcast_convert_type(values, data.element_type)
    return [new_state, values]


__all__ = ["RULES"]
