"""Linear algebra: Dot, DotGeneral, Cholesky, TriangularSolve."""
from __future__ import annotations

import dataclasses

import numpy as np

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import same_builder
from hlogen.errors import ShapeError
from hlogen.ops import elementwise, shaping
from hlogen.ops._common import ARITHMETIC, FLOATING, array_operand, check_kind, flag, int_list


@dataclasses.dataclass(frozen=True)
class DotDimensionNumbers:
    """DotGeneral's dimension numbers: the contracting and batch dimensions of each side."""

    lhs_contracting_dimensions: tuple
    rhs_contracting_dimensions: tuple
    lhs_batch_dimensions: tuple = ()
    rhs_batch_dimensions: tuple = ()


_DOT_FIELDS = [f.name for f in dataclasses.fields(DotDimensionNumbers)]


def _dot_numbers(dimension_numbers) -> DotDimensionNumbers:
    if isinstance(dimension_numbers, dict):
        unknown = set(dimension_numbers) - set(_DOT_FIELDS)
        if unknown:
            raise ShapeError(f"dot_general: dimension_numbers has unknown keys {sorted(unknown)}; "
                             f"the keys are {', '.join(_DOT_FIELDS)}")
        try:
            dimension_numbers = DotDimensionNumbers(**dimension_numbers)
        except TypeError as e:
            raise ShapeError(f"dot_general: dimension_numbers: {e}") from None
    if not isinstance(dimension_numbers, DotDimensionNumbers):
        raise ShapeError(f"dot_general: dimension_numbers must be an hg.DotDimensionNumbers or a "
                         f"dict of {', '.join(_DOT_FIELDS)}, got {dimension_numbers!r}")
    return DotDimensionNumbers(*(int_list("dot_general", f, getattr(dimension_numbers, f))
                                 for f in _DOT_FIELDS))


def dot_general_shape(lhs: T.Shape, rhs: T.Shape, numbers: DotDimensionNumbers,
                      result_type: T.ElementType) -> T.Shape:
    """DotGeneral's result: batch dimensions, then lhs free, then rhs free dimensions."""
    def fail(rule):
        raise ShapeError(f"dot_general: lhs {lhs}, rhs {rhs}, lhs_contracting_dimensions="
                         f"{list(numbers.lhs_contracting_dimensions)}, rhs_contracting_dimensions="
                         f"{list(numbers.rhs_contracting_dimensions)}, lhs_batch_dimensions="
                         f"{list(numbers.lhs_batch_dimensions)}, rhs_batch_dimensions="
                         f"{list(numbers.rhs_batch_dimensions)}: {rule}")
    for side, shape, contracting, batch in (
            ("lhs", lhs, numbers.lhs_contracting_dimensions, numbers.lhs_batch_dimensions),
            ("rhs", rhs, numbers.rhs_contracting_dimensions, numbers.rhs_batch_dimensions)):
        dims = contracting + batch
        if any(not 0 <= d < shape.rank for d in dims):
            fail(f"every {side} dimension number must be in [0, {shape.rank})")
        if len(set(dims)) != len(dims):
            fail(f"the {side} contracting and batch dimensions must all differ")
    for kind in ("contracting", "batch"):
        left = getattr(numbers, f"lhs_{kind}_dimensions")
        right = getattr(numbers, f"rhs_{kind}_dimensions")
        if len(left) != len(right):
            fail(f"lhs and rhs need as many {kind} dimensions")
        for a, b in zip(left, right):
            if lhs.dimensions[a] != rhs.dimensions[b]:
                fail(f"{kind} dimension {a} of lhs (size {lhs.dimensions[a]}) and {b} of rhs "
                     f"(size {rhs.dimensions[b]}) must have the same size")
    batch = [lhs.dimensions[d] for d in numbers.lhs_batch_dimensions]
    lhs_free = [n for d, n in enumerate(lhs.dimensions)
                if d not in numbers.lhs_contracting_dimensions + numbers.lhs_batch_dimensions]
    rhs_free = [n for d, n in enumerate(rhs.dimensions)
                if d not in numbers.rhs_contracting_dimensions + numbers.rhs_batch_dimensions]
    return T.Shape(result_type, tuple(batch + lhs_free + rhs_free))


