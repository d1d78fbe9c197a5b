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
  INT_MAX; the interpreter rounds f8e3m4 to NaN); loaded modules get the rounding and
  the conversion (their transcendental functions stay as XLA CPU computes them anyway);
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

def in_f32(emitter, mlir_name: str, shape: T.Shape, operands) -> ir.Value:
    """`mlir_name` of narrow floats of `shape` computed in f32 and rounded back, as XLA
    CPU computes them."""
    wide = shape.with_element_type(T.f32)
    result = _one(emitter, mlir_name, wide,
                  [_one(emitter, "stablehlo.convert", wide, [x]) for x in operands])
    return _one(emitter, "stablehlo.convert", shape, [result])


def convert(emitter, shape: T.Shape, x, from_type: T.ElementType) -> ir.Value:
    """ConvertElementType to `shape`; narrow floats go to integers through f32, as XLA
    converts them (XLA CPU's own f4 -> integer conversion makes 6.0 INT_MAX)."""
    if from_type.is_narrow_float and shape.element_type.is_integer:
        x = _one(emitter, "stablehlo.convert", shape.with_element_type(T.f32), [x])
    return _one(emitter, "stablehlo.convert", shape, [x])


# -- ReducePrecision ------------------------------------------------------------------

def reduce_precision(emitter, shape: T.Shape, x, exponent_bits: int, mantissa_bits: int) -> ir.Value:
    """ReducePrecision that keeps NaN, as XLA documents."""
    attrs = {"exponent_bits": _i32(exponent_bits), "mantissa_bits": _i32(mantissa_bits)}
    reduced = _one(emitter, "stablehlo.reduce_precision", shape, [x], attrs)
    if mantissa_bits:
        return reduced
    # No mantissa bit is left to mark a NaN: the interpreter returns Inf there.
    is_nan = _compare(emitter, shape, "NE", x, x)
    return _select(emitter, shape, is_nan, x, reduced)


def _i32(value: int) -> ir.Attribute:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(32, context=mlir.context()), value)
