"""Element-wise ops of the spec, as @hg.function definitions.

    hlogen emit samples/elementwise.py -o out/
    hlogen run samples/elementwise.py --function integer_division \
        --input 4xs32=7,-7,-2147483648,5 --input 4xs32=2,0,-1,0
"""
import hlogen as hg
from hlogen import ops


@hg.function
def gelu_like(x: hg.f32[8]):
    """x * 0.5 * (1 + erf(x / sqrt 2)): Erf legalized from CHLO, scalars as numbers."""
    return ops.mul(ops.mul(x, 0.5), ops.add(ops.erf(ops.mul(x, 0.7071067811865476)), 1.0))


@hg.function
def integer_division(a: hg.s32[4], b: hg.s32[4]):
    """XLA's integer Div and Rem: x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN."""
    return ops.div(a, b), ops.rem(a, b)


@hg.function
def shifts(a: hg.s8[4], n: hg.s8[4]):
    """Shifts by the bit width or more: 0, or the sign for ShiftRightArithmetic."""
    return ops.shift_left(a, n), ops.shift_right_arithmetic(a, n), ops.shift_right_logical(a, n)


@hg.function
def total_order(a: hg.f32[4], b: hg.f32[4]):
    """-NaN < -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN, next to IEEE's Lt."""
    return ops.lt_total_order(a, b), ops.lt(a, b)


@hg.function
def rounding(x: hg.f32[6]):
    """Round (ties away from zero) and RoundNearestEven; Sign keeps -0 and NaN."""
    return ops.round(x), ops.round_nearest_even(x), ops.sign(x)


@hg.function
def bits(x: hg.u32[3]):
    """Clz and PopulationCount, and the bits of the floats a u32 holds."""
    return ops.clz(x), ops.population_count(x), ops.bitcast_convert_type(x, hg.f32)


@hg.function
def clamp_and_select(x: hg.f32[5], lo: hg.f32[()], hi: hg.f32[()]):
    """Clamp with scalar bounds; Select with an array pred."""
    clamped = ops.clamp(lo, x, hi)
    return ops.select(ops.is_finite(x), clamped, ops.broadcast(lo, [5]))


@hg.function
def complex_parts(re: hg.f32[3], im: hg.f32[3]):
    """Complex, Abs of a complex (a real result), Real and Imag."""
    z = ops.complex(re, im)
    return ops.abs(z), ops.real(ops.mul(z, z)), ops.imag(ops.mul(z, z))


@hg.function
def bf16_precision(x: hg.f32[4]):
    """ConvertElementType to bf16 and back, and the same rounding with ReducePrecision."""
    narrowed = ops.convert_element_type(ops.convert_element_type(x, hg.bf16), hg.f32)
    return narrowed, ops.reduce_precision(x, exponent_bits=8, mantissa_bits=7)
