"""tests/spec_reference_linalg.py against the specs' worked examples, hand computations,
identities, and (for the convolution) jax.lax.conv_general_dilated as an independent second
implementation.

"XLA" examples come from spec/operation-semantics.zh.md, "StableHLO" ones from
openxla/stablehlo docs/spec.md and stablehlo/tests/interpret/*.mlir.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

from tests import spec_reference_linalg as ref
from tests.helpers import same


def close(actual, expected, dtype=None, rtol=1e-6, atol=1e-6):
    actual = np.asarray(actual)
    if dtype is not None:
        assert actual.dtype == np.dtype(dtype), actual.dtype
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    np.testing.assert_allclose(actual.astype(np.complex128), expected.astype(np.complex128),
                               rtol=rtol, atol=atol)


# -- DotGeneral / Dot ---------------------------------------------------------------------

def test_dot_general_xla_contracting_example():
    lhs = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    rhs = np.array([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], np.float32)
    same(ref.dot_general(lhs, rhs, [1], [1]), [[6.0, 12.0], [15.0, 30.0]])


def test_dot_general_xla_batch_example():
    lhs = np.array([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]], np.float32)
    rhs = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]], np.float32)
    same(ref.dot_general(lhs, rhs, [2], [1], [0], [0]), lhs)
    # the table: [b0, m, k] dot [b0, k, n] -> [b0, m, n]; [b0, b1, m, k] dot [b0, b1, k, n]
    got = ref.dot_general(np.ones((2, 3, 4)), np.ones((2, 4, 5)), [2], [1], [0], [0])
    assert got.shape == (2, 3, 5)
    assert ref.dot_general(np.ones((2, 6, 3, 4)), np.ones((2, 6, 4, 5)), [3], [2], [0, 1],
                           [0, 1]).shape == (2, 6, 3, 5)


def test_dot_general_stablehlo_examples():
    lhs = np.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.int64)
    rhs = np.array([[[1, 0], [0, 1]], [[1, 0], [0, 1]]], np.int64)
    same(ref.dot_general(lhs, rhs, [2], [1], [0], [0]), lhs)
    # empty dims: an outer product
    a = np.array([[1, 2], [3, 4]], np.int64)
    eye = np.array([[1, 0], [0, 1]], np.int64)
    same(ref.dot_general(a, eye, [], []),
         [[[[1, 0], [0, 1]], [[2, 0], [0, 2]]], [[[3, 0], [0, 3]], [[4, 0], [0, 4]]]])
    # different operand and result element types
    same(ref.dot_general(lhs.astype(np.float32), rhs.astype(np.float32), [2], [1], [0], [0],
                         preferred_element_type=np.float64), lhs.astype(np.float64))


def test_dot_general_against_loops():
    """Batch dims not leading and not in the same order on both sides, two contracting dims."""
    rng = np.random.default_rng(0)
    lhs = rng.integers(-5, 5, size=(3, 2, 4, 5))   # dims: k1=0, b1=1, m=2, k2=3
    rhs = rng.integers(-5, 5, size=(5, 6, 2, 3))   # dims: k2=0, n=1, b1=2, k1=3
    got = ref.dot_general(lhs, rhs, [0, 3], [3, 0], [1], [2])
    assert got.shape == (2, 4, 6) and got.dtype == lhs.dtype
    expected = np.zeros((2, 4, 6), np.int64)
    for b, m, n, k1, k2 in itertools.product(range(2), range(4), range(6), range(3), range(5)):
        expected[b, m, n] += lhs[k1, b, m, k2] * rhs[k2, n, b, k1]
    same(got, expected)
    # two batch dims given in swapped order: result batch dims follow lhs_batch_dimensions
    lhs = rng.integers(-5, 5, size=(2, 3, 4))       # b0=0, b1=1, k=2
    rhs = rng.integers(-5, 5, size=(3, 4, 2))       # b1=0, k=1, b0=2
    got = ref.dot_general(lhs, rhs, [2], [1], [1, 0], [0, 2])
    expected = np.einsum("abk,bka->ba", lhs, rhs)
    same(got, expected)


def test_dot_general_element_types():
    a = np.full((3,), 100, np.int8)
    # in the operands' type the sum wraps: 30000 mod 256 -> 48
    same(ref.dot_general(a, a, [0], [0]), np.int8(48))
    same(ref.dot_general(a, a, [0], [0], preferred_element_type=np.int32), np.int32(30000))
    same(ref.dot_general(a, a, [0], [0], preferred_element_type="s32"), np.int32(30000))
    u = np.array([200, 200], np.uint8)
    same(ref.dot_general(u, u, [0], [0], preferred_element_type="u32"), np.uint32(80000))
    same(ref.dot_general(u, u, [0], [0]), np.uint8(80000 % 256))
    big = np.array([2**63 + 1], np.uint64)
    same(ref.dot_general(big, np.array([3], np.uint64), [0], [0]),
         np.uint64((3 * (2**63 + 1)) % 2**64))
    # pred: OR of ANDs
    p = np.array([True, False, True])
    same(ref.dot_general(p, np.array([False, True, False]), [0], [0]), np.bool_(False))
    same(ref.dot_general(p, np.array([False, True, True]), [0], [0]), np.bool_(True))
    # bf16 in, f32 out, accumulated wide
    x = np.array([256.0, 1.0, 1.0], ml_dtypes.bfloat16)
    same(ref.dot_general(x, np.ones(3, ml_dtypes.bfloat16), [0], [0], preferred_element_type="f32"),
         np.float32(258.0))
    same(ref.dot_general(x, np.ones(3, ml_dtypes.bfloat16), [0], [0]),
         np.array(258.0, ml_dtypes.bfloat16))
    # complex: no conjugation
    c = np.array([1 + 2j, 3 - 1j], np.complex64)
    same(ref.dot_general(c, c, [0], [0]), np.complex64((1 + 2j) ** 2 + (3 - 1j) ** 2))


def test_dot_rank_table():
    v = np.array([1, 2, 3], np.int32)
    m = np.array([[1, 0, 2], [0, 1, 1]], np.int32)       # 2 x 3
    m2 = np.array([[1, 2], [3, 4], [5, 6]], np.int32)    # 3 x 2
    same(ref.dot(v, v), np.int32(14))                     # vector . vector -> scalar
    same(ref.dot(m, v), np.array([7, 5], np.int32))       # matrix . vector -> vector
    same(ref.dot(m, m2), m @ m2)                          # matrix . matrix -> matrix
    same(ref.dot(v, m2), v @ m2)                          # vector . matrix (the text's rule)
    same(ref.dot(m.astype(np.int8), m2.astype(np.int8), preferred_element_type=np.int32),
         (m @ m2).astype(np.int32))
    with pytest.raises(ValueError):
        ref.dot(np.ones((2, 2, 2)), np.ones((2, 2)))


# -- Conv ---------------------------------------------------------------------------------

SPEC_LHS = np.array([[[[1], [2], [5], [6]], [[3], [4], [7], [8]],
                      [[10], [11], [14], [15]], [[12], [13], [16], [17]]]], np.int64)
# [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
B01F = {"input_batch_dimension": 0, "input_feature_dimension": 3,
        "input_spatial_dimensions": [1, 2],
        "kernel_input_feature_dimension": 2, "kernel_output_feature_dimension": 3,
        "kernel_spatial_dimensions": [0, 1],
        "output_batch_dimension": 0, "output_feature_dimension": 3,
        "output_spatial_dimensions": [1, 2]}


def test_conv_stablehlo_spec_example():
    rhs = np.ones((3, 3, 1, 1), np.int64)
    got = ref.conv_general_dilated(SPEC_LHS, rhs, [4, 4], [(0, 0), (0, 0)], [2, 2], [1, 1], B01F)
    same(got, [[[[10], [26]], [[46], [62]]]])
    # the same through layout strings
    same(ref.conv_general_dilated(SPEC_LHS, rhs, [4, 4], "VALID", [2, 2], None,
                                  ("NHWC", "HWIO", "NHWC")), got)


def test_conv_stablehlo_interpret_examples():
    # si8 operands, i32 result
    got = ref.conv_general_dilated(SPEC_LHS.astype(np.int8), np.full((3, 3, 1, 1), 10, np.int8),
                                   [4, 4], "VALID", [2, 2], None, B01F,
                                   preferred_element_type="s32")
    same(got, [[[[100], [260]], [[460], [620]]]], np.int32)
    # padding
    got = ref.conv_general_dilated(SPEC_LHS, np.ones((3, 3, 1, 1), np.int64), [4, 4],
                                   [(1, 1), (1, 1)], [2, 2], None, B01F)
    same(got, [[[[1], [5]], [[10], [14]]]])
    # batch_group_count = 4: dim_numbers [0, b, 1, f]x[0, 1, i, o]->[b, 0, 1, f]
    dn = dict(B01F, input_batch_dimension=1, input_spatial_dimensions=[0, 2])
    got = ref.conv_general_dilated(SPEC_LHS, np.ones((1, 2, 1, 4), np.int64), [4, 4], "VALID",
                                   [2, 2], None, dn, batch_group_count=4)
    same(got, [[[[1, 3, 10, 12], [5, 7, 14, 16]]]])
    # feature_group_count = 2: dim_numbers [b, 0, f, 1]x[0, i, 1, o]->[b, 0, 1, f]
    dn = dict(B01F, input_feature_dimension=2, input_spatial_dimensions=[1, 3],
              kernel_input_feature_dimension=1, kernel_spatial_dimensions=[0, 2])
    got = ref.conv_general_dilated(SPEC_LHS, np.ones((1, 2, 1, 4), np.int64), [4, 4], "VALID",
                                   [2, 2], None, dn, feature_group_count=2)
    same(got, [[[[3, 3, 11, 11]], [[21, 21, 29, 29]]]])


def _xla_pseudocode(x, k, strides, pads):
    """The XLA spec's 2-D pseudocode, literally (fixed layout, no dilation, no groups)."""
    B, _, H, W = x.shape
    O, I, KH, KW = k.shape
    OH = (H + pads[0][0] + pads[0][1] - KH) // strides[0] + 1
    OW = (W + pads[1][0] + pads[1][1] - KW) // strides[1] + 1
    out = np.zeros((B, O, OH, OW), x.dtype)
    for b, oz, oy, ox in itertools.product(range(B), range(O), range(OH), range(OW)):
        value = 0
        for iz, ky, kx in itertools.product(range(I), range(KH), range(KW)):
            iy = oy * strides[0] + ky - pads[0][0]
            ix = ox * strides[1] + kx - pads[1][0]
            if 0 <= iy < H and 0 <= ix < W:
                value += x[b, iz, iy, ix] * k[oz, iz, ky, kx]
        out[b, oz, oy, ox] = value
    return out


