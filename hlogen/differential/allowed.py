"""What the spec allows two correct evaluations to differ by, from the operation: the one
place that judges a difference "allowed" (the conformance runner's known deviations by
bound, `BOUNDS`; the fuzzer's triage, `order_allows` and `bitcast_allows`).

How far two correct evaluations of a float reduction or an FFT may be apart:

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

import dataclasses
import math

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.differential.edits import op_alone
from hlogen.differential.near import Tolerance, judge
from hlogen.mlir import enum_attribute, ints_attribute


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


def _producer(computation, k: int):
    """(the op computing result `k` of main, that value, main's block), or None."""
    if computation is None:
        return None
    block = computation.main.regions[0].blocks[0]
    value = list(block.operations)[-1].operation.operands[k]
    op = mlir.defining_op(value)
    return None if op is None else (op, value, block)


def _unit_roundoff(value) -> float:
    """u of the value's element type (of its parts, for a complex type)."""
    return float(ml_dtypes.finfo(mlir.shape_of_type(value.type).element_type.dtype).eps) / 2


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u) if n * u < 1 else math.inf


def reassociation_bound(computation, arguments, k: int) -> np.ndarray | float | None:
    """The bound for result k of `computation`'s main run on `arguments`, or None when an
    op of REDUCTIONS does not compute it from values known (arguments, constants)."""
    found = _producer(computation, k)
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
        array = _known_value(op.operands[i], block, arguments)
        if array is None:
            return None
        magnitude *= float(np.max(np.abs(array.astype(np.float64)), initial=0.0))
    u, n = _unit_roundoff(value), length(op)
    if n * u >= 1:
        return None
    return 2 * _gamma(n, u) * n * magnitude


def fft_bound(computation, arguments, k: int) -> np.ndarray | None:
    """(c_xla + c_ref) * ||y|| for result k of `computation`'s main run on `arguments`,
    one per transformed slice (broadcast over its elements), when a stablehlo.fft
    computes it from a value known; else None."""
    found = _producer(computation, k)
    if found is None or found[0].name != "stablehlo.fft":
        return None
    op, value, block = found
    lengths = ints_attribute(op, "fft_length")
    x = _known_value(op.operands[0], block, arguments)
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
    return mlir.constant_of(value)


# a known entry's `when` -> the bound for check k's actual value (None: not derived for it)
BOUNDS = {"reassociation": reassociation_bound, "fft": fft_bound}


def within(name: str, computation, arguments, k: int, mask: np.ndarray, got, want) -> bool:
    """Every mismatch of result `k` (of `computation` run on `arguments`) is within the
    bound BOUNDS[name] (complex values: the modulus of the difference)."""
    with mlir.context():
        bound = BOUNDS[name](computation, arguments, k)
    if bound is None:
        return False
    got, want = np.asarray(got), np.asarray(want)
    wide = np.complex128 if T.element_type(got.dtype).kind == T.COMPLEX else np.float64
    with np.errstate(all="ignore"):
        diff = np.abs(got.astype(wide) - want.astype(wide))
    return bool(np.all((diff <= bound)[mask]))


# -- what the fuzzer's triage allows an op's values -----------------------------------------

# ops whose results the spec computes by arithmetic it leaves the order of to the
# implementation: a NaN on one side against an infinity on the other, from operands that
# hold infinities or NaNs, is the order's (inf - inf in one, inf + 1 in the other)
_ORDER_FREE = {"stablehlo.convolution", "stablehlo.dot_general", "stablehlo.reduce",
               "stablehlo.reduce_window", "stablehlo.triangular_solve", "stablehlo.cholesky"}
# and of these the algorithm too: where operands hold infinities or NaNs, whether a NaN
# reaches an element is the algorithm's (XLA CPU's blocked solve, the interpreter's
# substitution)
_ALGORITHM_FREE = {"stablehlo.triangular_solve", "stablehlo.cholesky"}


