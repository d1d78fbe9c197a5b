"""ConvertElementType, BitcastConvertType, ReducePrecision."""
from __future__ import annotations

from hlogen import semantics
from hlogen import types as T
from hlogen.builder import Op
from hlogen.errors import ShapeError
from hlogen.ops._common import COMPLEX, FLOAT, PRED, array_operand, check_kind


def convert_element_type(operand, new_element_type):
    """ConvertElementType: an element-wise static_cast to `new_element_type`.

    Complex to real keeps the real part (as XLA does); anything to pred is x != 0.
    """
    shape = array_operand("convert_element_type", "operand", operand)
    et = T.element_type(new_element_type)
    if shape.element_type.kind == COMPLEX and et.kind != COMPLEX:
        operand = operand.builder.add_op(  # Real (elementwise.py, which builds on this module)
            "stablehlo.real", shape.with_element_type(shape.element_type.component), [operand])
    result = shape.with_element_type(et)
    value = semantics.convert(operand.builder, result, operand.value, operand.shape.element_type)
    return Op(operand.builder, value, result)


def bitcast_convert_shape(shape: T.Shape, new_element_type) -> T.Shape:
    """The result shape of BitcastConvertType (spec: bitcasting between widths).

    Equal widths keep the dimensions; a narrower result type adds a minor
    dimension of size B/B'; a wider one requires the minor dimension to be B'/B
    and drops it.
    """
    et = T.element_type(new_element_type)
    old = shape.element_type
    for t in (old, et):
        if t.kind in (PRED, COMPLEX):
            raise ShapeError(f"bitcast_convert_type: cannot bitcast {shape} to {et.name}: "
                             f"pred and complex types have no bit layout XLA defines")
    if old.bits == et.bits:
        return T.Shape(et, shape.dimensions)
    if max(old.bits, et.bits) % min(old.bits, et.bits):  # f6 and 8-bit types
        raise ShapeError(f"bitcast_convert_type: cannot bitcast {shape} to {et.name}: one "
                         f"width must be a multiple of the other ({old.bits} and {et.bits} bits)")
    if old.bits > et.bits:
        return T.Shape(et, shape.dimensions + (old.bits // et.bits,))
    ratio = et.bits // old.bits
    if not shape.dimensions or shape.dimensions[-1] != ratio:
        raise ShapeError(f"bitcast_convert_type: bitcasting {shape} to the wider {et.name} needs "
                         f"a minor dimension of size {ratio} ({et.bits}/{old.bits} bits), "
                         f"which the conversion drops")
    return T.Shape(et, shape.dimensions[:-1])


def bitcast_convert_type(operand, new_element_type):
    """BitcastConvertType: reinterprets the bits of each element as `new_element_type`."""
    shape = array_operand("bitcast_convert_type", "operand", operand)
    result = bitcast_convert_shape(shape, new_element_type)
    return operand.builder.add_op("stablehlo.bitcast_convert", result, [operand])


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """ReducePrecision: rounds to a float format with the given exponent and mantissa
    bits (round to nearest even), overflowing to +-Inf, and back; NaN stays NaN.
    Call with keywords."""
    check_kind("reduce_precision", "operand", operand, {FLOAT})
    # the attributes are 32-bit integers
    for name, value, least in (("exponent_bits", exponent_bits, 1), ("mantissa_bits", mantissa_bits, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 2**31:
            raise ShapeError(f"reduce_precision: {name}={value!r} must be an integer in "
                             f"[{least}, 2**31) (operand {operand.shape})")
    # the function that also rewrites reduce_precision in loaded modules
    value = semantics.reduce_precision(operand.builder, operand.shape, operand.value,
                                       exponent_bits, mantissa_bits)
    return Op(operand.builder, value, operand.shape)
