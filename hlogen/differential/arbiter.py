"""Who is wrong: one op's two results judged against its exact answer.

`arbitrate(alone, operands, test, reference)` takes one op as a module of its own (its
operands main's parameters: hlogen.differential.edits.op_alone(op, parameters=True)),
the values both sides gave it, and each side's result. For the elements whose bits
differ (at most `limit` of them: the cheap path a fuzz run takes) it computes the exact
answer (hlogen.differential.exact: integers exactly, element-wise float functions with
mpmath, sums and dots with fractions) and each side's error in ULPs of the result
type, and judges each side by the op's accuracy bound (hlogen.differential.allowed's
ACCURACY: correctly rounded ops must give the rounding of the exact value, others be
within their bound; a sum within the bound of its order, `sum_bound`):

- `test wrong`: the test side outside the bound, the reference inside;
- `reference wrong`: the other way round;
- `allowed`: both inside (`within-accuracy`, `summation-order`), or the values differ
  only where the spec leaves them open (allowed.OPEN_CLASSES: a NaN's sign and payload,
  the sign of a zero from an init value, complex arithmetic with infinities, ...); with
  `strict`, such a difference is `undetermined` instead (no side is wrong by the spec,
  and yet they differ);
- `undetermined`: no exact model of the op, or both sides outside the bound.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import math
import re
from fractions import Fraction

import ml_dtypes
import mpmath
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import loading, mlir, runtime
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.differential import allowed, exact
from hlogen.errors import HlogenError
from hlogen.differential.exact import Open
from hlogen.differential.near import json_value, subnormal
from hlogen.mlir import enum_attribute, ints_attribute

LIMIT = 16   # differing elements judged (the errors are the largest over these): the cheap path
SHOWN = 8    # exact answers reported


class Verdict(str, enum.Enum):
    TEST_WRONG = "test wrong"
    REFERENCE_WRONG = "reference wrong"
    ALLOWED = "allowed"
    UNDETERMINED = "undetermined"


@dataclasses.dataclass(frozen=True)
class Judgement:
    verdict: Verdict
    ulps: dict          # {"test": ..., "reference": ...}: each side's largest error, in ULPs
    exact: list         # the exact answers of (up to SHOWN) differing elements, as strings
    elements: list      # their indices
    reason: str         # one sentence: why this verdict
    allowed_class: str | None = None  # allowed.OPEN_CLASSES' name, when the spec allows it

    def to_json(self) -> dict:
        ulps = {side: None if e is None else json_value(e) for side, e in self.ulps.items()}
        return {"verdict": self.verdict.value, "ulps": ulps, "exact": list(self.exact),
                "elements": [list(e) for e in self.elements], "reason": self.reason,
                "allowed_class": self.allowed_class}


@dataclasses.dataclass
class _Element:
    """One differing element: its exact value, and what the spec lets a side give."""

    exact: object = None
    slack: Fraction | None = None     # a sum's freedom (absolute), beyond the final rounding
    nonfinite_ok: bool = False        # an order of the sum can overflow: any infinity or NaN
    open: Open | None = None          # the spec gives no value
    zero_sign: float | None = None    # IEEE 754's sign of an exact zero (None: open)
    nan_bits: object = None           # the bits of a NaN of this float type (a bitcast's)


def the_op(alone: Computation):
    """The one op of `alone`'s main."""
    block = alone.main.regions[0].blocks[0]
    ops = [o.operation for o in block.operations
           if o.operation.name not in ("func.return", "stablehlo.constant")]
    return ops[0] if len(ops) == 1 else None


