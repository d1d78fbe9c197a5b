"""The pure shape rules of hlogen.ops, called as plain functions of shapes (no MLIR), on
the shapes of the spec's examples (spec/operation-semantics.zh.md; where it shows none,
the StableHLO specification's) and on each rule's errors, whose messages name the op
and the argument. The rules take attributes as the ops parse them (dimension numbers in
range and unrepeated: hlogen.ops._common.dimension_list; counts >= 1): those checks
are the op functions', tested with them."""
from __future__ import annotations

import re

import pytest

import hlogen as hg
from hlogen.ops.collectives import all_gather_shape, all_to_all_shape, reduce_scatter_shape
from hlogen.ops.conversion import bitcast_convert_shape
from hlogen.ops.fft import fft_shape
from hlogen.ops.indexing import IndexMapping, gather_shape, scatter_window
from hlogen.ops.linalg import DotDimensionNumbers, dot_general_shape
from hlogen.ops.movement import (collapse_shape, concatenate_shape, pad_config, pad_shape,
                                 reshape_shape, slice_shape, transpose_shape)
from hlogen.ops.random import rng_bit_generator_shapes, rng_shape
from hlogen.ops.shaping import broadcast_in_dim_shape
from hlogen.ops.windows import window

V = hg.f32[4, 2, 3]  # the spec's v of Collapse and Reshape


def _fails(pattern):
    return pytest.raises(hg.ShapeError, match=pattern)


# -- Reshape, Collapse, Transpose -------------------------------------------------------------

def test_reshape():
    assert reshape_shape(V, (24,)) == hg.f32[24]
    assert reshape_shape(V, (8, 3)) == hg.f32[8, 3]
    assert reshape_shape(hg.f32[1, 1], ()) == hg.f32[()]  # "单元素数组转换为标量,反之亦然"
    assert reshape_shape(hg.f32[()], (1, 1)) == hg.f32[1, 1]
    assert reshape_shape(hg.s32[2, 3], (3, 2)) == hg.s32[3, 2]  # StableHLO's example
    with _fails(r"^reshape: operand f32\[4,2,3\], new_sizes=\[5, 5\]: the element count must not "
                r"change \(24 elements into 25\)"):
        reshape_shape(V, (5, 5))


def test_collapse():
    assert collapse_shape(V, (0, 1, 2)) == hg.f32[24]
    # the spec's two 2-D examples carry swapped labels (tests/test_spec_reference.py): by its
    # text, {0, 1} of 4x2x3 merges 4 and 2, {1, 2} merges 2 and 3
    assert collapse_shape(V, (0, 1)) == hg.f32[8, 3]
    assert collapse_shape(V, (1, 2)) == hg.f32[4, 6]
    assert collapse_shape(V, (1,)) == V
    for dims in ((1, 0), (0, 2)):  # the spec: "{1, 0} 或 {0, 2} 无效"
        with _fails(rf"^collapse: operand f32\[4,2,3\], dimensions=\[{dims[0]}, {dims[1]}\]: "
                    r"the dimensions must be consecutive and in increasing order"):
            collapse_shape(V, dims)


def test_transpose():
    # input_dimensions[permutation[i]] = output_dimensions[i]
    assert transpose_shape(hg.s8[2, 3, 4], (1, 2, 0)) == hg.s8[3, 4, 2]
    assert transpose_shape(hg.s32[2, 3, 2], (2, 1, 0)) == hg.s32[2, 3, 2]  # StableHLO's example
    with _fails(r"^transpose: operand s8\[2,3,4\], permutation=\[1, 0\]: the permutation must "
                r"list each of the 3 dimensions once"):
        transpose_shape(hg.s8[2, 3, 4], (1, 0))


# -- Slice, Concatenate, Pad ------------------------------------------------------------------