def order_allows(op, got, want, operands: list, tolerance: Tolerance = Tolerance()) -> bool:
    """Whether `op` (of _ORDER_FREE), computing `got` on one side and `want` on the other
    from `operands` (their values), differs only as the order of its arithmetic can:
    within twice the error bound of a float sum in any order (a dot_general,
    convolution, or reduce or reduce_window that adds: reassociation_bound, from
    the operands' finite values: an element a term of which is not finite is not finite
    on either side) or of a product in any order (a reduce or reduce_window that
    multiplies: _product_bound), an infinity where the other side reaches the type's
    largest finite value within that bound (one order overflows), or a NaN against an
    infinity from operands that hold infinities or NaNs (against anything, for a
    triangular solve or a Cholesky factorization, _ALGORITHM_FREE, and for a product
    that can reach both an infinity and a zero: _zero_meets_overflow)."""
    a, e = np.asarray(got), np.asarray(want)
    if op.name not in _ORDER_FREE or a.shape != e.shape or a.dtype != e.dtype or \
            T.element_type(a.dtype).kind not in (T.FLOAT, T.COMPLEX):
        return False
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    floats = [T.element_type(np.asarray(v).dtype).kind in (T.FLOAT, T.COMPLEX) for v in operands]
    finite = [np.where(np.isfinite(np.asarray(v).astype(wide)), v, np.zeros_like(v)) if f
              else v for v, f in zip(operands, floats)]
    with mlir.context(), ir.Location.unknown():  # the op alone, on its operands' values
        alone = Computation(op_alone(op, parameters=True))
        bound = reassociation_bound(alone, finite, 0)
    with np.errstate(all="ignore"):
        x, y = a.astype(wide), e.astype(wide)
        if bound is None:
            bound = _product_bound(op, x, y)
        if bound is None:
            close = overflows = np.zeros(x.shape, bool)
        else:
            largest = float(ml_dtypes.finfo(np.real(a).dtype).max)
            close = np.abs(x - y) <= bound
            overflows = (np.isinf(x) & (np.abs(y) + bound >= largest)) | \
                (np.isinf(y) & (np.abs(x) + bound >= largest))
        odd = any(f and not np.isfinite(np.asarray(v).astype(wide)).all()
                  for v, f in zip(operands, floats))
        swapped = odd & ((np.isnan(x) | np.isnan(y)) if op.name in _ALGORITHM_FREE else
                         (np.isnan(x) & np.isinf(y)) | (np.isinf(x) & np.isnan(y)))
        if _multiplies(op) and _zero_meets_overflow(finite, floats, a.dtype):
            swapped = swapped | np.isnan(x) | np.isnan(y)
    return bool(np.all((close | overflows | swapped)[judge(a, e, tolerance)[0]]))


def _multiplies(op) -> bool:
    """Whether `op` is a reduce or reduce_window whose body multiplies."""
    body = [o.operation.name for o in op.regions[0].blocks[0].operations] if op.regions else []
    return op.name in ("stablehlo.reduce", "stablehlo.reduce_window") and \
        body == ["stablehlo.multiply", "stablehlo.return"]


def _zero_meets_overflow(finite: list, floats: list, dtype) -> bool:
    """Whether a product of the float operands' finite values in some order can overflow
    to an infinity before it meets a zero (inf * 0: a NaN in that order, a number in
    another): their magnitudes above 1 multiply past the largest value of `dtype`, and
    they hold a zero, or their magnitudes below 1 multiply past its smallest."""
    values = [np.abs(np.asarray(v).astype(np.complex128 if np.iscomplexobj(v) else np.float64))
              for v, f in zip(finite, floats) if f]
    if not values:
        return False
    info = ml_dtypes.finfo(np.real(np.zeros((), dtype)).dtype)
    with np.errstate(divide="ignore"):
        growth = sum(float(np.log2(v[v > 1]).sum()) for v in values)
        shrinking = sum(float(np.log2(v[(v > 0) & (v < 1)]).sum()) for v in values)
    zero = any((v == 0).any() for v in values) or \
        shrinking < float(np.log2(float(info.smallest_subnormal)))
    return zero and growth > float(np.log2(float(info.max)))