def arbitrate(alone: Computation, operands: list, test, reference, *, result: int = 0,
              strict: bool = False, limit: int = LIMIT) -> Judgement:
    """The verdict on result `result` of the op of `alone`, run on `operands`, where the
    test side gave `test` and the reference `reference` (see the module's text)."""
    test, reference = np.asarray(test), np.asarray(reference)
    operands = [np.asarray(v) for v in operands]
    with mlir.context():
        op = the_op(alone)
        if op is None:
            return _undetermined("the module holds more than one op: the arbiter judges one")
        name = op.name
        shape = mlir.shape_of_type(op.results[result].type)
        dtype = np.dtype(shape.element_type.dtype)
        wrong_shape = [side for side, v in (("test", test), ("reference", reference))
                       if v.shape != tuple(shape.dimensions) or v.dtype != dtype]
        if wrong_shape:
            return _shapes(wrong_shape, test, reference, shape)
        differing = np.flatnonzero(_unequal(test, reference))
        if not differing.size:
            return Judgement(Verdict.ALLOWED, {"test": 0, "reference": 0}, [], [],
                             "the two sides agree bit for bit")
        try:
            model = _model(op, operands, result, alone)  # (only now: a convolution's costs a run)
            if model is None:
                return _undetermined(f"no exact model of {name} with these types and attributes "
                                     f"(docs/accuracy.md lists the ops the arbiter models)")
            complex_operands = any(exact.kind(v.dtype) == T.COMPLEX for v in operands)
            accuracy = allowed.accuracy(name, complex_operands)
            part = np.real(np.zeros((), dtype)).dtype  # (a complex result's by its parts' type)
            bound = accuracy.bound(T.element_type(part).name) if accuracy else 1.0
            judgement = _judge(name, model, differing[:limit], int(differing.size), test,
                               reference, dtype, strict, bound)
        except (ArithmeticError, ValueError, TypeError, KeyError, IndexError,
                HlogenError) as error:  # a type or case the models do not cover: not a verdict
            return _undetermined(f"the exact model of {name} does not cover these values "
                                 f"({type(error).__name__}: {error})")
    if judgement.verdict is Verdict.TEST_WRONG and "subnormal" not in judgement.reason and \
            any(subnormal(v).any() for v in operands):
        judgement = dataclasses.replace(judgement, reason=judgement.reason + (
            "; its operands hold subnormals, and XLA CPU flushes subnormals to zero"))
    return judgement


def _undetermined(reason: str) -> Judgement:
    return Judgement(Verdict.UNDETERMINED, {"test": None, "reference": None}, [], [], reason)


def _shapes(wrong, test, reference, shape) -> Judgement:
    if len(wrong) == 2:
        return _undetermined(f"neither side's result is the op's type {shape}")
    side = wrong[0]
    value = test if side == "test" else reference
    return Judgement(Verdict.TEST_WRONG if side == "test" else Verdict.REFERENCE_WRONG,
                     {"test": None, "reference": None}, [], [],
                     f"the {side} side's result is {T.shape_text(value)}, the op's type is "
                     f"{shape}")


def _unequal(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.itemsize in (1, 2, 4, 8) and a.dtype.kind != "c":
        unsigned = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return np.ascontiguousarray(a).view(unsigned) != np.ascontiguousarray(b).view(unsigned)
    x, y = np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1)
    words = a.dtype.itemsize // 8
    return (x.view(np.uint64).reshape(-1, words) != y.view(np.uint64).reshape(-1, words)) \
        .any(1).reshape(a.shape)


# -- judging the differing elements ---------------------------------------------------------------

_OTHER = {"test": "reference", "reference": "test"}


