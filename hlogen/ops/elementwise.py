"""Element-wise ops: binary arithmetic, comparisons, unary functions, Select, Clamp.

Each family is one table; the public functions are generated from it. Binary
ops follow XLA's broadcasting (hlogen.broadcasting). Where XLA defines a result
that StableHLO leaves to the implementation, hlogen emits XLA's definition
explicitly so that every backend, the reference interpreter included, agrees:
- integer Div/Rem by zero and INT_MIN / -1 (x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN,
  INT_MIN%-1 = 0; unsigned x/0 = all ones);
- the TotalOrder comparisons (-NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN),
  compared as sign-magnitude-flipped integers like XLA's comparison expander;
- Abs and Sign of unsigned integers, which StableHLO does not accept.
Two backend gaps are closed the same way: transcendental functions of f8 values
are computed in f32 (as XLA CPU does), and PopulationCount of s4 counts u4 bits.
"""
from __future__ import annotations

import dataclasses
import enum

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir, semantics
from hlogen import types as T
from hlogen.broadcasting import binary_broadcast, broadcast_shapes_exactly
from hlogen.builder import Op, same_builder
from hlogen.errors import ShapeError, UnsupportedError
from hlogen.ops.tuples import get_tuple_element, tuple as make_tuple
from hlogen.ops._common import (ANY, ARITHMETIC, COMPLEX, FLOAT, FLOATING, INTEGER, LOGICAL,
                                PRED, UNSIGNED, array_operand, as_operands,
                                broadcast_in_dim, check_kind, int_list,
                                same_element_type)

# -- binary arithmetic ------------------------------------------------------------------

# Functions of narrow floats (f4, f6, f8) are computed in f32 and rounded back, as XLA CPU
# computes them (`narrow_in_f32`), in built and loaded modules (hlogen.rewrites): computed
# in f8 itself, intermediate values overflow (exp(7) > 448), XLA CPU's f8 atan2 is off by
# ulps, chlo.erf has no f8 lowering, the interpreter's f8e4m3fn logistic and its f8e3m4
# rounding differ.


@dataclasses.dataclass(frozen=True)
class Binary:
    spec: str             # the spec's name: Add
    mlir: str             # the StableHLO op: stablehlo.add
    kinds: frozenset      # element kinds accepted
    narrow_in_f32: bool = False


# python name -> its row
BINARY_ARITHMETIC = {
    "add": Binary("Add", "stablehlo.add", ARITHMETIC | {PRED}),
    "sub": Binary("Sub", "stablehlo.subtract", ARITHMETIC),
    "mul": Binary("Mul", "stablehlo.multiply", ARITHMETIC | {PRED}),
    "div": Binary("Div", "stablehlo.divide", ARITHMETIC),
    "pow": Binary("Pow", "stablehlo.power", ARITHMETIC),
    "rem": Binary("Rem", "stablehlo.remainder", INTEGER | {FLOAT}),
    "max": Binary("Max", "stablehlo.maximum", ANY),
    "min": Binary("Min", "stablehlo.minimum", ANY),
    "and_": Binary("And", "stablehlo.and", LOGICAL),
    "or_": Binary("Or", "stablehlo.or", LOGICAL),
    "xor": Binary("Xor", "stablehlo.xor", LOGICAL),
    "shift_left": Binary("ShiftLeft", "stablehlo.shift_left", INTEGER),
    "shift_right_arithmetic": Binary("ShiftRightArithmetic", "stablehlo.shift_right_arithmetic",
                                     INTEGER),
    "shift_right_logical": Binary("ShiftRightLogical", "stablehlo.shift_right_logical", INTEGER),
    "atan2": Binary("Atan2", "stablehlo.atan2", FLOATING, narrow_in_f32=True),
    "complex": Binary("Complex", "stablehlo.complex", frozenset({FLOAT})),
}

# Complex(lhs, rhs) is the one binary op whose result type differs from its operands'.
_COMPLEX_OF = {"f32": "c64", "f64": "c128"}


