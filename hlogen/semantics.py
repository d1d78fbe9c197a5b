"""XLA's definitions where StableHLO leaves a result to the implementation, as emission.

Each function here emits the ops that compute XLA's result, through a builder's
`emit(name, result_types, operand_values, attributes) -> ir.Operation`: the ops call
them when they emit, and hlogen.rewrites' XLA_SEMANTICS entries call them before an op
of a loaded module, so built and loaded modules get the same semantics from the same
code:
- integer Div/Rem: x/0 = -1 (all ones unsigned), x%0 = x, INT_MIN/-1 = INT_MIN,
  INT_MIN%-1 = 0 (the interpreter and XLA's constant folder die with SIGFPE otherwise);
- TotalOrder comparisons of floats, compared as integers like XLA's comparison
  expander (the interpreter ignores compare_type TOTALORDER);
- ReducePrecision keeps NaN (with mantissa_bits=0 the interpreter returns Inf);
- narrow floats (f4, f6, f8): functions computed in f32 and rounded back, and converted
  to integers through f32, as XLA computes them (XLA CPU's own f4 conversion makes 6.0
  INT_MAX; the interpreter rounds f8e3m4 to NaN), in loaded modules too;
- start indices of DynamicSlice, DynamicUpdateSlice, Gather and Scatter are converted to
  a signed type that holds them (the interpreter reads unsigned indices as signed), and
  Scatter windows that do not fit are sent wholly out of bounds (XLA skips them whole,
  the interpreter updates their in-bounds part);
- PopulationCount of s4 counts its 4 bits (XLA CPU sign-extends first);
- float -> integer ConvertElementType of NaN, infinities and values out of range made
  explicit as XLA CPU computes it (NaN -> 0, saturated), for compilers that differ
  (hlogen.rewrites.COMPARABLE: IREE gives INT_MIN or wraps);
- empty replica groups mean every replica, one group (in hlogen.rewrites: XLA CPU dies
  with SIGFPE on an AllToAll without groups, the interpreter aborts on any collective
  without them).
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T

_compare_attrs: dict = {}


def compare_attributes(direction: str, compare_type: str) -> dict:
    key = (direction, compare_type)
    if key not in _compare_attrs:
        ctx = mlir.context()
        _compare_attrs[key] = {
            "comparison_direction": stablehlo.ComparisonDirectionAttr.get(direction, ctx),
            "compare_type": stablehlo.ComparisonTypeAttr.get(compare_type, ctx)}
    return _compare_attrs[key]


def compare_type_of(et: T.ElementType) -> str:
    return {T.PRED: "UNSIGNED", T.SIGNED: "SIGNED", T.UNSIGNED: "UNSIGNED",
            T.FLOAT: "FLOAT", T.COMPLEX: "FLOAT"}[et.kind]


# -- small emission helpers -----------------------------------------------------------

def _one(emitter, name, shape, operands, attributes=None) -> ir.Value:
    return emitter.emit(name, [mlir.ir_type(shape)], list(operands), attributes).result


def _full(emitter, shape: T.Shape, value) -> ir.Value:
    """A splat constant of `shape` (no broadcast op needed)."""
    attr = mlir.dense_attr(np.array([value], dtype=shape.dtype), shape)
    return _one(emitter, "stablehlo.constant", shape, [], {"value": attr})


def _compare(emitter, shape: T.Shape, direction, lhs, rhs, compare_type=None) -> ir.Value:
    attrs = compare_attributes(direction, compare_type or compare_type_of(shape.element_type))
    return _one(emitter, "stablehlo.compare", shape.with_element_type(T.pred), [lhs, rhs], attrs)


def _select(emitter, shape, pred, on_true, on_false) -> ir.Value:
    return _one(emitter, "stablehlo.select", shape, [pred, on_true, on_false])


# -- integer Div and Rem --------------------------------------------------------------

def integer_division(emitter, mlir_name: str, shape: T.Shape, lhs, rhs) -> ir.Value:
    """XLA's integer Div/Rem (`mlir_name` stablehlo.divide or stablehlo.remainder).

    The divisor is replaced by 1 where it is 0 or where INT_MIN/-1 would overflow
    (INT_MIN/1 and INT_MIN%1 are already the results XLA defines there).
    """
    et = shape.element_type
    pred = shape.with_element_type(T.pred)
    is_zero = _compare(emitter, shape, "EQ", rhs, _full(emitter, shape, 0))
    bad = is_zero
    if et.kind == T.SIGNED:
        info = ml_dtypes.iinfo(et.dtype)
        overflow = _one(emitter, "stablehlo.and", pred, [
            _compare(emitter, shape, "EQ", lhs, _full(emitter, shape, int(info.min))),
            _compare(emitter, shape, "EQ", rhs, _full(emitter, shape, -1))])
        bad = _one(emitter, "stablehlo.or", pred, [is_zero, overflow])
    safe = _select(emitter, shape, bad, _full(emitter, shape, 1), rhs)
    result = _one(emitter, mlir_name, shape, [lhs, safe])
    if mlir_name == "stablehlo.divide":
        all_ones = -1 if et.kind == T.SIGNED else int(ml_dtypes.iinfo(et.dtype).max)
        return _select(emitter, shape, is_zero, _full(emitter, shape, all_ones), result)
    return _select(emitter, shape, is_zero, lhs, result)


# -- TotalOrder comparisons -----------------------------------------------------------

def total_order_compare(emitter, direction: str, shape: T.Shape, lhs, rhs) -> ir.Value:
    """Compares floats of `shape` in XLA's total order
    (-NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN; XLA's comparison expander
    puts the one NaN of types without -0 first; a type without a sign orders as its bits)."""
    if shape.element_type.bits not in T.SIGNED_OF_WIDTH:
        # f6: no integer of its width; f32 holds its values (it has no NaN) exactly
        wide = shape.with_element_type(T.f32)
        lhs, rhs = (_one(emitter, "stablehlo.convert", wide, [x]) for x in (lhs, rhs))
        shape = wide
    et = shape.element_type
    if not et.has_sign:
        key_shape = shape.with_element_type(T.UNSIGNED_OF_WIDTH[et.bits])
        keys = [_one(emitter, "stablehlo.bitcast_convert", key_shape, [x]) for x in (lhs, rhs)]
        return _compare(emitter, key_shape, direction, *keys, compare_type="UNSIGNED")
    keys = [_total_order_key(emitter, shape, x) for x in (lhs, rhs)]
    key_shape = shape.with_element_type(T.SIGNED_OF_WIDTH[et.bits])
    return _compare(emitter, key_shape, direction, *keys, compare_type="SIGNED")


def _total_order_key(emitter, shape: T.Shape, x) -> ir.Value:
    """Signed integers that order as the total order of the floats `x`: bitcast, then
    flip the other bits of negative values so larger magnitudes order lower:
    k ^ ((k >>a (n-1)) >>l 1); without -0 (fnuz types), as XLA: min - k for negative
    k, and min itself for NaN, whose bits are min's."""
    bits = shape.element_type.bits
    key_shape = shape.with_element_type(T.SIGNED_OF_WIDTH[bits])
    key = _one(emitter, "stablehlo.bitcast_convert", key_shape, [x])
    if not shape.element_type.has_negative_zero:
        least = _full(emitter, key_shape, -(1 << (bits - 1)))
        flipped = _select(emitter, key_shape, _compare(emitter, key_shape, "EQ", key, least),
                          least, _one(emitter, "stablehlo.subtract", key_shape, [least, key]))
        negative = _compare(emitter, key_shape, "LT", key, _full(emitter, key_shape, 0))
        return _select(emitter, key_shape, negative, flipped, key)
    sign = _one(emitter, "stablehlo.shift_right_arithmetic", key_shape,
                [key, _full(emitter, key_shape, bits - 1)])
    flip = _one(emitter, "stablehlo.shift_right_logical", key_shape,
                [sign, _full(emitter, key_shape, 1)])
    return _one(emitter, "stablehlo.xor", key_shape, [key, flip])