def _judge(name, model, flat, count, test, reference, dtype, strict, bound) -> Judgement:
    k = exact.kind(dtype)
    errors = {"test": [], "reference": []}
    bad = {"test": [], "reference": []}
    limits = {}  # index -> what the op allows there (a sum's bound differs per element)
    classes, shown, elements = [], [], []
    t, r = test.reshape(-1), reference.reshape(-1)
    for i in flat:
        index = tuple(int(j) for j in np.unravel_index(int(i), test.shape))
        element = model(index)
        if len(shown) < SHOWN:
            elements.append(index)
            shown.append(element.open.kind if element.open else
                         "-0" if element.zero_sign is not None and element.zero_sign < 0 else
                         exact.show(element.exact))
        if element.open is not None:
            classes.append(element.open.kind)
            continue
        sides = {"test": t[i], "reference": r[i]}
        spec_open = _spec_open(name, sides["test"], sides["reference"], element, k)
        for side, value in sides.items():
            error, right = _side(value, element, dtype, k, bound)
            errors[side].append(error)
            if not right and spec_open is None:
                bad[side].append(index)
                limits[index] = _limit_text(element, value, dtype, bound, k) + \
                    _flushed(value, element, dtype, k)
        if spec_open is not None:
            classes.append(spec_open)
        elif not bad["test"] and not bad["reference"]:
            classes.append("summation-order" if element.slack is not None or
                           element.nonfinite_ok else "within-accuracy")
    ulps = {side: _largest(e, k) for side, e in errors.items()}
    judged = f"{len(flat)} of {count} differing elements" if count > len(flat) else \
        f"{count} differing element{'s' * (count > 1)}"
    common = dict(ulps=ulps, exact=shown, elements=elements)
    also = ""
    if bad["test"] and bad["reference"]:
        # a side off by less than one ULP rounds differently; one off by more (an infinity
        # for a NaN, a wrong value) computes something else: that one is wrong
        wrong = [side for side in bad if k == T.FLOAT and ulps[side] is not None and
                 ulps[side] >= 1 and ulps[_OTHER[side]] is not None and ulps[_OTHER[side]] < 1]
        if not wrong:
            return Judgement(Verdict.UNDETERMINED, reason=f"both sides are outside {name}'s "
                             f"accuracy ({_bound_text(bound, k)}) on {judged}", **common)
        bad[_OTHER[wrong[0]]] = []
        also = (f"; the {_OTHER[wrong[0]]} side is outside the bound too, by less than one "
                f"ULP (it rounds otherwise)")
    for side, verdict in (("test", Verdict.TEST_WRONG), ("reference", Verdict.REFERENCE_WRONG)):
        if bad[side]:
            other = _OTHER[side]
            return Judgement(verdict, reason=(
                f"{name}'s {side} side is {_ulps_text(ulps[side], k)} from the exact answer at "
                f"{list(bad[side][0])} ({limits[bad[side][0]]}), the {other} side "
                f"{_ulps_text(ulps[other], k)}{also}"), **common)
    cls = _chief(classes)
    described = allowed.OPEN_CLASSES[cls]
    if strict and cls != "within-accuracy":
        return Judgement(Verdict.UNDETERMINED, allowed_class=cls, reason=(
            f"no side is wrong by the spec on {judged} of {name}, but strict counts what it "
            f"leaves open: {described}"), **common)
    return Judgement(Verdict.ALLOWED, allowed_class=cls, reason=(
        f"{name}: {described} ({judged}; errors: test {_ulps_text(ulps['test'], k)}, "
        f"reference {_ulps_text(ulps['reference'], k)})"), **common)


def _flushed(value, element: _Element, dtype, k) -> str:
    """A note where a zero stands for a subnormal exact value (XLA CPU flushes them)."""
    if k != T.FLOAT or float(value) != 0 or not isinstance(element.exact, Fraction) or \
            element.exact == 0:
        return ""
    if abs(element.exact) >= Fraction(2) ** exact.float_format(dtype).emin:
        return ""
    return "; the exact value is subnormal, and XLA CPU flushes subnormals to zero"


def _chief(classes: list) -> str:
    """The class that names a finding: a spec-open class before within-accuracy."""
    for cls in allowed.OPEN_CLASSES:
        if cls != "within-accuracy" and cls in classes:
            return cls
    return "within-accuracy"


def _largest(errors: list, k: str):
    if not errors:
        return None
    worst = max(errors)
    return int(worst) if k in (T.SIGNED, T.UNSIGNED, T.PRED) and math.isfinite(worst) else \
        float(worst)


def _ulps_text(error, k=T.FLOAT) -> str:
    if error is None:
        return "not measured"
    if k in (T.SIGNED, T.UNSIGNED, T.PRED):
        return f"{error} off" if error != math.inf else "off"
    return "infinitely far" if error == math.inf else f"{error:.3g} ULP"


def _limit_text(element: _Element, value, dtype, bound: float, k) -> str:
    if element.zero_sign is not None and k == T.FLOAT and float(value) == 0:
        return f"IEEE 754 gives {'-' if element.zero_sign < 0 else '+'}0"
    if element.slack is None or not isinstance(element.exact, Fraction):
        return _bound_text(bound, k) + " allowed"
    ulp = exact.binade_ulp(element.exact, exact.float_format(dtype))
    return f"a sum in any order is within {float(Fraction(1, 2) + element.slack / ulp):.3g} ULP"


def _bound_text(bound: float, k=T.FLOAT) -> str:
    if k in (T.SIGNED, T.UNSIGNED, T.PRED):
        return "only the exact value"
    return "only the exact value, correctly rounded" if bound == 0.5 else f"{bound:g} ULP"


def _isnan(value) -> bool:
    return bool(np.any(np.isnan(np.asarray(value).astype(np.complex128))))


