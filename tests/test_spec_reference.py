"""tests/spec_reference.py against the specs' worked examples, as data.

"XLA" examples come from spec/operation-semantics.zh.md, "StableHLO" ones from
openxla/stablehlo docs/spec.md and stablehlo/tests/interpret/*.mlir. Where the XLA text
states a mapping without numbers (Gather's informal examples, TopK), the mapping is
checked on chosen data.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tests import spec_reference as ref


def same(actual, expected, dtype=None):
    actual = np.asarray(actual)
    expected = np.asarray(expected, dtype=dtype if dtype is not None else actual.dtype)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype
    assert actual.tobytes() == expected.tobytes(), (actual, expected)


# The XLA spec's 24-element array v = f32[4x2x3] (Collapse, Reshape).
V = np.array([[[10, 11, 12], [15, 16, 17]],
              [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]],
              [[40, 41, 42], [45, 46, 47]]], np.float32)
V_FLAT = [10, 11, 12, 15, 16, 17, 20, 21, 22, 25, 26, 27, 30, 31, 32, 35, 36, 37, 40, 41, 42, 45, 46, 47]
V_8x3 = [[10, 11, 12], [15, 16, 17], [20, 21, 22], [25, 26, 27],
         [30, 31, 32], [35, 36, 37], [40, 41, 42], [45, 46, 47]]


# -- Collapse / Reshape / Transpose / Rev -------------------------------------------------

def test_collapse_xla_examples():
    same(ref.collapse(V, [0, 1, 2]), V_FLAT)
    # The spec's text: the given dims are replaced by one dim at their position, whose size is
    # the product of theirs. Its two 2-D examples carry swapped labels ("v01 = Collapse(v,
    # {0,1})" shown as f32[4x6], "v12 = Collapse(v, {1,2})" as f32[8x3]): merging dims 0 and 1
    # (sizes 4 and 2) of f32[4x2x3] can only give 8x3. The reference follows the text (as does
    # XlaBuilder: xla_client_test collapses [2,2,2] over [1,2] into [2,4]); the data are the
    # example's.
    same(ref.collapse(V, [1, 2]), [[10, 11, 12, 15, 16, 17], [20, 21, 22, 25, 26, 27],
                                   [30, 31, 32, 35, 36, 37], [40, 41, 42, 45, 46, 47]])
    same(ref.collapse(V, [0, 1]), V_8x3)
    same(ref.collapse(V, [1]), V)


def test_reshape_xla_examples():
    same(ref.reshape(V, [24]), V_FLAT)
    same(ref.reshape(V, [8, 3]), V_8x3)
    # "reshape 可以将单元素数组转换为标量,反之亦然"
    same(ref.reshape(np.array([[5]], np.float32), []), np.float32(5))
    same(ref.reshape(np.float32(5), [1, 1]), [[5]])


def test_reshape_stablehlo_example():
    same(ref.reshape(np.array([[1, 2, 3], [4, 5, 6]], np.int32), (3, 2)), [[1, 2], [3, 4], [5, 6]])


def test_transpose_stablehlo_example():
    operand = np.array([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]], np.int32)
    same(ref.transpose(operand, [2, 1, 0]), [[[1, 7], [3, 9], [5, 11]], [[2, 8], [4, 10], [6, 12]]])
    # XLA: input_dimensions[permutation[i]] = output_dimensions[i]
    x = np.zeros((2, 3, 4), np.int8)
    assert ref.transpose(x, [1, 2, 0]).shape == (3, 4, 2)


def test_rev_stablehlo_example():
    same(ref.rev(np.array([[1, 2], [3, 4], [5, 6]], np.int32), [1]), [[2, 1], [4, 3], [6, 5]])
    same(ref.rev(np.array([[1, 2], [3, 4], [5, 6]], np.int32), [0, 1]), [[6, 5], [4, 3], [2, 1]])


# -- Concatenate ---------------------------------------------------------------------------

def test_concatenate_xla_examples():
    same(ref.concatenate([np.array([2, 3]), np.array([4, 5]), np.array([6, 7])], 0), [2, 3, 4, 5, 6, 7])
    a = np.array([[1, 2], [3, 4], [5, 6]], np.int64)
    b = np.array([[7, 8]], np.int64)
    same(ref.concatenate([a, b], 0), [[1, 2], [3, 4], [5, 6], [7, 8]])  # also the StableHLO example


# -- Slice ---------------------------------------------------------------------------------

A5 = np.array([0.0, 1.0, 2.0, 3.0, 4.0], np.float32)
B43 = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0], [9.0, 10.0, 11.0]], np.float32)


def test_slice_xla_examples():
    same(ref.slice(A5, [2], [4]), [2.0, 3.0])
    same(ref.slice(B43, [2, 1], [4, 3]), [[7.0, 8.0], [10.0, 11.0]])


def test_slice_stablehlo_example_and_strides():
    operand = np.array([[0, 0, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], np.int64)
    same(ref.slice(operand, [1, 2], [3, 4], [1, 1]), [[1, 1], [1, 1]])
    # shape(result) = ceil((limit - start) / strides)
    same(ref.slice(np.arange(10, dtype=np.int32), [1], [8], [3]), [1, 4, 7])
    same(ref.slice_in_dim(B43, 0, 3, 2, 1), [[0.0, 2.0], [3.0, 5.0], [6.0, 8.0], [9.0, 11.0]])


# -- DynamicSlice / DynamicUpdateSlice ----------------------------------------------------

def test_dynamic_slice_xla_examples():
    same(ref.dynamic_slice(A5, [2], [2]), [2.0, 3.0])
    same(ref.dynamic_slice(B43, [2, 1], [2, 2]), [[7.0, 8.0], [10.0, 11.0]])


def test_dynamic_slice_stablehlo_example_clamps():
    operand = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]], np.int32)
    same(ref.dynamic_slice(operand, [np.int64(-1), np.int64(3)], [2, 2]), [[1, 1], [1, 1]])


def test_dynamic_slice_unsigned_starts_are_not_negative():
    # clamp(start, 0, dim - size): a huge unsigned start clamps to the high end.
    x = np.arange(10, dtype=np.int32)
    same(ref.dynamic_slice(x, [np.uint32(2**31)], [3]), [7, 8, 9])
    same(ref.dynamic_slice(x, [np.uint64(2**63 + 1)], [3]), [7, 8, 9])
    same(ref.dynamic_slice(x, [np.uint8(255)], [3]), [7, 8, 9])
    same(ref.dynamic_slice(x, [np.int8(-128)], [3]), [0, 1, 2])
    same(ref.dynamic_slice(B43, [np.uint16(1), np.int64(-5)], [2, 2]), [[3.0, 4.0], [6.0, 7.0]])


def test_dynamic_update_slice_xla_examples():
    same(ref.dynamic_update_slice(A5, np.array([5.0, 6.0], np.float32), [2]), [0.0, 1.0, 5.0, 6.0, 4.0])
    u = np.array([[12.0, 13.0], [14.0, 15.0], [16.0, 17.0]], np.float32)
    same(ref.dynamic_update_slice(B43, u, [1, 1]),
         [[0.0, 1.0, 2.0], [3.0, 12.0, 13.0], [6.0, 14.0, 15.0], [9.0, 16.0, 17.0]])


def test_dynamic_update_slice_stablehlo_example_clamps():
    operand = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1]], np.int32)
    update = np.array([[1, 1], [1, 1]], np.int32)
    same(ref.dynamic_update_slice(operand, update, [np.int64(-1), np.int64(3)]), np.ones((4, 4)))
    same(ref.dynamic_update_slice(np.zeros(5, np.int8), np.array([1, 2], np.int8), [np.uint64(2**64 - 1)]),
         [0, 0, 0, 1, 2])


# -- Pad -----------------------------------------------------------------------------------

def test_pad_stablehlo_example():
    operand = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    same(ref.pad(operand, np.int32(0), [(0, 2, 1), (1, 1, 2)]),
         [[0, 1, 0, 0, 2, 0, 0, 3, 0],
          [0, 0, 0, 0, 0, 0, 0, 0, 0],
          [0, 4, 0, 0, 5, 0, 0, 6, 0],
          [0, 0, 0, 0, 0, 0, 0, 0, 0],
          [0, 0, 0, 0, 0, 0, 0, 0, 0]])


def test_pad_stablehlo_interpreter_example_negative_edges():
    operand = np.array([[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0], [0, 5, 6, 0], [0, 0, 0, 0]], np.int64)
    same(ref.pad(operand, np.array(-1, np.int64), [(1, 1, 0), (-1, -1, 1)]),
         [[-1, -1, -1, -1, -1], [-1, 0, -1, 0, -1], [-1, 1, -1, 2, -1], [-1, 3, -1, 4, -1],
          [-1, 5, -1, 6, -1], [-1, 0, -1, 0, -1], [-1, -1, -1, -1, -1]])


def test_pad_interior_before_negative_edges():
    # "内部内边距会先于边缘内边距发生,因此在负边缘内边距的情况下,系统会从内边距内运算对象中移除元素"
    x = np.array([1, 2, 3], np.int32)
    same(ref.pad(x, np.int32(0), [(-1, 0, 1)]), [0, 2, 0, 3])
    same(ref.pad(x, np.int32(9), [(-2, -2, 1)]), [2])
    same(ref.pad(x, np.int32(9), [(-3, 0, 0)]), np.zeros(0, np.int32))
    same(ref.pad(np.zeros(0, np.float32), np.float32(7), [(2, -1, 3)]), [7.0])
    same(ref.pad(np.float32(5), np.float32(0), []), np.float32(5))


# -- Sort / TopK ---------------------------------------------------------------------------

def test_sort_xla_example_three_operands():
    op0, op1, op2 = np.array([3, 1], np.int32), np.array([42, 50], np.int32), np.array([-3.0, 1.1], np.float32)
    r0, r1, r2 = ref.sort([op0, op1, op2], comparator=lambda a, b, *rest: a < b)
    same(r0, [1, 3]), same(r1, [50, 42]), same(r2, [1.1, -3.0])


def test_sort_stablehlo_example_gt_stable():
    in0 = np.array([[1, 2, 3], [3, 2, 1]], np.int64)
    in1 = np.array([[3, 2, 1], [1, 2, 3]], np.int64)
    r0, r1 = ref.sort([in0, in1], comparator=lambda a, b, c, d: a > b, dimension=0, is_stable=True)
    same(r0, [[3, 2, 3], [1, 2, 1]])
    same(r1, [[1, 2, 1], [3, 2, 3]])


def test_sort_stablehlo_interpreter_example_dimension_0():
    x = np.array([[0, 1, 1, -3, -3, -2, 0], [4, -1, 3, 0, 4, 0, -3], [1, 0, 0, 0, 0, 2, 3],
                  [-3, -4, -4, -2, 0, 3, 3], [0, 5, 2, -2, 0, -2, 0]], np.int64)
    (r,) = ref.sort([x], comparator=lambda a, b: a < b, dimension=0)
    same(r, [[-3, -4, -4, -3, -3, -2, -3], [0, -1, 0, -2, 0, -2, 0], [0, 0, 1, -2, 0, 0, 0],
             [1, 1, 2, 0, 0, 2, 3], [4, 5, 3, 0, 4, 3, 3]])
    (r_default,) = ref.sort([x], dimension=-2)
    same(r_default, r)


def test_sort_default_is_the_float_total_order():
    nan = np.float32(np.nan)
    x = np.array([1.0, nan, -0.0, -np.inf, 0.0, -nan, np.inf, -1.0], np.float32)
    (r,) = ref.sort([x])
    expected_bits = np.array([-nan, -np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, nan], np.float32)
    same(r, expected_bits)
    for dt in (np.float16, np.float64, ml_dtypes.bfloat16):
        (r,) = ref.sort([x.astype(dt)])
        same(r, expected_bits.astype(dt))


def test_sort_default_other_types_and_rows():
    same(ref.sort([np.array([2**64 - 1, 0, 2**63], np.uint64)])[0], [0, 2**63, 2**64 - 1])
    same(ref.sort([np.array([True, False, True])])[0], [False, True, True])
    same(ref.sort([np.array([1 + 2j, 1 - 1j, -1 + 5j], np.complex64)])[0], [-1 + 5j, 1 - 1j, 1 + 2j])
    keys = np.array([[3, 1, 2], [0, 0, 1]], np.int8)
    vals = np.array([[10, 20, 30], [40, 50, 60]], np.float32)
    k, v = ref.sort([keys, vals], dimension=1)
    same(k, [[1, 2, 3], [0, 0, 1]]), same(v, [[20, 30, 10], [40, 50, 60]])
    assert ref.sort([np.zeros((2, 0), np.int32)])[0].shape == (2, 0)


def test_top_k_xla_description():
    x = np.array([[1, 3, 2, 3, 0], [5, 4, 4, 4, 9]], np.int32)
    values, indices = ref.top_k(x, 3)
    same(values, [[3, 3, 2], [9, 5, 4]]), same(indices, np.array([[1, 3, 2], [4, 0, 1]], np.int32))
    values, indices = ref.top_k(x, 2, largest=False)
    same(values, [[0, 1], [4, 4]]), same(indices, np.array([[4, 0], [1, 2]], np.int32))
    nan = np.float32(np.nan)
    values, indices = ref.top_k(np.array([1.0, nan, np.inf, -0.0, 0.0], np.float32), 5)
    same(values, np.array([nan, np.inf, 1.0, 0.0, -0.0], np.float32))
    same(indices, np.array([1, 2, 0, 4, 3], np.int32))
    assert ref.top_k(np.zeros((3, 4), np.float16), 0)[0].shape == (3, 0)


# -- Gather --------------------------------------------------------------------------------

OPERAND_16x11 = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)


def test_gather_xla_batch_dynamic_slice():
    # 5 slices of shape [8,6] from a [16,11] array, indices S64[5,2]:
    # output [G,O0,O1] = input [X+O0, Y+O1] with (X,Y) = indices[G].
    indices = np.array([[0, 0], [8, 5], [3, 2], [1, 4], [7, 0]], np.int64)
    out = ref.gather(OPERAND_16x11, indices, offset_dims=[1, 2], collapsed_slice_dims=[],
                     start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[8, 6])
    assert out.shape == (5, 8, 6)
    for g, (x, y) in enumerate(indices):
        same(out[g], OPERAND_16x11[x:x + 8, y:y + 6])


def test_gather_xla_batch_dynamic_slice_two_batch_dims():
    # The [4,5,2] version: output [G0,G1,O0,O1] = input [X+O0, Y+O1], (X,Y) = indices[G0,G1].
    rng = np.random.default_rng(0)
    indices = np.stack([rng.integers(0, 9, (4, 5)), rng.integers(0, 6, (4, 5))], axis=-1).astype(np.int64)
    out = ref.gather(OPERAND_16x11, indices, offset_dims=[2, 3], collapsed_slice_dims=[],
                     start_index_map=[0, 1], index_vector_dim=2, slice_sizes=[8, 6])
    assert out.shape == (4, 5, 8, 6)
    for g0 in range(4):
        for g1 in range(5):
            x, y = indices[g0, g1]
            same(out[g0, g1], OPERAND_16x11[x:x + 8, y:y + 6])


def test_gather_xla_gather_nd():
    # tf.gather_nd: output [G0,G1,O0] = input [GatherIndices[G0,G1,0], O0], slice_sizes [1,11].
    indices = np.array([[[3], [0]], [[15], [7]], [[2], [2]]], np.int32)
    out = ref.gather(OPERAND_16x11, indices, offset_dims=[2], collapsed_slice_dims=[0],
                     start_index_map=[0], index_vector_dim=2, slice_sizes=[1, 11])
    assert out.shape == (3, 2, 11)
    for g0 in range(3):
        for g1 in range(2):
            same(out[g0, g1], OPERAND_16x11[indices[g0, g1, 0]])
    # The same with an implicit index vector dimension (index_vector_dim == rank).
    implicit = ref.gather(OPERAND_16x11, indices[..., 0], offset_dims=[2], collapsed_slice_dims=[0],
                          start_index_map=[0], index_vector_dim=2, slice_sizes=[1, 11])
    same(implicit, out)


def test_gather_clamps_starts():
    # full_start_index = clamp(start, 0, dim - slice_size); unsigned values stay unsigned.
    indices = np.array([[255, 250], [0, 1]], np.uint8)
    out = ref.gather(OPERAND_16x11, indices, offset_dims=[1, 2], collapsed_slice_dims=[],
                     start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[8, 6])
    same(out[0], OPERAND_16x11[8:16, 5:11])
    same(out[1], OPERAND_16x11[0:8, 1:7])
    neg = ref.gather(OPERAND_16x11, np.array([[-7, 20]], np.int8), offset_dims=[1, 2], collapsed_slice_dims=[],
                     start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[8, 6])
    same(neg[0], OPERAND_16x11[0:8, 5:11])
    big = ref.gather(OPERAND_16x11, np.array([[2**64 - 1, 2**63]], np.uint64), offset_dims=[1, 2],
                     collapsed_slice_dims=[], start_index_map=[0, 1], index_vector_dim=1, slice_sizes=[8, 6])
    same(big[0], OPERAND_16x11[8:16, 5:11])


BATCHED_OPERAND = np.arange(1, 49, dtype=np.int64).reshape(2, 3, 4, 2)
BATCHED_INDICES = np.array([[[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]],
                            [[[0, 0], [2, 1], [2, 2]], [[1, 2], [0, 1], [1, 0]]]], np.int64)


def test_gather_stablehlo_example_with_batching_dims():
    out = ref.gather(BATCHED_OPERAND, BATCHED_INDICES, offset_dims=[3, 4], collapsed_slice_dims=[1],
                     operand_batching_dims=[0], start_indices_batching_dims=[1], start_index_map=[2, 1],
                     index_vector_dim=3, slice_sizes=[1, 1, 2, 2])
    same(out, [[[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
                [[[33, 34], [35, 36]], [[35, 36], [37, 38]], [[41, 42], [43, 44]]]],
               [[[[1, 2], [3, 4]], [[13, 14], [15, 16]], [[21, 22], [23, 24]]],
                [[[43, 44], [45, 46]], [[33, 34], [35, 36]], [[27, 28], [29, 30]]]]])


def test_gather_stablehlo_interpreter_example():
    operand = np.arange(1, 25, dtype=np.int64).reshape(3, 4, 2)
    indices = np.array([[[0, 0], [1, 0], [2, 1]], [[0, 1], [1, 1], [0, 9]]], np.int64)
    out = ref.gather(operand, indices, offset_dims=[2, 3], collapsed_slice_dims=[0], start_index_map=[1, 0],
                     index_vector_dim=2, slice_sizes=[1, 2, 2])
    same(out, [[[[1, 2], [3, 4]], [[3, 4], [5, 6]], [[13, 14], [15, 16]]],
               [[[9, 10], [11, 12]], [[11, 12], [13, 14]], [[17, 18], [19, 20]]]])


def test_gather_batching_dims_with_index_vector_dim_first():
    # full_batching_index[d_operand] = batch_index[d_start - (d_start < index_vector_dim ? 0 : 1)]
    operand = np.arange(2 * 5, dtype=np.int32).reshape(2, 5)
    indices = np.array([[[4, 0, 2]], [[1, 3, 3]]], np.int16).transpose(1, 0, 2)  # [1 (vector), 2 (batch), 3]
    out = ref.gather(operand, indices, offset_dims=[], collapsed_slice_dims=[1], operand_batching_dims=[0],
                     start_indices_batching_dims=[1], start_index_map=[1], index_vector_dim=0,
                     slice_sizes=[1, 1])
    same(out, [[4, 0, 2], [6, 8, 8]])


# -- Scatter -------------------------------------------------------------------------------

def add(a, b):
    return a + b


def test_scatter_stablehlo_example_with_batching_dims():
    (out,) = ref.scatter([BATCHED_OPERAND], BATCHED_INDICES, [np.ones((2, 2, 3, 2, 2), np.int64)], add,
                         update_window_dims=[3, 4], inserted_window_dims=[1], input_batching_dims=[0],
                         scatter_indices_batching_dims=[1], scatter_dims_to_operand_dims=[2, 1],
                         index_vector_dim=3)
    same(out, [[[[3, 4], [6, 7], [6, 7], [7, 8]], [[9, 10], [11, 12], [15, 16], [17, 18]],
                [[17, 18], [19, 20], [22, 23], [24, 25]]],
               [[[25, 26], [28, 29], [30, 31], [31, 32]], [[35, 36], [38, 39], [38, 39], [39, 40]],
                [[41, 42], [44, 45], [46, 47], [47, 48]]]])


def test_scatter_stablehlo_interpreter_example():
    inputs = np.arange(1, 25, dtype=np.int64).reshape(3, 4, 2)
    indices = np.array([[[0, 2], [1, 0], [2, 1]], [[0, 1], [1, 0], [0, 9]]], np.int64)
    (out,) = ref.scatter([inputs], indices, [np.ones((2, 3, 2, 2), np.int64)], add, update_window_dims=[2, 3],
                         inserted_window_dims=[0], scatter_dims_to_operand_dims=[1, 0], index_vector_dim=2)
    same(out, [[[1, 2], [5, 6], [7, 8], [7, 8]], [[10, 11], [12, 13], [14, 15], [16, 17]],
               [[18, 19], [20, 21], [21, 22], [23, 24]]])
    same(inputs, np.arange(1, 25).reshape(3, 4, 2))  # the input is not modified


def test_scatter_skips_whole_windows_that_do_not_fit():
    operand = np.zeros(6, np.int32)
    updates = np.array([[1, 2, 3], [10, 20, 30], [100, 200, 300], [7, 7, 7]], np.int32)
    indices = np.array([[0], [4], [-1], [3]], np.int64)  # [4, 7) and [-1, 2) stick out
    kw = dict(update_window_dims=[1], inserted_window_dims=[], scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    (out,) = ref.scatter([operand], indices, [updates], add, **kw)
    same(out, [1, 2, 3, 7, 7, 7])
    (per_element,) = ref.scatter([operand], indices, [updates], add, out_of_bounds="element", **kw)
    same(per_element, [201, 302, 3, 7, 17, 27])
    (unsigned,) = ref.scatter([operand], np.array([[2**32 - 1]], np.uint32), [updates[:1]], add, **kw)
    same(unsigned, operand)


def test_scatter_two_operands_order_and_arguments():
    # update_computation gets (operands..., updates...); updates apply in row-major order.
    keys, vals = np.zeros(3, np.int32), np.zeros(3, np.float32)
    calls = []

    def comp(k, v, uk, uv):
        calls.append((int(k), float(v), int(uk), float(uv)))
        return k * 10 + uk, v + uv

    indices = np.array([2, 0, 2], np.uint8)  # implicit index vector dimension
    k, v = ref.scatter([keys, vals], indices, [np.array([1, 2, 3], np.int32), np.array([0.5, 1.5, 2.5], np.float32)],
                       comp, update_window_dims=[], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                       index_vector_dim=1)
    same(k, [2, 0, 13]), same(v, np.array([1.5, 0.0, 3.0], np.float32))
    assert calls == [(0, 0.0, 1, 0.5), (0, 0.0, 2, 1.5), (1, 0.5, 3, 2.5)]


@pytest.mark.parametrize("dtype", [np.bool_, np.uint64, np.int8, np.float16, ml_dtypes.bfloat16, np.complex64])
def test_data_movement_keeps_every_dtype(dtype):
    x = np.arange(12).reshape(3, 4).astype(dtype)
    assert ref.transpose(x, [1, 0]).dtype == np.dtype(dtype)
    assert ref.pad(x, np.zeros((), dtype), [(1, -1, 1), (0, 0, 0)]).dtype == np.dtype(dtype)
    assert ref.concatenate([x, x], 1).shape == (3, 8)
    assert ref.gather(x, np.array([[1], [5]], np.uint64), offset_dims=[1], collapsed_slice_dims=[0],
                      start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 4]).dtype == np.dtype(dtype)
    same(ref.rev(ref.rev(x, [0, 1]), [1, 0]), x)
