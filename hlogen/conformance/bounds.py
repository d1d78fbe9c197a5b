"""How far two correct evaluations of a float reduction may be apart, from the operation.

A backend may sum a reduction's terms in any order and contract multiply-adds (XLA CPU
does both: it splits and vectorizes sums); StableHLO's `expect_close` asks for 3 ULP,
which only holds when the sum is evaluated in the reference's order. The classical
bound (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1) for a sum of n
terms t_i, each a product of at most two rounded inputs, evaluated in any order:

    |computed - exact| <= gamma_n * sum |t_i|,    gamma_n = n u / (1 - n u)

with u the unit roundoff of the element type; two evaluations are at most twice that
apart. sum |t_i| <= n * M, where M is the product of the largest magnitudes of the
summed operands (a convolution's or a dot's two operands, a window sum's one), so

    bound = 2 * gamma_n * n * M

per result: a bound derived from the op's reduction length and the magnitudes it sums,
not a tolerance. `within_reassociation` applies it to a check's mismatches; the known
deviation list names the backends it explains (`"when": "reassociation"`).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.conformance.module import Case, decode_constant


def _shape(value) -> list:
    return list(ir.RankedTensorType(value.type).shape)


def _convolution(op) -> int:
    """Products per output element: the kernel's size over its output features."""
    kernel = _shape(op.operands[1])
    numbers = stablehlo.ConvDimensionNumbers(op.attributes["dimension_numbers"])
    return math.prod(kernel) // kernel[numbers.kernel_output_feature_dimension]


def _dot_general(op) -> int:
    numbers = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lhs = _shape(op.operands[0])
    return math.prod(lhs[d] for d in numbers.lhs_contracting_dimensions)


def _reduce_window(op) -> int:
    """The window's size, and the initial value (a sum of n + 1 terms)."""
    return math.prod(ir.DenseI64ArrayAttr(op.attributes["window_dimensions"])) + 1


def _reduce(op) -> int:
    operand = _shape(op.operands[0])
    return math.prod(operand[d] for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"])) + 1


# op -> (its reduction length, the operands whose magnitudes multiply in each term)
REDUCTIONS = {
    "stablehlo.convolution": (_convolution, (0, 1)),
    "stablehlo.dot_general": (_dot_general, (0, 1)),
    "stablehlo.reduce_window": (_reduce_window, (0,)),
    "stablehlo.reduce": (_reduce, (0,)),
}


def _sums(op) -> bool:
    """A reduce or reduce_window whose body adds (a max or min is exact in any order)."""
    if not op.regions:
        return True
    body = [o.operation.name for o in op.regions[0].blocks[0].operations]
    return body == ["stablehlo.add", "stablehlo.return"]


def reassociation_bound(case: Case, k: int) -> np.ndarray | float | None:
    """The bound for check `k`'s actual value (result k of the case's main), or None when
    an op of REDUCTIONS does not compute it from values this runner knows."""
    if case.computation is None or case.replicated is not None:
        return None
    block = case.computation._main.regions[0].blocks[0]
    value = list(block.operations)[-1].operation.operands[k]
    if isinstance(value.owner, ir.Block):
        return None
    op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
    if op.name not in REDUCTIONS or not _sums(op):
        return None
    length, summed = REDUCTIONS[op.name]
    magnitude = 1.0
    for i in summed:
        array = _known_value(op.operands[i], block, case.arguments)
        if array is None:
            return None
        magnitude *= float(np.max(np.abs(array.astype(np.float64)), initial=0.0))
    element = mlir.shape_of_type(value.type).element_type
    u = float(ml_dtypes.finfo(element.dtype).eps) / 2
    n = length(op)
    if n * u >= 1:
        return None
    return 2 * (n * u / (1 - n * u)) * n * magnitude


def _known_value(value, block, arguments) -> np.ndarray | None:
    """A parameter of main (a lifted constant) or a constant."""
    if isinstance(value.owner, ir.Block):
        if value.owner != block:
            return None
        number = ir.BlockArgument(value).arg_number
        return np.asarray(arguments[number]) if number < len(arguments) else None
    op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
    return decode_constant(op) if op.name == "stablehlo.constant" else None


def within_reassociation(case: Case, k: int, mask: np.ndarray, got, want) -> bool:
    """Every mismatch of check `k` is within `reassociation_bound`."""
    with mlir.context():
        bound = reassociation_bound(case, k)
    if bound is None:
        return False
    got, want = np.asarray(got), np.asarray(want)
    if T.element_type(got.dtype).kind != T.FLOAT:
        return False
    with np.errstate(all="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    return bool(np.all(diff[mask] <= bound))