def test_conv_xla_pseudocode():
    rng = np.random.default_rng(1)
    x = rng.integers(-4, 5, size=(2, 3, 6, 5)).astype(np.int64)
    k = rng.integers(-4, 5, size=(4, 3, 3, 2)).astype(np.int64)
    for strides, pads in [([1, 1], [(0, 0), (0, 0)]), ([2, 3], [(1, 2), (0, 1)]),
                          ([1, 2], [(2, 2), (1, 1)])]:
        same(ref.conv_with_general_padding(x, k, strides, pads, [1, 1], [1, 1]),
             _xla_pseudocode(x, k, strides, pads))
        same(ref.conv(x, k, strides, pads), _xla_pseudocode(x, k, strides, pads))


def _jax_conv(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation, dn, fgc=1, bgc=1):
    import jax
    out = jax.lax.conv_general_dilated(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation,
                                       dn, feature_group_count=fgc, batch_group_count=bgc,
                                       precision=jax.lax.Precision.HIGHEST)
    return np.asarray(out)


# (lhs shape, rhs shape, strides, padding, lhs_dilation, rhs_dilation, dimension numbers,
#  feature_group_count, batch_group_count); float32 with small integer values: exact.
JAX_CASES = [
    ((2, 3, 7), (4, 3, 3), [2], [(1, 2)], [1], [1], ("NCH", "OIH", "NCH"), 1, 1),
    ((2, 3, 7), (4, 3, 2), [1], "SAME", None, [3], ("NCH", "OIH", "NCH"), 1, 1),
    ((1, 9, 2), (3, 2, 5), [3], "SAME", None, None, ("NWC", "WIO", "NWC"), 1, 1),
    ((2, 5, 6, 3), (3, 2, 3, 4), [1, 2], "SAME", None, None, ("NHWC", "HWIO", "NHWC"), 1, 1),
    ((2, 5, 6, 3), (3, 2, 3, 4), [2, 1], [(-1, 2), (1, -1)], [2, 1], [1, 2],
     ("NHWC", "HWIO", "NHWC"), 1, 1),
    ((2, 4, 5, 6), (8, 1, 3, 2), [1, 1], "VALID", None, None, ("NCHW", "OIHW", "NCHW"), 4, 1),
    ((2, 4, 5, 6), (8, 2, 2, 3), [2, 2], [(1, 1), (2, 0)], [1, 2], [2, 1],
     ("NCHW", "OIHW", "NCHW"), 2, 1),
    ((1, 7, 6, 4), (3, 3, 1, 4), [1, 1], "SAME", None, None, ("NHWC", "HWIO", "NHWC"), 4, 1),
    ((4, 3, 5, 6), (6, 3, 2, 2), [1, 2], [(0, 1), (1, 1)], None, [1, 2],
     ("NCHW", "OIHW", "NCHW"), 1, 2),
    ((6, 2, 5, 4), (3, 2, 2, 3), [1, 1], [(0, 0), (0, 0)], [1, 2], None,
     ("NCHW", "OIHW", "NCHW"), 1, 3),
    ((2, 2, 4, 3, 5), (3, 2, 2, 2, 3), [1, 2, 2], [(1, 0), (0, 1), (1, 1)], [1, 1, 2], [2, 1, 1],
     ("NCDHW", "OIDHW", "NCDHW"), 1, 1),
    ((2, 4, 3, 5, 2), (2, 3, 2, 1, 4), [2, 1, 1], "SAME", None, None,
     ("NDHWC", "DHWIO", "NDHWC"), 2, 1),
    # spatial characters in a different order in lhs / out than in the kernel string
    ((2, 6, 5, 3), (2, 3, 3, 4), [1, 2], [(1, 0), (0, 2)], [1, 1], [2, 1],
     ("NWHC", "HWIO", "NHCW"), 1, 1),
    ((3, 2, 5, 4), (3, 4, 3, 2), [1, 1], "VALID", None, None, ("CNHW", "IOHW", "HWNC"), 1, 1),
]


