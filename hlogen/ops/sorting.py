"""Sort and TopK."""
from __future__ import annotations

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Op, same_builder, trace
from hlogen.errors import ShapeError
from hlogen.ops import elementwise, movement, shaping
from hlogen.mlir import int_attr
from hlogen.ops._common import COMPLEX, array_operand, as_operand_list, flag


def _normalized_dimension(op_name: str, dimension, shape: T.Shape) -> int:
    if isinstance(dimension, bool) or not isinstance(dimension, int) or \
            not -shape.rank <= dimension < shape.rank:
        raise ShapeError(f"{op_name}: dimension={dimension!r} must be an integer in "
                         f"[-{shape.rank}, {shape.rank}) for operand {shape}")
    return dimension % shape.rank


def _ascending(p, q):
    """The default comparator: the first operand ascending in a total order (for floats
    -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN; complex numbers by real part, then
    imaginary part)."""
    if p.dtype.kind == COMPLEX:
        re_p, re_q = elementwise.real(p), elementwise.real(q)
        return elementwise.or_(elementwise.lt_total_order(re_p, re_q),
                       elementwise.and_(elementwise.eq_total_order(re_p, re_q),
                                elementwise.lt_total_order(elementwise.imag(p), elementwise.imag(q))))
    return elementwise.lt_total_order(p, q)


def sort(operands, comparator=None, dimension=-1, is_stable=False):
    """Sort(operands, comparator, dimension, is_stable): sorts along `dimension` (negative
    counts from the end), permuting every operand alike.

    `comparator` (a callable or a Computation) takes 2N scalars, operand k's two values
    being compared at positions 2k and 2k+1, and returns pred[]: whether the first sorts
    before the second. Without one: ascending by the first operand, in a total order.
    A bare Op returns a bare Op; a list of N returns a tuple of N.
    """
    single = isinstance(operands, Op)
    operands = as_operand_list("sort", "operands", operands)
    builder = same_builder("sort", *operands)
    shape = operands[0].shape
    for i, o in enumerate(operands[1:], 1):
        if o.shape.dimensions != shape.dimensions:
            raise ShapeError(f"sort: operands must have the same dimensions, got "
                             f"{', '.join(str(x.shape) for x in operands)}")
    if shape.rank == 0:
        raise ShapeError(f"sort: operands must have rank >= 1, got {shape}")
    dimension = _normalized_dimension("sort", dimension, shape)
    if comparator is None:
        comparator = lambda p, q, *_: _ascending(p, q)
    scalars = [T.Shape(o.dtype, ()) for o in operands for _ in (0, 1)]
    region = trace(builder, "sort", "comparator", comparator, scalars, [T.Shape(T.pred, ())])
    results = builder.add_op_with_regions(
        "stablehlo.sort", [o.shape for o in operands], operands,
        {"dimension": int_attr(dimension),
         "is_stable": ir.BoolAttr.get(flag("sort", "is_stable", is_stable),
                                      context=mlir.context())}, [region])
    return results[0] if single else tuple(results)


def top_k(operand, k, largest=True):
    """TopK(operand, k, largest): the k largest (or smallest) elements along the last
    dimension, in order, and their s32 indices; equal values keep index order. Floats
    order as -NaN < -Inf < ... < +Inf < +NaN."""
    shape = array_operand("top_k", "operand", operand)
    if shape.rank == 0:
        raise ShapeError(f"top_k: operand must have rank >= 1, got {shape}")
    if shape.element_type.kind == COMPLEX:
        raise ShapeError(f"top_k: complex numbers are not ordered (operand {shape})")
    n = shape.dimensions[-1]
    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= n:
        raise ShapeError(f"top_k: k={k!r} must be an integer in [0, {n}] (the size of the last "
                         f"dimension of {shape})")
    before = elementwise.gt_total_order if flag("top_k", "largest", largest) else elementwise.lt_total_order
    indices = shaping.iota(operand.builder, T.Shape(T.s32, shape.dimensions), shape.rank - 1)
    values, positions = sort([operand, indices], lambda p, q, i, j: before(p, q),
                             dimension=-1, is_stable=True)
    last = shape.rank - 1
    return (movement.slice_in_dim(values, 0, k, 1, last), movement.slice_in_dim(positions, 0, k, 1, last))
