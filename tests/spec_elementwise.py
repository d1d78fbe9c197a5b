"""Which element types each element-wise op takes, and its result type: written from the
specs, not read from hlogen.ops.elementwise (the code under test).

Sources, in order of authority:
- the XLA operation semantics (spec/operation-semantics.zh.md): comparisons give PRED
  arrays ("元素级比较运算"); Complex combines real and imaginary parts; IsFinite returns
  PRED; Real and Imag of a float are the value and 0; Not is logical not; TotalOrder
  comparisons "provide the same function" as the IEEE ones, ordering floats totally;
  Select's pred is PRED, its on_true/on_false any T; Clamp takes three arrays of one T;
- where the spec names no types, XLA's own rules: xla/service/shape_inference.cc
  (InferUnaryOpShape, InferBinaryOpShape, InferClampShape, InferSelectShape) and the
  table of "HLO semantics" in xla/backends/gpu/codegen/triton/support_test.cc
  (DoesOpSupportType: Cbrt, Erf, Floor, Ceil, IsFinite, the roundings: floats;
  Cos ... Tanh, Atan2, Real, Imag, Logistic: floats and complex; Clz, the shifts,
  PopulationCount: integers; Abs, Sign: signed integers, floats, complex; Power,
  Divide, Remainder, Subtract, Negate: every type but PRED; Complex: F32 and F64;
  And, Or, Xor, Not: PRED and integers; everything else: every type);
- the StableHLO specification's operand types (openxla/stablehlo docs/spec.md), which
  agree with the above except where noted.

Element types are classed by their XLA names (pred, sN, uN, f*/bf16, cN), not by
hlogen's ElementType.kind.
"""
from __future__ import annotations

import dataclasses

PRED, SIGNED, UNSIGNED, FLOAT, COMPLEX = "pred", "signed", "unsigned", "float", "complex"
INTEGER = frozenset({SIGNED, UNSIGNED})
EVERY = frozenset({PRED, SIGNED, UNSIGNED, FLOAT, COMPLEX})
NOT_PRED = EVERY - {PRED}
FLOATING = frozenset({FLOAT, COMPLEX})
LOGICAL = INTEGER | {PRED}

# result rules
SAME = "the operand's type"
PRED_RESULT = "pred"
COMPONENT = "the operand's real component type (c64 -> f32, c128 -> f64; a float: itself)"
COMPLEX_OF = "the complex type of the components (f32 -> c64, f64 -> c128)"

_COMPONENT = {"c64": "f32", "c128": "f64"}
_COMPLEX = {"f32": "c64", "f64": "c128"}


def element_class(name: str) -> str:
    """The class of an element type, from its XLA name."""
    if name == "pred":
        return PRED
    if name.startswith(("f", "bf")):
        return FLOAT
    found = {"s": SIGNED, "u": UNSIGNED, "c": COMPLEX}.get(name[0])
    if found is None or not name[1:].isdigit():
        raise KeyError(f"no element class for {name!r}")
    return found


@dataclasses.dataclass(frozen=True)
class Row:
    classes: frozenset       # the classes of element types the op takes
    result: str = SAME
    only: frozenset = None   # where a class is too wide: the type names themselves


BINARY = {
    # XLA: Add, Max, Min, Multiply take every type (PRED: Add is Or, Multiply is And)
    "add": Row(EVERY), "mul": Row(EVERY), "max": Row(EVERY), "min": Row(EVERY),
    # XLA: "Expected element type in shape to be arithmetic type ...; got PRED."
    "sub": Row(NOT_PRED), "div": Row(NOT_PRED), "pow": Row(NOT_PRED), "rem": Row(NOT_PRED),
    "and_": Row(LOGICAL), "or_": Row(LOGICAL), "xor": Row(LOGICAL),
    "shift_left": Row(INTEGER), "shift_right_arithmetic": Row(INTEGER),
    "shift_right_logical": Row(INTEGER),
    "atan2": Row(FLOATING),
    # XLA: Complex of F32 gives C64, of F64 C128; other floats "not implemented"
    "complex": Row(frozenset({FLOAT}), COMPLEX_OF, frozenset({"f32", "f64"})),
}

