"""The rewrites of each backend: ops it lacks or gets wrong, replaced by ops it runs.

One table, (backend, op name) -> [Rewrite(why, when, expand)], filled by the modules
that define rewrites (`register`, from hlogen.decompositions and hlogen.random_bits).
A rewrite applies only where its backend needs it (`when` of the op, or always), so
the other backend still compiles the op itself and the two stay independent oracles.
`rewrite_module` applies a backend's rewrites to a module in place (hlogen.runtime's
prepare does, for the backend it prepares a module for); what a backend cannot run even
so is hlogen.preflight's UNSUPPORTED table.

`expand(b, op, operands)` emits the replacement with hlogen's own ops through `b`, an
InsertingBuilder before `op`, and returns one Op per result of `op` (the op's attributes
read with hlogen.mlir's `int_attribute`, `ints_attribute`, `enum_attribute`).
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen.builder import InsertingBuilder, Op


@dataclasses.dataclass(frozen=True)
class Rewrite:
    why: str  # what the backend lacks or gets wrong
    when: Callable[[ir.Operation], bool] | None  # None: always
    expand: Callable[[InsertingBuilder, ir.Operation, list[Op]], list[Op]]


TABLE: dict[tuple[str, str], list[Rewrite]] = {}


def register(backend: str, op: str, why: str, when=None):
    """Decorator: `expand` rewrites `op` on `backend` where `when(op)` holds (always if None)."""
    def decorate(expand):
        TABLE.setdefault((backend, op), []).append(Rewrite(why, when, expand))
        return expand
    return decorate


def rewrite_for(backend: str, op: ir.Operation) -> Rewrite | None:
    """The rewrite of `op` on `backend`, or None where the backend runs it as it is."""
    for rewrite in TABLE.get((backend, op.name), ()):
        if rewrite.when is None or rewrite.when(op):
            return rewrite
    return None


def rewrite_module(module: ir.Module, backend: str) -> int:
    """Rewrites every op of `module` that `backend` needs rewritten; returns how many."""
    if not any(key[0] == backend for key in TABLE):
        return 0  # nothing to look for (no walk of the module)
    count = 0
    # innermost and last first: a rewrite may move the regions of the op it replaces
    for op in reversed(mlir.walk(module)):
        rewrite = rewrite_for(backend, op)
        if rewrite is None:
            continue
        b = InsertingBuilder(module, op, f"the rewrite of {op.name} for {backend}")
        operands = [Op(b, v, mlir.shape_of_type(v.type)) for v in op.operands]
        new = rewrite.expand(b, op, operands)
        for old, value in zip(op.results, new):
            old.replace_all_uses_with(value.value)
        op.erase()
        count += 1
    return count


__all__ = ["Rewrite", "TABLE", "register", "rewrite_for", "rewrite_module"]
