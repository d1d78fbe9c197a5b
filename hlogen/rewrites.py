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
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir, semantics
from hlogen import types as T
from hlogen.builder import InsertingBuilder, Op
from hlogen.ops import computations, elementwise, movement


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


def applicable(module: ir.Module, rules: Sequence[Rewrite]) -> list:
    """The entries of `rules` that `rewrite_module` would apply to `module` (one per op, the
    first whose condition holds), in the order of its walk; `module` is not changed."""
    table = _by_op(rules)
    return [found for op in reversed(mlir.walk(module)) for found in
            [next((r for r in table.get(op.name, ()) if r.when is None or r.when(op)), None)]
            if found is not None]


# -- XLA's semantics, for every backend ------------------------------------------------------

XLA_SEMANTICS: list[Rewrite] = []


def _array_shape(value) -> T.Shape | None:
    try:
        shape = mlir.shape_of_type(value.type)
    except Exception:  # a type hlogen has no shape for: not rewritten
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


for _row in [*elementwise.BINARY_ARITHMETIC.values(), *elementwise.UNARY.values()]:
    if _row.narrow_in_f32 and _row.mlir.startswith("stablehlo."):  # (chlo is legalized)
        @rule(XLA_SEMANTICS, _row.mlir, "XLA computes functions of narrow floats in f32 (the "
              "interpreter's f8 logistic and f8e3m4 rounding differ)", _narrow_float_result)
        def _in_f32(b, op, operands):
            return [semantics.in_f32(b, op.name, operands[0].shape, op.operands)]


def _s4(op) -> bool:
    shape = _array_shape(op.results[0])
    return shape is not None and shape.element_type.name == "s4"


@rule(XLA_SEMANTICS, "stablehlo.popcnt", "XLA CPU sign-extends s4 before counting "
      "(popcnt(-8) = 5): hlogen counts its 4 bits", _s4)
def _popcnt(b, op, operands):
    return [semantics.population_count(b, operands[0].shape, op.operands[0])]


# -- start indices: the interpreter reads unsigned ones as signed ---------------------------

def _index_positions(op) -> list:
    """Where the start indices of a dynamic_slice, dynamic_update_slice or gather are."""
    if op.name == "stablehlo.gather":
        return [1]
    first = 1 if op.name == "stablehlo.dynamic_slice" else 2  # (operand, update, starts...)
    return list(range(first, len(op.operands)))


def _unsigned_indices(op) -> bool:
    shapes = [_array_shape(op.operands[k]) for k in _index_positions(op)]
    return (_array_shape(op.operands[0]) is not None and None not in shapes
            and any(s.element_type.kind == T.UNSIGNED for s in shapes))


def _signed_indices(b, op, operands):
    """The unsigned index operands converted, in place, to a signed type that holds them."""
    positions = _index_positions(op)
    target = semantics.index_type([operands[k].shape.element_type for k in positions],
                                  max(operands[0].shape.dimensions, default=0))
    for k in positions:
        op.operands[k] = semantics.signed_index(b, operands[k].shape, op.operands[k], target)
    return None


for _name in ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice", "stablehlo.gather"):
    rule(XLA_SEMANTICS, _name, "the interpreter reads unsigned start indices as signed (a u32 "
         "2**31 starts at 0 instead of being clamped to the end)", _unsigned_indices)(
        _signed_indices)


