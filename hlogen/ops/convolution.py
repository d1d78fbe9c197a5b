"""Convolution: Conv, ConvWithGeneralPadding and conv_general_dilated.

The dimension numbers say which dimension of the input (lhs), kernel (rhs) and output is
the batch, the feature and each spatial dimension. They are an hg.ConvDimensionNumbers,
or layout strings as jax takes them, ("NHWC", "HWIO", "NHWC"): N batch, C feature, O and
I the kernel's output and input features, any other letter a spatial dimension, matched
between the three strings by letter in the kernel's order. Without them, XLA's fixed
layout: (batch, feature, spatial...), (output feature, input feature, spatial...).
"""
from __future__ import annotations

import dataclasses

from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import same_builder
from hlogen.errors import ShapeError
from hlogen.mlir import int_attr
from hlogen.ops._common import ARITHMETIC, array_operand, check_kind, int_list
from hlogen.ops.windows import window
from hlogen.ops.movement import transpose


@dataclasses.dataclass(frozen=True)
class ConvDimensionNumbers:
    """Which dimensions of the input, kernel and output are batch, feature and spatial."""

    input_batch_dimension: int
    input_feature_dimension: int
    input_spatial_dimensions: tuple
    kernel_input_feature_dimension: int
    kernel_output_feature_dimension: int
    kernel_spatial_dimensions: tuple
    output_batch_dimension: int
    output_feature_dimension: int
    output_spatial_dimensions: tuple


def _fixed_layout(rank: int) -> ConvDimensionNumbers:
    spatial = tuple(range(2, rank))
    return ConvDimensionNumbers(0, 1, spatial, 1, 0, spatial, 0, 1, spatial)


def _from_layouts(layouts, rank: int) -> ConvDimensionNumbers:
    """("NHWC", "HWIO", "NHWC"): spatial letters matched by name, in the kernel's order."""
    lhs, rhs, out = layouts
    where = f"conv: dimension_numbers={tuple(layouts)!r}"
    for text, fixed, words in ((lhs, "NC", "batch and feature"),
                               (rhs, "OI", "output and input feature"),
                               (out, "NC", "batch and feature")):
        if len(text) != rank or len(set(text)) != len(text) or any(c not in text for c in fixed):
            raise ShapeError(f"{where}: each layout string needs one letter per dimension "
                             f"({rank}), no letter twice, and {fixed[0]} and {fixed[1]} ({words})")
    spatial = [c for c in rhs if c not in "OI"]
    for text in (lhs, out):
        if sorted(c for c in text if c not in "NC") != sorted(spatial):
            raise ShapeError(f"{where}: the spatial letters of {text!r} must be those of the "
                             f"kernel {rhs!r}")
    return ConvDimensionNumbers(
        lhs.index("N"), lhs.index("C"), tuple(lhs.index(c) for c in spatial),
        rhs.index("I"), rhs.index("O"), tuple(rhs.index(c) for c in spatial),
        out.index("N"), out.index("C"), tuple(out.index(c) for c in spatial))


def _dimension_numbers(dimension_numbers, rank: int) -> ConvDimensionNumbers:
    if dimension_numbers is None:
        return _fixed_layout(rank)
    if isinstance(dimension_numbers, (tuple, list)) and len(dimension_numbers) == 3 and all(
            isinstance(s, str) for s in dimension_numbers):
        return _from_layouts(dimension_numbers, rank)
    if not isinstance(dimension_numbers, ConvDimensionNumbers):
        raise ShapeError(f"conv: dimension_numbers must be None, an hg.ConvDimensionNumbers or "
                         f"three layout strings such as ('NHWC', 'HWIO', 'NHWC'), got "
                         f"{dimension_numbers!r}")
    parsed = []
    for field in dataclasses.fields(ConvDimensionNumbers):
        value = getattr(dimension_numbers, field.name)
        many = field.name.endswith("_dimensions")
        values = int_list("conv", field.name, value if many else [value])
        parsed.append(values if many else values[0])
    numbers = ConvDimensionNumbers(*parsed)
    for side, dims in (("input", (numbers.input_batch_dimension, numbers.input_feature_dimension,
                                  *numbers.input_spatial_dimensions)),
                       ("kernel", (numbers.kernel_input_feature_dimension,
                                   numbers.kernel_output_feature_dimension,
                                   *numbers.kernel_spatial_dimensions)),
                       ("output", (numbers.output_batch_dimension, numbers.output_feature_dimension,
                                   *numbers.output_spatial_dimensions))):
        if sorted(dims) != list(range(rank)):
            raise ShapeError(f"conv: dimension_numbers: the {side} dimensions {list(dims)} must "
                             f"name each of the {rank} dimensions once")
    return numbers


