"""XLA's broadcasting rules (spec/broadcasting.md) as pure functions of shapes.

The plan for a binary op says the result dimensions and, for each operand that
must grow, the `broadcast_in_dim` mapping of its dimensions into the result.
XLA's rule, in order:
1. scalars broadcast to anything;
2. operands of different ranks need `broadcast_dimensions`, which maps each
   dimension of the lower-rank operand to a dimension of the higher-rank one
   ("InDim" broadcasting); a matched pair must be equal or one of them 1;
3. then operands of equal rank broadcast degenerate (size-1) dimensions
   against each other.
"""
from __future__ import annotations

import dataclasses

from hlogen.errors import ShapeError

RULE_RANKS = ("operands of different ranks need broadcast_dimensions that map the "
              "lower-rank operand's dimensions to the higher-rank operand's; only "
              "scalars broadcast without them")
RULE_DEGENERATE = "dimensions of equal-rank operands must be equal or one of them 1"
RULE_DIMS_SIZE = "broadcast_dimensions has one entry per dimension of the lower-rank operand"
RULE_DIMS_RANGE = "each broadcast dimension names a dimension of the higher-rank operand"
RULE_DIMS_ORDER = "broadcast_dimensions must be strictly increasing"
RULE_DIMS_MATCH = "matched dimensions must be equal or one of them 1"
RULE_SAME_RANK = ("broadcast_dimensions must be empty or the identity when the operands "
                  "have the same rank")


@dataclasses.dataclass(frozen=True)
class BroadcastPlan:
    """How the two operands of a binary op reach the result dimensions.

    `lhs_map`/`rhs_map` are broadcast_in_dim mappings (operand dimension i goes to
    result dimension map[i]), or None where the operand already has the result
    dimensions.
    """

    dimensions: tuple[int, ...]
    lhs_map: tuple[int, ...] | None
    rhs_map: tuple[int, ...] | None


def binary_broadcast(op: str, lhs, rhs, broadcast_dimensions=()) -> BroadcastPlan:
    """The broadcast plan for `op(lhs, rhs, broadcast_dimensions)`; lhs/rhs are Shapes."""
    bdims = tuple(broadcast_dimensions)

    def fail(rule, detail=""):
        raise ShapeError(
            f"{op}: cannot broadcast {lhs} and {rhs} with broadcast_dimensions={list(bdims)}"
            f"{': ' + detail if detail else ''} (rule: {rule})")

    ld, rd = lhs.dimensions, rhs.dimensions
    if len(ld) == len(rd):
        if bdims and bdims != tuple(range(len(ld))):
            fail(RULE_SAME_RANK)
        return _degenerate(ld, rd, fail)

    lhs_is_larger = len(ld) > len(rd)
    large, small = (ld, rd) if lhs_is_larger else (rd, ld)
    if not small:  # a scalar: broadcast_dimensions, if any, must be empty
        if bdims:
            fail(RULE_DIMS_SIZE, "the lower-rank operand is a scalar")
        return _plan(large, large, (), lhs_is_larger)
    if not bdims:
        fail(RULE_RANKS)
    if len(bdims) != len(small):
        fail(RULE_DIMS_SIZE, f"the lower-rank operand has rank {len(small)}")
    for i, d in enumerate(bdims):
        if not 0 <= d < len(large):
            fail(RULE_DIMS_RANGE, f"{d} is out of range for rank {len(large)}")
        if i and d <= bdims[i - 1]:
            fail(RULE_DIMS_ORDER, f"{d} comes after {bdims[i - 1]}")
    # InDim: the small operand, grown to the large rank with 1s where unmapped.
    grown = [1] * len(large)
    for i, d in enumerate(bdims):
        s, l = small[i], large[d]
        if s != l and s != 1 and l != 1:
            fail(RULE_DIMS_MATCH, f"dimension {i} (size {s}) is mapped to dimension {d} (size {l})")
        grown[d] = s
    result = _degenerate(tuple(grown), large, fail).dimensions
    return _plan(result, large, bdims, lhs_is_larger)


def _plan(result, large, small_map, lhs_is_larger) -> BroadcastPlan:
    # The lower-rank operand always changes rank; the other only if it grows.
    large_map = None if large == result else tuple(range(len(large)))
    return BroadcastPlan(result, large_map, small_map) if lhs_is_larger \
        else BroadcastPlan(result, small_map, large_map)


def _degenerate(ld, rd, fail) -> BroadcastPlan:
    result = []
    for i, (a, b) in enumerate(zip(ld, rd)):
        if a != b and a != 1 and b != 1:
            fail(RULE_DEGENERATE, f"dimension {i} is {a} in one and {b} in the other")
        result.append(b if a == 1 else a)
    result = tuple(result)
    identity = tuple(range(len(result)))
    return BroadcastPlan(result, None if ld == result else identity,
                         None if rd == result else identity)


def broadcast_shapes_exactly(op: str, names_and_shapes, allow_scalar=()) -> tuple[int, ...]:
    """Dimensions shared by operands that must have equal dimensions, except those
    named in `allow_scalar` which may also be scalars (Select's pred, Clamp's
    min/max): the restricted broadcasting those ops allow."""
    full = [(n, s) for n, s in names_and_shapes if not (n in allow_scalar and s.rank == 0)]
    if not full:
        return ()
    dims = full[0][1].dimensions
    for n, s in full[1:]:
        if s.dimensions != dims:
            described = ", ".join(f"{n}={s}" for n, s in names_and_shapes)
            scalars = f" ({' and '.join(allow_scalar)} may also be scalars)" if allow_scalar else ""
            raise ShapeError(f"{op}: operands must have the same dimensions{scalars}; "
                             f"got {described}")
    return dims