def _spec_open(name, a, b, element: _Element, k) -> str | None:
    """The open class two differing values of one element fall in, if any."""
    if element.nan_bits is not None:  # a bitcast of a NaN: NaN bits on both sides
        source = np.dtype(element.nan_bits)
        if source.itemsize != np.dtype(np.asarray(a).dtype).itemsize:
            return "nan-sign-payload"  # a piece of a NaN's bits
        return "nan-sign-payload" if all(
            _isnan(np.asarray(v).reshape(1).view(source)) for v in (a, b)) else None
    if k == T.COMPLEX:
        if _isnan(a) and _isnan(b):
            return "nan-sign-payload"
        return None
    if k != T.FLOAT:
        return None
    x, y = float(a), float(b)
    if math.isnan(x) and math.isnan(y):
        return "nan-sign-payload" if isinstance(element.exact, float) and \
            math.isnan(element.exact) or element.nonfinite_ok else None
    if x == 0 and y == 0 and element.exact == 0:
        sign = element.zero_sign
        return "zero-sign" if sign is None else None
    return None


def _side(value, element: _Element, dtype, k, bound) -> tuple[float, bool]:
    """(the error of one side's value, whether the op's accuracy allows it)."""
    want = element.exact
    if k in (T.SIGNED, T.UNSIGNED, T.PRED):
        error = abs(int(value) - want)
        return float(error), error == 0
    if k == T.COMPLEX:
        if exact_complex_nan(want):
            return (0.0, True) if _isnan(value) else (math.inf, False)
        error = exact.complex_ulps(value, want, dtype)
        if element.slack is not None:  # (an FFT: an absolute bound on the modulus)
            parts = [exact.fraction(np.real(value)), exact.fraction(np.imag(value))]
            if any(isinstance(p, float) for p in parts):
                return error, False
            distance = math.hypot(float(parts[0] - want[0]), float(parts[1] - want[1]))
            scale = max(abs(want[0]), abs(want[1]))
            ulp = exact.binade_ulp(scale, exact.float_format(np.real(np.zeros((), dtype)).dtype))
            return error, distance <= float(ulp + element.slack)
        return error, _equal_complex(value, want, dtype) if bound == 0.5 else error <= bound
    got = float(value)
    if element.nonfinite_ok and not math.isfinite(got):
        return 0.0, True
    if got == 0 and isinstance(want, Fraction) and want == 0:
        sign = element.zero_sign
        right = sign is None or math.copysign(1.0, got) == sign
        return 0.0, right
    error = exact.ulps(value, want, dtype)
    if element.slack is not None:
        if not isinstance(want, Fraction) or math.isinf(got) or math.isnan(got):
            return error, error == 0
        ulp = exact.binade_ulp(want, exact.float_format(dtype))
        return error, abs(exact.fraction(value) - want) <= ulp / 2 + element.slack
    if bound == 0.5:  # correctly rounded: only the rounding of the exact value
        rounded = exact.round_to(want, exact.float_format(dtype))
        if isinstance(rounded, float):
            return error, math.isnan(rounded) and math.isnan(got) or rounded == got
        return error, exact.fraction(value) == rounded
    return error, error <= bound


def exact_complex_nan(want) -> bool:
    return isinstance(want, tuple) and any(isinstance(p, float) and math.isnan(p) for p in want)


def _equal_complex(value, want, dtype) -> bool:
    part = exact.float_format(np.real(np.zeros((), dtype)).dtype)
    return all(exact.fraction(v) == exact.round_to(w, part) if isinstance(w, Fraction) else
               exact.fraction(v) == w
               for v, w in ((np.real(value), want[0]), (np.imag(value), want[1])))


# -- the exact model of each op ------------------------------------------------------------------

ELEMENTWISE_FLOAT = set(exact.MPMATH) | {"stablehlo." + n for n in (
    "add", "subtract", "multiply", "divide", "atan2", "power", "remainder", "floor", "ceil",
    "round_nearest_even", "round_nearest_afz", "negate", "abs", "sign", "maximum", "minimum",
    "clamp")}


def _at(array: np.ndarray, index: tuple):
    return array[()] if array.ndim == 0 else array[index]