_PRECISIONS = ("DEFAULT", "HIGH", "HIGHEST")


def _precision_config(op_name, precision_config) -> dict:
    """None, one precision for both operands, or a (lhs, rhs) pair."""
    if precision_config is None:
        return {}
    values = [precision_config] * 2 if isinstance(precision_config, str) else precision_config
    if not isinstance(values, (list, tuple)) or len(values) != 2 or any(
            v not in _PRECISIONS for v in values):
        raise ShapeError(f"{op_name}: precision_config={precision_config!r} must be one of "
                         f"{', '.join(_PRECISIONS)} or a (lhs, rhs) pair of them")
    ctx = mlir.context()
    return {"precision_config": ir.ArrayAttr.get(
        [stablehlo.PrecisionAttr.get(v, context=ctx) for v in values], context=ctx)}


def _result_type(op_name, et: T.ElementType, preferred) -> T.ElementType:
    """The operands' type, or `preferred_element_type`: of the same family (integers,
    floats, complex) and at least as wide, as in s8 x s8 -> s32 or bf16 x bf16 -> f32."""
    if preferred is None:
        return et
    wanted = T.element_type(preferred)
    family = {T.SIGNED: "integer", T.UNSIGNED: "integer", T.FLOAT: "float", T.COMPLEX: "complex"}
    if family.get(wanted.kind) != family.get(et.kind) or wanted.bits < et.bits:
        raise ShapeError(f"{op_name}: preferred_element_type {wanted.name} must be an "
                         f"{family.get(et.kind, et.name)} type at least as wide as the "
                         f"operands' {et.name}")
    return wanted


def _operands(op_name, lhs, rhs) -> T.ElementType:
    check_kind(op_name, "lhs", lhs, ARITHMETIC)
    check_kind(op_name, "rhs", rhs, ARITHMETIC)
    same_builder(op_name, lhs, rhs)
    if lhs.dtype != rhs.dtype:
        raise ShapeError(f"{op_name}: lhs {lhs.shape} and rhs {rhs.shape} must have the same "
                         f"element type")
    return lhs.dtype


def _emit_dot(lhs, rhs, numbers: DotDimensionNumbers, result: T.Shape, precision: dict):
    ctx = mlir.context()
    return lhs.builder.add_op("stablehlo.dot_general", result, [lhs, rhs], {
        "dot_dimension_numbers": stablehlo.DotDimensionNumbers.get(
            list(numbers.lhs_batch_dimensions), list(numbers.rhs_batch_dimensions),
            list(numbers.lhs_contracting_dimensions), list(numbers.rhs_contracting_dimensions),
            context=ctx), **precision})


def dot_general(lhs, rhs, dimension_numbers, precision_config=None, preferred_element_type=None):
    """DotGeneral: sums of products over the contracting dimensions, for each index of the
    batch dimensions; the result has the batch, then lhs free, then rhs free dimensions.
    `dimension_numbers` is an hg.DotDimensionNumbers or a dict of its fields."""
    et = _operands("dot_general", lhs, rhs)
    numbers = _dot_numbers(dimension_numbers)
    result = dot_general_shape(lhs.shape, rhs.shape, numbers,
                               _result_type("dot_general", et, preferred_element_type))
    return _emit_dot(lhs, rhs, numbers, result, _precision_config("dot_general", precision_config))


def dot(lhs, rhs, precision_config=None, preferred_element_type=None):
    """Dot, by the spec's table: vector [n] . vector [n] -> scalar; matrix [m x k] . vector
    [k] -> vector [m]; matrix [m x k] . matrix [k x n] -> matrix [m x n]."""
    et = _operands("dot", lhs, rhs)
    if (lhs.shape.rank, rhs.shape.rank) not in ((1, 1), (2, 1), (2, 2)):
        raise ShapeError(f"dot: lhs {lhs.shape} and rhs {rhs.shape}: Dot takes vector . vector, "
                         f"matrix . vector or matrix . matrix (ranks 1.1, 2.1, 2.2); use "
                         f"dot_general for other ranks")
    numbers = DotDimensionNumbers((lhs.shape.rank - 1,), (0,))
    if lhs.shape.dimensions[-1] != rhs.shape.dimensions[0]:
        raise ShapeError(f"dot: lhs {lhs.shape} and rhs {rhs.shape}: the last dimension of lhs "
                         f"and the first of rhs must have the same size")
    result = dot_general_shape(lhs.shape, rhs.shape, numbers,
                               _result_type("dot", et, preferred_element_type))
    return _emit_dot(lhs, rhs, numbers, result, _precision_config("dot", precision_config))


