"""tests/spec_reference_computations.py against the specs' worked examples, as data.

"XLA" examples come from spec/operation-semantics.zh.md, "StableHLO" ones from
openxla/stablehlo docs/spec.md and stablehlo/tests/interpret/*.mlir. Where the XLA text only
shows a figure (ReduceWindow's 4x6 max example, SelectAndScatter's figure) the stated shapes
and facts are checked on chosen data; "derived" marks expected values worked out by hand
from the spec's rules rather than printed in it.
"""
from __future__ import annotations

import numpy as np
import pytest

from tests import spec_reference_computations as ref
from tests.helpers import same

F32_MAX = np.finfo(np.float32).max
F32_MIN = np.finfo(np.float32).min  # LiteralUtil::MinValue(F32) is -inf; any lower bound works


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


# -- Reduce --------------------------------------------------------------------------------

def test_reduce_xla_1d_sum_and_fold_order():
    x = np.array([10, 11, 12, 13], np.float32)
    [r] = ref.reduce([x], [np.float32(0)], add, [0])
    same(r, np.float32(46))
    # The documented order: the XLA variadic example's left fold f(...f(f(init, V_0), V_1)...).
    calls = []

    def record(acc, v):
        calls.append((int(acc), int(v)))
        return acc + v

    ref.reduce([x], [np.float32(0)], record, [0])
    assert calls == [(0, 10), (10, 11), (21, 12), (33, 13)]


def test_reduce_stablehlo_example():
    [r] = ref.reduce([np.array([[0, 1, 2, 3, 4, 5]], np.int64)], [np.int64(0)], add, [1])
    same(r, [15], np.int64)


M2 = np.array([[1, 2, 3], [4, 5, 6]], np.float32)  # XLA: 2-D, dim 0 size 2, dim 1 size 3


def test_reduce_xla_2d():
    same(ref.reduce([M2], [0], add, [0])[0], [5, 7, 9], np.float32)
    same(ref.reduce([M2], [0], add, [1])[0], [6, 15], np.float32)


# XLA: 3-D, dims 4 x 2 x 3, "值 1 到 6 会复制到维度 0 中".
M3 = np.array([[[1, 2, 3], [4, 5, 6]]] * 4, np.float32)


def test_reduce_xla_3d():
    assert M3.shape == (4, 2, 3)
    same(ref.reduce([M3], [0], add, [0])[0], [[4, 8, 12], [16, 20, 24]], np.float32)
    same(ref.reduce([M3], [0], add, [2])[0], [[6, 15]] * 4, np.float32)
    same(ref.reduce([M3], [0], add, [0, 1])[0], [20, 28, 36], np.float32)
    same(ref.reduce([M3], [0], add, [1, 0])[0], [20, 28, 36], np.float32)  # unordered
    same(ref.reduce([M3], [0], add, [0, 1, 2])[0], np.float32(84))
    same(ref.reduce([M3], [0], add, [1])[0], [[5, 7, 9]] * 4, np.float32)  # derived


def argmax_step(max_, argmax, value, index):
    """The XLA spec's f: (Float, Int, Float, Int) -> Float, Int."""
    if value >= max_:
        return value, index
    return max_, argmax


def test_reduce_xla_variadic_max_argmax():
    v = np.array([3, 7, 7, 2, 5], np.float32)
    k = np.arange(5, dtype=np.int32)  # iota
    m, i = ref.reduce([v, k], [np.float32(-np.inf), np.int32(-1)], argmax_step, [0])
    same(m, np.float32(7))
    same(i, np.int32(2))  # `>=` in the left fold keeps the LAST of equal maxima
    # Row-wise over a 2-D pair, dimension 1.
    v2 = np.array([[1, 9, 3], [8, 2, 8]], np.float32)
    k2 = np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3))
    m2, i2 = ref.reduce([v2, k2], [np.float32(-np.inf), np.int32(-1)], argmax_step, [1])
    same(m2, [9, 8], np.float32)
    same(i2, [1, 2], np.int32)


def test_reduce_edge_cases():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    same(ref.reduce([x], [0], add, [])[0], x)  # no dimension: f(init, x) per element
    empty = np.zeros((2, 0), np.int32)
    same(ref.reduce([empty], [7], add, [1])[0], [7, 7], np.int32)  # empty extent: init
    # The computation's result is coerced to the element type (int8 wraps).
    with np.errstate(over="ignore"):
        same(ref.reduce([np.array([100, 100], np.int8)], [0], add, [0])[0], np.int8(-56))


# -- ReduceWindow --------------------------------------------------------------------------

def test_reduce_window_xla_2d_max():
    # The spec's example: a [4x6] input, window_dimensions and window strides both [2x3],
    # kValid, max with init MinValue(F32) -> [2x2] of the maxima of the four 2x3 blocks.
    x = np.array([[10, 2, 3, 4, 50, 6],
                  [7, 8, 9, 1, 2, 3],
                  [3, 30, 1, 9, 8, 7],
                  [4, 5, 6, 7, 70, 1]], np.float32)
    [r] = ref.reduce_window([x], [np.float32(-np.inf)], np.maximum, [2, 3], [2, 3], "VALID")
    same(r, [[10, 50], [30, 70]], np.float32)