def _binary_operands(name, lhs, rhs, broadcast_dimensions, kinds):
    """Checks, then broadcasts both operands to the result dimensions (XLA's rules).

    Returns the element type, the shape both operands now have, and the operands.
    """
    if (type(lhs) is Op and type(rhs) is Op and lhs.shape == rhs.shape
            and type(broadcast_dimensions) is tuple and not broadcast_dimensions
            and lhs.builder is rhs.builder and type(lhs.shape) is T.Shape):
        # the common case, on the hot path of emission: nothing to convert or broadcast
        return check_kind(name, "lhs", lhs, kinds), lhs.shape, lhs, rhs
    broadcast_dimensions = int_list(name, "broadcast_dimensions",
                                    () if broadcast_dimensions is None else broadcast_dimensions)
    lhs, rhs = as_operands(name, lhs, rhs)
    array_operand(name, "lhs", lhs)
    array_operand(name, "rhs", rhs)
    et = same_element_type(name, ("lhs", lhs), ("rhs", rhs))
    check_kind(name, "lhs", lhs, kinds)
    plan = binary_broadcast(name, lhs.shape, rhs.shape, broadcast_dimensions)
    if plan.lhs_map is not None:
        lhs = broadcast_in_dim(lhs, plan.dimensions, plan.lhs_map)
    if plan.rhs_map is not None:
        rhs = broadcast_in_dim(rhs, plan.dimensions, plan.rhs_map)
    return et, T.Shape(et, plan.dimensions), lhs, rhs


def _binary_op(name, lhs, rhs, broadcast_dimensions):
    row = BINARY_ARITHMETIC[name]
    mlir_name = row.mlir
    et, shape, lhs, rhs = _binary_operands(name, lhs, rhs, broadcast_dimensions, row.kinds)
    if name == "complex":
        if et.name not in _COMPLEX_OF:
            raise ShapeError(f"complex: operands must be f32 or f64, got {lhs.shape} and {rhs.shape}")
        et = T.ELEMENT_TYPES[_COMPLEX_OF[et.name]]
        shape = shape.with_element_type(et)
    if name in ("div", "rem") and et.is_integer:
        return _integer_division(name, mlir_name, shape, lhs, rhs)
    if row.narrow_in_f32 and et.is_narrow_float:
        return Op(lhs.builder, semantics.in_f32(lhs.builder, mlir_name, shape,
                                                [lhs.value, rhs.value]), shape)
    return lhs.builder.add_op(mlir_name, shape, [lhs, rhs])


def _integer_division(name, mlir_name, shape, lhs, rhs):
    """XLA's integer Div/Rem, emitted by the function that also rewrites loaded modules."""
    value = semantics.integer_division(lhs.builder, mlir_name, shape, lhs.value, rhs.value)
    return Op(lhs.builder, value, shape)


# -- comparisons ------------------------------------------------------------------------

# python name: (spec name, comparison direction); each also has a _total_order variant.
COMPARISONS = {
    "eq": ("Eq", "EQ"), "ne": ("Ne", "NE"), "ge": ("Ge", "GE"),
    "gt": ("Gt", "GT"), "le": ("Le", "LE"), "lt": ("Lt", "LT"),
}


def _compare(name, lhs, rhs, broadcast_dimensions, total_order):
    direction = COMPARISONS[name.removesuffix("_total_order")][1]
    et, shape, lhs, rhs = _binary_operands(name, lhs, rhs, broadcast_dimensions, ANY)
    if et.kind == COMPLEX and direction not in ("EQ", "NE"):
        raise ShapeError(f"{name}: complex numbers are not ordered; only eq and ne compare "
                         f"{lhs.shape} operands")
    result_shape = shape.with_element_type(T.pred)
    if total_order and et.kind == FLOAT:
        # the function that also rewrites TOTALORDER compares of loaded modules
        value = semantics.total_order_compare(lhs.builder, direction, shape, lhs.value, rhs.value)
        return Op(lhs.builder, value, result_shape)
    return lhs.builder.add_op("stablehlo.compare", result_shape, [lhs, rhs],
                              semantics.compare_attributes(direction,
                                                           semantics.compare_type_of(et)))