# the spec: every comparison gives PRED; the TotalOrder variants take what the IEEE ones do
COMPARISONS = {name: Row(EVERY, PRED_RESULT) for base in ("eq", "ne", "ge", "gt", "le", "lt")
               for name in (base, f"{base}_total_order")}

UNARY = {
    "abs": Row(frozenset({SIGNED, FLOAT, COMPLEX}), COMPONENT),
    "sign": Row(frozenset({SIGNED, FLOAT, COMPLEX})),
    "neg": Row(NOT_PRED),
    "not_": Row(LOGICAL),
    "clz": Row(INTEGER), "population_count": Row(INTEGER),
    "is_finite": Row(frozenset({FLOAT}), PRED_RESULT),
    "real": Row(FLOATING, COMPONENT), "imag": Row(FLOATING, COMPONENT),
    **{name: Row(frozenset({FLOAT})) for name in (
        "cbrt", "ceil", "floor", "round", "round_nearest_even", "erf")},
    **{name: Row(FLOATING) for name in (
        "cos", "sin", "tan", "tanh", "exp", "expm1", "log", "log1p", "logistic", "rsqrt",
        "sqrt")},
}

# the spec: Select's pred is PRED (an array of the operands' dimensions or a scalar), its
# on_true and on_false any one type, which the result has; XLA's InferClampShape and
# StableHLO's clamp restrict Clamp's one type to nothing
SELECT_PRED = frozenset({PRED})
SELECT = Row(EVERY)
CLAMP = Row(EVERY)

# Where hlogen departs from the table above on purpose, and why (seen on jaxlib 0.10.2).
HLOGEN_ACCEPTS = {
    # XLA's shape inference and StableHLO refuse unsigned Abs and Sign; XLA's elemental
    # emitter defines them (|x| = x, sgn(x) = min(x, 1)) and hlogen emits that
    ("abs", UNSIGNED): "|x| = x", ("sign", UNSIGNED): "sgn(x) = min(x, 1)",
}
_NOT_ORDERED = ("complex numbers are not ordered: StableHLO orders them lexicographically "
                "but plans to remove that (openxla/stablehlo#560), and the reference "
                "interpreter aborts on it (LLVM ERROR: Unsupported element type)")
HLOGEN_REFUSES = {
    # StableHLO and XLA's HLO semantics take complex Remainder; no backend runs it
    ("rem", COMPLEX): "XLA CPU ends the process compiling it (SIGSEGV); the interpreter "
                      "aborts (rem(complex, complex) is not implemented)",
    **{(name, COMPLEX): _NOT_ORDERED for base in ("ge", "gt", "le", "lt")
       for name in (base, f"{base}_total_order")},
}

TABLES = {**BINARY, **COMPARISONS, **UNARY}


def xla_accepts(op: str, type_name: str) -> bool:
    row = TABLES[op]
    return element_class(type_name) in row.classes and (row.only is None or type_name in row.only)


def accepts(op: str, type_name: str) -> bool:
    """Whether hlogen builds `op` of `type_name` operands: XLA's rule, with its departures."""
    cls = element_class(type_name)
    if (op, cls) in HLOGEN_ACCEPTS:
        return True
    return xla_accepts(op, type_name) and (op, cls) not in HLOGEN_REFUSES


def result_type(op: str, type_name: str) -> str:
    """The result element type of `op` of `type_name` operands (one it accepts)."""
    rule = TABLES[op].result
    if rule == PRED_RESULT:
        return "pred"
    if rule == COMPONENT:
        return _COMPONENT.get(type_name, type_name)
    if rule == COMPLEX_OF:
        return _COMPLEX[type_name]
    return type_name