def _model(op, operands: list, result: int, alone: Computation | None = None):
    """A function of a result index giving that element's _Element, or None."""
    name = op.name
    out = np.dtype(mlir.shape_of_type(op.results[result].type).element_type.dtype)
    k = exact.kind(out)
    kinds = [exact.kind(v.dtype) for v in operands]
    if name == "stablehlo.select":
        return lambda i: _picked(_at(operands[1 + (not _at(operands[0], i))], i))
    if name == "stablehlo.compare":
        direction = enum_attribute(op, "comparison_direction")
        compare_type = enum_attribute(op, "compare_type") if "compare_type" in op.attributes \
            else None
        return lambda i: _Element(exact.compare(_at(operands[0], i), _at(operands[1], i),
                                                direction, compare_type, operands[0].dtype))
    if name == "stablehlo.is_finite":
        return lambda i: _Element(int(bool(np.isfinite(np.float64(_at(operands[0], i))))))
    if name == "stablehlo.convert":
        return _guarded(lambda i: _Element(exact.convert(exact.value_of(_at(operands[0], i)),
                                                         operands[0].dtype, out)))
    if name == "stablehlo.reduce_precision":
        fmt = exact.reduced_format(op.attributes["exponent_bits"].value,
                                   op.attributes["mantissa_bits"].value)
        return lambda i: _Element(_reduce_precision(exact.value_of(_at(operands[0], i)), fmt))
    if name == "stablehlo.bitcast_convert":
        whole = exact.bitcast(operands[0], out)
        source = operands[0].dtype
        nan = np.isnan(operands[0].astype(np.float64)) if exact.kind(source) == T.FLOAT else None

        def element(i):
            found = _Element(exact.value_of(whole[i]))
            # the operand element(s) whose bits it holds: one, or several (a wider result)
            if nan is not None and np.any(nan[i[:nan.ndim]]):
                found.nan_bits = source
            return found
        return element
    if k in (T.SIGNED, T.UNSIGNED, T.PRED) and name in exact.INTEGER_OPS and \
            all(c == k for c in kinds):
        return _guarded(lambda i: _Element(exact.integer(
            name, [int(_at(v, i)) for v in operands], out)))
    if name == "stablehlo.sort":
        return _sort(op, operands, result)
    if name == "stablehlo.fft":
        return _fft(op, operands[0], out)
    if kinds and all(c == T.COMPLEX for c in kinds) and name in exact.COMPLEX_OPS:
        return _guarded(lambda i: _Element(exact.complex_op(
            name, [exact.value_of(_at(v, i)) for v in operands])))
    if name == "stablehlo.dot_general" and k == T.COMPLEX and all(c == k for c in kinds):
        return _dot_general(op, operands[0], operands[1], out)
    if name in ("stablehlo.dot_general", "stablehlo.reduce") and \
            k in (T.SIGNED, T.UNSIGNED) and all(c == k for c in kinds):
        return _dot_general(op, operands[0], operands[1], out) if name.endswith("general") \
            else _reduce(op, operands, out)
    if name in _SUMS and k == T.FLOAT and all(c == T.FLOAT for c in kinds):
        if name == "stablehlo.dot_general":
            return _dot_general(op, operands[0], operands[1], out)
        if name == "stablehlo.reduce":
            return _reduce(op, operands, out)
        if name == "stablehlo.reduce_window" and _body(op) != "stablehlo.add":
            return None
        terms = allowed.REDUCTIONS[name][0](op)
        return _widened(op, alone, operands, out, terms)
    if k == T.FLOAT and name in ELEMENTWISE_FLOAT and all(c == T.FLOAT for c in kinds):
        def element(i):
            args = [exact.fraction(_at(v, i)) for v in operands]
            found = _Element(exact.real(name, args))
            if found.exact == 0 and isinstance(found.exact, Fraction):
                raw = [_at(v, i) for v in operands]  # (the Fractions have no -0)
                found.zero_sign = exact.zero_sign(name, raw) if name not in (
                    "stablehlo.maximum", "stablehlo.minimum", "stablehlo.clamp") else None
            return found
        return element
    return None


# -- sums: exactly with fractions, or in float64 with its error as a bound ----------------------

_SUMS = {"stablehlo.dot_general", "stablehlo.reduce", "stablehlo.convolution",
         "stablehlo.reduce_window"}


def _body(op) -> str | None:
    """The op a reduce's or reduce_window's body applies ("stablehlo.add"), if it is one."""
    names = [o.operation.name for o in op.regions[0].blocks[0].operations]
    return names[0] if len(names) == 2 and names[1] == "stablehlo.return" else None


def _bounded(total: Fraction, magnitude, terms: int, dtype, uncertainty=Fraction(0)) -> _Element:
    fmt = exact.float_format(dtype)
    bound = allowed.sum_bound(terms, float(magnitude), dtype)
    # (no bound where n u >= 1: any value is one order's)
    found = _Element(total, slack=Fraction(bound) + uncertainty if bound is not None else math.inf)
    # an order whose partial sums or products pass the largest value overflows: any
    # infinity or NaN is one order's
    found.nonfinite_ok = magnitude > fmt.largest
    return found