def _scatter_parts(op):
    """(operand, indices, updates shapes, the dimension numbers), or None."""
    n = (len(op.operands) - 1) // 2  # operands..., indices, updates...
    shapes = [_array_shape(op.operands[k]) for k in (0, n, n + 1)]
    if None in shapes:
        return None
    return (*shapes, stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"]))


def _scatter_unguarded(op) -> bool:
    parts = _scatter_parts(op)
    if parts is None:
        return False
    operand, indices, updates, numbers = parts
    n = (len(op.operands) - 1) // 2
    index_map = list(numbers.scattered_dims_to_operand_dims)
    if not index_map:  # no window to check: only a type to change, or vectors to give a 0
        free = len(operand.dimensions) > len(list(numbers.input_batching_dims))
        target = semantics.index_type([indices.element_type], max(operand.dimensions, default=0))
        return indices.element_type != target or bool(free and updates.size)
    return not _windows_sent_out(op.operands[n], operand, index_map, numbers.index_vector_dim)


@rule(XLA_SEMANTICS, "stablehlo.scatter", "XLA skips a window that does not fit whole (the "
      "interpreter updates its in-bounds part), reads unsigned indices as unsigned, and "
      "index vectors of no components as 0", _scatter_unguarded)
def _scatter(b, op, operands):
    operand, indices, updates, numbers = _scatter_parts(op)
    n = (len(op.operands) - 1) // 2
    index_map, ivd = list(numbers.scattered_dims_to_operand_dims), numbers.index_vector_dim
    safe, new_map = semantics.scatter_indices(
        b, operand, updates, indices, op.operands[n], list(numbers.update_window_dims),
        list(numbers.inserted_window_dims), list(numbers.input_batching_dims), index_map, ivd)
    op.operands[n] = safe
    if list(new_map) != index_map:
        op.attributes["scatter_dimension_numbers"] = stablehlo.ScatterDimensionNumbers.get(
            list(numbers.update_window_dims), list(numbers.inserted_window_dims),
            list(numbers.input_batching_dims), list(numbers.scatter_indices_batching_dims),
            list(new_map), ivd, context=mlir.context())
    return None


def _no_replica_groups(op) -> bool:
    return ("replica_groups" in op.attributes
            and ir.DenseIntElementsAttr(op.attributes["replica_groups"]).type.shape[0] == 0)


def _every_replica(b, op, operands):
    n = b.num_replicas
    op.attributes["replica_groups"] = ir.DenseIntElementsAttr.get(
        np.arange(n, dtype=np.int64).reshape(1, n), context=mlir.context())
    return None


for _name in ("stablehlo.all_gather", "stablehlo.all_reduce", "stablehlo.all_to_all",
              "stablehlo.collective_broadcast", "stablehlo.reduce_scatter",
              "stablehlo.cross-replica-sum"):  # the ops that have replica_groups
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
    except Exception:  # a type numpy cannot read: not one of ours
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


def _windows_sent_out(indices, operand: T.Shape, index_map, ivd: int) -> bool:
    """True when scatter `indices` are select(fits, x, sizes) as scatter_indices emits:
    signed, the operand's sizes where the window of x does not fit, `fits` read from x."""
    shape = _array_shape(indices)
    select = mlir.defining_op(indices, "stablehlo.select")
    if not index_map or shape is None or shape.element_type.kind != T.SIGNED or select is None:
        return False
    sizes = [operand.dimensions[d] for d in index_map]
    single = _splat(select.operands[2])
    if single is not None and set(sizes) != {single}:
        return False
    if single is None and _broadcast_vector(select.operands[2], ivd) != sizes:
        return False
    return _reads(select.operands[0], select.operands[1], depth=4 + 2 * len(index_map))


def _broadcast_vector(value, ivd: int):
    """The values of a constant vector broadcast along dimension `ivd`, or None."""
    broadcast = mlir.defining_op(value, "stablehlo.broadcast_in_dim")
    const = broadcast and mlir.defining_op(broadcast.operands[0], "stablehlo.constant")
    if not const or mlir.ints_attribute(broadcast, "broadcast_dimensions") != [ivd]:
        return None
    return np.array(ir.DenseElementsAttr(const.attributes["value"])).reshape(-1).tolist()


def _reads(value, source, depth: int) -> bool:
    """True when `value` is computed from `source` through at most `depth` ops (each op
    looked at once)."""
    seen, frontier = set(), [value]
    for _ in range(depth + 1):
        if source in frontier:
            return True
        owners = []
        for v in frontier:
            owner = mlir.defining_op(v)
            if owner is not None and owner not in seen:
                seen.add(owner)
                owners.append(owner)
        frontier = [v for owner in owners for v in owner.operands]
    return False


# -- layouts, for XLA without its HLO passes --------------------------------------------------

# With every HLO pass disabled (`--no-hlo-passes`: an *after_optimizations* dump run as it
# is), XLA assigns no layouts: it lays a transpose out as a bitcast of its operand (and the
# element-wise ops after it alike), a custom call's results as it asks (`result_layouts`),
# and copies nothing into the layout a result, a call or a custom call's operand
# (`operand_layouts`: LAPACK's are column-major) reads, nor an operand that a custom call
# overwrites (`output_operand_aliases`) before its other readers. StableHLO says no
# layouts but a custom call's; these entries make the data where it is read as XLA's
# layout assignment and copy insertion would have left it, with ops XLA lays out
# row-major in a new buffer (`_row_major`).
LAYOUTS: list[Rewrite] = []


def _row_major(x: Op) -> Op:
    """x, in a new buffer laid out row-major: a reduction over a unit dimension of x + -0
    (exactly x), which XLA lays out as it likes and no canonicalization folds away (it
    folds reshapes and copies)."""
    dims, et = x.shape.dimensions, x.shape.element_type
    zero = x.builder.constant(np.array(-0.0 if et.kind in (T.FLOAT, T.COMPLEX) else 0,
                                       et.dtype))
    return computations.reduce(movement.reshape(x, (*dims, 1)), zero, elementwise.add,
                               [len(dims)])


def _permutes(op) -> bool:
    perm = mlir.ints_attribute(op, "permutation")
    return perm != sorted(perm)


@rule(LAYOUTS, "stablehlo.transpose", "with every HLO pass disabled, XLA lays a transpose out "
      "as a bitcast of its operand, and nothing copies it into the row-major layout that a "
      "result, a call or a custom call reads", _permutes)
def _transpose_row_major(b, op, operands):
    return [_row_major(movement.transpose(operands[0], mlir.ints_attribute(op, "permutation")))]


def _layouts(op, name: str) -> list:
    if name not in op.attributes:
        return []
    return [[int(d) for d in ir.DenseIntElementsAttr(a)] for a in ir.ArrayAttr(op.attributes[name])]


def _is_row_major(layout: list) -> bool:
    return layout == sorted(layout, reverse=True)


def _aliased_operands(op) -> set:
    if "output_operand_aliases" not in op.attributes:
        return set()
    return {stablehlo.OutputOperandAlias(a).operand_index
            for a in ir.ArrayAttr(op.attributes["output_operand_aliases"])}


def _laid_out(op) -> bool:
    return bool(_aliased_operands(op)) or not all(
        _is_row_major(layout) for name in ("operand_layouts", "result_layouts")
        for layout in _layouts(op, name))


@rule(LAYOUTS, "stablehlo.custom_call", "with every HLO pass disabled, nothing gives a custom "
      "call its operands in the layouts it asks for, nor copies an operand it overwrites",
      _laid_out)
def _custom_call_layouts(b, op, operands):
    aliased = _aliased_operands(op)
    moved = {}
    for i, x in enumerate(operands):
        layout = (_layouts(op, "operand_layouts") or [None] * len(operands))[i]
        if layout is not None and not _is_row_major(layout):
            order = list(reversed(layout))  # the dimensions, major to minor
            # x's elements in the layout's order, row-major; transposed back as a bitcast
            held = _row_major(movement.transpose(x, order))
            moved[i] = movement.transpose(held, [order.index(d) for d in range(len(order))])
        elif i in aliased:
            moved[i] = _row_major(x)  # a buffer of its own to overwrite
    new = op.clone(ir.InsertionPoint(op))  # after the operands moved, before their readers
    for i, value in moved.items():
        new.operands[i] = value.value
    results = []
    for i, value in enumerate(new.results):
        result = Op(b, value, mlir.shape_of_type(value.type))
        layout = (_layouts(op, "result_layouts") or [None] * len(new.results))[i]
        results.append(_row_major(result) if layout is not None and not _is_row_major(layout)
                       else result)
    return results


__all__ = ["LAYOUTS", "Rewrite", "RewriteBuilder", "XLA_SEMANTICS", "applicable", "rule", "rewrite_module"]