@pytest.mark.parametrize("case", range(len(JAX_CASES)))
def test_conv_against_jax(case):
    ls, rs, strides, padding, ld, rd, dn, fgc, bgc = JAX_CASES[case]
    rng = np.random.default_rng(case)
    lhs = rng.integers(-3, 4, size=ls).astype(np.float32)
    rhs = rng.integers(-3, 4, size=rs).astype(np.float32)
    got = ref.conv_general_dilated(lhs, rhs, strides, padding, ld, rd, dn, fgc, bgc)
    expected = _jax_conv(lhs, rhs, strides, padding, ld, rd, dn, fgc, bgc)
    same(got, expected)


def test_conv_dimension_numbers_forms_agree():
    """A dict, jax's integer ConvDimensionNumbers, and the layout strings give the same conv."""
    rng = np.random.default_rng(7)
    lhs = rng.integers(-3, 4, size=(2, 5, 6, 3)).astype(np.float32)      # NHWC
    rhs = rng.integers(-3, 4, size=(3, 2, 3, 4)).astype(np.float32)      # HWIO
    by_strings = ref.conv_general_dilated(lhs, rhs, [1, 2], [(1, 1), (0, 1)], None, None,
                                          ("NHWC", "HWIO", "NHWC"))
    by_dict = ref.conv_general_dilated(lhs, rhs, [1, 2], [(1, 1), (0, 1)], None, None, B01F)
    by_ints = ref.conv_general_dilated(lhs, rhs, [1, 2], [(1, 1), (0, 1)], None, None,
                                       ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)))
    canonical = ref.conv_general_dilated(lhs.transpose(0, 3, 1, 2), rhs.transpose(3, 2, 0, 1),
                                         [1, 2], [(1, 1), (0, 1)])
    same(by_dict, by_strings)
    same(by_ints, by_strings)
    same(canonical.transpose(0, 2, 3, 1), by_strings)