# -- narrow floats (f4, f6, f8) ----------------------------------------------------------

def in_f32(emitter, mlir_name: str, shape: T.Shape, operands, attributes=None) -> ir.Value:
    """`mlir_name` (with `attributes`) of narrow floats of `shape` computed in f32 and
    rounded back, as XLA CPU computes them."""
    wide = shape.with_element_type(T.f32)
    result = _one(emitter, mlir_name, wide,
                  [_one(emitter, "stablehlo.convert", wide, [x]) for x in operands], attributes)
    return _one(emitter, "stablehlo.convert", shape, [result])


def convert(emitter, shape: T.Shape, x, from_type: T.ElementType) -> ir.Value:
    """ConvertElementType to `shape`; narrow floats go to integers through f32, as XLA
    converts them (XLA CPU's own f4 -> integer conversion makes 6.0 INT_MAX)."""
    if from_type.is_narrow_float and shape.element_type.is_integer:
        x = _one(emitter, "stablehlo.convert", shape.with_element_type(T.f32), [x])
    return _one(emitter, "stablehlo.convert", shape, [x])


def saturating_convert(emitter, shape: T.Shape, x, from_type: T.ElementType) -> ir.Value:
    """ConvertElementType of floats `x` to the integers of `shape`, written so that no
    compiler chooses: NaN -> 0, values beyond the range -> its end (±inf too), the rest
    truncated toward zero, as XLA CPU converts (measured for s2...s64 and u2...u64, from
    f16, f32, f64; StableHLO leaves out-of-range results to the implementation, and IREE
    gives INT_MIN or wraps). Only values in range reach the `convert` (the others are
    replaced by 0 first): LLVM's fptosi of one is poison."""
    if from_type.is_narrow_float:  # as XLA: through f32
        x = _one(emitter, "stablehlo.convert", shape.with_element_type(T.f32), [x])
        from_type = T.f32
    source = shape.with_element_type(from_type)
    et = shape.element_type
    info = ml_dtypes.iinfo(et.dtype)
    # exclusive bounds in the float type: powers of two, exact (or inf beyond its range)
    signed = et.kind == T.SIGNED
    low, high = (-2.0 ** (et.bits - 1), 2.0 ** (et.bits - 1)) if signed else (0.0, 2.0 ** et.bits)
    with np.errstate(over="ignore"):
        low_c, high_c = (_full(emitter, source, np.array(v).astype(from_type.dtype))
                         for v in (low, high))
    too_low = _compare(emitter, source, "LE", x, low_c)
    too_high = _compare(emitter, source, "GE", x, high_c)
    fits = _one(emitter, "stablehlo.and", source.with_element_type(T.pred), [
        _compare(emitter, source, "GT", x, low_c), _compare(emitter, source, "LT", x, high_c)])
    inside = _select(emitter, source, fits, x, _full(emitter, source, 0))  # NaN -> 0 too
    result = _one(emitter, "stablehlo.convert", shape, [inside])
    result = _select(emitter, shape, too_low, _full(emitter, shape, int(info.min)), result)
    return _select(emitter, shape, too_high, _full(emitter, shape, int(info.max)), result)