def test_slice():
    assert slice_shape(hg.f32[5], (2,), (4,), (1,)) == hg.f32[2]
    assert slice_shape(hg.f32[4, 3], (2, 1), (4, 3), (1, 1)) == hg.f32[2, 2]
    assert slice_shape(hg.s64[3, 4], (1, 2), (3, 4), (1, 1)) == hg.s64[2, 2]  # StableHLO's
    assert slice_shape(hg.s32[10], (1,), (8,), (3,)) == hg.s32[3]  # ceil((8 - 1) / 3)
    assert slice_shape(hg.s32[10], (4,), (4,), (1,)) == hg.s32[0]
    where = r"^slice: operand f32\[4,3\], start_indices=\[.*\], limit_indices=\[.*\], strides=\[.*\]: "
    with _fails(where + r"start_indices, limit_indices and strides need one entry per dimension"):
        slice_shape(hg.f32[4, 3], (2,), (4,), (1,))
    for start, limit in (((3, 0), (2, 3)), ((0, 0), (5, 3)), ((-1, 0), (2, 3))):
        with _fails(where + r"dimension 0 needs 0 <= start <= limit <= 4 \(its size\)"):
            slice_shape(hg.f32[4, 3], start, limit, (1, 1))
    with _fails(where + r"dimension 1 has stride 0; strides must be >= 1"):
        slice_shape(hg.f32[4, 3], (0, 0), (4, 3), (1, 0))


def test_concatenate():
    assert concatenate_shape([hg.s32[2]] * 3, 0) == hg.s32[6]
    assert concatenate_shape([hg.s64[3, 2], hg.s64[1, 2]], 0) == hg.s64[4, 2]
    assert concatenate_shape([hg.s64[3, 2], hg.s64[3, 5]], 1) == hg.s64[3, 7]
    with _fails(r"^concatenate: needs at least one operand"):
        concatenate_shape([], 0)
    with _fails(r"^concatenate: .*: scalars cannot be concatenated"):  # "0 维值无法串联"
        concatenate_shape([hg.f32[()], hg.f32[()]], 0)
    with _fails(r"^concatenate: dimension=2 must be a dimension number in \[0, 2\)"):
        concatenate_shape([hg.s64[3, 2], hg.s64[1, 2]], 2)
    with _fails(r"^concatenate: operands s64\[3,2\], f32\[1,2\], dimension=0: operand 1 has "
                r"element type f32"):
        concatenate_shape([hg.s64[3, 2], hg.f32[1, 2]], 0)
    with _fails(r"^concatenate: .*: operand 1 has rank 1, operand 0 has 2"):
        concatenate_shape([hg.s64[3, 2], hg.s64[2]], 0)
    with _fails(r"^concatenate: .*: dimension 1 of operand 1 is 3, of operand 0 2; sizes must "
                r"be equal except in dimension 0"):
        concatenate_shape([hg.s64[3, 2], hg.s64[1, 3]], 0)


@pytest.mark.parametrize("shape,config,result", [
    (hg.s32[2, 3], ((0, 2, 1), (1, 1, 2)), hg.s32[5, 9]),   # StableHLO's example
    (hg.s64[5, 4], ((1, 1, 0), (-1, -1, 1)), hg.s64[7, 5]),  # its interpreter's, negative edges
    (hg.s32[3], ((-1, 0, 1),), hg.s32[4]),  # interior padding first, then the edges
    (hg.s32[3], ((-2, -2, 1),), hg.s32[1]),
    (hg.s32[3], ((-3, 0, 0),), hg.s32[0]),
    (hg.f32[0], ((2, -1, 3),), hg.f32[1]),
    (hg.f32[()], (), hg.f32[()]),
])
def test_pad(shape, config, result):
    assert pad_shape(shape, pad_config(shape, config)) == result


def test_pad_errors():
    where = r"^pad: operand s32\[2,3\], padding_config="
    for config in ([(0, 0)], 3, [(0, 0, 0, 0), (0, 0, 0)]):
        with _fails(where + r".*: padding_config is a sequence of \(edge_padding_low, "
                            r"edge_padding_high, interior_padding\), one per dimension"):
            pad_config(hg.s32[2, 3], config)
    with _fails(where + r"\[\(0, 0, 0\)\]: needs one \(low, high, interior\) per dimension \(2\)"):
        pad_shape(hg.s32[2, 3], ((0, 0, 0),))
    with _fails(where + r".*: dimension 1 has interior padding -1; it must be >= 0"):
        pad_shape(hg.s32[2, 3], ((0, 0, 0), (0, 0, -1)))
    with _fails(where + r".*: dimension 0 would have size -1"):
        pad_shape(hg.s32[2, 3], ((-2, -1, 0), (0, 0, 0)))


# -- BroadcastInDim, BitcastConvertType -------------------------------------------------------

