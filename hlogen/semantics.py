"""XLA's definitions where StableHLO leaves a result to the implementation, as emission.

Each function here emits the ops that compute XLA's result, through an emitter:
any object with `emit(name, result_types, operand_values, attributes) -> ir.Operation`.
The builder is one (ops call these functions when they emit), and `rewrite_module`
uses another that inserts before an op of a loaded module, so built and loaded
modules get the same semantics from the same code:
- integer Div/Rem: x/0 = -1 (all ones unsigned), x%0 = x, INT_MIN/-1 = INT_MIN,
  INT_MIN%-1 = 0 (the interpreter and XLA's constant folder die with SIGFPE otherwise);
- TotalOrder comparisons of floats, compared as integers like XLA's comparison
  expander (the interpreter ignores compare_type TOTALORDER);
- ReducePrecision keeps NaN (with mantissa_bits=0 the interpreter returns Inf);
- narrow floats (f4, f6, f8): functions computed in f32 and rounded back, and converted
  to integers through f32, as XLA computes them (XLA CPU's own f4 conversion makes 6.0
  INT_MAX; the interpreter rounds f8e3m4 to NaN); loaded modules get the rounding and
  the conversion (their transcendental functions stay as XLA CPU computes them anyway);
- empty replica groups mean every replica, one group (`explicit_replica_groups`: XLA
  CPU dies with SIGFPE on an AllToAll without groups, the interpreter aborts on any
  collective without them).
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


# -- the rewrite of loaded modules ----------------------------------------------------

class _Before:
    """Emits right before `op`, at its location."""

    def __init__(self, op: ir.Operation):
        self._ip = ir.InsertionPoint(op)
        self._loc = op.location

    def emit(self, name, result_types, operand_values, attributes=None) -> ir.Operation:
        return ir.Operation.create(name, results=result_types, operands=operand_values,
                                   attributes=attributes, loc=self._loc, ip=self._ip)


def rewrite_module(module: ir.Module) -> int:
    """Gives every op of `module` whose result StableHLO leaves open XLA's result, in
    place, with the functions above; ops already in that form are left alone.
    Returns how many ops were rewritten."""
    todo = [op for op in mlir.walk(module) if op.name in _REWRITES]
    count = 0
    for op in todo:
        replacement = _REWRITES[op.name](op)
        if replacement is not None:
            op.result.replace_all_uses_with(replacement)
            op.erase()
            count += 1
    return count


def _shape(value) -> T.Shape | None:
    try:
        shape = mlir.shape_of_type(value.type)
    except Exception:
        return None
    return shape if isinstance(shape, T.Shape) else None


def _rewrite_division(op):
    shape = _shape(op.result)
    if shape is None or not shape.element_type.is_integer:
        return None
    lhs, rhs = op.operands
    if _divisor_is_safe(shape, lhs, rhs):
        return None
    return integer_division(_Before(op), op.name, shape, lhs, rhs)


def _rewrite_compare(op):
    if "compare_type" not in op.attributes or \
            mlir.enum_attribute(op, "compare_type") != "TOTALORDER":
        return None
    shape = _shape(op.operands[0])
    if shape is None or shape.element_type.kind != T.FLOAT:
        return None
    direction = mlir.enum_attribute(op, "comparison_direction")
    return total_order_compare(_Before(op), direction, shape, *op.operands)


def _rewrite_reduce_precision(op):
    shape = _shape(op.result)
    mantissa = ir.IntegerAttr(op.attributes["mantissa_bits"]).value
    if shape is None or mantissa or _nan_is_kept(op):
        return None
    exponent = ir.IntegerAttr(op.attributes["exponent_bits"]).value
    return reduce_precision(_Before(op), shape, op.operands[0], exponent, mantissa)


def _rewrite_convert(op):
    source, shape = _shape(op.operands[0]), _shape(op.result)
    if source is None or shape is None or not source.element_type.is_narrow_float or \
            not shape.element_type.is_integer:
        return None
    return convert(_Before(op), shape, op.operands[0], source.element_type)


def _rewrite_in_f32(op):
    shape = _shape(op.result)
    if shape is None or not shape.element_type.is_narrow_float:
        return None
    return in_f32(_Before(op), op.name, shape, op.operands)


# Narrow floats' rounding to integers, computed in f32 (exact there) in loaded modules
# too: the interpreter returns NaN for f8e3m4's (hlogen.ops.elementwise emits the
# transcendental functions so as well, as XLA CPU computes them).
ROUNDING_IN_F32 = ("stablehlo.ceil", "stablehlo.floor", "stablehlo.round_nearest_afz",
                   "stablehlo.round_nearest_even")

_REWRITES = {"stablehlo.divide": _rewrite_division, "stablehlo.remainder": _rewrite_division,
             "stablehlo.compare": _rewrite_compare,
             "stablehlo.reduce_precision": _rewrite_reduce_precision,
             "stablehlo.convert": _rewrite_convert,
             **{name: _rewrite_in_f32 for name in ROUNDING_IN_F32}}


# -- recognizing what the functions above emitted (so a second rewrite changes nothing)

def _defining(value, name):
    owner = value.owner
    if isinstance(owner, ir.Block) or owner is None:
        return None
    owner = owner.operation if hasattr(owner, "operation") else owner
    return owner if owner.name == name else None


def _splat(value):
    """The value of a splat constant, or None."""
    const = _defining(value, "stablehlo.constant")
    if const is None:
        return None
    attr = ir.DenseElementsAttr(const.attributes["value"])
    if not attr.is_splat:
        return None
    try:
        return np.array(attr).reshape(-1)[0].item()
    except Exception:
        return None


def _is_compare(value, direction, lhs, constant):
    op = _defining(value, "stablehlo.compare")
    return (op is not None and mlir.enum_attribute(op, "comparison_direction") == direction
            and op.operands[0] == lhs and _splat(op.operands[1]) == constant)


def _divisor_is_safe(shape, lhs, rhs) -> bool:
    """True when `rhs` is select(guard, 1, r) with the guard integer_division emits."""
    select = _defining(rhs, "stablehlo.select")
    if select is None or _splat(select.operands[1]) != 1:
        return False
    guard, divisor = select.operands[0], select.operands[2]
    if shape.element_type.kind != T.SIGNED:
        return _is_compare(guard, "EQ", divisor, 0)
    either = _defining(guard, "stablehlo.or")
    if either is None or not _is_compare(either.operands[0], "EQ", divisor, 0):
        return False
    both = _defining(either.operands[1], "stablehlo.and")
    int_min = int(ml_dtypes.iinfo(shape.dtype).min)
    return (both is not None and _is_compare(both.operands[0], "EQ", lhs, int_min)
            and _is_compare(both.operands[1], "EQ", divisor, -1))


def _nan_is_kept(op) -> bool:
    """True when every use of `op` is select(x != x, x, op) as reduce_precision emits."""
    x = op.operands[0]
    uses = list(op.result.uses)
    for use in uses:
        select = use.owner
        if select.name != "stablehlo.select" or use.operand_number != 2 or select.operands[1] != x:
            return False
        test = _defining(select.operands[0], "stablehlo.compare")
        if test is None or list(test.operands) != [x, x] or \
                not str(test.attributes["comparison_direction"]).endswith(" NE>"):
            return False
    return bool(uses)


def explicit_replica_groups(module: ir.Module, num_replicas: int) -> None:
    """Empty replica_groups of collectives become [[0, 1, ..., num_replicas - 1]]."""
    every = None
    for op in mlir.walk(module):
        if "replica_groups" in op.attributes:
            groups = ir.DenseIntElementsAttr(op.attributes["replica_groups"])
            if groups.type.shape[0] == 0:
                if every is None:
                    every = ir.DenseIntElementsAttr.get(
                        np.arange(num_replicas, dtype=np.int64).reshape(1, num_replicas),
                        context=mlir.context())
                op.attributes["replica_groups"] = every