# -- ReducePrecision ------------------------------------------------------------------

def reduce_precision(emitter, shape: T.Shape, x, exponent_bits: int, mantissa_bits: int) -> ir.Value:
    """ReducePrecision that keeps NaN, as XLA documents."""
    attrs = {"exponent_bits": mlir.int_attr(exponent_bits, 32),
             "mantissa_bits": mlir.int_attr(mantissa_bits, 32)}
    reduced = _one(emitter, "stablehlo.reduce_precision", shape, [x], attrs)
    if mantissa_bits:
        return reduced
    # No mantissa bit is left to mark a NaN: the interpreter returns Inf there.
    is_nan = _compare(emitter, shape, "NE", x, x)
    return _select(emitter, shape, is_nan, x, reduced)


# -- PopulationCount -------------------------------------------------------------------

def population_count(emitter, shape: T.Shape, x) -> ir.Value:
    """PopulationCount of `shape`; s4 counts its 4 bits, as u4 (XLA CPU sign-extends s4
    first: popcnt(-8) = 5)."""
    if shape.element_type.name != "s4":
        return _one(emitter, "stablehlo.popcnt", shape, [x])
    bits = shape.with_element_type(T.u4)
    counted = _one(emitter, "stablehlo.popcnt", bits,
                   [_one(emitter, "stablehlo.bitcast_convert", bits, [x])])
    return _one(emitter, "stablehlo.bitcast_convert", shape, [counted])


# -- start indices: DynamicSlice, DynamicUpdateSlice, Gather, Scatter ---------------------

_S64_MAX = 2**63 - 1


def index_type(element_types, largest_bound: int) -> T.ElementType:
    """s32, or s64 when an index type or a bound needs it: every index converts exactly."""
    wide = largest_bound >= 2**31 or any(et.name in ("s64", "u32", "u64") for et in element_types)
    return T.s64 if wide else T.s32


