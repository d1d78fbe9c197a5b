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
not a tolerance (`"when": "reassociation"` in the known-deviation list).

An FFT is the other kind (`fft_bound`, `"when": "fft"`): StableHLO's expected values
come from XLA's FFT library (ducc: mixed-radix passes with correctly rounded twiddle
factors), the interpreter sums the DFT directly: its own `__fft_1d` (for each output, n
products by cos/sin of the phase -2*pi*j*k/n, itself rounded in double), or hlogen's
rewrite (hlogen.decompositions: dot_generals with correctly rounded twiddles, within the
same bound). Per result of
a transform of length n, with ||y|| the 2-norm of its exact line (Parseval, from the
input) and u the unit roundoff of the element type:

- a direct sum of n complex products with twiddles accurate to mu (Higham 3.6: sqrt(2)
  gamma_2 per complex product, gamma_{n-1} for the sum; 2 more roundings for the scaling
  by 1/n and a final conversion) is within (sqrt(2) gamma_{n+4} + mu) * sum|x_j|, and
  sum|x_j| <= sqrt(n) ||x|| = ||y|| (the 1/n of an inverse cancels the same way);
- a radix-2 Cooley-Tukey FFT of t = ceil(log2 n) stages is within t eta / (1 - t eta)
  ||y||, eta = mu + gamma_4 (sqrt(2) + mu) (Higham, Theorem 24.2), and each element's
  error is at most that 2-norm; a mixed-radix FFT's passes are short direct sums, within
  the direct sum's bound;

so XLA's values are within c_xla ||y||, c_xla the larger of the two with mu = u, and the
interpreter's within c_ref ||y||, c_ref the direct sum's with mu = gamma_3 (1 + 2 pi
(n-1)^2 / n) (a phase up to 2 pi (n-1)^2 / n, rounded in three operations, then its
cosine and sine rounded). Two evaluations are at most (c_xla + c_ref) ||y|| apart. The
bound is per transformed line, for a transform over one dimension (more dimensions: not
derived here, no bound).
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
from hlogen.rewrites import enum_attribute, ints_attribute


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


def _producer(case: Case, k: int):
    """(the op computing check `k`'s actual value, that value, main's block), or None."""
    if case.computation is None or case.replicated is not None:
        return None
    block = case.computation._main.regions[0].blocks[0]
    value = list(block.operations)[-1].operation.operands[k]
    if isinstance(value.owner, ir.Block):
        return None
    op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
    return op, value, block


def _unit_roundoff(value) -> float:
    """u of the value's element type (of its parts, for a complex type)."""
    return float(ml_dtypes.finfo(mlir.shape_of_type(value.type).element_type.dtype).eps) / 2


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def reassociation_bound(case: Case, k: int) -> np.ndarray | float | None:
    """The bound for check `k`'s actual value (result k of the case's main), or None when
    an op of REDUCTIONS does not compute it from values this runner knows."""
    found = _producer(case, k)
    if found is None:
        return None
    op, value, block = found
    if op.name not in REDUCTIONS or not _sums(op):
        return None
    if mlir.shape_of_type(value.type).element_type.kind != T.FLOAT:
        return None
    length, summed = REDUCTIONS[op.name]
    magnitude = 1.0
    for i in summed:
        array = _known_value(op.operands[i], block, case.arguments)
        if array is None:
            return None
        magnitude *= float(np.max(np.abs(array.astype(np.float64)), initial=0.0))
    u, n = _unit_roundoff(value), length(op)
    if n * u >= 1:
        return None
    return 2 * _gamma(n, u) * n * magnitude


def fft_bound(case: Case, k: int) -> np.ndarray | None:
    """(c_xla + c_ref) * ||y|| for each element of check `k`'s actual value when a
    stablehlo.fft over one dimension computes it from a value this runner knows; else None."""
    found = _producer(case, k)
    if found is None or found[0].name != "stablehlo.fft":
        return None
    op, value, block = found
    lengths = ints_attribute(op, "fft_length")
    x = _known_value(op.operands[0], block, case.arguments)
    if len(lengths) != 1 or lengths[0] < 1 or x is None:
        return None
    n, u = lengths[0], _unit_roundoff(value)
    norm = _exact_norm(enum_attribute(op, "fft_type"), np.asarray(x).astype(np.complex128), n)
    t = math.ceil(math.log2(n))
    eta = u + _gamma(4, u) * (math.sqrt(2) + u)
    cooley_tukey = t * eta / (1 - t * eta) if t * eta < 1 else math.inf
    c_xla = max(cooley_tukey, math.sqrt(2) * _gamma(n + 4, u) + u)
    c_ref = math.sqrt(2) * _gamma(n + 4, u) + _gamma(3, u) * (1 + 2 * math.pi * (n - 1) ** 2 / n)
    return ((c_xla + c_ref) * norm)[..., None]


def _exact_norm(kind: str, x: np.ndarray, n: int) -> np.ndarray:
    """||y|| of each line of the exact transform of length n of `x` (Parseval)."""
    line = np.sqrt(np.sum(np.abs(x) ** 2, axis=-1))
    if kind in ("FFT", "RFFT"):
        return math.sqrt(n) * line
    if kind == "IFFT":
        return line / math.sqrt(n)
    # IRFFT: x holds spectrum values 0 .. n//2; values n//2+1 .. n-1 mirror 1 .. n-n//2-1
    mirrored = np.sum(np.abs(x[..., 1:n - x.shape[-1] + 1]) ** 2, axis=-1)
    return np.sqrt((line ** 2 + mirrored) / n)


def _known_value(value, block, arguments) -> np.ndarray | None:
    """A parameter of main (a lifted constant) or a constant."""
    if isinstance(value.owner, ir.Block):
        if value.owner != block:
            return None
        number = ir.BlockArgument(value).arg_number
        return np.asarray(arguments[number]) if number < len(arguments) else None
    op = value.owner.operation if hasattr(value.owner, "operation") else value.owner
    return decode_constant(op) if op.name == "stablehlo.constant" else None


# a known entry's `when` -> the bound for check k's actual value (None: not derived for it)
BOUNDS = {"reassociation": reassociation_bound, "fft": fft_bound}


def within(name: str, case: Case, k: int, mask: np.ndarray, got, want) -> bool:
    """Every mismatch of check `k` is within the bound BOUNDS[name] (complex values: the
    modulus of the difference)."""
    with mlir.context():
        bound = BOUNDS[name](case, k)
    if bound is None:
        return False
    got, want = np.asarray(got), np.asarray(want)
    wide = np.complex128 if T.element_type(got.dtype).kind == T.COMPLEX else np.float64
    with np.errstate(all="ignore"):
        diff = np.abs(got.astype(wide) - want.astype(wide))
    return bool(np.all((diff <= bound)[mask]))