# -- unary functions --------------------------------------------------------------------

class Result(enum.Enum):
    """A unary function's result element type."""
    SAME = "the operand's"
    PRED = "pred"
    COMPONENT = "the operand's real component type"


@dataclasses.dataclass(frozen=True)
class Unary:
    spec: str
    mlir: str
    kinds: frozenset
    result: Result = Result.SAME
    narrow_in_f32: bool = False


_F = frozenset({FLOAT})
# python name -> its row
UNARY = {
    "abs": Unary("Abs", "stablehlo.abs", ARITHMETIC, Result.COMPONENT),
    "cbrt": Unary("Cbrt", "stablehlo.cbrt", _F, narrow_in_f32=True),  # XLA: no complex Cbrt
    "ceil": Unary("Ceil", "stablehlo.ceil", _F, narrow_in_f32=True),
    "clz": Unary("Clz", "stablehlo.count_leading_zeros", INTEGER),
    "cos": Unary("Cos", "stablehlo.cosine", FLOATING, narrow_in_f32=True),
    "erf": Unary("Erf", "chlo.erf", _F, narrow_in_f32=True),
    "exp": Unary("Exp", "stablehlo.exponential", FLOATING, narrow_in_f32=True),
    "expm1": Unary("Expm1", "stablehlo.exponential_minus_one", FLOATING, narrow_in_f32=True),
    "floor": Unary("Floor", "stablehlo.floor", _F, narrow_in_f32=True),
    "imag": Unary("Imag", "stablehlo.imag", FLOATING, Result.COMPONENT),
    "is_finite": Unary("IsFinite", "stablehlo.is_finite", _F, Result.PRED),
    "log": Unary("Log", "stablehlo.log", FLOATING, narrow_in_f32=True),
    "log1p": Unary("Log1p", "stablehlo.log_plus_one", FLOATING, narrow_in_f32=True),
    "logistic": Unary("Logistic", "stablehlo.logistic", FLOATING, narrow_in_f32=True),
    "neg": Unary("Neg", "stablehlo.negate", ARITHMETIC),
    "not_": Unary("Not", "stablehlo.not", LOGICAL),
    "population_count": Unary("PopulationCount", "stablehlo.popcnt", INTEGER),
    "real": Unary("Real", "stablehlo.real", FLOATING, Result.COMPONENT),
    "round": Unary("Round", "stablehlo.round_nearest_afz", _F, narrow_in_f32=True),
    "round_nearest_even": Unary("RoundNearestEven", "stablehlo.round_nearest_even", _F,
                                narrow_in_f32=True),
    "rsqrt": Unary("Rsqrt", "stablehlo.rsqrt", FLOATING, narrow_in_f32=True),
    "sign": Unary("Sign", "stablehlo.sign", ARITHMETIC),
    "sin": Unary("Sin", "stablehlo.sine", FLOATING, narrow_in_f32=True),
    "sqrt": Unary("Sqrt", "stablehlo.sqrt", FLOATING, narrow_in_f32=True),
    "tan": Unary("Tan", "stablehlo.tan", FLOATING, narrow_in_f32=True),
    "tanh": Unary("Tanh", "stablehlo.tanh", FLOATING, narrow_in_f32=True),
}


