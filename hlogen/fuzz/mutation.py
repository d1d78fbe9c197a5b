"""Small type-preserving mutations of existing modules (`mutate`)."""
from __future__ import annotations

import random

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.differential.edits import WHOLE, valid
from hlogen.errors import HlogenError
from hlogen.fuzz.program import checked_seed, random_values
from hlogen.loading import load
from hlogen.ops import elementwise
from hlogen.ops._common import COMPLEX

_MUTATION_TRIES = 16     # changes tried until one verifies


# -- mutations of existing modules -----------------------------------------------------------

# Element-wise ops that one may stand for another: same operands, same result type.
# MLIR name -> the element kinds it takes; two families, as hlogen.ops' tables say.
_SWAPS = [
    {row.mlir: row.kinds for name, row in elementwise.BINARY_ARITHMETIC.items()
     if name != "complex"},
    {row.mlir: row.kinds for row in elementwise.UNARY.values()
     if row.result is elementwise.Result.SAME and row.mlir.startswith("stablehlo.")},
]
_UNARY_SAME = _SWAPS[1]
_DIRECTIONS = [direction for _, direction in elementwise.COMPARISONS.values()]


def mutate(computation, seed: int) -> Computation:
    """A copy of `computation` (or of what hg.load takes) with one small change that keeps
    every type, chosen by `seed`: an element-wise op swapped for another of its family
    that takes the same element types, a constant given new values, a comparison
    direction changed, or a unary element-wise op inserted on a value; never inside a
    reducer, a comparator or a loop, nor on a loop's operands (a changed value can still
    make a loop run long: run mutated modules with a time limit). The copy verifies
    and passes hlogen.preflight.check_module; hg.HlogenError when the module has nothing
    any mutation applies to."""
    original = computation if isinstance(computation, Computation) else load(computation)
    rng = random.Random(checked_seed(seed))
    where = original.source or original.name
    for _ in range(_MUTATION_TRIES):
        copy = original.clone()
        with mlir.context(), ir.Location.unknown():
            sites = [(kind, op) for op in mlir.walk(copy.module) if _may_change(op)
                     for kind, (applies, _) in MUTATIONS.items() if applies(op)]
            if not sites:
                raise HlogenError(f"mutate: {where} has no op a mutation applies to "
                                  f"({', '.join(MUTATIONS)})")
            kind, op = rng.choice(sites)
            MUTATIONS[kind][1](op, rng)
        # the tables say what XLA's ops take; a StableHLO op may take less (abs of unsigned)
        if valid(copy.module):
            return Computation(copy.module, original.source)
    raise HlogenError(f"mutate: no change of {where} tried verifies ({_MUTATION_TRIES} tries)")


def _may_change(op) -> bool:
    """Not in the regions the reducer leaves whole either (reduce.WHOLE: reducers,
    comparators, loops), nor a loop's operand: a change there can make results the
    implementation's, abort the interpreter (a comparator that is no strict weak order),
    or make a loop run forever (a counter that never reaches its bound)."""
    if mlir.nested_in(op, WHOLE):
        return False
    return not any(use.owner.name == "stablehlo.while" for r in op.results for use in r.uses)


def _element_kind(value) -> str | None:
    try:
        shape = mlir.shape_of_type(value.type)
    except HlogenError:
        return None
    return shape.element_type.kind if isinstance(shape, T.Shape) else None


def _swaps(op) -> list:
    kind = _element_kind(op.results[0]) if len(op.results) == 1 else None
    for family in _SWAPS:
        if op.name in family:
            return [n for n, kinds in family.items() if n != op.name and kind in kinds]
    return []


def _swap(op, rng: random.Random) -> None:
    new = ir.Operation.create(rng.choice(_swaps(op)), results=[op.results[0].type],
                              operands=list(op.operands), loc=op.location, ip=ir.InsertionPoint(op))
    op.results[0].replace_all_uses_with(new.results[0])
    op.erase()


def _is_constant(op) -> bool:
    return op.name == "stablehlo.constant" and _element_kind(op.results[0]) is not None


def _new_values(op, rng: random.Random) -> None:
    # new values, not changed ones: reading a complex constant from Python ends the process
    shape = mlir.shape_of_type(op.results[0].type)
    op.attributes["value"] = mlir.dense_attr(random_values(rng, shape), shape)


def _is_comparison(op) -> bool:
    return op.name == "stablehlo.compare"


def _redirect(op, rng: random.Random) -> None:
    kind = _element_kind(op.operands[0])
    old = mlir.enum_attribute(op, "comparison_direction")
    choices = [d for d in (("EQ", "NE") if kind == COMPLEX else _DIRECTIONS) if d != old]
    op.attributes["comparison_direction"] = stablehlo.ComparisonDirectionAttr.get(
        rng.choice(choices))


def _insertable(op) -> bool:
    return op.name not in ("func.func", "func.return", "stablehlo.return") and any(
        _inserts(r) for r in op.results)


def _inserts(value) -> list:
    kind = _element_kind(value)
    return [n for n, kinds in _UNARY_SAME.items() if kind in kinds]


def _insert(op, rng: random.Random) -> None:
    """A unary element-wise op on one of `op`'s results, which its users then read."""
    value = rng.choice([r for r in op.results if _inserts(r)])
    new = ir.Operation.create(rng.choice(_inserts(value)), results=[value.type], operands=[value],
                              loc=op.location, ip=ir.InsertionPoint(op))
    new.move_after(op)
    value.replace_all_uses_except(new.results[0], new)


# kind: (whether it applies to an op, the change)
MUTATIONS = {
    "swap": (lambda op: bool(_swaps(op)), _swap),
    "constant": (_is_constant, _new_values),
    "direction": (_is_comparison, _redirect),
    "insert": (_insertable, _insert),
}