def test_conv_depthwise_by_hand():
    """feature_group_count = C with one filter per channel: each channel convolved alone."""
    rng = np.random.default_rng(8)
    x = rng.integers(-3, 4, size=(2, 3, 6)).astype(np.int64)   # N C W
    k = rng.integers(-3, 4, size=(3, 1, 2)).astype(np.int64)   # O=C, I=1, W
    got = ref.conv_general_dilated(x, k, [1], "VALID", feature_group_count=3)
    expected = np.zeros((2, 3, 5), np.int64)
    for n, c, w in itertools.product(range(2), range(3), range(5)):
        expected[n, c, w] = x[n, c, w] * k[c, 0, 0] + x[n, c, w + 1] * k[c, 0, 1]
    same(got, expected)


def test_conv_batch_group_by_hand():
    """batch_group_count = 2: output feature f reads lhs batch group f // (O / 2)."""
    x = np.arange(4 * 1 * 3, dtype=np.int64).reshape(4, 1, 3)   # N=4 C=1 W=3
    k = np.array([[[1]], [[10]], [[100]], [[1000]]], np.int64)   # O=4 I=1 W=1
    got = ref.conv_general_dilated(x, k, [1], "VALID", batch_group_count=2)
    assert got.shape == (2, 4, 3)
    for b, f in itertools.product(range(2), range(4)):
        same(got[b, f], x[(f // 2) * 2 + b, 0] * k[f, 0, 0])


def test_conv_same_padding_with_lhs_dilation():
    """Not defined by XLA, refused by jax: SAME on the lhs-dilated input (documented choice):
    with stride 1 the output has the dilated input's size."""
    x = np.arange(1, 5, dtype=np.int64).reshape(1, 1, 4)          # dilated by 2: 7 positions
    k = np.ones((1, 1, 3), np.int64)
    got = ref.conv_general_dilated(x, k, [1], "SAME", [2])
    assert ref.conv_padding("SAME", [4], [3], [1], [2]) == [(1, 1)]
    # dilated: [1 0 2 0 3 0 4], padded [0 1 0 2 0 3 0 4 0], windows of 3
    same(got, [[[1, 3, 2, 5, 3, 7, 4]]])
    assert ref.conv_padding("SAME", [4], [3], [2], [2]) == [(1, 1)]     # out ceil(7/2)=4
    assert ref.conv_padding("SAME", [5], [2], [1], None, [3]) == [(1, 2)]   # window 4: total 3
    assert ref.conv_padding("SAME", [5], [2], [2]) == [(0, 1)]          # odd total: high side


def test_conv_negative_padding_and_empty_output():
    x = np.arange(1, 7, dtype=np.int64).reshape(1, 1, 6)
    k = np.ones((1, 1, 2), np.int64)
    same(ref.conv_general_dilated(x, k, [1], [(-2, -1)]), [[[7, 9]]])   # on [3, 4, 5]
    same(ref.conv_general_dilated(x, k, [1], [(-5, -1)]), np.zeros((1, 1, 0), np.int64))
    same(ref.conv_general_dilated(x, np.ones((1, 1, 7), np.int64), [1], "VALID"),
         np.zeros((1, 1, 0), np.int64))


def test_conv_element_types():
    x = np.full((1, 2, 3), 100, np.int8)
    k = np.ones((1, 2, 3), np.int8)
    same(ref.conv(x, k, [1], "VALID"), np.int8(600 % 256).reshape(1, 1, 1))
    same(ref.conv_general_dilated(x, k, [1], "VALID", preferred_element_type=np.int32),
         np.int32(600).reshape(1, 1, 1))
    c = np.array([[[1 + 1j, 2 - 1j]]], np.complex64)
    same(ref.conv(c, np.array([[[1j, 1]]], np.complex64), [1], "VALID"),
         np.complex64((1 + 1j) * 1j + (2 - 1j)).reshape(1, 1, 1))


# -- Fft ----------------------------------------------------------------------------------

def test_fft_stablehlo_spec_example():
    x = np.array([1, 0, 0, 0], np.complex64)
    same(ref.fft(x, "FFT", [4]), np.ones(4, np.complex64))


FFT_CASES = [  # stablehlo/tests/interpret/fft.mlir
    ("FFT", [2], [1 + 2j, 3 - 4j], [4 - 2j, -2 + 6j]),
    ("FFT", [2, 2], [[1 + 2j, 3 - 4j], [-5 + 6j, -7 - 8j]], [[-8 - 4j, 20j], [16, -4 - 8j]]),
    ("FFT", [2, 2, 2],
     [[[1 + 2j, 3 - 4j], [-5 + 6j, -7 - 8j]], [[-1 - 2j, -3 + 4j], [5 - 6j, 7 + 8j]]],
     [[[0, 0], [0, 0]], [[-16 - 8j, 40j], [32, -8 - 16j]]]),
    ("IFFT", [2], [4 - 2j, -2 + 6j], [1 + 2j, 3 - 4j]),
    ("IFFT", [2, 2], [[-8 - 4j, 16], [20j, -4 - 8j]], [[1 + 2j, -5 + 6j], [3 - 4j, -7 - 8j]]),
    ("IFFT", [2, 2, 2], [[[0, 0], [0, 0]], [[-16 - 8j, 32], [40j, -8 - 16j]]],
     [[[1 + 2j, -5 + 6j], [3 - 4j, -7 - 8j]], [[-1 - 2j, 5 - 6j], [-3 + 4j, 7 + 8j]]]),
    ("RFFT", [4], [1.0, 2.0, 3.0, 4.0], [10, -2 + 2j, -2]),
    ("RFFT", [4, 4], np.arange(1, 17.0).reshape(4, 4),
     [[136, -8 + 8j, -8], [-32 + 32j, 0, 0], [-32, 0, 0], [-32 - 32j, 0, 0]]),
    ("RFFT", [2, 2, 4], np.arange(1, 17.0).reshape(2, 2, 4),
     [[[136, -8 + 8j, -8], [-32, 0, 0]], [[-64, 0, 0], [0, 0, 0]]]),
    ("IRFFT", [4], [10, -2 + 2j, -2], [1.0, 2.0, 3.0, 4.0]),
    ("IRFFT", [4, 4], [[136, -8 + 8j, -8], [-32 + 32j, 0, 0], [-32, 0, 0], [-32 - 32j, 0, 0]],
     np.arange(1, 17.0).reshape(4, 4)),
    ("IRFFT", [2, 2, 4], [[[136, -8 + 8j, -8], [-32, 0, 0]], [[-64, 0, 0], [0, 0, 0]]],
     np.arange(1, 17.0).reshape(2, 2, 4)),
]


@pytest.mark.parametrize("case", range(len(FFT_CASES)))
def test_fft_stablehlo_interpret_examples(case):
    kind, length, operand, expected = FFT_CASES[case]
    in_dtype = np.float64 if kind == "RFFT" else np.complex128
    out_dtype = np.float64 if kind == "IRFFT" else np.complex128
    got = ref.fft(np.array(operand, in_dtype), kind, length)
    close(got, np.array(expected, out_dtype), out_dtype, atol=1e-12)


def test_fft_by_hand():
    # DFT of [a, b, c, d]: X_k = sum x_n e^{-2 pi i k n / 4}, e^{-i pi/2} = -i
    x = np.array([1, 2j, 0, -1], np.complex64)
    expected = [1 + 2j - 1, 1 + 2j * -1j - 1 * 1j, 1 - 2j + 1, 1 + 2j * 1j - 1 * -1j]
    close(ref.fft(x, "FFT", [4]), expected, np.complex64)
    close(ref.fft(np.array(expected, np.complex64), "IFFT", [4]), x, np.complex64)
    # batched: only the innermost axis is transformed with one length
    xb = np.stack([x, 2 * x])
    close(ref.fft(xb, "FFT", [4]), np.stack([expected, 2 * np.array(expected)]), np.complex64)
    # RFFT with odd length: n // 2 + 1 = 3 outputs
    r = np.array([1, 2, 3, 4, 5], np.float32)
    w = np.exp(-2j * np.pi / 5)
    exp_r = [sum(r[n] * w ** (k * n) for n in range(5)) for k in range(3)]
    got = ref.fft(r, "RFFT", [5])
    close(got, exp_r, np.complex64, rtol=1e-5, atol=1e-5)
    # IRFFT length 5 from those 3 entries, length 4 from 3 entries
    close(ref.fft(got, "IRFFT", [5]), r, np.float32, rtol=1e-5, atol=1e-5)
    close(ref.fft(np.array([10, -2 + 2j, -2], np.complex64), "IRFFT", [4]), [1, 2, 3, 4],
          np.float32, atol=1e-6)


def test_fft_multidimensional_order_and_types():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 6))
    y = ref.fft(x, "RFFT", [4, 6])
    assert y.shape == (3, 4, 4) and y.dtype == np.complex128
    # innermost real transform first, then the complex one on the next axis, per the spec
    first = np.stack([[np.fft.fft(row)[:4] for row in plane] for plane in x])
    close(y, np.fft.fft(first, axis=1), atol=1e-12)
    back = ref.fft(y, "IRFFT", [4, 6])
    assert back.shape == x.shape and back.dtype == np.float64
    close(back, x, atol=1e-12)
    assert ref.fft(x.astype(np.float32), "RFFT", [6]).dtype == np.complex64
    z = (x + 1j * rng.standard_normal(x.shape)).astype(np.complex64)
    close(ref.fft(ref.fft(z, "FFT", [3, 4, 6]), "IFFT", [3, 4, 6]), z, np.complex64, atol=1e-5)


def test_fft_empty():
    assert ref.fft(np.zeros((2, 0), np.float32), "RFFT", [0]).shape == (2, 0)
    assert ref.fft(np.zeros((2, 1), np.complex64), "IRFFT", [0]).shape == (2, 0)
    assert ref.fft(np.zeros((0, 4), np.complex64), "FFT", [4]).shape == (0, 4)


# -- Cholesky -----------------------------------------------------------------------------

def _spd(rng, batch, n, complex_=False):
    m = rng.standard_normal(batch + (n, n))
    if complex_:
        m = m + 1j * rng.standard_normal(batch + (n, n))
    return m @ np.swapaxes(m, -1, -2).conj() + n * np.eye(n)


def test_cholesky_stablehlo_example():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 20.0, 26.0], [3.0, 26.0, 70.0]], np.float32)
    same(ref.cholesky(a, lower=True), [[1.0, 0.0, 0.0], [2.0, 4.0, 0.0], [3.0, 5.0, 6.0]])
    same(ref.cholesky(a, lower=False), [[1.0, 2.0, 3.0], [0.0, 4.0, 5.0], [0.0, 0.0, 6.0]])