def test_broadcast_in_dim():
    # StableHLO's example: [1, 3] to [2, 3, 2] along dimensions [2, 1]
    assert broadcast_in_dim_shape(hg.s32[1, 3], (2, 3, 2), (2, 1)) == hg.s32[2, 3, 2]
    # the spec's Broadcast example (a scalar to {2, 3}) in BroadcastInDim's terms
    assert broadcast_in_dim_shape(hg.f32[()], (2, 3), ()) == hg.f32[2, 3]
    where = r"^broadcast_in_dim: operand s32\[1,3\], out_dim_size=\[.*\], broadcast_dimensions=\[.*\]: "
    cases = [((2, -3, 2), (2, 1), "sizes must be non-negative"),
             ((2, 3, 2), (1,), r"broadcast_dimensions needs one entry per operand dimension \(2\)"),
             ((2, 3, 2), (1, 1), "broadcast_dimensions must not repeat a dimension"),
             ((2, 3, 2), (0, 3), "dimension 3 is out of range for rank 3"),
             ((2, 4, 2), (0, 1), r"operand dimension 1 \(size 3\) must be 1 or equal to output "
                                 r"dimension 1 \(size 4\)")]
    for out, dims, rule in cases:
        with _fails(where + rule):
            broadcast_in_dim_shape(hg.s32[1, 3], out, dims)


def test_bitcast_convert_errors():
    # the shapes of the spec's examples: tests/test_conversion_and_shaping.py
    with _fails(r"^bitcast_convert_type: cannot bitcast pred\[2\] to s8: pred and complex"):
        bitcast_convert_shape(hg.pred[2], hg.s8)
    with _fails(r"^bitcast_convert_type: cannot bitcast f32\[2\] to f6e2m3fn: one width must "
                r"be a multiple of the other \(32 and 6 bits\)"):
        bitcast_convert_shape(hg.f32[2], hg.f6e2m3fn)
    with _fails(r"^bitcast_convert_type: bitcasting f16\[10,3\] to the wider f32 needs a minor "
                r"dimension of size 2"):
        bitcast_convert_shape(hg.f16[10, 3], hg.f32)


# -- DotGeneral --------------------------------------------------------------------------------

def _dot(lhs, rhs, lc, rc, lb=(), rb=()):
    return dot_general_shape(lhs, rhs, DotDimensionNumbers(lc, rc, lb, rb), lhs.element_type)


def test_dot_general():
    # the spec's contracting example: 2x3 and 2x3 over dimension 1 of each
    assert _dot(hg.f32[2, 3], hg.f32[2, 3], (1,), (1,)) == hg.f32[2, 2]
    # its batch example, and its table: batch, then lhs free, then rhs free dimensions
    assert _dot(hg.f32[2, 2, 2], hg.f32[2, 2, 2], (2,), (1,), (0,), (0,)) == hg.f32[2, 2, 2]
    assert _dot(hg.f32[5, 2, 3], hg.f32[5, 3, 4], (2,), (1,), (0,), (0,)) == hg.f32[5, 2, 4]
    assert _dot(hg.f32[5, 6, 2, 3], hg.f32[5, 6, 3, 4], (3,), (2,), (0, 1), (0, 1)) == \
        hg.f32[5, 6, 2, 4]
    # Dot's table: vector . vector, matrix . vector, matrix . matrix
    assert _dot(hg.f32[7], hg.f32[7], (0,), (0,)) == hg.f32[()]
    assert _dot(hg.f32[2, 7], hg.f32[7], (1,), (0,)) == hg.f32[2]
    assert _dot(hg.f32[2, 7], hg.f32[7, 4], (1,), (0,)) == hg.f32[2, 4]
    # the result type is the one asked for (preferred_element_type, parsed by the op)
    numbers = DotDimensionNumbers((1,), (0,))
    assert dot_general_shape(hg.s8[2, 7], hg.s8[7, 4], numbers, hg.s32) == hg.s32[2, 4]