def _finite_terms(values) -> list | None:
    terms = [exact.fraction(v) for v in values]
    return terms if all(isinstance(t, Fraction) for t in terms) else None


def _dot_general(op, lhs: np.ndarray, rhs: np.ndarray, dtype):
    numbers = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lb, rb = list(numbers.lhs_batching_dimensions), list(numbers.rhs_batching_dimensions)
    lc, rc = list(numbers.lhs_contracting_dimensions), list(numbers.rhs_contracting_dimensions)
    lf = [d for d in range(lhs.ndim) if d not in lb + lc]
    rf = [d for d in range(rhs.ndim) if d not in rb + rc]
    batch = [lhs.shape[d] for d in lb]
    left = np.transpose(lhs, lb + lf + lc).reshape(
        math.prod(batch), math.prod(lhs.shape[d] for d in lf), -1)
    right = np.transpose(rhs, rb + rc + rf).reshape(
        math.prod(batch), -1, math.prod(rhs.shape[d] for d in rf))
    shape = batch + [lhs.shape[d] for d in lf] + [rhs.shape[d] for d in rf]

    def element(i):
        flat = int(np.ravel_multi_index(i, shape)) if shape else 0
        b, rest = divmod(flat, left.shape[1] * right.shape[2])
        m, n = divmod(rest, right.shape[2])
        if exact.kind(dtype) == T.COMPLEX:
            return _complex_dot(left[b, m], right[b, :, n], dtype)
        if exact.kind(dtype) in (T.SIGNED, T.UNSIGNED):  # integers: exactly, wrapping
            return _Element(exact.wrap(sum(int(p) * int(q) for p, q in
                                           zip(left[b, m], right[b, :, n])), dtype))
        a, c = left[b, m], right[b, :, n]
        with np.errstate(invalid="ignore"):
            finite = np.isfinite(a.astype(np.float64)).all() and \
                np.isfinite(c.astype(np.float64)).all()
        if not finite:  # infinities or NaNs: IEEE's order decides, any is one
            return _Element(exact.NAN, nonfinite_ok=True)
        total, magnitude = exact.dyadic_sum(list(zip(a.tolist(), c.tolist())))
        return _bounded(total, magnitude, len(a), dtype)
    return element


def _complex_dot(a: np.ndarray, c: np.ndarray, dtype) -> _Element:
    """A complex dot exactly: its real and imaginary parts are real sums of 2n products;
    the freedom of their order bounds the modulus of the error (normwise)."""
    x, y = a.astype(np.complex128), c.astype(np.complex128)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        return _Element(open=Open("complex-infinity", "a complex dot of infinities or NaNs"))
    real, real_size = exact.dyadic_sum([(p.real, q.real) for p, q in zip(x, y)] +
                                       [(-p.imag, q.imag) for p, q in zip(x, y)])
    imag, imag_size = exact.dyadic_sum([(p.real, q.imag) for p, q in zip(x, y)] +
                                       [(p.imag, q.real) for p, q in zip(x, y)])
    part = np.real(np.zeros((), dtype)).dtype
    bound = allowed.sum_bound(2 * len(x), float(real_size + imag_size), part)
    found = _Element((real, imag), slack=Fraction(bound) if bound is not None else math.inf)
    return found


