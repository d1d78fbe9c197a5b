"""The narrow element types beyond f8e4m3fn, f8e5m2 and s4/u4: f8e4m3, f8e3m4, the fnuz
f8 types, f8e8m0fnu, f4e2m1fn, the f6 types and the 2-bit integers.

Every value of each type goes through element-wise ops, conversions and bitcasts on
both backends, against ml_dtypes/numpy references (computed in float64, rounded once
to the type: exact for +, -, *, / of these types). What a backend cannot run is
refused before native code, as each backend's declaration says (hlogen.backends)."""
from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests import references as R
from tests.helpers import (BACKENDS, NARROW_TYPES, WRONG_TYPES, assert_close, bits_equal, run,
                           single_op)
from tests.ulp import ulp_distance

NEW_TYPES = {  # XLA name: (MLIR name, ml_dtypes type)
    "f8e4m3": ("f8E4M3", ml_dtypes.float8_e4m3),
    "f8e3m4": ("f8E3M4", ml_dtypes.float8_e3m4),
    "f8e4m3fnuz": ("f8E4M3FNUZ", ml_dtypes.float8_e4m3fnuz),
    "f8e5m2fnuz": ("f8E5M2FNUZ", ml_dtypes.float8_e5m2fnuz),
    "f8e4m3b11fnuz": ("f8E4M3B11FNUZ", ml_dtypes.float8_e4m3b11fnuz),
    "f8e8m0fnu": ("f8E8M0FNU", ml_dtypes.float8_e8m0fnu),
    "f4e2m1fn": ("f4E2M1FN", ml_dtypes.float4_e2m1fn),
    "f6e2m3fn": ("f6E2M3FN", ml_dtypes.float6_e2m3fn),
    "f6e3m2fn": ("f6E3M2FN", ml_dtypes.float6_e3m2fn),
    "s2": ("i2", ml_dtypes.int2),
    "u2": ("ui2", ml_dtypes.uint2),
}
TYPES = [hg.ELEMENT_TYPES[name] for name in NARROW_TYPES]


def _limit(et, backend):
    return et.name in WRONG_TYPES[backend] or None


# (type, backend) pairs a backend runs; the others are refused (test_refused_...)
RUNS = [pytest.param(et, backend, id=f"{et.name}-{backend}")
        for et in TYPES for backend in BACKENDS if _limit(et, backend) is None]
REFUSED = [pytest.param(et, backend, id=f"{et.name}-{backend}")
           for et in TYPES for backend in BACKENDS if _limit(et, backend) is not None]

# XLA CPU flushes f32 subnormals to zero, and f8e8m0fnu's smallest value 2**-127 is one:
# arithmetic on it gives NaN (the type has no zero). The known deviation of
# tests/test_subnormals.py; the other values are compared here.
_E8M0_SMALLEST = 0x00


def every_value(et) -> np.ndarray:
    """Every value of `et` (each bit pattern, for floats)."""
    if et.is_integer:
        info = ml_dtypes.iinfo(et.dtype)
        return np.arange(info.min, info.max + 1).astype(et.dtype)
    bits = np.arange(1 << et.bits, dtype=np.uint8)
    if et.name == "f8e8m0fnu":
        bits = bits[bits != _E8M0_SMALLEST]
    return bits.view(et.dtype)


def every_pair(et):
    v = every_value(et)
    lhs, rhs = np.repeat(v, len(v)), np.tile(v, len(v))
    return (lhs[::7], rhs[::7]) if len(lhs) > 4096 else (lhs, rhs)  # every 7th: all rows