def test_dot_general_errors():
    where = (r"^dot_general: lhs f32\[2,3\], rhs f32\[3,4\], lhs_contracting_dimensions=\[.*\], "
             r"rhs_contracting_dimensions=\[.*\], lhs_batch_dimensions=\[.*\], "
             r"rhs_batch_dimensions=\[.*\]: ")
    cases = [((2,), (0,), (), (), r"every lhs dimension number must be in \[0, 2\)"),
             ((1,), (0,), (1,), (1,), "the lhs contracting and batch dimensions must all differ"),
             ((1,), (), (), (), "lhs and rhs need as many contracting dimensions"),
             ((0,), (1,), (), (), r"contracting dimension 0 of lhs \(size 2\) and 1 of rhs "
                                  r"\(size 4\) must have the same size"),
             ((1,), (0,), (0,), (), "lhs and rhs need as many batch dimensions"),
             ((1,), (0,), (0,), (1,), r"batch dimension 0 of lhs \(size 2\) and 1 of rhs "
                                      r"\(size 4\) must have the same size")]
    for lc, rc, lb, rb, rule in cases:
        with _fails(where + rule):
            _dot(hg.f32[2, 3], hg.f32[3, 4], lc, rc, lb, rb)


# -- Fft ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,kind,length,result", [
    (hg.c64[3, 8], "FFT", (8,), hg.c64[3, 8]),         # "形状保持不变"
    (hg.c128[3, 8], "IFFT", (8,), hg.c128[3, 8]),
    (hg.f32[3, 16], "RFFT", (16,), hg.c64[3, 9]),       # fft_length[-1] // 2 + 1
    (hg.f32[3, 17], "RFFT", (17,), hg.c64[3, 9]),       # the same shape as RFFT(16)
    (hg.c64[3, 9], "IRFFT", (16,), hg.f32[3, 16]),      # why IRFFT needs fft_length
    (hg.c64[3, 9], "IRFFT", (17,), hg.f32[3, 17]),
    (hg.f64[4, 16], "RFFT", (4, 16), hg.c128[4, 9]),    # several axes: the innermost halves
    (hg.c128[4, 9], "IRFFT", (4, 16), hg.f64[4, 16]),
    (hg.c64[2, 3, 4], "FFT", (2, 3, 4), hg.c64[2, 3, 4]),  # up to 3 axes
    (hg.f32[4], "RFFT", (4,), hg.c64[3]),               # StableHLO's rfft example
])
def test_fft(shape, kind, length, result):
    assert fft_shape(shape, kind, length) == result


# the spec changes the innermost size only 'if fft_length[-1] is non-zero' (XLA's
# InferFftShape: 'Preserve the size of zero-sized dimensions')
def test_fft_of_zero_length_keeps_the_size():
    assert fft_shape(hg.f32[3, 0], "RFFT", (0,)) == hg.c64[3, 0]
    assert fft_shape(hg.c64[3, 0], "IRFFT", (0,)) == hg.f32[3, 0]


def test_fft_errors():
    cases = [(hg.c64[8], "DFT", (8,), "fft_type must be one of FFT, IFFT, RFFT, IRFFT"),
             (hg.c64[2, 2, 2, 2], "FFT", (2, 2, 2, 2), "fft_length gives 1 to 3 non-negative "
                                                       "sizes"),
             (hg.c64[8], "FFT", (), "fft_length gives 1 to 3"),
             (hg.c64[8], "FFT", (2, 8), "the operand needs at least 2 dimensions"),
             (hg.f16[8], "RFFT", (8,), "RFFT takes f32 or f64"),
             (hg.f32[8], "RFFT", (4,), r"the innermost dimensions \[8\] must be fft_length"),
             (hg.f32[8], "FFT", (8,), "FFT takes c64 or c128"),
             (hg.c64[8], "IRFFT", (8,), r"the innermost dimensions \[8\] must be fft_length with "
                                        r"its last size halved: \[5\]"),
             (hg.c64[3, 5], "IRFFT", (2, 8), r"the innermost dimensions \[3, 5\] must be "
                                             r"fft_length with its last size halved: \[2, 5\]"),
             (hg.c64[8], "IFFT", (4,), r"the innermost dimensions \[8\] must be fft_length")]
    for shape, kind, length, rule in cases:
        with _fails(rf"^fft: operand {re.escape(str(shape))}, fft_type='{kind}', "
                    rf"fft_length=\[.*\]: {rule}"):
            fft_shape(shape, kind, length)


# -- Gather, Scatter ---------------------------------------------------------------------------

GATHER = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
          "start_indices_batching_dims", "start_index_map", "index_vector_dim")
