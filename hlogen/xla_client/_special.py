"""XLA's client-library special functions that neither StableHLO nor CHLO has, built
from hlogen ops as XLA's client library built them from XLA ops.

RegularizedIncompleteBeta(a, b, x) = I_x(a, b) = B(x; a, b) / B(a, b): the continued
fraction of the incomplete beta function,

    I_x(a, b) = x^a (1 - x)^b / (a B(a, b)) * 1 / (1 + d1 / (1 + d2 / (1 + ...)))
    d(2m+1) = -(a + m)(a + b + m) x / ((a + 2m)(a + 2m + 1))
    d(2m)   = m (b - m) x / ((a + 2m - 1)(a + 2m))

evaluated by the modified Lentz method (a while loop that stops once every element has
converged, or after _MAX_ITERATIONS), on the side of the symmetry
I_x(a, b) = 1 - I_(1-x)(b, a) where it converges fast: x < (a + 1) / (a + b + 2).
As XLA's: NaN where a <= 0, b <= 0, x < 0 or x > 1; f16 and bf16 computed in f32.
"""
from __future__ import annotations

import numpy as np

from hlogen import ops
from hlogen import types as T
from hlogen.builder import Op
from hlogen.errors import ShapeError
from hlogen.ops._common import full_like

_MAX_ITERATIONS = 200  # as XLA's; about sqrt(max(a, b)) are needed
_IN_F32 = ("f16", "bf16")


def _lgamma(x: Op) -> Op:
    return x.builder.add_op("chlo.lgamma", x.shape, [x])


def _continued_fraction(a: Op, b: Op, x: Op) -> Op:
    """1 / (1 + d1 / (1 + d2 / ...)) by the modified Lentz method."""
    dtype = x.shape.dtype
    tiny = float(np.finfo(dtype).tiny)      # keeps a denominator off zero
    eps = float(np.finfo(dtype).eps)        # converged: the last factor is within it of 1

    def off_zero(v):
        return ops.select(ops.lt(ops.abs(v), tiny), full_like(v, tiny), v)

    def condition(i, a, b, x, c, d, f, done):
        return ops.and_(ops.lt(i, _MAX_ITERATIONS), ops.not_(done))

    def body(i, a, b, x, c, d, f, done):
        m = ops.convert_element_type(i, x.shape.element_type)
        two_m = ops.mul(m, 2.0)
        # the even term d(2m), then the odd term d(2m+1)
        even = ops.div(ops.mul(ops.mul(m, ops.sub(b, m)), x),
                       ops.mul(ops.add(ops.sub(a, 1.0), two_m), ops.add(a, two_m)))
        d = ops.div(1.0, off_zero(ops.add(ops.mul(even, d), 1.0)))
        c = off_zero(ops.add(ops.div(even, c), 1.0))
        f = ops.mul(f, ops.mul(c, d))
        odd = ops.neg(ops.div(ops.mul(ops.mul(ops.add(a, m), ops.add(ops.add(a, b), m)), x),
                              ops.mul(ops.add(a, two_m), ops.add(ops.add(a, 1.0), two_m))))
        d = ops.div(1.0, off_zero(ops.add(ops.mul(odd, d), 1.0)))
        c = off_zero(ops.add(ops.div(odd, c), 1.0))
        factor = ops.mul(c, d)
        f = ops.mul(f, factor)
        converged = ops.lt(ops.abs(ops.sub(factor, 1.0)), eps)
        everywhere = ops.reduce(converged, True, ops.and_, list(range(x.shape.rank)))
        return ops.add(i, 1), a, b, x, c, d, f, everywhere

    # the first term: f = 1 / (1 + d1), d1 = -(a + b) x / (a + 1)
    first = ops.div(1.0, off_zero(ops.sub(1.0, ops.div(ops.mul(ops.add(a, b), x),
                                                       ops.add(a, 1.0)))))
    one = full_like(x, 1.0)
    start = x.builder.constant(np.int32(1))
    done = x.builder.constant(np.bool_(False))
    results = ops.while_loop(condition, body, (start, a, b, x, one, first, first, done))
    return results[6]


def regularized_incomplete_beta(a, b, x) -> Op:
    """I_x(a, b) of arrays of one float type and shape (scalars broadcast, as XLA's
    binary ops broadcast them)."""
    for name, v in (("a", a), ("b", b), ("x", x)):
        if not isinstance(v, Op) or not isinstance(v.shape, T.Shape) or \
                v.shape.element_type.kind != T.FLOAT:
            raise ShapeError(f"RegularizedIncompleteBeta: {name} must be an XlaOp of floats, got "
                             f"{v.shape if isinstance(v, Op) else repr(v)}")
    if len({a.shape.element_type, b.shape.element_type, x.shape.element_type}) != 1:
        raise ShapeError(f"RegularizedIncompleteBeta: a, b and x must have one element type, got "
                         f"{a.shape}, {b.shape}, {x.shape}")
    rank = max(v.shape.rank for v in (a, b, x))
    dims = next(v.shape.dimensions for v in (a, b, x) if v.shape.rank == rank)
    for name, v in (("a", a), ("b", b), ("x", x)):
        if v.shape.rank and v.shape.dimensions != dims:
            raise ShapeError(f"RegularizedIncompleteBeta: a, b and x must have one shape (or be "
                             f"scalars), got {a.shape}, {b.shape}, {x.shape}")
    et = x.shape.element_type
    if et.name in _IN_F32:
        a, b, x = (ops.convert_element_type(v, T.f32) for v in (a, b, x))
    shape = T.Shape(x.shape.element_type, dims)
    a, b, x = (v if v.shape.rank == rank else ops.broadcast_in_dim(v, dims, ()) for v in (a, b, x))

    # the side of the symmetry where the fraction converges fast
    swap = ops.gt(x, ops.div(ops.add(a, 1.0), ops.add(ops.add(a, b), 2.0)))
    a_, b_ = ops.select(swap, b, a), ops.select(swap, a, b)
    x_ = ops.select(swap, ops.sub(1.0, x), x)
    # x^a (1 - x)^b / (a B(a, b)), B by log-gamma
    log_beta = ops.sub(ops.add(_lgamma(a_), _lgamma(b_)), _lgamma(ops.add(a_, b_)))
    front = ops.div(ops.exp(ops.sub(ops.add(ops.mul(a_, ops.log(x_)),
                                            ops.mul(b_, ops.log1p(ops.neg(x_)))), log_beta)), a_)
    value = ops.mul(front, _continued_fraction(a_, b_, x_))
    result = ops.select(swap, ops.sub(1.0, value), value)
    # the ends and the domain
    result = ops.select(ops.eq(x, 0.0), full_like(result, 0.0), result)
    result = ops.select(ops.eq(x, 1.0), full_like(result, 1.0), result)
    outside = ops.or_(ops.or_(ops.le(a, 0.0), ops.le(b, 0.0)),
                      ops.or_(ops.lt(x, 0.0), ops.gt(x, 1.0)))
    result = ops.select(outside, full_like(result, np.nan), result)
    assert result.shape == shape
    return result if et.name not in _IN_F32 else ops.convert_element_type(result, et)
