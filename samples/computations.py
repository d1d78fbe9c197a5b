"""Ops with computations in real programs, as @hg.function definitions.

    hlogen run samples/computations.py --function softmax --input 2x4xf32=1,2,3,4,0,0,0,10
    hlogen run samples/computations.py --function argmax --input 6xf32=3,-1,8.5,2,8.5,0
    hlogen run samples/computations.py --function max_pool --input 4x4xf32=1,9,2,3,4,0,8,7,5,6,1,2,3,4,0,1
    hlogen run samples/computations.py --function newton_sqrt --input 3xf32=2,9,0.25
"""
import numpy as np

import hlogen as hg
from hlogen import ops


def _softmax(x, axis):
    """exp(x - max) / sum(exp(x - max)) along `axis`: Reduce with max, then with add."""
    kept = [d for d in range(x.shape.rank) if d != axis]
    largest = ops.reduce(x, -np.inf, ops.max, [axis])
    shifted = ops.exp(ops.sub(x, largest, broadcast_dimensions=kept))
    return ops.div(shifted, ops.reduce(shifted, 0.0, ops.add, [axis]), broadcast_dimensions=kept)


@hg.function
def softmax(x: hg.f32[2, 4]):
    """Softmax of each row."""
    return _softmax(x, 1)


@hg.function
def argmax(x: hg.f32[6]):
    """The largest value and its first index: a Reduce of two operands (values, iota)."""
    def larger(best, best_index, value, index):
        take = ops.or_(ops.gt(value, best), ops.and_(ops.eq(value, best), ops.lt(index, best_index)))
        return ops.select(take, value, best), ops.select(take, index, best_index)
    return ops.reduce([x, ops.iota(x.builder, hg.s32[6], 0)], [-np.inf, 0], larger, [0])


@hg.function
def max_pool(image: hg.f32[4, 4]):
    """2x2 max-pooling with stride 2: ReduceWindow with max."""
    return ops.reduce_window(image, -np.inf, ops.max, [2, 2], [2, 2], "VALID")


@hg.function
def newton_sqrt(a: hg.f32[3]):
    """sqrt(a) by 20 Newton steps x <- (x + a / x) / 2: a While loop over (step, x, a)
    (a loop sees only its state, so `a` travels in it)."""
    def condition(step, x, a):
        return ops.lt(step, 20)

    def body(step, x, a):
        return ops.add(step, 1), ops.mul(ops.add(x, ops.div(a, x)), 0.5), a

    _, root, _ = ops.while_loop(condition, body, (a.builder.constant(0), a, a))
    return root
