"""ConvertElementType, BitcastConvertType, ReducePrecision, Iota, Broadcast,
BroadcastInDim, Tuple, GetTupleElement: the spec's examples and numpy references,
on PJRT and on the interpreter."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from hlogen.ops.conversion import bitcast_convert_shape
from tests.helpers import BACKENDS, EVERY_TYPE, bits_equal, run, single_op

ALL_TYPES = EVERY_TYPE  # the narrow new types: tests/test_element_types_narrow.py


# -- ConvertElementType ---------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_convert_example(backend):
    """a: s32[3] = {0, 1, 2}; convert(a, f32) == f32[3]{0.0, 1.0, 2.0}."""
    got = run(single_op(lambda a: ops.convert_element_type(a, hg.f32), hg.s32[3]), backend,
              np.array([0, 1, 2], np.int32))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [0.0, 1.0, 2.0])


def _convertible_values(src, dst):
    """Values exactly representable in both types (conversion of others is implementation-defined)."""
    candidates = [0, 1, 2, 3, 7]
    if src.kind not in ("unsigned", "pred") and dst.kind not in ("unsigned", "pred"):
        candidates += [-1, -7]
    if src.kind == "pred":
        candidates = [0, 1]
    return np.array(candidates).astype(src.dtype)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dst", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("src", ALL_TYPES, ids=lambda t: t.name)
def test_convert_between_every_pair_of_types(src, dst, backend):
    x = _convertible_values(src, dst)
    got = run(single_op(lambda a: ops.convert_element_type(a, dst), hg.Shape(src, x.shape)), backend, x)
    if dst.kind == "pred":
        expected = x != 0
    elif src.kind == "complex" and dst.kind != "complex":
        expected = x.real.astype(dst.dtype)  # XLA keeps the real part
    elif src.is_integer and dst.is_integer:
        expected = x.astype(np.int64).astype(dst.dtype)  # numpy has no int4 <-> uint4 cast
    else:
        expected = x.astype(dst.dtype)
    assert got.dtype == dst.dtype
    np.testing.assert_array_equal(got.astype(np.complex128), expected.astype(np.complex128))


@pytest.mark.parametrize("backend", BACKENDS)
def test_convert_rounds_to_nearest_even(backend):
    # 1 + 2**-8 lies halfway between two bf16 values; 1 + 3 * 2**-8 too.
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), 1e39, -1e39], np.float64)
    got = run(single_op(lambda a: ops.convert_element_type(a, hg.bf16), hg.f64[5]), backend, x)
    with np.errstate(over="ignore"):
        expected = x.astype(ml_dtypes.bfloat16)
    assert bits_equal(got, expected)


# -- BitcastConvertType ---------------------------------------------------------------------

@pytest.mark.parametrize("dims,src,dst,result", [
    ((10,), hg.f32, hg.f16, (10, 2)),      # the spec's f32[10] -> f16[10,2]
    ((), hg.f32, hg.f16, (2,)),            # f32[] -> f16[2]
    ((10, 2), hg.f16, hg.f32, (10,)),      # f16[10,2] -> f32[10]
    ((3,), hg.s32, hg.s8, (3, 4)),         # one s32 becomes four s8
    ((2, 3), hg.u32, hg.f32, (2, 3)),      # equal widths keep the dimensions
])
def test_spec_bitcast_shapes(dims, src, dst, result):
    assert bitcast_convert_shape(hg.Shape(src, dims), dst) == hg.Shape(dst, result)


BITCAST_PAIRS = [(hg.f32, hg.s32), (hg.f32, hg.u32), (hg.f64, hg.s64), (hg.f16, hg.s16),
                 (hg.bf16, hg.u16), (hg.s8, hg.u8), (hg.f8e4m3fn, hg.s8), (hg.f32, hg.f16),
                 (hg.f64, hg.f32), (hg.s32, hg.u8), (hg.f16, hg.f32), (hg.u8, hg.s64)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("src,dst", BITCAST_PAIRS, ids=lambda t: t.name)
def test_bitcast_matches_numpy_views(src, dst, backend):
    rng = np.random.default_rng(0)
    n_src = max(1, dst.bits // src.bits)
    raw = rng.integers(0, 256, size=4 * n_src * src.bits // 8, dtype=np.uint8)
    x = raw.view(src.dtype).reshape((4, n_src) if n_src > 1 else (4,))
    if src.kind == "float":  # NaN payloads need not survive: keep the floats finite
        x = np.where(np.isfinite(x.astype(np.float64)), x, np.zeros((), src.dtype)).astype(src.dtype)
    comp = single_op(lambda a: ops.bitcast_convert_type(a, dst), hg.Shape(src, x.shape))
    got = run(comp, backend, x)
    expected = np.ascontiguousarray(x).view(dst.dtype)  # little-endian: the minor part first
    expected = expected.reshape(4, -1) if src.bits > dst.bits else expected.reshape(4)
    assert bits_equal(got, expected), (got, expected)


def test_bitcast_errors():
    b = hg.Builder("bitcast_errors")
    x = b.parameter(hg.f32[10], "x")
    with pytest.raises(hg.ShapeError, match=r"needs a minor dimension of size 2"):
        ops.bitcast_convert_type(x, hg.f64)
    with pytest.raises(hg.ShapeError, match=r"pred and complex"):
        ops.bitcast_convert_type(x, hg.pred)
    with pytest.raises(hg.ShapeError, match=r"pred and complex"):
        ops.bitcast_convert_type(b.parameter(hg.c64[2], "c"), hg.f64)


# -- ReducePrecision ------------------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("exponent_bits,mantissa_bits,narrow", [
    (5, 10, np.float16), (8, 7, ml_dtypes.bfloat16)], ids=["f16", "bf16"])
def test_reduce_precision_rounds_like_the_narrow_type(exponent_bits, mantissa_bits, narrow, backend):
    x = np.array([1.0, 1 + 2**-11, 1 + 3 * 2**-11, 3.14159, -2.71828, 1e-3, 65519.0, 70000.0,
                  -1e6, 0.0, -0.0, np.inf, -np.inf], np.float32)
    comp = single_op(lambda a: ops.reduce_precision(a, exponent_bits=exponent_bits,
                                                     mantissa_bits=mantissa_bits), hg.f32[13])
    got = run(comp, backend, x)
    with np.errstate(over="ignore"):
        expected = x.astype(narrow).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def test_reduce_precision_errors():
    b = hg.Builder("rp")
    with pytest.raises(hg.ShapeError, match=r"exponent_bits=0 must be an integer in \[1, 2\*\*31\)"):
        ops.reduce_precision(b.parameter(hg.f32[2], "x"), exponent_bits=0, mantissa_bits=3)
    with pytest.raises(hg.ShapeError, match=r"takes floating-point"):
        ops.reduce_precision(b.parameter(hg.s32[2], "i"), exponent_bits=5, mantissa_bits=3)


# -- Iota, Broadcast, BroadcastInDim ----------------------------------------------------------

def _no_parameters(make):
    b = hg.Builder("nullary")
    return b.build(make(b))


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_iota_examples(backend):
    got = run(_no_parameters(lambda b: ops.iota(b, hg.s32[4, 8], 0)), backend)
    np.testing.assert_array_equal(got, np.repeat(np.arange(4), 8).reshape(4, 8))
    got = run(_no_parameters(lambda b: ops.iota(b, hg.s32[4, 8], 1)), backend)
    np.testing.assert_array_equal(got, np.tile(np.arange(8), (4, 1)))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("et", [hg.f32, hg.bf16, hg.u8, hg.s64, hg.f64], ids=lambda t: t.name)
def test_iota_of_other_types_converts_the_integer_iota(et, backend):
    got = run(_no_parameters(lambda b: ops.iota(b, hg.Shape(et, (2, 5)), 1)), backend)
    np.testing.assert_array_equal(got, np.tile(np.arange(5), (2, 1)).astype(et.dtype))


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_broadcast_example(backend):
    """Broadcast of the f32 scalar 2.0 with broadcast_sizes {2, 3}: f32[2, 3] of 2.0."""
    comp = single_op(lambda s: ops.broadcast(s, [2, 3]), hg.f32[()])
    got = run(comp, backend, np.float32(2.0))
    assert got.shape == (2, 3) and (got == 2.0).all()
    comp = single_op(lambda v: ops.broadcast(v, [2]), hg.s32[3])
    np.testing.assert_array_equal(run(comp, backend, np.arange(3, dtype=np.int32)), [[0, 1, 2]] * 2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shape,out,dims", [
    ((3,), (2, 3), (1,)), ((3,), (3, 2), (0,)), ((1, 3), (4, 3), (0, 1)),
    ((2, 1), (2, 5, 3), (0, 2)), ((), (2, 2), ()), ((3, 2), (2, 4, 3), (2, 0))])
def test_broadcast_in_dim_matches_numpy(shape, out, dims, backend):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    comp = single_op(lambda a: ops.broadcast_in_dim(a, out, dims), hg.Shape(hg.f32, shape))
    # numpy: put operand dimension i at output dimension dims[i], then broadcast.
    order = np.argsort(dims)
    aligned = np.transpose(x, order) if x.ndim else x
    expanded = aligned.reshape([shape[order[list(np.sort(dims)).index(d)]] if d in dims else 1
                                for d in range(len(out))])
    np.testing.assert_array_equal(run(comp, backend, x), np.broadcast_to(expanded, out))



def test_broadcast_in_dim_takes_any_sequence_of_integers():
    x = np.arange(3, dtype=np.float32)
    for dims in (np.array([1]), (d for d in [1])):  # numpy integers; a one-shot iterator
        comp = single_op(lambda a: ops.broadcast_in_dim(a, [2, 3], dims), hg.f32[3])
        np.testing.assert_array_equal(run(comp, "cpu", x), np.broadcast_to(x, (2, 3)))

def test_broadcast_in_dim_errors():
    x = hg.Builder("bid").parameter(hg.f32[3], "x")
    with pytest.raises(hg.ShapeError, match=r"one entry per operand dimension"):
        ops.broadcast_in_dim(x, [2, 3], [0, 1])
    with pytest.raises(hg.ShapeError, match=r"must be 1 or equal to output dimension 0 \(size 2\)"):
        ops.broadcast_in_dim(x, [2, 3], [0])
    with pytest.raises(hg.ShapeError, match=r"out of range"):
        ops.broadcast_in_dim(x, [2, 3], [2])
    with pytest.raises(hg.ShapeError, match=r"non-negative"):
        ops.broadcast(x, [-1])
    with pytest.raises(hg.ShapeError, match=r"iota_dimension=2 must be a dimension number in \[0, 2\)"):
        ops.iota(x.builder, hg.s32[2, 2], 2)


# -- Tuple and GetTupleElement ----------------------------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_tuple_example(backend):
    """t = tuple(v, s); gettupleelement(t, 1) is s, of the inferred shape s32."""
    b = hg.Builder("tuples")
    v = b.parameter(hg.f32[10], "v")
    s = b.parameter(hg.s32[()], "s")
    t = ops.tuple([v, s])
    element_1 = ops.get_tuple_element(t, 1)
    assert t.shape == hg.tuple_shape(hg.f32[10], hg.s32[()])
    assert element_1.shape == hg.s32[()]
    comp = b.build(element_1, t)
    got_s, (got_v, got_s2) = run(comp, backend, np.arange(10, dtype=np.float32), np.int32(5))
    assert got_s == 5 and got_s2 == 5
    np.testing.assert_array_equal(got_v, np.arange(10))


def test_tuple_errors():
    b = hg.Builder("tuple_errors")
    x = b.parameter(hg.f32[2], "x")
    with pytest.raises(hg.ShapeError, match=r"get_tuple_element: tuple_data must be a tuple"):
        ops.get_tuple_element(x, 0)
    with pytest.raises(hg.ShapeError, match=r"index=2 must be in \[0, 1\)"):
        ops.get_tuple_element(ops.tuple([x]), 2)
    with pytest.raises(hg.ShapeError, match=r"empty tuple needs builder="):
        ops.tuple([])
    assert ops.tuple([], builder=b).shape == hg.tuple_shape()