@pytest.mark.parametrize("complex_", [False, True])
def test_cholesky_identities(complex_):
    rng = np.random.default_rng(3)
    a = _spd(rng, (2, 3), 4, complex_)
    l = ref.cholesky(a, lower=True)
    assert l.shape == a.shape and l.dtype == a.dtype
    close(l @ np.swapaxes(l, -1, -2).conj(), a, atol=1e-10)
    same(l, np.tril(l))
    assert np.all(np.diagonal(l, axis1=-2, axis2=-1).real > 0)
    u = ref.cholesky(a, lower=False)
    close(np.swapaxes(u, -1, -2).conj() @ u, a, atol=1e-10)
    same(u, np.triu(u))
    # only the selected triangle is read
    junk = rng.standard_normal(a.shape) * 100
    upper = np.triu(np.ones(a.shape[-2:], bool), 1)
    same(ref.cholesky(np.where(upper, junk, a), lower=True), l)
    same(ref.cholesky(np.where(upper.T, junk, a), lower=False), u)
    # single precision: computed wide, cast back
    a32 = a.astype(np.complex64 if complex_ else np.float32)
    l32 = ref.cholesky(a32)
    assert l32.dtype == a32.dtype
    close(l32, l, rtol=1e-5, atol=1e-5)


def test_cholesky_not_positive_definite():
    a = np.array([[[4.0, 2.0], [2.0, 1.0 - 3.0]], [[4.0, 2.0], [2.0, 5.0]]])
    got = ref.cholesky(a)
    assert np.all(np.isnan(got[0]))                      # only the failing batch element
    same(got[1], [[2.0, 0.0], [1.0, 2.0]])
    assert np.all(np.isnan(ref.cholesky(np.array([[-1.0]]))))


