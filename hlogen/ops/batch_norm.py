"""BatchNormTraining, BatchNormInference, BatchNormGrad, with the feature dimension anywhere."""
from __future__ import annotations

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import same_builder
from hlogen.errors import ShapeError
from hlogen.ops._common import FLOAT, array_operand, check_dimension, check_kind


def _checked(op_name: str, operand, feature_index, epsilon, **vectors) -> tuple:
    """Checks the operand (floats, rank >= 1), feature_index, epsilon, and that each named
    vector is an f[C] of the operand's type, C the size of the feature dimension."""
    check_kind(op_name, "operand", operand, {FLOAT})
    shape = operand.shape
    check_dimension(op_name, "feature_index", feature_index, shape.rank)
    # any number, as XLA's shape inference has no rule on it (its tests use epsilon=-100)
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        raise ShapeError(f"{op_name}: epsilon={epsilon!r} must be a number")
    vector = T.Shape(shape.element_type, (shape.dimensions[feature_index],))
    for name, value in vectors.items():
        if array_operand(op_name, name, value) != vector:
            raise ShapeError(f"{op_name}: {name} must be {vector} (one value per feature: "
                             f"dimension {feature_index} of operand {shape}), got {value.shape}")
    builder = same_builder(op_name, operand, *vectors.values())
    attributes = {"epsilon": ir.FloatAttr.get_f32(float(epsilon), context=mlir.context()),
                  "feature_index": mlir.int_attr(feature_index)}
    return builder, shape, vector, attributes


def batch_norm_training(operand, scale, offset, epsilon, feature_index):
    """BatchNormTraining: (output, batch_mean, batch_var), where mean and variance are taken
    over every dimension but feature_index and output = scale * (x - mean) /
    sqrt(var + epsilon) + offset."""
    builder, shape, vector, attributes = _checked("batch_norm_training", operand, feature_index,
                                                  epsilon, scale=scale, offset=offset)
    return tuple(builder.add_op_with_regions("stablehlo.batch_norm_training",
                                             [shape, vector, vector], [operand, scale, offset],
                                             attributes, []))


def batch_norm_inference(operand, scale, offset, mean, variance, epsilon, feature_index):
    """BatchNormInference: scale * (x - mean) / sqrt(variance + epsilon) + offset, with the
    given mean and variance per feature."""
    builder, shape, _, attributes = _checked("batch_norm_inference", operand, feature_index, epsilon,
                                             scale=scale, offset=offset, mean=mean,
                                             variance=variance)
    return builder.add_op("stablehlo.batch_norm_inference", shape,
                          [operand, scale, offset, mean, variance], attributes)


def batch_norm_grad(operand, scale, mean, variance, grad_output, epsilon, feature_index):
    """BatchNormGrad: (grad_operand, grad_scale, grad_offset), the gradients of
    BatchNormTraining's output with respect to its operand, scale and offset."""
    builder, shape, vector, attributes = _checked("batch_norm_grad", operand, feature_index,
                                                  epsilon, scale=scale, mean=mean,
                                                  variance=variance)
    if array_operand("batch_norm_grad", "grad_output", grad_output) != shape:
        raise ShapeError(f"batch_norm_grad: grad_output must have the operand's shape {shape}, "
                         f"got {grad_output.shape}")
    same_builder("batch_norm_grad", operand, grad_output)
    return tuple(builder.add_op_with_regions("stablehlo.batch_norm_grad", [shape, vector, vector],
                                             [operand, scale, mean, variance, grad_output],
                                             attributes, []))