# -- result accuracy ---------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ResultAccuracy:
    """The accuracy asked of a transcendental op (StableHLO's `result_accuracy`, XLA's
    ResultAccuracy): mode "DEFAULT" (the backend's implementation), "HIGHEST" (its most
    accurate one) or "TOLERANCE" (one within atol + rtol * |exact| or `ulps` units in the
    last place of the exact result; at least one of them set)."""
    mode: str = "DEFAULT"
    atol: float = 0.0
    rtol: float = 0.0
    ulps: int = 0

    MODES = ("DEFAULT", "HIGHEST", "TOLERANCE")

    def check(self, op_name: str) -> "ResultAccuracy":
        if self.mode not in self.MODES:
            raise ShapeError(f"{op_name}: result_accuracy.mode must be one of "
                             f"{', '.join(self.MODES)}, got {self.mode!r}")
        tolerances = {"atol": self.atol, "rtol": self.rtol, "ulps": self.ulps}
        for key, value in tolerances.items():
            if not isinstance(value, (int, float, np.integer, np.floating)) or not value >= 0 or (
                    key == "ulps" and int(value) != value):
                raise ShapeError(f"{op_name}: result_accuracy.{key} must be a non-negative "
                                 f"{'integer' if key == 'ulps' else 'number'}, got {value!r}")
        if self.mode == "TOLERANCE" and not any(tolerances.values()):
            raise ShapeError(f"{op_name}: result_accuracy in TOLERANCE mode needs atol, rtol or "
                             f"ulps set (all are 0)")
        if self.mode != "TOLERANCE" and any(tolerances.values()):
            raise ShapeError(f"{op_name}: result_accuracy sets tolerances ({tolerances}) in "
                             f"{self.mode} mode; they count only in TOLERANCE mode")
        return self

    def attribute(self) -> ir.Attribute:
        return stablehlo.ResultAccuracyAttr.get(
            atol=float(self.atol), rtol=float(self.rtol), ulps=int(self.ulps), mode=self.mode,
            context=mlir.context())


# the ops that take a result_accuracy (XlaBuilder's and StableHLO's transcendental ops);
# chlo.erf has no such attribute: its one implementation is CHLO's decomposition
ACCURACY_OPS = ("exp", "expm1", "log", "log1p", "logistic", "rsqrt", "sqrt", "cbrt", "sin",
                "cos", "tan", "tanh", "erf")


def _accuracy_attributes(name, result_accuracy) -> dict | None:
    if result_accuracy is None:
        return None
    if not isinstance(result_accuracy, ResultAccuracy):
        raise ShapeError(f"{name}: result_accuracy must be an hg.ResultAccuracy, got "
                         f"{type(result_accuracy).__name__} {result_accuracy!r}")
    result_accuracy.check(name)
    if result_accuracy.mode == "DEFAULT":  # as jax: the default is no attribute
        return None
    if UNARY[name].mlir.startswith("chlo."):
        if result_accuracy.mode == "TOLERANCE":
            raise UnsupportedError(f"{name}: result_accuracy in TOLERANCE mode: {name} is CHLO's "
                                   f"decomposition on every backend, one implementation whose "
                                   f"error no backend checks against a tolerance")
        return None  # HIGHEST: the one implementation there is
    return {"result_accuracy": result_accuracy.attribute()}


def _unary_op(name, operand, result_accuracy=None):
    row = UNARY[name]
    mlir_name = row.mlir
    et = check_kind(name, "operand", operand, row.kinds)
    attributes = _accuracy_attributes(name, result_accuracy)
    if et.kind == UNSIGNED and name in ("abs", "sign"):
        # XLA: |x| = x and sgn(x) = min(x, 1) for unsigned x; StableHLO has neither.
        return operand if name == "abs" else _binary_op("min", operand, 1, ())
    if et.is_narrow_float and row.narrow_in_f32:
        return Op(operand.builder, semantics.in_f32(operand.builder, mlir_name, operand.shape,
                                                    [operand.value], attributes), operand.shape)
    if name == "population_count":  # s4's 4 bits, in loaded modules too
        return Op(operand.builder, semantics.population_count(operand.builder, operand.shape,
                                                              operand.value), operand.shape)
    result_et = {Result.SAME: et, Result.PRED: T.pred, Result.COMPONENT: et.component}[row.result]
    shape = T.Shape(result_et, operand.shape.dimensions)
    return operand.builder.add_op(mlir_name, shape, [operand], attributes)


# -- Select and Clamp -------------------------------------------------------------------