SCATTER = ("update_window_dims", "inserted_window_dims", "input_batching_dims",
           "scatter_indices_batching_dims", "scatter_dims_to_operand_dims", "index_vector_dim")


def _gather(operand, indices, offset_dims, collapsed, index_map, ivd, sizes,
            operand_batching=(), indices_batching=()):
    mapping = IndexMapping("gather", GATHER, offset_dims, collapsed, operand_batching,
                           indices_batching, index_map, ivd)
    return gather_shape(operand, indices, mapping, sizes)


@pytest.mark.parametrize("args,result", [
    # 5 slices [8,6] of a [16,11] array: output [G, O0, O1]
    ((hg.f32[16, 11], hg.s64[5, 2], (1, 2), (), (0, 1), 1, (8, 6)), hg.f32[5, 8, 6]),
    # the [4,5,2] indices: [G0, G1, O0, O1]
    ((hg.f32[16, 11], hg.s64[4, 5, 2], (2, 3), (), (0, 1), 2, (8, 6)), hg.f32[4, 5, 8, 6]),
    # tf.gather_nd: one start component, rows of 11, [G0, G1, O0]
    ((hg.f32[16, 11], hg.s32[4, 5, 1], (2,), (0,), (0,), 2, (1, 11)), hg.f32[4, 5, 11]),
    # index_vector_dim == rank: an implicit trailing 1 ([6,7] read as [6,7,1])
    ((hg.f32[16, 11], hg.s32[6, 7], (2,), (0,), (0,), 2, (1, 11)), hg.f32[6, 7, 11]),
    # remapped_offset_dims: 4 offset dims of a rank-6 operand, {0, 2} collapsed
    ((hg.f32[2, 3, 2, 5, 6, 7], hg.s32[9, 2], (1, 2, 3, 4), (0, 2), (0, 2), 1,
      (1, 3, 1, 4, 5, 6)), hg.f32[9, 3, 4, 5, 6]),
    # offset dims before the batch dimension
    ((hg.f32[16, 11], hg.s64[5, 2], (0, 1), (), (0, 1), 1, (8, 6)), hg.f32[8, 6, 5]),
    # StableHLO's example (batching dimensions) and its interpreter's
    ((hg.s32[2, 3, 4, 2], hg.s64[2, 2, 3, 2], (3, 4), (1,), (2, 1), 3, (1, 1, 2, 2), (0,), (1,)),
     hg.s32[2, 2, 3, 2, 2]),
    ((hg.s64[3, 4, 2], hg.s64[2, 3, 2], (2, 3), (0,), (1, 0), 2, (1, 2, 2)), hg.s64[2, 3, 2, 2]),
])
def test_gather(args, result):
    assert _gather(*args) == result


def test_gather_errors():
    where = r"^gather: operand f32\[16,11\], indices s64\[5,2\], offset_dims=.*: "
    o, i = hg.f32[16, 11], hg.s64[5, 2]
    cases = [
        (((1, 2), (), (0, 1), 3, (8, 6)), r"index_vector_dim must be in \[0, 2\]"),
        (((1, 2), (), (0,), 1, (8, 6)), r"start_index_map must have one entry per component of "
                                        r"an index vector \(2, the size of dimension 1"),
        (((1, 3), (), (0, 1), 1, (8, 6)), r"every entry of offset_dims must be in \[0, 3\)"),
        (((1, 2), (), (0, 2), 1, (8, 6)), r"every entry of start_index_map must be in \[0, 2\)"),
        (((1, 2), (), (0, 0), 1, (8, 6)), "start_index_map must not repeat a dimension"),
        (((2, 1), (), (0, 1), 1, (8, 6)), "offset_dims must be sorted"),
        (((1,), (), (0, 1), 1, (8, 6)), r"the operand's rank \(2\) must equal the number of "
                                        r"offset_dims \+ collapsed_slice_dims"),
        (((1, 2), (), (0, 1), 1, (8,)), r"slice_sizes=\[8\] needs one entry per operand dimension"),
        (((1, 2), (), (0, 1), 1, (17, 6)), r"slice_sizes=\[17, 6\]: dimension 0 slices 17 "
                                           r"elements of 16"),
        (((1,), (0,), (0, 1), 1, (8, 6)), r"dimension 0 is collapsed or batching, so its slice "
                                          r"size must be 0 or 1, not 8"),
    ]
    for args, rule in cases:
        with _fails(where + rule):
            _gather(o, i, *args)
    with _fails(r"^gather: .*: batching dimension 0 of the operand \(size 2\) and 1 of the "
                r"indices \(size 3\) must have the same size"):
        _gather(hg.s32[2, 3, 4, 2], hg.s64[2, 3, 3, 2], (3, 4), (1,), (2, 1), 3, (1, 1, 2, 2),
                (0,), (1,))
    with _fails(r"^gather: .*: start_index_map must not name a dimension of operand_batching_dims"):
        _gather(hg.s32[2, 3, 4, 2], hg.s64[2, 2, 3, 2], (3, 4), (1,), (0, 1), 3, (1, 1, 2, 2),
                (0,), (1,))
    with _fails(r"^gather: .*: index_vector_dim must not be one of start_indices_batching_dims"):
        _gather(hg.s32[2, 3, 4, 2], hg.s64[2, 2, 3, 2], (3, 4), (1,), (2, 1), 3, (1, 1, 2, 2),
                (0,), (3,))


