"""The one rewrite engine: ops replaced by ops a backend runs as XLA defines them.

A `Rewrite` is an entry: the op it applies to, why, the condition (`when` of the op, or
always) and `expand`, which emits the replacement before the op. Entries come in lists,
each made by the module that defines them with `rule`:
- `XLA_SEMANTICS` (here): XLA's results where StableHLO leaves them to the implementation
  (integer division by zero, TotalOrder comparisons, ReducePrecision of NaN, narrow floats,
  empty replica groups), for every backend: loaded modules get what hlogen's own ops emit
  (hlogen.semantics has the emission, shared with the ops);
- `hlogen.decompositions.RULES` and `hlogen.random_bits.RULES`: the ops the reference
  interpreter lacks or gets wrong, written with ops it has (PJRT compiles them itself, so
  the two stay independent oracles).
A backend's declaration (hlogen.backends) lists the entries it needs; `rewrite_module`
applies them in one walk of the module. An expansion emits with hlogen's own ops or
hlogen.semantics, which already carry XLA's semantics: no entry needs to see another's
output.

`expand(b, op, operands)` emits through `b`, a RewriteBuilder before `op` (at its
location), and returns one value (an Op or an ir.Value) per result of `op`, or None when
it changed `op` in place.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Sequence

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir, semantics
from hlogen import types as T
from hlogen.builder import InsertingBuilder, Op
from hlogen.ops import collectives, elementwise


@dataclasses.dataclass(frozen=True)
class Rewrite:
    op: str    # the op's name, e.g. stablehlo.cholesky
    why: str   # what the backend lacks or gets wrong
    expand: Callable
    when: Callable[[ir.Operation], bool] | None = None  # None: always


def rule(rules: list, op: str, why: str, when=None):
    """Decorator: `expand` rewrites `op` where `when(op)` holds (always if None); the entry
    is appended to `rules`."""
    def decorate(expand):
        rules.append(Rewrite(op, why, expand, when))
        return expand
    return decorate


class RewriteBuilder(InsertingBuilder):
    """Emits before the op being rewritten, at its location; knows the replica count the
    module is prepared for."""

    def __init__(self, module: ir.Module, operation: ir.Operation, num_replicas: int):
        super().__init__(module, operation, f"the rewrite of {operation.name}")
        self.num_replicas = num_replicas


_index: dict = {}  # id of a list of rules -> (the list, {op name: [Rewrite]})


def _by_op(rules: Sequence[Rewrite]) -> dict:
    found = _index.get(id(rules))
    if found is None or found[0] is not rules:
        table: dict = {}
        for r in rules:
            table.setdefault(r.op, []).append(r)
        found = _index[id(rules)] = (rules, table)
    return found[1]


def rewrite_for(rules: Sequence[Rewrite], op: ir.Operation) -> Rewrite | None:
    """The first entry of `rules` that rewrites `op`, or None."""
    for r in _by_op(rules).get(op.name, ()):
        if r.when is None or r.when(op):
            return r
    return None


def rewrite_module(module: ir.Module, rules: Sequence[Rewrite], num_replicas: int = 1) -> int:
    """Applies `rules` (a backend's `rewrites`) to every op of `module`, in place, in one
    walk; returns how many rewrites were made. An entry that changes an op in place lets
    the next entries of the op see it."""
    table = _by_op(rules)
    count = 0
    # innermost and last first: a rewrite may move the regions of the op it replaces
    for op in reversed(mlir.walk(module)):
        for found in table.get(op.name, ()):
            if found.when is not None and not found.when(op):
                continue
            b = RewriteBuilder(module, op, num_replicas)
            operands = [Op(b, v, mlir.shape_of_type(v.type)) for v in op.operands]
            new = found.expand(b, op, operands)
            count += 1
            if new is not None:
                for old, value in zip(op.results, new):
                    old.replace_all_uses_with(value.value if isinstance(value, Op) else value)
                op.erase()
                break
    return count


# -- XLA's semantics, for every backend ------------------------------------------------------

XLA_SEMANTICS: list[Rewrite] = []


def _array_shape(value) -> T.Shape | None:
    try:
        shape = mlir.shape_of_type(value.type)
    except Exception:  # noqa: BLE001 - a type hlogen has no shape for: not rewritten
        return None
    return shape if isinstance(shape, T.Shape) else None


def _integer_division_unguarded(op) -> bool:
    shape = _array_shape(op.results[0])
    return (shape is not None and shape.element_type.is_integer
            and not _divisor_is_safe(shape, *op.operands))


for _name in ("stablehlo.divide", "stablehlo.remainder"):
    @rule(XLA_SEMANTICS, _name, "x/0 = -1, x%0 = x, INT_MIN/-1 = INT_MIN (the interpreter and "
          "XLA's constant folder die with SIGFPE otherwise)", _integer_division_unguarded)
    def _division(b, op, operands):
        return [semantics.integer_division(b, op.name, operands[0].shape, *op.operands)]


def _total_order(op) -> bool:
    shape = _array_shape(op.operands[0])
    return ("compare_type" in op.attributes and shape is not None
            and mlir.enum_attribute(op, "compare_type") == "TOTALORDER"
            and shape.element_type.kind == T.FLOAT)


@rule(XLA_SEMANTICS, "stablehlo.compare", "the interpreter ignores compare_type TOTALORDER",
      _total_order)
def _compare(b, op, operands):
    direction = mlir.enum_attribute(op, "comparison_direction")
    return [semantics.total_order_compare(b, direction, operands[0].shape, *op.operands)]


def _nan_dropped(op) -> bool:
    return (_array_shape(op.results[0]) is not None
            and not mlir.int_attribute(op, "mantissa_bits") and not _nan_is_kept(op))


@rule(XLA_SEMANTICS, "stablehlo.reduce_precision",
      "ReducePrecision keeps NaN (with mantissa_bits=0 the interpreter returns Inf)", _nan_dropped)
def _reduce_precision(b, op, operands):
    return [semantics.reduce_precision(b, operands[0].shape, op.operands[0],
                                       mlir.int_attribute(op, "exponent_bits"), 0)]


def _narrow_float_to_integer(op) -> bool:
    source, result = _array_shape(op.operands[0]), _array_shape(op.results[0])
    return (source is not None and result is not None and source.element_type.is_narrow_float
            and result.element_type.is_integer)


@rule(XLA_SEMANTICS, "stablehlo.convert", "XLA converts narrow floats to integers through f32 "
      "(XLA CPU's own f4 conversion makes 6.0 INT_MAX)", _narrow_float_to_integer)
def _convert(b, op, operands):
    return [semantics.convert(b, _array_shape(op.results[0]), op.operands[0],
                              operands[0].shape.element_type)]


def _narrow_float_result(op) -> bool:
    shape = _array_shape(op.results[0])
    return shape is not None and shape.element_type.is_narrow_float


for _name in [row.mlir for row in elementwise.UNARY.values()
              if row.narrow is elementwise.Narrow.ROUNDED_IN_F32]:
    @rule(XLA_SEMANTICS, _name, "XLA rounds narrow floats in f32 (the interpreter returns NaN "
          "for f8e3m4's)", _narrow_float_result)
    def _rounding(b, op, operands):
        return [semantics.in_f32(b, op.name, operands[0].shape, op.operands)]


def _no_replica_groups(op) -> bool:
    return ("replica_groups" in op.attributes
            and ir.DenseIntElementsAttr(op.attributes["replica_groups"]).type.shape[0] == 0)


def _every_replica(b, op, operands):
    n = b.num_replicas
    op.attributes["replica_groups"] = ir.DenseIntElementsAttr.get(
        np.arange(n, dtype=np.int64).reshape(1, n), context=mlir.context())
    return None


for _name in sorted(collectives.OPS | {"stablehlo.cross-replica-sum"}):
    rule(XLA_SEMANTICS, _name, "empty replica groups mean every replica, one group (XLA CPU "
         "dies with SIGFPE on an AllToAll without groups, the interpreter aborts on any "
         "collective without them)", _no_replica_groups)(_every_replica)


# -- recognizing what hlogen.semantics emitted (so that a second rewrite changes nothing) --

def _splat(value):
    """The value of a splat constant, or None."""
    const = mlir.defining_op(value, "stablehlo.constant")
    if const is None:
        return None
    attr = ir.DenseElementsAttr(const.attributes["value"])
    if not attr.is_splat:
        return None
    try:
        return np.array(attr).reshape(-1)[0].item()
    except Exception:  # noqa: BLE001 - a type numpy cannot read: not one of ours
        return None


def _is_compare(value, direction, lhs, constant):
    op = mlir.defining_op(value, "stablehlo.compare")
    return (op is not None and mlir.enum_attribute(op, "comparison_direction") == direction
            and op.operands[0] == lhs and _splat(op.operands[1]) == constant)


def _divisor_is_safe(shape, lhs, rhs) -> bool:
    """True when `rhs` is select(guard, 1, r) with the guard integer_division emits."""
    select = mlir.defining_op(rhs, "stablehlo.select")
    if select is None or _splat(select.operands[1]) != 1:
        return False
    guard, divisor = select.operands[0], select.operands[2]
    if shape.element_type.kind != T.SIGNED:
        return _is_compare(guard, "EQ", divisor, 0)
    either = mlir.defining_op(guard, "stablehlo.or")
    if either is None or not _is_compare(either.operands[0], "EQ", divisor, 0):
        return False
    both = mlir.defining_op(either.operands[1], "stablehlo.and")
    int_min = int(ml_dtypes.iinfo(shape.dtype).min)
    return (both is not None and _is_compare(both.operands[0], "EQ", lhs, int_min)
            and _is_compare(both.operands[1], "EQ", divisor, -1))


def _nan_is_kept(op) -> bool:
    """True when every use of `op` is select(x != x, x, op) as reduce_precision emits."""
    x = op.operands[0]
    uses = list(op.results[0].uses)
    for use in uses:
        select = use.owner
        if select.name != "stablehlo.select" or use.operand_number != 2 or select.operands[1] != x:
            return False
        test = mlir.defining_op(select.operands[0], "stablehlo.compare")
        if test is None or list(test.operands) != [x, x] or \
                mlir.enum_attribute(test, "comparison_direction") != "NE":
            return False
    return bool(uses)


__all__ = ["Rewrite", "RewriteBuilder", "XLA_SEMANTICS", "rule", "rewrite_for", "rewrite_module"]
