"""A two-layer perceptron, as an @hg.function: Dot, a bias broadcast, tanh.

    hlogen run samples/mlp.py --input @x.npy --input @w1.npy ... (or .npz by name)
    hlogen run samples/mlp.py --input 4x3xf32=1 --input 3x8xf32=0.5 --input 8xf32=0 \
        --input 8x2xf32=0.25 --input 2xf32=1
"""
import hlogen as hg
from hlogen import ops


def dense(x, w, b):
    """x @ w + b, the bias broadcast along the batch dimension (dimension 1 of the result)."""
    return ops.add(ops.dot(x, w), b, broadcast_dimensions=[1])


@hg.function
def mlp(x: hg.f32[4, 3], w1: hg.f32[3, 8], b1: hg.f32[8], w2: hg.f32[8, 2], b2: hg.f32[2]):
    """tanh(x @ w1 + b1) @ w2 + b2."""
    return dense(ops.tanh(dense(x, w1, b1)), w2, b2)