def _scatter(operand, indices, updates, window_dims, inserted, index_map, ivd,
             input_batching=(), indices_batching=()):
    mapping = IndexMapping("scatter", SCATTER, window_dims, inserted, input_batching,
                           indices_batching, index_map, ivd)
    return scatter_window(operand, indices, updates, mapping)


def test_scatter():
    """The window of updates each index vector writes, per operand dimension."""
    # StableHLO's example (batching dimensions) and its interpreter's
    assert _scatter(hg.s64[2, 3, 4, 2], hg.s64[2, 2, 3, 2], hg.s64[2, 2, 3, 2, 2], (3, 4), (1,),
                    (2, 1), 3, (0,), (1,)) == [1, 1, 2, 2]
    assert _scatter(hg.s64[3, 4, 2], hg.s64[2, 3, 2], hg.s64[2, 3, 2, 2], (2, 3), (0,), (1, 0),
                    2) == [1, 2, 2]
    # window_dims_to_operand_dims: 4 window dims, operand rank 6, {0, 2} inserted -> 1, 3, 4, 5
    assert _scatter(hg.f32[2, 3, 2, 5, 6, 7], hg.s32[9, 2], hg.f32[9, 3, 4, 5, 6], (1, 2, 3, 4),
                    (0, 2), (0, 2), 1) == [1, 3, 1, 4, 5, 6]
    # implicit trailing index dimension: one update per index
    assert _scatter(hg.f32[6], hg.s32[3], hg.f32[3], (), (0,), (0,), 1) == [1]


def test_scatter_errors():
    where = r"^scatter: operand s64\[3,4,2\], indices s64\[2,3,2\], update_window_dims=.*: "
    o, i = hg.s64[3, 4, 2], hg.s64[2, 3, 2]
    with _fails(where + r"updates s64\[2,3,2\] must have rank 4: one dimension per indices "
                        r"dimension other than index_vector_dim"):
        _scatter(o, i, hg.s64[2, 3, 2], (2, 3), (0,), (1, 0), 2)
    with _fails(where + r"updates s64\[3,2,2,2\]: its dimensions other than update_window_dims "
                        r"\(\[3, 2\]\) must be the sizes of the indices' dimensions other than "
                        r"index_vector_dim \(\[2, 3\]\)"):
        _scatter(o, i, hg.s64[3, 2, 2, 2], (2, 3), (0,), (1, 0), 2)
    with _fails(where + r"updates s64\[2,3,5,2\]: the update window has size 5 in operand "
                        r"dimension 1, which has size 4"):
        _scatter(o, i, hg.s64[2, 3, 5, 2], (2, 3), (0,), (1, 0), 2)
    with _fails(where + "inserted_window_dims must be sorted"):
        _scatter(hg.s64[3, 4, 2], i, hg.s64[2, 3, 2], (2,), (1, 0), (1, 0), 2)


# -- windows: ReduceWindow, SelectAndScatter, the convolutions' spatial dimensions ----------------