# -- Cholesky, TriangularSolve ------------------------------------------------------------------

def _square_matrices(op_name: str, arg: str, operand) -> T.Shape:
    shape = array_operand(op_name, arg, operand)
    check_kind(op_name, arg, operand, FLOATING)
    if shape.rank < 2 or shape.dimensions[-1] != shape.dimensions[-2]:
        raise ShapeError(f"{op_name}: {arg} {shape} must be a square matrix or a batch of them "
                         f"(rank >= 2, the last two dimensions equal)")
    return shape


def cholesky(a, lower=True):
    """Cholesky(a, lower): the lower (or upper) triangular factor of each symmetric (Hermitian)
    positive-definite matrix of `a`, reading only that triangle of `a`. The other triangle
    of the result is zero; for an input that is not positive definite the values are
    whatever XLA computes (the spec leaves them to the implementation)."""
    shape = _square_matrices("cholesky", "a", a)
    lower = flag("cholesky", "lower", lower)
    factor = a.builder.add_op("stablehlo.cholesky", shape, [a], {
        "lower": ir.BoolAttr.get(lower, context=mlir.context())})
    rows = shaping.iota(a.builder, T.Shape(T.s32, shape.dimensions), shape.rank - 2)
    columns = shaping.iota(a.builder, T.Shape(T.s32, shape.dimensions), shape.rank - 1)
    kept = elementwise.ge(rows, columns) if lower else elementwise.le(rows, columns)
    return elementwise.select(kept, factor, shaping.broadcast(a.builder.constant(np.zeros((), shape.dtype)),
                                                  shape.dimensions))


_TRANSPOSE = ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT")


def triangular_solve(a, b, left_side, lower, unit_diagonal, transpose_a):
    """TriangularSolve: x with op(a) @ x = b (left_side) or x @ op(a) = b, for triangular a
    (only its `lower` or upper triangle is read; its diagonal taken as ones when
    `unit_diagonal`); op(a) is a, its transpose or its adjoint per `transpose_a`
    ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"). Leading dimensions are batch dimensions."""
    a_shape = _square_matrices("triangular_solve", "a", a)
    b_shape = array_operand("triangular_solve", "b", b)
    same_builder("triangular_solve", a, b)
    left_side = flag("triangular_solve", "left_side", left_side)
    lower = flag("triangular_solve", "lower", lower)
    unit_diagonal = flag("triangular_solve", "unit_diagonal", unit_diagonal)
    if transpose_a not in _TRANSPOSE:
        raise ShapeError(f"triangular_solve: transpose_a={transpose_a!r} must be one of "
                         f"{', '.join(_TRANSPOSE)}")
    m = a_shape.dimensions[-1]
    where = f"triangular_solve: a {a_shape}, b {b_shape}, left_side={left_side}"
    if b_shape.element_type != a_shape.element_type:
        raise ShapeError(f"{where}: a and b must have the same element type")
    if b_shape.rank != a_shape.rank or b_shape.dimensions[:-2] != a_shape.dimensions[:-2]:
        raise ShapeError(f"{where}: b must have a's rank and batch dimensions "
                         f"{list(a_shape.dimensions[:-2])}")
    if b_shape.dimensions[-2 if left_side else -1] != m:
        raise ShapeError(f"{where}: b's {'rows' if left_side else 'columns'} must number {m}, as "
                         f"a's do")
    ctx = mlir.context()
    return a.builder.add_op("stablehlo.triangular_solve", b_shape, [a, b], {
        "left_side": ir.BoolAttr.get(left_side, context=ctx),
        "lower": ir.BoolAttr.get(lower, context=ctx),
        "unit_diagonal": ir.BoolAttr.get(unit_diagonal, context=ctx),
        "transpose_a": stablehlo.TransposeAttr.get(transpose_a, context=ctx)})
