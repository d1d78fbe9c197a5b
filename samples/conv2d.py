"""A 2-D convolution in the NHWC layout, as an @hg.function: conv_general_dilated with
layout strings, "SAME" padding and a bias, then a ReLU.

    hlogen run samples/conv2d.py --input 1x5x5x2xf32=1 --input 3x3x2x4xf32=0.5 --input 4xf32=-1
"""
import hlogen as hg
from hlogen import ops


@hg.function
def conv2d(image: hg.f32[1, 5, 5, 2], kernel: hg.f32[3, 3, 2, 4], bias: hg.f32[4]):
    """relu(conv(image, kernel) + bias), stride 1, "SAME" padding: the output is 1x5x5x4."""
    y = ops.conv_general_dilated(image, kernel, [1, 1], "SAME",
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return ops.max(ops.add(y, bias, broadcast_dimensions=[3]), 0.0)