@pytest.mark.parametrize("dims,args,result", [
    # the spec's 2x3 max pool of a [4x6] array, strides 2x3
    ((4, 6), ((2, 3), (2, 3), "VALID"), (2, 2)),
    # its 1-D example: window 3, stride 2 over 5 elements: [100, 1] and [1000, 10, 1]
    ((5,), ((3,), (2,), "VALID"), (2,)),
    ((5,), ((3,), (2,), "SAME"), (3,)),
    # StableHLO's reduce_window example: base and window dilations, padding
    ((3, 2), ((2, 1), (4, 1), ((2, 1), (0, 0)), (2, 1), (3, 1)), (2, 2)),
    # SelectAndScatter's figure: source [2, 2]; overlapping windows (stride 2 < 3): [1, 2]
    ((4, 6), ((2, 3), (2, 3), "VALID"), (2, 2)),
    ((2, 5), ((2, 3), (2, 2), "VALID"), (1, 2)),
    # StableHLO's convolution example: 4x4 input dilated by 2, 3x3 kernel, strides 4
    ((4, 4), ((3, 3), (4, 4), ((0, 0), (0, 0)), (2, 2), (1, 1)), (2, 2)),
    # a window larger than the padded input fits nowhere
    ((2,), ((3,), None, "VALID"), (0,)),
])
def test_window_output_dimensions(dims, args, result):
    assert window("reduce_window", dims, *args).output_dimensions(dims) == result


def test_same_padding_puts_the_odd_element_high():
    assert window("reduce_window", (5,), (3,), (2,), "SAME").padding == ((1, 1),)
    assert window("reduce_window", (4,), (2,), (1,), "SAME").padding == ((0, 1),)


def test_window_errors():
    cases = [((None,), r"window_dimensions is required"),
             (((2,),), r"window_dimensions=\[2\] needs one entry per dimension of the input "
                       r"\(2: \[4, 6\]\)"),
             (((2, 0),), r"window_dimensions=\[2, 0\] must be >= 1 in every dimension"),
             (((2, 3), (1, 0)), r"window_strides=\[1, 0\] must be >= 1"),
             (((2, 3), None, "FULL"), r"padding='FULL' must be 'SAME', 'VALID' or a sequence"),
             (((2, 3), None, [(0, 0)]), r"padding=\[\(0, 0\)\] needs one \(low, high\) pair per "
                                        r"dimension of the input \(2\)"),
             (((2, 3), None, [(0, 0, 0), (0, 0)]), r"padding=.* must be 'SAME', 'VALID' or a "
                                                   r"sequence of \(low, high\) pairs"),
             (((2, 3), None, [(-3, -2), (0, 0)]), r"padding \(-3, -2\) of dimension 0 removes "
                                                  r"more than its 4 elements"),
             (((2, 3), None, "VALID", (1, 0)), r"base_dilations=\[1, 0\] must be >= 1"),
             (((2, 3), None, "VALID", None, (0, 1)), r"window_dilations=\[0, 1\] must be >= 1")]
    for args, rule in cases:
        with _fails(r"^reduce_window: " + rule):
            window("reduce_window", (4, 6), *args)


# -- collectives ---------------------------------------------------------------------------------

def test_collective_shapes():
    # the spec: two replicas' [1.0, 2.5] and [3.0, 5.25] gathered along 0: 4 elements
    assert all_gather_shape(hg.f32[2], 0, 2) == hg.f32[4]
    # its AllToAll example: f32[4,16] split along 1 in 4, concatenated along 0
    assert all_to_all_shape(hg.f32[4, 16], 1, 0, 4) == hg.f32[16, 4]
    # its ReduceScatter example: [4.0] and [7.5] from two replicas' two elements
    assert reduce_scatter_shape(hg.f32[2], 0, 2) == hg.f32[1]
    # StableHLO's: all_gather 2x2 along 1, all_to_all 2x4 split 1 concat 0, reduce_scatter 2x4
    assert all_gather_shape(hg.s64[2, 2], 1, 2) == hg.s64[2, 4]
    assert all_to_all_shape(hg.s64[2, 4], 1, 0, 2) == hg.s64[4, 2]
    assert reduce_scatter_shape(hg.s64[2, 4], 1, 2) == hg.s64[2, 2]