def _group_count(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ShapeError(f"conv: {name}={value!r} must be an integer >= 1")
    return value


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1):
    """The general convolution: `rhs` (the kernel) slides over the lhs-dilated, padded
    `lhs`, with `window_strides` and `rhs_dilation`; `padding` "SAME", "VALID" or
    [(low, high), ...] (negative removes). `feature_group_count` splits the input features
    into groups convolved separately (depthwise when it equals them), `batch_group_count`
    the batch."""
    check_kind("conv", "lhs", lhs, ARITHMETIC)
    check_kind("conv", "rhs", rhs, ARITHMETIC)
    builder = same_builder("conv", lhs, rhs)
    ls, rs = lhs.shape, rhs.shape
    where = f"conv: lhs {ls}, rhs {rs}"
    if ls.element_type != rs.element_type:
        raise ShapeError(f"{where}: lhs and rhs must have the same element type")
    if ls.rank != rs.rank or ls.rank < 2:
        raise ShapeError(f"{where}: lhs and rhs must have the same rank, at least 2 (batch and "
                         f"feature, then the spatial dimensions)")
    numbers = _dimension_numbers(dimension_numbers, ls.rank)
    groups = _group_count("feature_group_count", feature_group_count)
    batch_groups = _group_count("batch_group_count", batch_group_count)
    batch = ls.dimensions[numbers.input_batch_dimension]
    features = ls.dimensions[numbers.input_feature_dimension]
    kernel_in = rs.dimensions[numbers.kernel_input_feature_dimension]
    kernel_out = rs.dimensions[numbers.kernel_output_feature_dimension]
    if groups > 1 and batch_groups > 1:
        raise ShapeError(f"{where}: feature_group_count and batch_group_count cannot both be > 1")
    if features != kernel_in * groups:
        raise ShapeError(f"{where}: the input features ({features}) must equal the kernel's input "
                         f"features ({kernel_in}) times feature_group_count ({groups})")
    if kernel_out % groups:
        raise ShapeError(f"{where}: feature_group_count ({groups}) must divide the kernel's output "
                         f"features ({kernel_out})")
    if batch % batch_groups or kernel_out % batch_groups:
        raise ShapeError(f"{where}: batch_group_count ({batch_groups}) must divide the input batch "
                         f"({batch}) and the kernel's output features ({kernel_out})")
    spatial_in = [ls.dimensions[d] for d in numbers.input_spatial_dimensions]
    spatial_kernel = [rs.dimensions[d] for d in numbers.kernel_spatial_dimensions]
    w = window("conv", spatial_in, spatial_kernel, window_strides, padding, lhs_dilation,
               rhs_dilation)
    # The result is emitted as (batch, feature, spatial...) and transposed to the output
    # layout asked for: the reference interpreter aborts on some permuted output layouts
    # (tests/test_convolution.py), and XLA assigns layouts itself either way.
    order = (numbers.output_batch_dimension, numbers.output_feature_dimension,
             *numbers.output_spatial_dimensions)
    canonical = (batch // batch_groups, kernel_out, *w.output_dimensions(spatial_in))
    attributes = w.attributes()
    result = builder.add_op("stablehlo.convolution", T.Shape(ls.element_type, canonical), [lhs, rhs], {
        "window_strides": attributes["window_strides"], "padding": attributes["padding"],
        "lhs_dilation": attributes["base_dilations"], "rhs_dilation": attributes["window_dilations"],
        "dimension_numbers": stablehlo.ConvDimensionNumbers.get(
            numbers.input_batch_dimension, numbers.input_feature_dimension,
            list(numbers.input_spatial_dimensions), numbers.kernel_input_feature_dimension,
            numbers.kernel_output_feature_dimension, list(numbers.kernel_spatial_dimensions),
            0, 1, list(range(2, ls.rank)), ctx=mlir.context()),
        "feature_group_count": int_attr(groups), "batch_group_count": int_attr(batch_groups)})
    if order == tuple(range(ls.rank)):
        return result
    return transpose(result, [order.index(d) for d in range(ls.rank)])


def conv(lhs, rhs, window_strides, padding, feature_group_count=1, batch_group_count=1):
    """Conv: conv_general_dilated in XLA's fixed layout with "SAME" or "VALID" padding."""
    if not isinstance(padding, str) or padding.upper() not in ("SAME", "VALID"):
        raise ShapeError(f"conv: padding={padding!r} must be 'SAME' or 'VALID' (explicit padding: "
                         f"conv_with_general_padding)")
    array_operand("conv", "lhs", lhs)
    return conv_general_dilated(lhs, rhs, window_strides, padding,
                                feature_group_count=feature_group_count,
                                batch_group_count=batch_group_count)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              feature_group_count=1, batch_group_count=1):
    """ConvWithGeneralPadding: conv_general_dilated in XLA's fixed layout with explicit
    (low, high) padding per spatial dimension and lhs/rhs dilations."""
    if isinstance(padding, str):
        raise ShapeError(f"conv_with_general_padding: padding must be [(low, high), ...], got "
                         f"{padding!r} (use conv for 'SAME' / 'VALID')")
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                feature_group_count=feature_group_count,
                                batch_group_count=batch_group_count)
