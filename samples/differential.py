"""A program on which XLA CPU and the StableHLO interpreter disagree, for hlogen reduce and
hlogen fuzz (docs/reduce.md, "Reducing a divergence").

    hlogen emit samples/differential.py --function rounded_residual -o residual.mlir
    hlogen reduce residual.mlir -o small.mlir
"""
import numpy as np

import hlogen as hg
from hlogen import ops

LAYERS = 6
ROUNDING = 12582912.0  # 1.5 * 2**23: adding it rounds an f32 of magnitude < 2**22 to an integer


def _rms_norm(h):
    """h / sqrt(mean(h * h) + 1e-5), along each row."""
    mean = ops.div(ops.reduce(ops.mul(h, h), 0.0, ops.add, [1]), np.float32(h.shape.dimensions[1]))
    return ops.mul(h, ops.rsqrt(ops.add(mean, np.float32(1e-5))), broadcast_dimensions=[0])


@hg.function
def rounded_residual(x: hg.f32[4, 8], w: hg.f32[8, 8]):
    """Residual layers (h + tanh(h @ w) / 2, an RMS norm) with the round-to-integer trick
    `(x + 12582912) - 12582912` added in the middle: XLA CPU's algebraic simplifier
    rewrites it to x, the interpreter rounds x to an integer (on hlogen's random inputs, in
    [-0.1, 0.2): to 0), so the results differ."""
    h = x
    for layer in range(LAYERS):
        h = _rms_norm(ops.add(h, ops.mul(ops.tanh(ops.dot(h, w)), np.float32(0.5))))
        if layer == LAYERS // 2:
            h = ops.add(h, ops.sub(ops.add(x, np.float32(ROUNDING)), np.float32(ROUNDING)))
    return h