X5 = np.array([10000, 1000, 100, 10, 1], np.float32)


def test_reduce_window_xla_1d_min_padding():
    # "维度为 3 且步长为 2 的 reduce 窗口最小值(初始值为 MAX_FLOAT)"
    [valid] = ref.reduce_window([X5], [F32_MAX], np.minimum, [3], [2], "VALID")
    same(valid, [100, 1], np.float32)
    # kSame pads to [MAX_VALUE, 10000, 1000, 100, 10, 1, MAX_VALUE].
    assert ref.padding_for("SAME", [5], [3], [2]) == [(1, 1)]
    [same_] = ref.reduce_window([X5], [F32_MAX], np.minimum, [3], [2], "SAME")
    same(same_, [1000, 10, 1], np.float32)
    # The explicit padding gives the same windows.
    same(ref.reduce_window([X5], [F32_MAX], np.minimum, [3], [2], [(1, 1)])[0], same_)


def test_reduce_window_1d_min_window2_stride1():  # derived
    [valid] = ref.reduce_window([X5], [F32_MAX], np.minimum, [2], [1], "VALID")
    same(valid, [1000, 100, 10, 1], np.float32)
    assert ref.padding_for("SAME", [5], [2], [1]) == [(0, 1)]  # odd total: extra goes high
    [same_] = ref.reduce_window([X5], [F32_MAX], np.minimum, [2], [1], "SAME")
    same(same_, [1000, 100, 10, 1, 1], np.float32)


def test_reduce_window_stablehlo_dilations():
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int64)
    [r] = ref.reduce_window([x], [np.int64(0)], add, window_dimensions=[2, 1],
                            window_strides=[4, 1], padding=[(2, 1), (0, 0)],
                            base_dilations=[2, 1], window_dilations=[3, 1])
    same(r, [[0, 0], [3, 4]], np.int64)
    # stablehlo/tests/interpret/reduce_window.mlir, @reduce_window_issue_1662.
    [r] = ref.reduce_window([x], [np.int64(0)], add, window_dimensions=[3, 1],
                            window_strides=[4, 1], padding=[(2, 1), (0, 0)],
                            base_dilations=[2, 1], window_dilations=[3, 1])
    same(r, [[5, 6]], np.int64)


def test_reduce_window_padding_and_holes_take_init():  # derived
    x = np.array([1, 2, 3], np.int32)
    # base dilation 2 -> [1, h, 2, h, 3]; holes and padding are the init value (100 here, not
    # an identity, to make them visible): windows of 2 over [100, 1, 100, 2, 100, 3, 100].
    [r] = ref.reduce_window([x], [np.int32(100)], np.maximum, [2], [1], [(1, 1)], [2])
    same(r, [100, 100, 100, 100, 100, 100], np.int32)
    [r] = ref.reduce_window([x], [np.int32(0)], add, [2], [1], [(1, 1)], [2])
    same(r, [1, 1, 2, 2, 3, 3], np.int32)
    # Negative padding removes elements (StableHLO `pad`).
    [r] = ref.reduce_window([np.array([1, 2, 3, 4], np.int32)], [0], add, [1], [1], [(-1, 0)])
    same(r, [2, 3, 4], np.int32)
    # A window larger than the padded input: no windows.
    same(ref.reduce_window([x], [0], add, [4])[0], np.zeros((0,), np.int32))


def test_reduce_window_variadic():
    v = np.array([1, 5, 5, 2, 8, 8], np.float32)
    k = np.arange(6, dtype=np.int32)
    m, i = ref.reduce_window([v, k], [np.float32(-np.inf), np.int32(-1)], argmax_step, [3], [3])
    same(m, [5, 8], np.float32)
    same(i, [2, 5], np.int32)


def test_padding_for():
    # xla/client/padding.cc MakePadding's own illustrations.
    assert ref.padding_for("SAME", [10], [5], [3]) == [(2, 2)]  # "00----------00", output 4
    assert ref.padding_for("SAME", [24], [7], [1]) == [(3, 3)]
    assert ref.padding_for("SAME", [24], [6], [1]) == [(2, 3)]  # option A: one more high
    assert ref.padding_for("VALID", [5, 4], [2, 2], [1, 1]) == [(0, 0), (0, 0)]
    assert ref.padding_for([(1, -2), (0, 3)], [5, 4], [2, 2], [1, 1]) == [(1, -2), (0, 3)]
    assert ref.padding_for(np.array([[1, 2]]), [5], [2], [1]) == [(1, 2)]
    # Stride larger than the window: never negative.
    assert ref.padding_for("SAME", [5], [1], [3]) == [(0, 0)]
    # Dilations: window 3 with dilation 2 spans 5; base 4 with dilation 2 spans 7.
    assert ref.padding_for("SAME", [4], [3], [1], window_dilations=[2]) == [(2, 2)]
    assert ref.padding_for("SAME", [4], [2], [2], base_dilations=[2]) == [(0, 1)]


