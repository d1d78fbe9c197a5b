"""Convolution: the fixed-layout forms, layout strings, groups, dilations and negative
padding against the independent reference (a direct loop of the StableHLO formulas,
tests/spec_reference_linalg.py) on PJRT and the interpreter; hypothesis over random
strides, paddings, dilations, group counts and layouts; errors that name the rule."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import hlogen as hg
from hlogen import ops
from tests import spec_reference_linalg as ref
from tests.helpers import BACKENDS, run
from tests.test_indexing import build, on

RNG = np.random.default_rng(5)


def small_ints(shape):
    return RNG.integers(-3, 4, size=shape).astype(np.float32)  # sums stay exact in f32


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("groups", [(1, 1), (2, 1), (4, 1), (1, 2)])
def test_conv_in_the_fixed_layout(padding, groups, backend):
    feature_groups, batch_groups = groups
    lhs = small_ints((2 * batch_groups, 4, 6, 5))
    rhs = small_ints((4 * batch_groups, 4 // feature_groups, 3, 2))
    got = on(backend, lambda a, b: ops.conv(a, b, [2, 1], padding, *groups), lhs, rhs)
    expected = ref.conv(lhs, rhs, [2, 1], padding, *groups)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_conv_with_general_padding_negative_padding_and_dilations(backend):
    lhs, rhs = small_ints((1, 2, 7, 6)), small_ints((3, 2, 2, 3))
    args = ([1, 2], [(2, -1), (-1, 3)], [2, 1], [1, 2])
    got = on(backend, lambda a, b: ops.conv_with_general_padding(a, b, *args), lhs, rhs)
    np.testing.assert_array_equal(got, ref.conv_with_general_padding(lhs, rhs, *args))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("layouts,lhs_dims,rhs_dims", [
    (("NHWC", "HWIO", "NHWC"), (2, 5, 4, 3), (2, 3, 3, 4)),
    (("NCH", "OIH", "NCH"), (2, 3, 9), (4, 3, 3)),
    (("NWC", "WIO", "NCW"), (1, 8, 2), (3, 2, 5)),
    (("NCDHW", "OIDHW", "NCDHW"), (1, 2, 3, 4, 3), (2, 2, 2, 2, 2)),
    (("CHWN", "OHWI", "HWNC"), (3, 4, 5, 2), (2, 2, 3, 3)),
], ids=["2d-nhwc", "1d", "1d-mixed", "3d", "2d-odd"])
def test_conv_general_dilated_with_layout_strings(layouts, lhs_dims, rhs_dims, backend):
    lhs, rhs = small_ints(lhs_dims), small_ints(rhs_dims)
    n = len(lhs_dims) - 2
    got = on(backend, lambda a, b: ops.conv_general_dilated(a, b, [1] * n, "SAME",
                                                            dimension_numbers=layouts), lhs, rhs)
    expected = ref.conv_general_dilated(lhs, rhs, [1] * n, "SAME", dimension_numbers=layouts)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_depthwise_convolution(backend):
    lhs, rhs = small_ints((1, 5, 5, 3)), small_ints((3, 3, 1, 3))
    got = on(backend, lambda a, b: ops.conv_general_dilated(
        a, b, [1, 1], "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=3),
        lhs, rhs)
    np.testing.assert_array_equal(got, ref.conv_general_dilated(
        lhs, rhs, [1, 1], "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=3))


def test_explicit_dimension_numbers_equal_layout_strings():
    numbers = hg.ConvDimensionNumbers(0, 3, (1, 2), 2, 3, (0, 1), 0, 3, (1, 2))
    lhs, rhs = small_ints((2, 5, 4, 3)), small_ints((2, 3, 3, 4))
    by_numbers = on("cpu", lambda a, b: ops.conv_general_dilated(
        a, b, [1, 1], "VALID", dimension_numbers=numbers), lhs, rhs)
    by_strings = on("cpu", lambda a, b: ops.conv_general_dilated(
        a, b, [1, 1], "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")), lhs, rhs)
    np.testing.assert_array_equal(by_numbers, by_strings)


# -- hypothesis ---------------------------------------------------------------------------------------

@st.composite
def conv_cases(draw):
    n = draw(st.integers(1, 3))
    spatial = "HWD"[:n]
    mode = draw(st.sampled_from(["none", "feature", "batch"]))
    groups = draw(st.integers(2, 3)) if mode != "none" else 1
    feature_groups, batch_groups = (groups, 1) if mode == "feature" else (1, groups) if mode == "batch" else (1, 1)
    batch = batch_groups * draw(st.integers(1, 2))
    kernel_in = draw(st.integers(1, 2))
    out_features = max(feature_groups, batch_groups) * draw(st.integers(1, 2))
    sizes = [draw(st.integers(1, 5 if n < 3 else 3)) for _ in range(n)]
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    lhs_dilation = [draw(st.integers(1, 2)) for _ in range(n)]
    rhs_dilation = [draw(st.integers(1, 2)) for _ in range(n)]
    kind = draw(st.sampled_from(["explicit", "SAME", "VALID"]))
    if kind == "SAME" and any(d > 1 for d in lhs_dilation):
        kind = "explicit"  # SAME with lhs dilation: jax refuses it, the reference differs
    padding = kind if kind != "explicit" else [
        (draw(st.integers(-1, 2)), draw(st.integers(-1, 2))) for _ in range(n)]
    lhs_layout = "".join(draw(st.permutations("NC" + spatial)))
    rhs_layout = "".join(draw(st.permutations("OI" + spatial)))
    if kind == "explicit":  # attributes go by the kernel's spatial order (as in jax)
        ordered = [dict(zip(spatial, sizes))[c] for c in rhs_layout if c in spatial]
        assume(all((s - 1) * d + 1 + lo + hi >= 0
                   for s, d, (lo, hi) in zip(ordered, lhs_dilation, padding)))
    out_layout = "".join(draw(st.permutations("NC" + spatial)))
    letter_sizes = dict(zip(spatial, sizes))
    lhs_shape = [{"N": batch, "C": kernel_in * feature_groups}.get(c, letter_sizes.get(c)) for c in lhs_layout]
    kernel_sizes = dict(zip(spatial, kernel))
    rhs_shape = [{"O": out_features, "I": kernel_in}.get(c, kernel_sizes.get(c)) for c in rhs_layout]
    return dict(lhs=small_ints(lhs_shape), rhs=small_ints(rhs_shape), window_strides=strides,
                padding=padding, lhs_dilation=lhs_dilation, rhs_dilation=rhs_dilation,
                dimension_numbers=(lhs_layout, rhs_layout, out_layout),
                feature_group_count=feature_groups, batch_group_count=batch_groups)


@settings(max_examples=int(os.environ.get("HLOGEN_EXAMPLES", 30)), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(conv_cases())
def test_random_convolutions_on_both_backends(case):
    case = dict(case)
    lhs, rhs = case.pop("lhs"), case.pop("rhs")
    expected = ref.conv_general_dilated(lhs, rhs, **case)
    comp = build(lambda a, b: ops.conv_general_dilated(a, b, **case), lhs, rhs)
    for backend in BACKENDS:
        np.testing.assert_array_equal(run(comp, backend, lhs, rhs), expected, err_msg=backend)


# -- errors ------------------------------------------------------------------------------------------

def _b():
    b = hg.Builder("e")
    return b.parameter(hg.f32[2, 4, 6, 5]), b.parameter(hg.f32[6, 2, 3, 3])


ERRORS = [
    (lambda x, k: ops.conv(x, k, [1, 1], "SAME"), r"input features \(4\) must equal the kernel's input "
                                                  r"features \(2\) times feature_group_count \(1\)"),
    (lambda x, k: ops.conv(x, k, [1, 1], "SAME", feature_group_count=2, batch_group_count=2),
     "cannot both be > 1"),
    (lambda x, k: ops.conv(x, k, [1, 1], "SAME", feature_group_count=4),
     r"input features \(4\) must equal"),
    (lambda x, k: ops.conv(x, ops.slice(k, [0, 0, 0, 0], [5, 2, 3, 3]), [1, 1], "SAME", 2),
     r"feature_group_count \(2\) must divide the kernel's output features \(5\)"),
    (lambda x, k: ops.conv(x, ops.concatenate([k, k], 1), [1, 1], "SAME", batch_group_count=4),
     r"batch_group_count \(4\) must divide the input batch \(2\)"),
    (lambda x, k: ops.conv(x, k, [1, 1], "SAME", feature_group_count=0), "must be an integer >= 1"),
    (lambda x, k: ops.conv(x, k, [1], "SAME", 2), "one entry per dimension"),
    (lambda x, k: ops.conv(x, k, [1, 0], "SAME", 2), "must be >= 1"),
    (lambda x, k: ops.conv(x, k, [1, 1], [(0, 0), (0, 0)], 2), "must be 'SAME' or 'VALID'"),
    (lambda x, k: ops.conv_with_general_padding(x, k, [1, 1], "SAME", None, None, 2), "use conv"),
    (lambda x, k: ops.conv_general_dilated(x, k, [1, 1], "VALID", dimension_numbers=("NHWC", "HWOI", "NCHW"),
                                           feature_group_count=2), "must be those of the kernel|input features"),
    (lambda x, k: ops.conv_general_dilated(x, k, [1, 1], "VALID", dimension_numbers=("NHW", "HWIO", "NHWC")),
     "one letter per dimension"),
    (lambda x, k: ops.conv_general_dilated(x, k, [1, 1], "VALID", dimension_numbers=("NHWC", "HWIO", "NHXC")),
     "must be those of the kernel"),
    (lambda x, k: ops.conv_general_dilated(x, k, [1, 1], "VALID", dimension_numbers=[0, 1]),
     "ConvDimensionNumbers or three layout strings"),
    (lambda x, k: ops.conv_general_dilated(x, k, [1, 1], "VALID", dimension_numbers=hg.ConvDimensionNumbers(
        0, 1, (2, 2), 1, 0, (2, 3), 0, 1, (2, 3))), "input dimensions .* must name each"),
    (lambda x, k: ops.conv(x, ops.reshape(k, [6, 2, 9]), [1, 1], "SAME", 2), "same rank"),
    (lambda x, k: ops.conv(x, ops.convert_element_type(k, hg.f64), [1, 1], "SAME", 2), "same element type"),
]


@pytest.mark.parametrize("call,message", ERRORS, ids=[m for _, m in ERRORS])
def test_errors(call, message):
    with pytest.raises(hg.ShapeError, match=message):
        call(*_b())