def signed_index(emitter, shape: T.Shape, x, target: T.ElementType) -> ir.Value:
    """Indices `x` of `shape` as the signed `target`, values kept (u64 beyond s64's range
    becomes s64's largest, out of bounds just the same): the interpreter reads unsigned
    indices as signed (a u32 2**31 would start at 0 instead of being clamped to the end)."""
    if shape.element_type == target:
        return x
    if shape.element_type.name == "u64":
        x = _one(emitter, "stablehlo.minimum", shape, [x, _full(emitter, shape, _S64_MAX)])
    return _one(emitter, "stablehlo.convert", shape.with_element_type(target), [x])


def scatter_indices(emitter, operand: T.Shape, updates: T.Shape, indices: T.Shape, x,
                    update_window_dims, inserted_dims, batching_dims, index_map, ivd):
    """Scatter's indices `x` (of shape `indices`) as XLA reads them, and the
    scatter_dims_to_operand_dims they go with: signed (signed_index); index vectors of no
    components given one 0 component (XLA CPU skips every update when the indices hold
    no elements); an index vector whose window does not fit in the operand replaced by
    the operand's sizes, so that no element of its window is in bounds and every backend
    skips the whole window, as XLA does (the interpreter would update its in-bounds part)."""
    target = index_type([indices.element_type], max(operand.dimensions, default=0))
    x, indices = signed_index(emitter, indices, x, target), indices.with_element_type(target)
    free = [d for d in range(operand.rank) if d not in batching_dims]
    if not index_map and free and updates.size:
        indices = T.Shape(target, tuple(1 if d == ivd else n
                                        for d, n in enumerate(indices.dimensions)))
        x, index_map = _full(emitter, indices, 0), (free[0],)
    if not index_map:  # index vectors of no components: every window starts at 0
        return x, tuple(index_map)
    window = scatter_window(operand, updates, update_window_dims, inserted_dims, batching_dims)
    highest = [operand.dimensions[d] - window[d] for d in index_map]
    pred = indices.with_element_type(T.pred)
    fits = _one(emitter, "stablehlo.and", pred, [
        _compare(emitter, indices, "GE", x, _full(emitter, indices, 0)),
        _compare(emitter, indices, "LE", x, _along_vector(emitter, indices, ivd, highest))])
    dims = indices.dimensions
    if ivd < len(dims):  # a window fits when every component of its vector does
        part = T.Shape(T.pred, tuple(1 if d == ivd else n for d, n in enumerate(dims)))
        every = None
        for k in range(dims[ivd]):
            start = [k if d == ivd else 0 for d in range(len(dims))]
            limit = [k + 1 if d == ivd else n for d, n in enumerate(dims)]
            one = _one(emitter, "stablehlo.slice", part, [fits], {
                "start_indices": mlir.i64_array(start), "limit_indices": mlir.i64_array(limit),
                "strides": mlir.i64_array([1] * len(dims))})
            every = one if every is None else _one(emitter, "stablehlo.and", part, [every, one])
        fits = _one(emitter, "stablehlo.broadcast_in_dim", pred, [every],
                    {"broadcast_dimensions": mlir.i64_array(range(len(dims)))})
    sizes = [operand.dimensions[d] for d in index_map]
    return _select(emitter, indices, fits, x, _along_vector(emitter, indices, ivd, sizes)), \
        tuple(index_map)


def scatter_window(operand: T.Shape, updates: T.Shape, update_window_dims, inserted_dims,
                   batching_dims) -> list:
    """The size of a scatter's update window along each dimension of the operand."""
    window = [1] * operand.rank
    windowed = [d for d in range(operand.rank) if d not in inserted_dims and d not in batching_dims]
    for d, u in zip(windowed, update_window_dims):
        window[d] = updates.dimensions[u]
    return window


def _along_vector(emitter, shape: T.Shape, ivd: int, values) -> ir.Value:
    """One value per component of an index vector, laid out like indices of `shape`."""
    if ivd == shape.rank or len(set(values)) == 1:
        return _full(emitter, shape, values[0])
    vector = T.Shape(shape.element_type, (len(values),))
    constant = _one(emitter, "stablehlo.constant", vector, [],
                    {"value": mlir.dense_attr(np.array(values, dtype=shape.dtype), vector)})
    return _one(emitter, "stablehlo.broadcast_in_dim", shape, [constant],
                {"broadcast_dimensions": mlir.i64_array([ivd])})