# -- TriangularSolve ----------------------------------------------------------------------

TS_A_LOWER = [[1.0, 0.0, 0.0], [2.0, 3.0, 0.0], [4.0, 5.0, 6.0]]
TS_A_UPPER = [[1.0, 2.0, 4.0], [0.0, 3.0, 5.0], [0.0, 0.0, 6.0]]
TS_DIAG = [[2.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 5.0]]
# stablehlo/tests/interpret/triangular_solve.mlir:
#   (a, left_side, lower, unit_diagonal, transpose_a, x)
TS_CASES = [
    (TS_DIAG, True, True, False, "NO_TRANSPOSE", [3.5, 2.0, 1.8]),
    (TS_DIAG, False, False, False, "NO_TRANSPOSE", [3.5, 2.0, 1.8]),
    (TS_DIAG, True, True, True, "NO_TRANSPOSE", [7.0, 8.0, 9.0]),
    (TS_DIAG, False, False, True, "TRANSPOSE", [7.0, 8.0, 9.0]),
    (TS_A_LOWER, True, True, False, "NO_TRANSPOSE", [7.0, -2.0, -1.5]),
    (TS_A_UPPER, True, False, False, "NO_TRANSPOSE", [2 / 3, 1 / 6, 1.5]),
    (TS_A_LOWER, False, True, False, "NO_TRANSPOSE", [2 / 3, 1 / 6, 1.5]),
    (TS_A_UPPER, False, False, False, "NO_TRANSPOSE", [7.0, -2.0, -1.5]),
    (TS_A_LOWER, True, True, False, "TRANSPOSE", [2 / 3, 1 / 6, 1.5]),
    (TS_A_UPPER, True, False, False, "TRANSPOSE", [7.0, -2.0, -1.5]),
    (TS_A_LOWER, False, True, False, "TRANSPOSE", [7.0, -2.0, -1.5]),
    (TS_A_UPPER, False, False, False, "TRANSPOSE", [2 / 3, 1 / 6, 1.5]),
]