@pytest.mark.parametrize("n,w,s,b,d", [(5, 3, 2, 1, 1), (7, 2, 3, 1, 1), (4, 3, 1, 1, 2),
                                       (4, 2, 2, 2, 1), (6, 3, 2, 3, 2), (1, 4, 1, 1, 1)])
def test_same_output_size_is_ceil_of_dilated_base_over_stride(n, w, s, b, d):
    x = np.arange(n, dtype=np.int32)
    [r] = ref.reduce_window([x], [0], add, [w], [s], "SAME", [b], [d])
    dilated = (n - 1) * b + 1
    assert r.shape == (-(-dilated // s),)


# -- SelectAndScatter ----------------------------------------------------------------------

def ge(a, b):
    return a >= b


def test_select_and_scatter_stablehlo_example():
    operand = np.array([[1, 5], [2, 5], [3, 6], [4, 4]], np.int64)
    source = np.array([[5, 6], [7, 8]], np.int64)
    r = ref.select_and_scatter(operand, ge, [3, 1], [2, 1], [(0, 1), (0, 0)], source,
                               np.int64(0), add)
    same(r, [[0, 0], [0, 0], [5, 14], [7, 0]], np.int64)


def test_select_and_scatter_xla_figure_overlap():
    # The figure's fact: with overlapping windows, the element 9 is selected by two windows
    # (blue and red) whose source values 2 and 6 add to an output of 8. Data chosen here.
    operand = np.array([[1, 4, 2, 3, 1],
                        [5, 0, 9, 7, 2],
                        [3, 8, 6, 1, 4]], np.float32)
    source = np.array([[2, 6]], np.float32)
    r = ref.select_and_scatter(operand, ge, [3, 3], [2, 2], "VALID", source, np.float32(0), add)
    expected = np.zeros((3, 5), np.float32)
    expected[1, 2] = 8
    same(r, expected)


def test_select_and_scatter_non_overlapping_and_ties():  # derived
    operand = np.array([[7, 2, 6, 6],
                        [3, 7, 1, 5]], np.int32)
    source = np.array([[10, 20]], np.int32)
    # select = `>=`: select(current, next) is true on a tie, so the FIRST maximum stays.
    r = ref.select_and_scatter(operand, ge, [2, 2], [2, 2], "VALID", source, np.int32(1), add)
    same(r, [[11, 1, 21, 1], [1, 1, 1, 1]], np.int32)
    # select = `>`: a later equal element replaces the selection, so the LAST maximum wins.
    r = ref.select_and_scatter(operand, lambda a, b: a > b, [2, 2], [2, 2], "VALID", source,
                               np.int32(1), add)
    same(r, [[1, 1, 1, 21], [1, 11, 1, 1]], np.int32)


def test_select_and_scatter_padding_is_never_selected():  # derived
    operand = np.array([-5, -3, -4], np.float32)
    assert ref.padding_for("SAME", [3], [3], [1]) == [(1, 1)]
    source = np.array([1, 10, 100], np.float32)
    r = ref.select_and_scatter(operand, ge, [3], [1], "SAME", source, np.float32(0), add)
    same(r, [0, 111, 0], np.float32)


def test_select_and_scatter_scatter_argument_order():
    calls = []

    def scatter(current, value):
        calls.append((int(current), int(value)))
        return current + value

    operand = np.array([1, 2, 3], np.int32)
    ref.select_and_scatter(operand, ge, [2], [1], "VALID", np.array([10, 20], np.int32),
                           np.int32(5), scatter)
    # Windows [1, 2] and [2, 3] select indices 1 and 2: (current output, source value).
    assert calls == [(5, 10), (5, 20)]


# -- Map -----------------------------------------------------------------------------------

def test_map_stablehlo_example():
    a = np.array([[0, 1], [2, 3]], np.int64)
    b = np.array([[4, 5], [6, 7]], np.int64)
    same(ref.map([a, b], mul), [[0, 5], [12, 21]], np.int64)


def test_map_xla_static_parameter_and_result_type():
    # "Map(op1, op2, op3, computation, par1) 会将 elem_out <- computation(elem1, elem2, elem3,
    # par1) 映射到输入数组中的每个(多维)索引": par1 as a closure.
    op1 = np.array([1, 2, 3], np.float32)
    op2 = np.array([10, 20, 30], np.float32)
    op3 = np.array([100, 200, 300], np.float32)
    par1 = np.float32(0.5)
    same(ref.map([op1, op2, op3], lambda x, y, z: (x + y + z) * par1), [55.5, 111, 166.5],
         np.float32)
    # T -> S: the element type may change (here f32 -> pred).
    same(ref.map([op1, op2], lambda x, y: x * 10 >= y), [True, True, True], np.bool_)
    same(ref.map([op1], lambda x: x, dtype=np.int32), [1, 2, 3], np.int32)