def bitcast_allows(got, want, operand_got, operand_want,
                   tolerance: Tolerance = Tolerance()) -> bool:
    """Whether a bitcast_convert's results `got` and `want` (of its operand's values
    `operand_got` and `operand_want` on each side) differ only as its float operand's
    bits do, where the operand's values match by the rule: a bitcast shows the bits of
    what the rule lets differ (a NaN's sign and payload, which the spec, as IEEE 754,
    leaves to the implementation; the last bits of a function it leaves inexact)."""
    x, y, got, want = (np.asarray(v) for v in (operand_got, operand_want, got, want))
    if T.element_type(x.dtype).kind not in (T.FLOAT, T.COMPLEX) or \
            (x.shape, x.dtype, got.shape, got.dtype) != (y.shape, y.dtype, want.shape, want.dtype) \
            or judge(x, y, tolerance)[0].any():
        return False
    operand_differs = judge(x, y, Tolerance(bitwise=True))[0]
    differs = judge(got, want, tolerance)[0]
    if differs.ndim == x.ndim + 1:  # to narrower elements: several per operand element
        differs = differs.any(-1)
    elif x.ndim == differs.ndim + 1:  # to wider elements: several operand elements in one
        operand_differs = operand_differs.any(-1)
    return differs.shape == operand_differs.shape and not np.any(differs & ~operand_differs)