@pytest.mark.parametrize("case", range(len(TS_CASES)))
def test_triangular_solve_stablehlo_interpret_examples(case):
    a, left, lower, unit, transpose, x = TS_CASES[case]
    b = np.array([7.0, 8.0, 9.0], np.float32)
    b = b.reshape(3, 1) if left else b.reshape(1, 3)
    got = ref.triangular_solve(np.array(a, np.float32), b, left, lower, unit, transpose)
    close(got, np.array(x).reshape(b.shape), np.float32, rtol=1e-6)


def test_triangular_solve_stablehlo_spec_and_complex_examples():
    a = np.array([[1.0, 0.0, 0.0], [2.0, 4.0, 0.0], [3.0, 5.0, 6.0]], np.float32)
    b = np.array([[2.0, 0.0, 0.0], [4.0, 8.0, 0.0], [6.0, 10.0, 12.0]], np.float32)
    same(ref.triangular_solve(a, b, True, True, False, "NO_TRANSPOSE"), 2 * np.eye(3))
    a = np.array([[1 + 1j, 0, 0], [2 - 2j, 3 + 4j, 0], [4 - 3j, 5 + 5j, 6 - 8j]], np.complex64)
    b = np.array([[7 - 2j], [8 + 4j], [9 - 5j]], np.complex64)
    close(ref.triangular_solve(a, b, True, True, False, "NO_TRANSPOSE"),
          [[2.5 - 4.5j], [4.32 + 0.24j], [-0.29 - 0.77j]], np.complex64, atol=1e-5)
    close(ref.triangular_solve(a, b, True, True, False, "ADJOINT"),
          [[7.18 + 2.68j], [-0.08 + 3.16j], [0.14 - 1.02j]], np.complex64, atol=1e-5)


@pytest.mark.parametrize("complex_", [False, True])
def test_triangular_solve_identities(complex_):
    rng = np.random.default_rng(4)

    def rand(*shape):
        m = rng.standard_normal(shape)
        return m + 1j * rng.standard_normal(shape) if complex_ else m

    n, k = 4, 3
    a = rand(2, n, n) + 4 * np.eye(n)                   # well conditioned triangles
    for left, lower, unit, transpose in itertools.product(
            [True, False], [True, False], [True, False], ["NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"]):
        b = rand(2, n, k) if left else rand(2, k, n)
        x = ref.triangular_solve(a, b, left, lower, unit, transpose)
        assert x.shape == b.shape and x.dtype == b.dtype
        t = np.tril(a) if lower else np.triu(a)
        if unit:
            t = t.copy()
            t[:, np.arange(n), np.arange(n)] = 1
        op = {"NO_TRANSPOSE": t, "TRANSPOSE": np.swapaxes(t, -1, -2),
              "ADJOINT": np.swapaxes(t, -1, -2).conj()}[transpose]
        close(op @ x if left else x @ op, b, atol=1e-10)
        # the other triangle and (with unit_diagonal) the diagonal are never read
        junk = rng.standard_normal(a.shape) * 100
        mask = np.triu(np.ones((n, n)), 1 if not unit else 0) if lower else \
            np.tril(np.ones((n, n)), -1 if not unit else 0)
        same(ref.triangular_solve(a + junk * mask, b, left, lower, unit, transpose), x)


# -- BatchNorm ----------------------------------------------------------------------------

SPEC_BN_OPERAND = np.array([[[1.0, 2.0], [3.0, 4.0]], [[3.0, 4.0], [1.0, 2.0]]])


def test_batch_norm_stablehlo_examples():
    out, mean, var = ref.batch_norm_training(SPEC_BN_OPERAND, [1.0, 1.0], [1.0, 1.0], 0.0, 2)
    same(out, [[[0.0, 0.0], [2.0, 2.0]], [[2.0, 2.0], [0.0, 0.0]]])
    same(mean, [2.0, 3.0])
    same(var, [1.0, 1.0])
    same(ref.batch_norm_inference(SPEC_BN_OPERAND, [1.0, 1.0], [1.0, 1.0], [2.0, 3.0], [1.0, 1.0],
                                  0.0, 2),
         [[[0.0, 0.0], [2.0, 2.0]], [[2.0, 2.0], [0.0, 0.0]]])
    gx, gs, gb = ref.batch_norm_grad(SPEC_BN_OPERAND, [1.0, 1.0], [2.0, 3.0], [1.0, 1.0],
                                     np.full((2, 2, 2), 0.1), 0.0, 2)
    close(gx, np.zeros((2, 2, 2)), np.float64, atol=1e-15)
    close(gs, [0.0, 0.0], np.float64, atol=1e-15)
    close(gb, [0.4, 0.4], np.float64, atol=1e-15)