def _reduce(op, operands: list, dtype):
    body = _body(op)
    if len(operands) != 2 or body not in ("stablehlo.add", "stablehlo.multiply",
                                          "stablehlo.maximum", "stablehlo.minimum"):
        return None
    operand, init = operands
    dims = [int(d) for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"])]
    kept = [d for d in range(operand.ndim) if d not in dims]
    grouped = np.transpose(operand, kept + dims).reshape(
        tuple(operand.shape[d] for d in kept) + (-1,))
    start = exact.fraction(init[()])
    if exact.kind(dtype) in (T.SIGNED, T.UNSIGNED):  # integers: exactly, wrapping
        combine = {"stablehlo.add": sum, "stablehlo.multiply": math.prod, "stablehlo.maximum": max,
                   "stablehlo.minimum": min}[body]
        return lambda i: _Element(exact.wrap(combine([int(init[()])] +
                                                     [int(v) for v in grouped[i]]), dtype))

    def element(i):
        terms = _finite_terms(grouped[i])
        if terms is None or not isinstance(start, Fraction):
            values = [float(v) for v in grouped[i]] + [float(init[()])]
            if body in ("stablehlo.maximum", "stablehlo.minimum") and \
                    not any(math.isnan(v) for v in values):
                return _Element(exact.fraction((max if body.endswith("maximum") else min)(values)))
            return _Element(exact.NAN, nonfinite_ok=True)
        if body == "stablehlo.add":
            total, magnitude = exact.dyadic_sum([float(init[()])] + grouped[i].tolist())
            return _bounded(total, magnitude, len(terms) + 1, dtype)
        if body == "stablehlo.multiply":
            product = math.prod(terms, start=start)
            u = float(ml_dtypes.finfo(dtype).eps) / 2
            n = len(terms)
            found = _Element(product, slack=Fraction(allowed._gamma(n, u)) * abs(product)
                             if n * u < 1 else None)
            found.nonfinite_ok = any(abs(t) > 1 for t in terms) and any(t == 0 for t in terms)
            return found
        return _Element((max if body.endswith("maximum") else min)([start] + terms))
    return element


def _widened(op, alone: Computation, operands: list, dtype, terms: int):
    """A sum the arbiter has no exact loop for (a convolution, a window sum): computed in
    float64 by the interpreter, and again on the operands' magnitudes (sum |t_i|); float64's
    own error, gamma_n 2^-53 sum |t_i| (Higham 3.1), is added to the freedom of the sum
    (negligible beside a ULP of f32 and narrower types)."""
    text = re.sub(r"(?<=[x<])(f16|bf16|f32)(?=>)", "f64", alone.as_text())
    if text == alone.as_text() and dtype != np.float64:
        return None
    wide = loading.load(text)
    floats = [v.astype(np.float64) if exact.kind(v.dtype) == T.FLOAT else v for v in operands]
    with np.errstate(all="ignore"):
        values = np.asarray(runtime.interpret(wide, *floats))
        magnitudes = np.asarray(runtime.interpret(wide, *[np.abs(v) for v in floats]))
    u64 = 2.0 ** -53

    def element(i):
        value, magnitude = float(values[i]), float(magnitudes[i])
        if not (math.isfinite(value) and math.isfinite(magnitude)):
            return _Element(exact.NAN, nonfinite_ok=True)
        uncertainty = Fraction(allowed._gamma(terms, u64) * magnitude)
        return _bounded(Fraction(value), Fraction(magnitude), terms, dtype, uncertainty)
    return element


def _scalar_ops_of(block) -> bool:
    """Whether the region's ops are ones _evaluate knows."""
    known = exact.INTEGER_OPS | {"stablehlo.constant", "stablehlo.compare", "stablehlo.select",
                                 "stablehlo.bitcast_convert", "stablehlo.return"}
    return all(o.operation.name in known for o in block.operations)


def _evaluate(block, arguments: list) -> list:
    """The values a region (a sort's comparator) returns for scalar `arguments`, op by op
    with the exact models (integers, bit casts, comparisons, selections)."""
    values = {}

    def get(v):
        return arguments[ir.BlockArgument(v).arg_number] if isinstance(v.owner, ir.Block) \
            else values[v]
    for o in block.operations:
        o = o.operation
        args = [get(v) for v in o.operands]
        if o.name == "stablehlo.return":
            return args
        out = np.dtype(mlir.shape_of_type(o.results[0].type).element_type.dtype)
        if o.name == "stablehlo.constant":
            value = np.asarray(mlir.constant_of(o.results[0])).reshape(())
        elif o.name == "stablehlo.compare":
            kind = enum_attribute(o, "compare_type") if "compare_type" in o.attributes else None
            value = exact.compare(args[0], args[1], enum_attribute(o, "comparison_direction"),
                                  kind, np.asarray(args[0]).dtype)
        elif o.name == "stablehlo.select":
            value = args[1] if bool(args[0]) else args[2]
        elif o.name == "stablehlo.bitcast_convert":
            value = exact.bitcast(np.asarray(args[0]).reshape(()), out)
        else:
            value = exact.integer(o.name, [int(a) for a in args], out)
        values[o.results[0]] = np.asarray(value, dtype=out).reshape(())
    raise ValueError("a region without a return")


def _sort(op, operands: list, result: int):
    """sort, exactly: each line along `dimension` ordered by its comparator, evaluated op by
    op (_evaluate: a compare, or the integer arithmetic of a total order); where keys are
    equal (neither before the other) but differ in an unstable sort, or NaNs meet a
    partial order (no strict weak order), the spec fixes no order: `sort-order`."""
    block = op.regions[0].blocks[0]
    if not _scalar_ops_of(block):
        return None
    partial = any(o.operation.name == "stablehlo.compare" and
                  exact.kind(mlir.shape_of_type(o.operation.operands[0].type)
                             .element_type.dtype) == T.FLOAT and
                  ("compare_type" not in o.operation.attributes or
                   enum_attribute(o.operation, "compare_type") == "FLOAT")
                  for o in block.operations)
    dimension = op.attributes["dimension"].value
    stable = "is_stable" in op.attributes and ir.BoolAttr(op.attributes["is_stable"]).value
    orders: dict = {}

    def before(a, b) -> bool:
        pairs = [v for operand in operands for v in (operand[a], operand[b])]
        return bool(_evaluate(block, pairs)[0])

    def order_of(i):
        line = i[:dimension] + i[dimension + 1:]
        if line not in orders:
            at = [i[:dimension] + (j,) + i[dimension + 1:]
                  for j in range(operands[0].shape[dimension])]
            nan = partial and any(exact.kind(v.dtype) == T.FLOAT and
                                  np.isnan(v[a].astype(np.float64)) for v in operands for a in at)
            order = None if nan else sorted(at, key=functools.cmp_to_key(
                lambda a, b: -1 if before(a, b) else 1 if before(b, a) else 0))
            orders[line] = order
        return orders[line]

    def element(i):
        order = order_of(i)
        if order is None:
            return _Element(open=Open("sort-order", "NaN keys under a partial order"))
        j = order[i[dimension]]
        if not stable and any(not before(j, other) and not before(other, j) and
                              exact.value_of(operands[result][other]) !=
                              exact.value_of(operands[result][j]) for other in order
                              if other != j):
            return _Element(open=Open("sort-order", "equal keys in an unstable sort"))
        return _picked(operands[result][j])
    return element


def _picked(value) -> _Element:
    """An element whose exact value is a value given (a selection): a zero keeps its sign."""
    found = _Element(exact.value_of(value))
    if exact.kind(np.asarray(value).dtype) == T.FLOAT and found.exact == 0:
        found.zero_sign = math.copysign(1.0, float(value))
    return found


def _fft(op, operand: np.ndarray, dtype):
    """A one-dimensional fft (fft_length of one length n), exactly: the DFT summed with
    mpmath; each side within the bound of XLA's algorithm (allowed.fft_bound's c_xla, times
    the 2-norm of the exact transform of the element's line: Parseval), beyond the final
    rounding."""
    lengths = ints_attribute(op, "fft_length")
    kind = enum_attribute(op, "fft_type")
    if len(lengths) != 1 or lengths[0] < 1:
        return None
    n = lengths[0]
    part = np.real(np.zeros((), dtype)).dtype
    u = float(ml_dtypes.finfo(part).eps) / 2
    c_xla = allowed._pass_xla(n, u)
    x = operand.astype(np.complex128)
    norm = allowed._exact_norm(kind, x, [n])  # per line

    def element(i):
        line = x[i[:-1]]
        if not np.isfinite(line).all():
            return _Element(open=Open("complex-infinity", "an FFT of infinities or NaNs"))
        k = i[-1]
        sign = -1 if kind in ("FFT", "RFFT") else 1
        if kind == "IRFFT":  # the Hermitian mirror of the n // 2 + 1 values given
            line = list(line[:n // 2 + 1]) + [np.conj(line[n - j]) for j in range(n // 2 + 1, n)]
        with mpmath.workprec(exact.PRECISION):
            total = mpmath.fsum(mpmath.mpc(float(v.real), float(v.imag)) *
                                mpmath.expjpi(sign * mpmath.mpf(2 * j * k) / n)
                                for j, v in enumerate(line[:n]))
            if kind in ("IFFT", "IRFFT"):
                total /= n
        slack = Fraction(c_xla * float(norm[i[:-1]]))
        if kind == "IRFFT":
            return _Element(exact.fraction(total.real), slack=slack)
        return _Element((exact.fraction(total.real), exact.fraction(total.imag)), slack=slack)
    return element


def _guarded(model):
    def element(i):
        try:
            return model(i)
        except Open as why:
            return _Element(open=why)
    return element


def _reduce_precision(x, fmt):
    if not isinstance(x, Fraction):
        return x
    rounded = exact.round_to(x, fmt)
    return rounded