def same_values(got, want, context="", backend=None):
    """Equal values (NaN equals NaN), of the same dtype and shape. On XLA CPU,
    f8e8m0fnu results of 2**-127 (an f32 subnormal, flushed) are NaN instead."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, context
    if backend == "cpu" and want.dtype == hg.f8e8m0fnu.dtype:
        flushed = want.astype(np.float64) == 2.0 ** -127
        assert np.isnan(got[flushed].astype(np.float64)).all(), context
        got, want = got[~flushed], want[~flushed]
    assert_close(got, want, None, context=context)


# -- the table ------------------------------------------------------------------------

@pytest.mark.parametrize("name", NARROW_TYPES)
def test_each_type_is_one_entry_of_the_table(name):
    mlir_name, dtype = NEW_TYPES[name]
    et = hg.ELEMENT_TYPES[name]
    assert getattr(hg, name) is et and name in hg.__all__
    assert et.mlir == mlir_name and et.dtype == np.dtype(dtype)
    assert hg.element_type(mlir_name) is et and hg.element_type(dtype) is et
    b = hg.Builder("param")
    comp = b.build(b.parameter(hg.Shape(et, (2,)), "x"))
    assert f"tensor<2x{mlir_name}>" in comp.as_text()
    assert hg.load(comp.as_text()).parameter_shapes == [hg.Shape(et, (2,))]


def test_values_a_type_cannot_hold_are_refused():
    for et, value in [(hg.f8e8m0fnu, 0.0), (hg.f8e8m0fnu, -1.0),  # no zero, no sign
                      (hg.f4e2m1fn, 7.5), (hg.f4e2m1fn, np.inf), (hg.f4e2m1fn, np.nan),
                      (hg.f6e3m2fn, 31.0), (hg.f8e4m3fnuz, np.inf), (hg.s2, 2), (hg.u2, 4)]:
        with pytest.raises(hg.ShapeError, match=f"not representable as {et.name}"):
            hg.Builder("c").constant(value, et)
    # rounding is not overflow: 6.9 is f4's 6, 460 is f8e4m3fn's 448
    assert hg.types.as_array(6.9, hg.f4e2m1fn) == 6.0
    assert hg.types.as_array(460.0, hg.f8e4m3fn) == 448.0


@pytest.mark.parametrize("et,backend", RUNS)
def test_constants_of_every_value(et, backend):
    v = every_value(et)
    b = hg.Builder("constants")
    got, splat = run(b.build(b.constant(v), b.constant(np.repeat(v[-1:], 3))), backend)
    assert bits_equal(got, v) and bits_equal(splat, np.repeat(v[-1:], 3))


# -- element-wise ops -------------------------------------------------------------------

BINARY = ["add", "sub", "mul", "div", "max", "min", "atan2"]
UNARY = ["neg", "abs", "sign", "floor", "ceil", "round", "round_nearest_even", "sqrt",
         "is_finite"]
INTEGER_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "and_", "or_", "xor",
                  "shift_left", "shift_right_arithmetic", "shift_right_logical"]
INTEGER_UNARY = ["neg", "abs", "sign", "not_", "clz", "population_count"]


@pytest.mark.parametrize("et,backend", RUNS)
def test_binary_ops_on_every_pair_of_values(et, backend):
    lhs, rhs = every_pair(et)
    shape = hg.Shape(et, lhs.shape)
    for name in INTEGER_BINARY if et.is_integer else BINARY:
        int_ref, float_ref, _, _ = R.BINARY[name]
        got = run(single_op(getattr(ops, name), shape, shape), backend, lhs, rhs)
        same_values(got, (int_ref if et.is_integer else float_ref)(lhs, rhs, et),
                    f"{et.name} {name}", backend)


@pytest.mark.parametrize("et,backend", RUNS)
def test_unary_ops_on_every_value(et, backend):
    v = every_value(et)
    for name in INTEGER_UNARY if et.is_integer else UNARY:
        if name == "neg" and et.name == "f8e8m0fnu":
            continue  # no negative values: NaN everywhere, compared below
        int_ref, float_ref, _ = R.UNARY[name]
        got = run(single_op(getattr(ops, name), hg.Shape(et, v.shape)), backend, v)
        same_values(got, (int_ref if et.is_integer else float_ref)(v, et),
                    f"{et.name} {name}", backend)


@pytest.mark.parametrize("et,backend", [p for p in RUNS if p.values[0].kind == "float"])
def test_transcendental_functions_round_once_from_f32(et, backend):
    """XLA computes them in f32: the reference is numpy's f32 function rounded to the
    type, within one ulp of the type (libm and XLA's f32 functions differ by f32 ulps)."""
    v = every_value(et)
    if et.name == "f8e8m0fnu" and backend == "cpu":  # flushed near f32's subnormals
        v = v[v.astype(np.float64) > 2.0 ** -100]
    for name, fn in [("exp", np.exp), ("log", np.log), ("tanh", np.tanh), ("erf", R._erf)]:
        with np.errstate(all="ignore"):
            want = np.asarray(fn(v.astype(np.float32))).astype(np.float32).astype(et.dtype)
        got = run(single_op(getattr(ops, name), hg.Shape(et, v.shape)), backend, v)
        distance = ulp_distance(got, want)
        assert (distance <= 1).all(), (name, v[distance > 1], got[distance > 1])


@pytest.mark.parametrize("et,backend", RUNS)
def test_comparisons_on_every_pair_of_values(et, backend):
    lhs, rhs = every_pair(et)
    shape = hg.Shape(et, lhs.shape)
    widen = np.int64 if et.is_integer else np.float64
    for name in ("eq", "ne", "lt", "ge"):
        got = run(single_op(getattr(ops, name), shape, shape), backend, lhs, rhs)
        np.testing.assert_array_equal(got, R.COMPARE[name](lhs.astype(widen), rhs.astype(widen)))


def _total_order_key(bits: int, et) -> int:
    """XLA's total order of a float's bits: sign-magnitude with -0 < +0; without -0
    (fnuz) the NaN, whose bits are the sign bit, orders first; without a sign
    (f8e8m0fnu) the bits order as they are."""
    sign = 1 << (et.bits - 1)
    magnitude = bits & (sign - 1)
    if et.name == "f8e8m0fnu":
        return bits
    if et.name.endswith("fnuz"):
        return -sign if bits == sign else (-magnitude if bits & sign else magnitude)
    return -magnitude - 1 if bits & sign else magnitude


@pytest.mark.parametrize("et,backend", [p for p in RUNS if p.values[0].kind == "float"])
def test_total_order_on_every_pair_of_bit_patterns(et, backend):
    bits = np.arange(1 << et.bits, dtype=np.uint8)
    lhs, rhs = np.repeat(bits, len(bits)), np.tile(bits, len(bits))
    shape = hg.Shape(et, lhs.shape)
    got = run(single_op(ops.lt_total_order, shape, shape), backend,
              lhs.view(et.dtype), rhs.view(et.dtype))
    keys = np.array([_total_order_key(int(b), et) for b in bits])
    np.testing.assert_array_equal(got, keys[lhs] < keys[rhs])


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_bit_integers_wrap_like_the_spec_example(backend):
    """StableHLO's add example for i2: [1, 0, -1, -2] + [-1, 1, 1, 1] = [0, 1, 0, -1]."""
    comp = single_op(ops.add, hg.s2[4], hg.s2[4])
    got = run(comp, backend, np.array([1, 0, -1, -2], ml_dtypes.int2),
              np.array([-1, 1, 1, 1], ml_dtypes.int2))
    same_values(got, np.array([0, 1, 0, -1], ml_dtypes.int2))


def test_e8m0_smallest_value_is_flushed_by_xla_cpu():
    """The known deviation: 2**-127 is an f32 subnormal, so XLA CPU's 2**-127 * 2 is
    0 * 2, which f8e8m0fnu holds as NaN (the interpreter refuses this type)."""
    x = np.array([2.0 ** -127, 1.0], ml_dtypes.float8_e8m0fnu)
    got = run(single_op(lambda a: ops.mul(a, a), hg.f8e8m0fnu[2]), "cpu", x)
    assert np.isnan(float(got[0])) and float(got[1]) == 1.0


# -- conversions and bitcasts -----------------------------------------------------------

WIDE = [hg.f32, hg.f64, hg.f16, hg.bf16, hg.f8e4m3fn, hg.s32]


def _to(values, et):
    """numpy's conversion (through int64 for integers, float64 for floats)."""
    wide = np.int64 if hg.element_type(values.dtype).is_integer else np.float64
    with np.errstate(all="ignore"):
        values = values.astype(wide)
        return (values.astype(np.int64) if et.is_integer else values).astype(et.dtype)


@pytest.mark.parametrize("et,backend", RUNS)
def test_conversions_of_every_value(et, backend):
    """To wider types and back (rounding again where the wider type lost something)."""
    v = every_value(et)
    for wide in WIDE:
        x = v
        if wide.is_integer and not et.is_integer:  # NaN and beyond: implementation-defined
            x = v[np.abs(v.astype(np.float64)) < 2.0 ** 31]
        got = run(single_op(lambda a: ops.convert_element_type(a, wide), hg.Shape(et, x.shape)),
                  backend, x)
        same_values(got, _to(x, wide), f"{et.name} -> {wide.name}", backend)
        got = run(single_op(lambda a: ops.convert_element_type(a, et), hg.Shape(wide, x.shape)),
                  backend, _to(x, wide))
        same_values(got, _to(_to(x, wide), et), f"{wide.name} -> {et.name}", backend)


@pytest.mark.parametrize("et,backend", [p for p in RUNS if p.values[0].kind == "float"])
def test_conversion_from_f32_rounds_to_nearest_even_and_saturates_or_overflows(et, backend):
    x = np.array([0.3, -0.7, 1e6, -1e6, 1e-9, 2.75, 3.3, np.inf, -np.inf, np.nan], np.float32)
    got = run(single_op(lambda a: ops.convert_element_type(a, et), hg.f32[10]), backend, x)
    same_values(got, _to(x, et))


def test_f4_largest_value_converts_to_an_integer():
    """XLA CPU's own f4 -> s32 conversion gives 6.0 as INT_MAX; hlogen converts through
    f32 (on XLA CPU: the interpreter refuses f4)."""
    x = np.array([6.0, -6.0, 4.0, -0.5], ml_dtypes.float4_e2m1fn)
    got = run(single_op(lambda a: ops.convert_element_type(a, hg.s32), hg.f4e2m1fn[4]), "cpu", x)
    same_values(got, np.array([6, -6, 4, 0], np.int32))


ROUNDING_E3M4 = """func.func @main(%y: tensor<4xf8E3M4>) -> (tensor<4xf8E3M4>, tensor<4xf8E3M4>) {
  %0 = stablehlo.floor %y : tensor<4xf8E3M4>
  %1 = stablehlo.round_nearest_even %y : tensor<4xf8E3M4>
  return %0, %1 : tensor<4xf8E3M4>, tensor<4xf8E3M4>
}"""
F4_TO_I32 = """func.func @main(%x: tensor<4xf4E2M1FN>) -> tensor<4xi32> {
  %0 = stablehlo.convert %x : (tensor<4xf4E2M1FN>) -> tensor<4xi32>
  return %0 : tensor<4xi32>
}"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_loaded_modules_get_the_same_narrow_float_semantics(backend):
    """f8e3m4's rounding in f32 (the interpreter: NaN otherwise) and f4 -> integer
    through f32 (XLA CPU: 6.0 -> INT_MAX otherwise; the interpreter refuses f4), in
    modules hlogen did not build."""
    y = np.array([1.5, -2.25, 7.75, 0.5], ml_dtypes.float8_e3m4)
    floor, even = run(hg.load(ROUNDING_E3M4), backend, y)
    same_values(floor, np.floor(y.astype(np.float64)).astype(y.dtype))
    same_values(even, np.rint(y.astype(np.float64)).astype(y.dtype))
    if backend == "cpu":
        x = np.array([6.0, -6.0, 4.0, 1.5], ml_dtypes.float4_e2m1fn)
        same_values(run(hg.load(F4_TO_I32), backend, x), np.array([6, -6, 4, 1], np.int32))


def _same_width_types(et):
    return [t for t in hg.ELEMENT_TYPES.values()
            if t is not et and t.bits == et.bits and t.kind not in ("pred", "complex")]


@pytest.mark.parametrize("et,backend", RUNS)
def test_bitcasts_to_and_from_every_type_of_the_same_width(et, backend):
    """Bit patterns (ml_dtypes keeps a sub-byte value in a byte's low bits)."""
    v = every_value(et)
    mask = (1 << et.bits) - 1
    for other in _same_width_types(et):
        if _limit(other, backend):
            continue
        got = run(single_op(lambda a: ops.bitcast_convert_type(a, other), hg.Shape(et, v.shape)),
                  backend, v)
        assert got.dtype == other.dtype
        assert np.array_equal(got.view(np.uint8) & mask, v.view(np.uint8) & mask), other
        back = run(single_op(lambda a: ops.bitcast_convert_type(a, et),
                             hg.Shape(other, got.shape)), backend, got)
        assert bits_equal(back.view(np.uint8) & mask, v.view(np.uint8) & mask), other


@pytest.mark.parametrize("backend", BACKENDS)
def test_bitcasts_between_widths_pack_little_endian(backend):
    """The first element is the least significant part, sub-byte ones too."""
    x = np.arange(8, dtype=np.uint8).view(ml_dtypes.float8_e4m3fnuz).reshape(4, 2)
    got = run(single_op(lambda a: ops.bitcast_convert_type(a, hg.u16), hg.f8e4m3fnuz[4, 2]),
              backend, x)
    assert bits_equal(got, x.view(np.uint16).reshape(4))
    crumbs = np.array([[0, 1, -2, -1], [1, 1, 0, -2]], ml_dtypes.int2)  # 2-bit: 0,1,2,3 / 1,1,0,2
    got = run(single_op(lambda a: ops.bitcast_convert_type(a, hg.u8), hg.s2[2, 4]), backend, crumbs)
    same_values(got, np.array([0 | 1 << 2 | 2 << 4 | 3 << 6, 1 | 1 << 2 | 0 << 4 | 2 << 6], np.uint8))
    back = run(single_op(lambda a: ops.bitcast_convert_type(a, hg.s2), hg.u8[2]), backend, got)
    same_values(back, crumbs)


def test_bitcasts_between_widths_that_do_not_divide_are_refused():
    b = hg.Builder("bitcast")
    for shape, et in [(hg.f6e2m3fn[4], hg.u8), (hg.u8[4], hg.f6e3m2fn), (hg.f6e2m3fn[4], hg.s4)]:
        with pytest.raises(hg.ShapeError, match="one width must be a multiple of the other"):
            ops.bitcast_convert_type(b.parameter(shape), et)


@pytest.mark.parametrize("et,backend", RUNS)
def test_sort_and_select(et, backend):
    v = every_value(et)
    if not et.is_integer:
        v = v[~np.isnan(v.astype(np.float64))]
    mask = np.arange(len(v)) % 2 == 0
    got = run(single_op(ops.select, hg.Shape(hg.pred, v.shape), hg.Shape(et, v.shape),
                        hg.Shape(et, v.shape)), backend, mask, v, v[::-1].copy())
    same_values(got, np.where(mask, v, v[::-1]))
    if et.bits == 2 and backend == "cpu":
        with pytest.raises(hg.UnsupportedError, match=f"XLA CPU sorts wrongly {et.name} values"):
            run(single_op(ops.sort, hg.Shape(et, v.shape)), backend, v[::-1].copy())
        return
    got = run(single_op(ops.sort, hg.Shape(et, v.shape)), backend, v[::-1].copy())
    widen = np.int64 if et.is_integer else np.float64
    np.testing.assert_array_equal(got.astype(widen), np.sort(v.astype(widen)))


@pytest.mark.parametrize("et,backend", [p for p in RUNS if p.values[0].bits < 8])
def test_concatenate_of_sub_byte_types(et, backend):
    """XLA CPU ends the process on a concatenation of 2-bit values: refused there."""
    x = every_value(et)[:4].reshape(2, 2)
    comp = single_op(lambda a: ops.concatenate([a, a], 0), hg.Shape(et, (2, 2)))
    if et.bits == 2 and backend == "cpu":
        with pytest.raises(hg.UnsupportedError, match="ends the process"):
            run(comp, backend, x)
        return
    same_values(run(comp, backend, x), np.concatenate([x, x], 0))


# -- what a backend cannot run -----------------------------------------------------------

@pytest.mark.parametrize("et,backend", REFUSED)
def test_refused_before_native_code(et, backend):
    """A constant of the type (XLA CPU ends the process on an f6 one) and a parameter."""
    b = hg.Builder("refused")
    comp = b.build(b.constant(np.array([1.0, 2.0], et.dtype)))
    why = {"cpu": "XLA CPU has no f6 types", "interpret": "the reference interpreter"}[backend]
    with pytest.raises(hg.UnsupportedError, match=f"cannot run {et.name}.*: {why}"):
        run(comp, backend)
    with pytest.raises(hg.UnsupportedError, match=f"cannot run {et.name}"):
        run(single_op(lambda a: ops.convert_element_type(a, hg.f32), hg.Shape(et, (2,))),
            backend, np.ones(2, et.dtype))


def test_random_bits_of_a_width_no_integer_has_are_refused():
    b = hg.Builder("bits")
    state = b.parameter(hg.u64[2], "state")
    with pytest.raises(hg.ShapeError, match="no integer type has the 6 bits of f6e2m3fn"):
        ops.rng_bit_generator("THREE_FRY", state, hg.f6e2m3fn[4])


@pytest.mark.parametrize("et", [hg.s2, hg.u2, hg.f4e2m1fn, hg.f8e4m3fnuz])
def test_random_bits_of_narrow_types_agree_on_both_backends(et):
    """The same bits on XLA CPU and the interpreter; where the interpreter refuses the
    type (f4), its bits are those of u4, the unsigned type of its width."""
    def bits(of, backend):
        b = hg.Builder("bits")
        _, data = ops.rng_bit_generator("THREE_FRY", b.parameter(hg.u64[2], "state"),
                                        hg.Shape(of, (64,)))
        return run(b.build(data), backend, np.array([1, 2], np.uint64)).view(np.uint8)

    got = bits(et, "cpu")
    want = bits(hg.u4 if _limit(et, "interpret") else et, "interpret")
    assert bits_equal(got, want), (got, want)
    assert len(np.unique(got)) > 1