def test_collective_errors():
    with _fails(r"^all_gather: all_gather_dim=2 must be a dimension number in \[0, 2\)"):
        all_gather_shape(hg.f32[2, 2], 2, 2)
    with _fails(r"^all_gather: all_gather_dim=1 is a dimension of size 0 in operand f32\[2,0\]"):
        all_gather_shape(hg.f32[2, 0], 1, 2)
    with _fails(r"^reduce_scatter: scatter_dimension=-1 must be a dimension number"):
        reduce_scatter_shape(hg.f32[2, 4], -1, 2)
    with _fails(r"^reduce_scatter: dimension 1 of operand f32\[2,4\] \(size 4\) must be "
                r"divisible by shard_count=3"):
        reduce_scatter_shape(hg.f32[2, 4], 1, 3)
    with _fails(r"^all_to_all: split_dimension=2 must be a dimension number"):
        all_to_all_shape(hg.f32[4, 16], 2, 0, 4)
    with _fails(r"^all_to_all: concat_dimension=5 must be a dimension number"):
        all_to_all_shape(hg.f32[4, 16], 1, 5, 4)
    with _fails(r"^all_to_all: dimension 1 of operand f32\[4,16\] \(size 16\) must be divisible "
                r"by split_count=3"):
        all_to_all_shape(hg.f32[4, 16], 1, 0, 3)


# -- RngUniform, RngNormal, RngBitGenerator ------------------------------------------------------

# the spec: "CPU 和 GPU 后端目前仅支持 F64、F32、F16、BF16、S64、U64、S32 和 U32"
UNIFORM_ON_CPU_AND_GPU = {"f64", "f32", "f16", "bf16", "s64", "u64", "s32", "u32"}


def test_rng_uniform_types():
    """Pred, integers and floats (the spec), of which XLA generates the listed ones: the
    others are refused as unsupported, complex types as wrong."""
    for et in hg.ELEMENT_TYPES.values():
        scalar, shape = hg.Shape(et, ()), hg.Shape(et, (3, 4))
        if et.name in UNIFORM_ON_CPU_AND_GPU:
            assert rng_shape("rng_uniform", "a", scalar, "b", scalar, shape) == shape
        elif et.name.startswith("c"):
            with _fails(r"^rng_uniform: .*: rng_uniform generates pred, integer or "
                        r"floating-point numbers"):
                rng_shape("rng_uniform", "a", scalar, "b", scalar, shape)
        else:
            with pytest.raises(hg.UnsupportedError, match=rf"^rng_uniform: .*aborts on {et.name}\)"):
                rng_shape("rng_uniform", "a", scalar, "b", scalar, shape)


def test_rng_errors():
    with _fails(r"^rng_normal: mu s32\[\], sigma s32\[\], shape s32\[3\]: rng_normal generates "
                r"floating-point numbers, not s32"):  # the spec: floating-point types
        rng_shape("rng_normal", "mu", hg.s32[()], "sigma", hg.s32[()], hg.s32[3])
    with _fails(r"^rng_uniform: a f32\[2\], b f32\[\], shape f32\[3\]: a must be a scalar"):
        rng_shape("rng_uniform", "a", hg.f32[2], "b", hg.f32[()], hg.f32[3])
    with _fails(r"^rng_normal: mu f32\[\], sigma f64\[\], shape f32\[3\]: sigma must have the "
                r"output's element type f32"):
        rng_shape("rng_normal", "mu", hg.f32[()], "sigma", hg.f64[()], hg.f32[3])


def test_rng_bit_generator():
    # the new state has the initial state's shape; the data the shape asked for
    assert rng_bit_generator_shapes("THREE_FRY", hg.u64[2], hg.u32[4, 5]) == (hg.u64[2], hg.u32[4, 5])
    assert rng_bit_generator_shapes("PHILOX", hg.u64[3], hg.f32[7]) == (hg.u64[3], hg.f32[7])
    where = r"^rng_bit_generator: algorithm=\w+, initial_state \w+\[.*\], shape \w+\[.*\]: "
    with _fails(where + r"initial_state must be u64\[2\] for THREE_FRY, got u64\[3\]"):
        rng_bit_generator_shapes("THREE_FRY", hg.u64[3], hg.u32[4])
    with _fails(where + r"initial_state must be u64\[2\] or u64\[3\] for PHILOX, got s64\[2\]"):
        rng_bit_generator_shapes("PHILOX", hg.s64[2], hg.u32[4])
    with _fails(where + r"the data must be of an integer or floating-point type, not c64"):
        rng_bit_generator_shapes("PHILOX", hg.u64[2], hg.c64[4])