def test_batch_norm_training_by_hand():
    # feature 0: [1, 3] -> mean 2, var 1; feature 1: [2, 6] -> mean 4, var 4
    x = np.array([[1.0, 2.0], [3.0, 6.0]], np.float32)
    out, mean, var = ref.batch_norm_training(x, np.array([2.0, 0.5], np.float32),
                                             np.array([1.0, -1.0], np.float32), 0.0, 1)
    same(out, np.array([[-1.0, -1.5], [3.0, -0.5]], np.float32))
    same(mean, np.array([2.0, 4.0], np.float32))
    same(var, np.array([1.0, 4.0], np.float32))
    # feature dim in the middle of a rank-3 operand: the same numbers
    x3 = x.astype(np.float64).reshape(2, 2, 1)
    out3, mean3, var3 = ref.batch_norm_training(x3, [2.0, 0.5], [1.0, -1.0], 0.0, 1)
    same(out3, out.astype(np.float64).reshape(2, 2, 1))
    same(mean3, [2.0, 4.0])
    same(var3, [1.0, 4.0])
    # epsilon: var + eps under the root; eps is an f32 attribute
    out, _, _ = ref.batch_norm_training(np.array([[0.0], [2.0]]), [1.0], [0.0], 3.0, 1)
    same(out, [[-0.5], [0.5]])                           # (x - 1) / sqrt(1 + 3)
    got = ref.batch_norm_inference(np.array([1.0]), [1.0], [0.0], [0.0], [0.0], 0.1, 0)
    same(got, [1.0 / np.sqrt(float(np.float32(0.1)))])


def test_batch_norm_grad_by_hand():
    # one feature, x = [-1, -1, 1, 1] (mean 0, var 1), dy = [1, 2, 3, 4], scale 2, eps 0, N = 4:
    #   sum dy = 10, sum dy * (x - mean) = 4
    #   grad_x = 2 / 1 / 4 * (4 dy - 10 - 4 (x - mean) / 1) = [-1, 1, -1, 1]
    #   grad_scale = sum(dy * x) = 4, grad_offset = 10
    x = np.array([[-1.0], [-1.0], [1.0], [1.0]], np.float32)
    dy = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    gx, gs, gb = ref.batch_norm_grad(x, np.float32([2.0]), np.float32([0.0]), np.float32([1.0]),
                                     dy, 0.0, 1)
    same(gx, np.array([[-1.0], [1.0], [-1.0], [1.0]], np.float32))
    same(gs, np.float32([4.0]))
    same(gb, np.float32([10.0]))


def test_batch_norm_grad_is_the_gradient_of_training():
    """With the batch statistics as mean / variance, grad_operand is d/dx of
    sum(dy * batch_norm_training(x)[0]) (central differences, float64)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 2, 4))
    scale, offset = rng.standard_normal(2), rng.standard_normal(2)
    dy, eps = rng.standard_normal(x.shape), 0.25
    _, mean, var = ref.batch_norm_training(x, scale, offset, eps, 1)
    gx, gs, gb = ref.batch_norm_grad(x, scale, mean, var, dy, eps, 1)
    f32eps = float(np.float32(eps))

    def loss(xx, sc=scale, of=offset):
        return np.sum(dy * ref.batch_norm_training(xx, sc, of, f32eps, 1)[0])

    h = 1e-6
    num = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        e = np.zeros_like(x)
        e[i] = h
        num[i] = (loss(x + e) - loss(x - e)) / (2 * h)
    close(gx, num, atol=1e-6)
    num_s = [(loss(x, scale + h * np.eye(2)[j]) - loss(x, scale - h * np.eye(2)[j])) / (2 * h)
             for j in range(2)]
    close(gs, num_s, atol=1e-6)
    num_b = [(loss(x, scale, offset + h * np.eye(2)[j]) - loss(x, scale, offset - h * np.eye(2)[j]))
             / (2 * h) for j in range(2)]
    close(gb, num_b, atol=1e-6)


def test_batch_norm_low_precision_types():
    x = np.array([[1.0, 2.0], [3.0, 6.0]], ml_dtypes.bfloat16)
    out, mean, var = ref.batch_norm_training(x, np.array([2.0, 0.5], ml_dtypes.bfloat16),
                                             np.array([1.0, -1.0], ml_dtypes.bfloat16), 0.0, 1)
    assert out.dtype == mean.dtype == var.dtype == x.dtype
    same(out, np.array([[-1.0, -1.5], [3.0, -0.5]], ml_dtypes.bfloat16))