def select(pred, on_true, on_false):
    """Select(pred, on_true, on_false): elements of on_true where pred is true, else on_false.

    pred is a PRED array of the operands' dimensions or a PRED scalar; tuple
    operands (of equal shapes) need a scalar pred.
    """
    same_builder("select", pred, on_true, on_false)
    array_operand("select", "pred", pred)
    if pred.shape.element_type.kind != PRED:
        raise ShapeError(f"select: pred must have element type pred, got {pred.shape}")
    if on_true.shape != on_false.shape:
        raise ShapeError(f"select: on_true and on_false must have the same shape, got "
                         f"{on_true.shape} and {on_false.shape}")
    if isinstance(on_true.shape, T.TupleShape):
        if pred.shape.rank:
            raise ShapeError(f"select: selecting between tuples {on_true.shape} needs a scalar "
                             f"pred, got {pred.shape}")
        n = len(on_true.shape.elements)
        return make_tuple([select(pred, get_tuple_element(on_true, i), get_tuple_element(on_false, i))
                           for i in range(n)], builder=pred.builder)
    array_operand("select", "on_true", on_true)
    broadcast_shapes_exactly("select", [("pred", pred.shape), ("on_true", on_true.shape),
                                        ("on_false", on_false.shape)], allow_scalar=("pred",))
    return pred.builder.add_op("stablehlo.select", on_true.shape, [pred, on_true, on_false])


def clamp(min, operand, max):  # the spec's argument names
    """Clamp(min, operand, max) = min(max(operand, min), max), element-wise.

    min and max have the operand's shape, or are scalars (Ops or Python numbers)
    of its element type.
    """
    lo, x, hi = as_operands("clamp", min, operand, max)
    for arg, value in (("min", lo), ("operand", x), ("max", hi)):
        array_operand("clamp", arg, value)
    same_element_type("clamp", ("min", lo), ("operand", x), ("max", hi))
    check_kind("clamp", "operand", x, ANY)
    broadcast_shapes_exactly("clamp", [("min", lo.shape), ("operand", x.shape), ("max", hi.shape)],
                             allow_scalar=("min", "max"))
    if x.shape.rank == 0 and (lo.shape.rank or hi.shape.rank):
        raise ShapeError(f"clamp: a scalar operand needs scalar min and max, got "
                         f"min={lo.shape}, operand={x.shape}, max={hi.shape}")
    return x.builder.add_op("stablehlo.clamp", x.shape, [lo, x, hi])


# -- the generated public functions -----------------------------------------------------

def _make_binary(name, spec):
    def op(lhs, rhs, broadcast_dimensions=()):
        return _binary_op(name, lhs, rhs, broadcast_dimensions)
    op.__doc__ = (f"{spec}(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting.\n\n"
                  f"A Python number operand becomes a scalar of the other operand's type.")
    return op


def _make_compare(name, spec, total_order):
    def op(lhs, rhs, broadcast_dimensions=()):
        return _compare(name, lhs, rhs, broadcast_dimensions, total_order)
    order = ("the total order -NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN"
             if total_order else "IEEE 754 comparison for floats")
    op.__doc__ = f"{spec}(lhs, rhs, broadcast_dimensions) -> pred array; {order}."
    return op


def _make_unary(name, spec):
    if name in ACCURACY_OPS:
        def op(operand, result_accuracy=None):
            return _unary_op(name, operand, result_accuracy)
        op.__doc__ = (f"{spec}(operand, result_accuracy=None): applied to each element of "
                      f"operand, as accurately as `result_accuracy` (an hg.ResultAccuracy) asks.")
        return op

    def op(operand):
        return _unary_op(name, operand)
    op.__doc__ = f"{spec}(operand): applied to each element of operand."
    return op


def _publish(name, function):
    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    globals()[name] = function
    __all__.append(name)


__all__ = ["select", "clamp"]
for _name, _row in BINARY_ARITHMETIC.items():
    _publish(_name, _make_binary(_name, _row.spec))
for _name, (_spec, _) in COMPARISONS.items():
    _publish(_name, _make_compare(_name, _spec, False))
    _publish(f"{_name}_total_order", _make_compare(f"{_name}_total_order", f"{_spec}TotalOrder", True))
for _name, _row in UNARY.items():
    _publish(_name, _make_unary(_name, _row.spec))
del _name, _spec, _row