def _product_bound(op, x: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """For a reduce or reduce_window whose body multiplies, how far two evaluations of
    its products (x and y, widened) may be apart: n terms in any order are n - 1
    roundings, each evaluation within gamma_{n-1} of the exact product relatively
    (Higham 3.1), so two within 2 gamma / (1 - gamma) of the larger finite magnitude."""
    if not _multiplies(op):
        return None
    roundings = REDUCTIONS[op.name][0](op) - 1
    u = float(ml_dtypes.finfo(mlir.shape_of_type(op.results[0].type).element_type.dtype).eps) / 2
    if roundings * u >= 0.5:
        return None
    gamma = roundings * u / (1 - roundings * u)
    larger = np.maximum(*(np.where(np.isfinite(v), np.abs(v), 0) for v in (x, y)))
    return 2 * gamma / (1 - gamma) * larger




# -- each op's accuracy: how far from the exact value an implementation may be -----------------

@dataclasses.dataclass(frozen=True)
class Accuracy:
    """An op's accuracy bound, in ULPs of its result type at the exact value, per type
    name ("*": any other): a value within it is right (the arbiter's verdicts,
    hlogen.differential.arbiter). 0.5 means correctly rounded: only the rounding of the
    exact value is right. `xla` and `interpreter`: each side's own accuracy (the largest
    error measured, per type, or a word), and `source`: where the bound comes from."""

    ulps: dict
    xla: dict | str
    interpreter: dict | str
    source: str

    def bound(self, type_name: str) -> float:
        return self.ulps.get(type_name, self.ulps["*"])


MEASURED = ("measured by benchmarks/accuracy.py (jaxlib 0.10.2, XLA CPU x86_64; 2000 random "
            "inputs per type, a typical range and run_hlo_module's large range; subnormals "
            "left out)")
_CAP = 4.0  # XLA's own error past this is a finding in itself (log1p f64: 80 ULP)


def _measured(xla: dict, interpreter: dict) -> Accuracy:
    """A function XLA does not round correctly: the bound is XLA's own accuracy as
    measured, rounded up to a half ULP, with half a ULP more for inputs not drawn; never
    below faithful rounding (1 ULP), never above _CAP. XLA is the implementation under
    test and its last bits are its design (the spec leaves the accuracy of these functions
    to the implementation, `result_accuracy` DEFAULT): an XLA value beyond what it achieves
    on random inputs is a finding, an interpreter beyond it the less accurate side."""
    ulps = {t: min(_CAP, max(1.0, math.ceil(2 * e) / 2 + 0.5)) for t, e in xla.items()}
    return Accuracy({**ulps, "*": 1.0}, xla, interpreter, MEASURED)


CORRECT = Accuracy({"*": 0.5}, "0.5", "0.5", "the spec: IEEE 754's operation, correctly rounded")
EXACT = Accuracy({"*": 0.5}, "exact", "exact", "the spec: an exact result (integers, "
                 "selections, comparisons, bit casts) or the rounding of one")
FAITHFUL = Accuracy({"*": 1.0}, "not measured", "not measured",
                    "faithful rounding (1 ULP): not measured here")
# sums: the exact sum rounded (0.5 ULP) plus the freedom of order: see sum_bound
SUM = Accuracy({"*": 0.5}, "f32 accumulation (f16, bf16) in blocks, fused multiply-adds",
               "sequential, each step rounded in the result type",
               "the spec's freedom of order, at an accumulation of at least f32: sum_bound")
FFT = Accuracy({"*": 0.5}, "mixed-radix passes (ducc), within c_xla times the 2-norm",
              "direct sums (c_ref)", "derived: fft_bound's c_xla (Higham 24.2) times the exact "
              "transform's 2-norm, beyond the final rounding")
# complex results, normwise: each part in ULPs of the larger part's binade (Higham 3.6: a
# product's error is sqrt(2) gamma_2 |z|, a quotient's a few u |z|)
COMPLEX_PRODUCT = Accuracy({"*": 2.0}, "not measured", "not measured",
                           "derived: sqrt(2) gamma_2 of the modulus (Higham 3.6), normwise")
COMPLEX_FUNCTION = Accuracy({"*": 4.0}, "not measured", "not measured",
                            "a few ULPs, normwise: not measured here")

# op (with " complex" for complex operands) -> its accuracy: THE table of what the arbiter
# judges by (docs/accuracy.md shows it, with each figure's source)
ACCURACY = {
    **{"stablehlo." + n: CORRECT for n in (
        "add", "subtract", "multiply", "divide", "sqrt", "convert", "reduce_precision")},
    **{"stablehlo." + n: EXACT for n in (
        "remainder", "negate", "abs", "sign", "floor", "ceil", "round_nearest_even",
        "round_nearest_afz", "maximum", "minimum", "clamp", "select", "compare",
        "bitcast_convert", "count_leading_zeros", "popcnt", "shift_left",
        "shift_right_logical", "shift_right_arithmetic", "and", "or", "xor", "not", "sort",
        "is_finite")},
    **{"stablehlo." + n: SUM for n in ("dot_general", "convolution", "reduce", "reduce_window")},
    "stablehlo.fft": FFT,
    **{"chlo." + n: FAITHFUL for n in (
        "erf", "erfc", "sinh", "cosh", "asin", "acos", "atan", "asinh", "acosh", "atanh")},
    "stablehlo.exponential": _measured(
        xla={"f64": 1.19, "f32": 0.901, "f16": 0.5, "bf16": 0.5},
        interpreter={"f64": 0.5, "f32": 0.5, "f16": 0.5, "bf16": 0.5}),
    "stablehlo.exponential_minus_one": _measured(
        xla={"f64": 2.71, "f32": 3.89, "f16": 1.69, "bf16": 0.5},
        interpreter={"f64": 0.734, "f32": 0.5, "f16": 0.5, "bf16": 0.5}),
    "stablehlo.log": _measured(
        xla={"f64": 0.5, "f32": 0.953, "f16": 0.5, "bf16": 0.499},
        interpreter={"f64": 0.5, "f32": 0.5, "f16": 0.5, "bf16": 0.499}),
    "stablehlo.log_plus_one": _measured(
        xla={"f64": 80, "f32": 1.81, "f16": 0.5, "bf16": 0.499},
        interpreter={"f64": 0.735, "f32": 0.5, "f16": 0.5, "bf16": 0.499}),
    "stablehlo.logistic": _measured(
        xla={"f64": 1.9, "f32": 1.76, "f16": 1.84, "bf16": 0.499},
        interpreter={"f64": 1.9, "f32": 1.84, "f16": 1.84, "bf16": 1.63}),
    "stablehlo.sine": _measured(
        xla={"f64": 0.503, "f32": 0.551, "f16": 0.5, "bf16": 0.499},
        interpreter={"f64": 0.503, "f32": 0.5, "f16": 0.5, "bf16": 0.499}),
    "stablehlo.cosine": _measured(
        xla={"f64": 0.5, "f32": 0.535, "f16": 0.5, "bf16": 0.5},
        interpreter={"f64": 0.5, "f32": 0.499, "f16": 0.5, "bf16": 0.5}),
    "stablehlo.tan": _measured(
        xla={"f64": 0.521, "f32": 0.668, "f16": 0.499, "bf16": 0.5},
        interpreter={"f64": 0.521, "f32": 0.5, "f16": 0.499, "bf16": 0.5}),
    "stablehlo.tanh": _measured(
        xla={"f64": 3.2, "f32": 3.81, "f16": 0.5, "bf16": 0.497},
        interpreter={"f64": 1.76, "f32": 0.5, "f16": 0.5, "bf16": 0.497}),
    "stablehlo.rsqrt": _measured(
        xla={"f64": 1.43, "f32": 1.13, "f16": 0.5, "bf16": 0.499},
        interpreter={"f64": 1.43, "f32": 0.5, "f16": 0.5, "bf16": 0.499}),
    "stablehlo.cbrt": _measured(
        xla={"f64": 3.01, "f32": 0.872, "f16": 0.5, "bf16": 0.5},
        interpreter={"f64": 3.01, "f32": 0.5, "f16": 0.5, "bf16": 0.5}),
    "stablehlo.atan2": _measured(
        xla={"f64": 0.504, "f32": 1.05, "f16": 0.5, "bf16": 0.499},
        interpreter={"f64": 0.504, "f32": 0.5, "f16": 0.5, "bf16": 0.499}),
    "stablehlo.power": _measured(
        xla={"f64": 0.5, "f32": 0.501, "f16": 0.5, "bf16": 0.5},
        interpreter={"f64": 0.5, "f32": 0.5, "f16": 0.5, "bf16": 0.5}),
    **{f"stablehlo.{n} complex": CORRECT for n in ("add", "subtract", "negate")},
    **{f"stablehlo.{n} complex": EXACT for n in ("maximum", "minimum", "real", "imag")},
    "stablehlo.multiply complex": COMPLEX_PRODUCT,
    "stablehlo.divide complex": COMPLEX_FUNCTION,
    "stablehlo.abs complex": FAITHFUL,
    **{f"stablehlo.{n} complex": COMPLEX_FUNCTION for n in (
        "exponential", "log", "sqrt", "sine", "cosine", "tanh", "tan", "rsqrt",
        "exponential_minus_one", "log_plus_one")},
}


def accuracy(name: str, complex_operands: bool = False) -> Accuracy | None:
    return ACCURACY.get(name + " complex" if complex_operands else name)


# unit roundoff of the accumulation the arbiter allows a sum: the result type's, but no
# coarser than f32's (XLA accumulates f16 and bf16 sums in f32: an f16 sum rounded at each
# step is the less accurate evaluation, not another order)
_F32_U = 2.0 ** -24


def sum_bound(terms: int, magnitude, dtype):
    """How far a sum of `terms` terms whose magnitudes add up to `magnitude` may be from
    its exact value, beyond the final rounding (Higham 3.1: gamma_n sum |t_i| with u the
    accumulation's unit roundoff, for any order, with or without fused multiply-adds);
    None where n u >= 1 (no bound)."""
    u = min(float(ml_dtypes.finfo(dtype).eps) / 2, _F32_U)
    if terms * u >= 1:
        return None
    return _gamma(terms, u) * magnitude


# differences the spec leaves open: the classes the arbiter reports as allowed
OPEN_CLASSES = {
    "nan-sign-payload": "a NaN's sign and payload (IEEE 754 leaves them open), and what shows "
                        "them: a bitcast, a sort in total order",
    "zero-sign": "the sign of a zero the spec does not fix (an init value's, a reduction's, "
                 "a maximum or minimum of -0 and +0)",
    "summation-order": "a sum or dot in another order, with or without fused multiply-adds, "
                       "within the bound of the sum (an overflow of one order included)",
    "complex-infinity": "complex arithmetic with infinities or NaNs (C99's Annex G is not "
                        "the spec's)",
    "convert-out-of-range": "a float converted to an integer type that cannot hold it",
    "integer-division": "an integer divided by zero, or MIN / -1",
    "sort-order": "the order of equal keys in an unstable sort, or of NaN keys under a "
                  "partial order (no strict weak order)",
    "within-accuracy": "both values within the op's accuracy bound (ACCURACY)",
}
