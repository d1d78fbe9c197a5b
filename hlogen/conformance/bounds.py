"""How far two correct evaluations of a float reduction or an FFT may be apart, from the operation.

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
same bound). A transform is one pass per transformed dimension (a 1-D transform of
length n of every line along it). In the 2-norm over one transformed slice (the
fft_length dimensions at one batch index), with u the unit roundoff of the type:

- a pass of direct sums (n complex products with twiddles accurate to mu: Higham 3.6,
  sqrt(2) gamma_2 per product, gamma_{n-1} for the sum, 2 more roundings for the scaling
  by 1/n and a conversion) errs by at most (sqrt(2) gamma_{n+4} + mu) sum_j |x_j| per
  element, so by sqrt(n) (sqrt(2) gamma_{n+4} + mu) times the 2-norm of its result;
- a radix-2 Cooley-Tukey pass of t = ceil(log2 n) stages by t eta / (1 - t eta) times
  it, eta = mu + gamma_4 (sqrt(2) + mu) (Higham, Theorem 24.2); a mixed-radix pass is
  made of short direct sums, within the direct sum's bound;
- a pass is a scaled unitary map, so the relative errors c_p of the passes compose to
  prod(1 + c_p) - 1, and an element's error is at most the slice's 2-norm of the error.

XLA's values are so within c_xla ||y||, per pass the larger of the two with mu = u, the
interpreter's within c_ref ||y||, direct sums with mu = gamma_3 (1 + 2 pi (n-1)^2 / n) (a
phase up to 2 pi (n-1)^2 / n rounded in three operations, then its cosine and sine
rounded); ||y|| is the exact result's 2-norm, from the input (Parseval: sqrt(N) ||x||
forward, ||x|| / sqrt(N) inverse, N the product of the lengths, an IRFFT's Hermitian
mirror counted). Two evaluations are at most (c_xla + c_ref) ||y|| apart.
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.conformance.module import Case, constant_of
from hlogen.mlir import defining_op, enum_attribute, ints_attribute


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
    op = defining_op(value)
    return None if op is None else (op, value, block)


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
    """(c_xla + c_ref) * ||y|| for check `k`'s actual value, one per transformed slice
    (broadcast over its elements), when a stablehlo.fft computes it from a value this
    runner knows; else None."""
    found = _producer(case, k)
    if found is None or found[0].name != "stablehlo.fft":
        return None
    op, value, block = found
    lengths = ints_attribute(op, "fft_length")
    x = _known_value(op.operands[0], block, case.arguments)
    if not lengths or min(lengths) < 1 or x is None:
        return None
    u = _unit_roundoff(value)
    c_xla = math.prod(1 + _pass_xla(n, u) for n in lengths) - 1
    c_ref = math.prod(1 + _pass_ref(n, u) for n in lengths) - 1
    x = np.asarray(x).astype(np.complex128)
    norm = _exact_norm(enum_attribute(op, "fft_type"), x, lengths)
    return ((c_xla + c_ref) * norm).reshape(norm.shape + (1,) * len(lengths))


def _direct_sums(n: int, u: float, mu: float) -> float:
    return math.sqrt(n) * (math.sqrt(2) * _gamma(n + 4, u) + mu)


def _pass_xla(n: int, u: float) -> float:
    t = math.ceil(math.log2(n))
    eta = u + _gamma(4, u) * (math.sqrt(2) + u)
    cooley_tukey = t * eta / (1 - t * eta) if t * eta < 1 else math.inf
    return max(cooley_tukey, _direct_sums(n, u, u))


def _pass_ref(n: int, u: float) -> float:
    return _direct_sums(n, u, _gamma(3, u) * (1 + 2 * math.pi * (n - 1) ** 2 / n))


def _exact_norm(kind: str, x: np.ndarray, lengths: list[int]) -> np.ndarray:
    """||y|| of each transformed slice of the exact transform of `x` (Parseval)."""
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    size, n = math.prod(lengths), lengths[-1]
    squares = np.sum(np.abs(x) ** 2, axis=axes)
    if kind in ("FFT", "RFFT"):
        return np.sqrt(size * squares)
    if kind == "IFFT":
        return np.sqrt(squares / size)
    # IRFFT: x holds values 0 .. n//2 of the last dimension; n//2+1 .. n-1 mirror 1 .. n-n//2-1
    mirrored = np.sum(np.abs(x[..., 1:n - x.shape[-1] + 1]) ** 2, axis=axes)
    return np.sqrt((squares + mirrored) / size)


def _known_value(value, block, arguments) -> np.ndarray | None:
    """A parameter of main (a lifted constant) or a constant."""
    if isinstance(value.owner, ir.Block):
        if value.owner != block:
            return None
        number = ir.BlockArgument(value).arg_number
        return np.asarray(arguments[number]) if number < len(arguments) else None
    return constant_of(value)


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
