"""The generators of ops with regions: reductions (with a reducer of the type's identity),
sort and top_k, loops, branches, mapped and called computations."""
from __future__ import annotations


import numpy as np

from hlogen import ops
from hlogen import types as T
from hlogen.builder import Builder
from hlogen.fuzz.program import NoFit, Program, as_list, latest, reducer
from hlogen.ops._common import ANY, COMPLEX, FLOAT, INTEGER, PRED

def reduce_op(p: Program):
    x = p.array(low_rank=1)
    combine, identity = reducer(p, x.dtype)
    init = p.constant(T.Shape(x.dtype, ()), identity)
    return [ops.reduce(x, init, lambda a, b: combine(a, b), p.subset(range(x.shape.rank), 1))]


def _window(p: Program, dims) -> tuple:
    window = [p.rng.randint(1, min(d, 3)) for d in dims]
    strides = [p.rng.randint(1, 2) for _ in dims]
    return window, strides


def reduce_window_op(p: Program):
    x = p.array(low_rank=1)
    combine, identity = reducer(p, x.dtype)
    window, strides = _window(p, x.shape.dimensions)
    padding = p.rng.choice(["VALID", "SAME", [(p.rng.randint(0, 1), p.rng.randint(0, 1))
                                               for _ in window]])
    if not isinstance(padding, str) and any(
            (d + lo + hi - w) // s + 1 > p.options.max_dim
            for d, (lo, hi), w, s in zip(x.shape.dimensions, padding, window, strides)):
        raise NoFit
    init = p.constant(T.Shape(x.dtype, ()), identity)
    return [ops.reduce_window(x, init, lambda a, b: combine(a, b), window, strides, padding)]


def select_and_scatter_op(p: Program):
    x = p.array(INTEGER | {FLOAT}, low_rank=1)
    window, strides = _window(p, x.shape.dimensions)
    # VALID padding: with padding, XLA CPU does not keep the first of tied elements
    out = tuple((d - w) // s + 1 for d, w, s in zip(x.shape.dimensions, window, strides))
    select = p.rng.choice([ops.ge, ops.le])
    source = p.like(T.Shape(x.dtype, out))
    zero = p.constant(T.Shape(x.dtype, ()), 0)
    return [ops.select_and_scatter(x, lambda a, b: select(a, b), window, strides, "VALID",
                                   source, zero, lambda a, b: ops.add(a, b))]


def sort_op(p: Program):
    keys = p.array(ANY - {COMPLEX}, low_rank=1)
    operands = [keys]
    if p.rng.random() < 0.4:  # values sorted along with the keys
        operands.append(p.like(T.Shape(p.element_type(), keys.shape.dimensions)))
    order = p.rng.choice(["lt", "gt"])
    compare = getattr(ops, f"{order}_total_order" if keys.dtype.kind == FLOAT else order)
    # stable: with several operands, the order of tied keys decides the other results
    return as_list(ops.sort(operands, lambda a, b, *_: compare(a, b),
                             p.rng.randrange(keys.shape.rank), is_stable=True))


def top_k_op(p: Program):
    x = p.array(ANY - {COMPLEX}, low_rank=1)
    values, indices = ops.top_k(x, p.rng.randint(1, x.shape.dimensions[-1]),
                                largest=p.rng.random() < 0.5)
    return [values, indices]


def while_op(p: Program):
    """A loop that runs a bounded number of times: a counter next to the loop's values,
    a body with a program of its own."""
    state = [p.array() for _ in range(p.rng.randint(1, 2))]
    trips = p.rng.randint(0, 3)

    def body(i, *values):
        inner = p.region(list(values))
        return (i + 1, *[latest(inner, v.shape) for v in values])

    counter = p.builder.constant(np.int32(0))
    return as_list(ops.while_loop(lambda i, *_: ops.lt(i, trips), body, (counter, *state)))[1:]


def conditional_op(p: Program):
    operands = tuple(p.array() for _ in range(p.rng.randint(1, 2)))

    def branch(*values):
        inner = p.region(list(values))
        return tuple(latest(inner, v.shape) for v in operands)

    if p.rng.random() < 0.5:
        pred = p.take(lambda s: s.rank == 0, {PRED}, make=lambda: T.Shape(T.pred, ()))
        return as_list(ops.conditional(pred, operands, branch, operands, branch))
    index = p.take(lambda s: s == T.Shape(T.s32, ()), {T.SIGNED}, make=lambda: T.Shape(T.s32, ()))
    count = p.rng.randint(1, 3)
    return as_list(ops.conditional(index, [branch] * count, [operands] * count))


def map_op(p: Program):
    # one element type: XLA's verifier refuses floats of several precisions in a map
    x = p.array(low_rank=1)
    operands = [x] + ([p.like(x.shape)] if p.rng.random() < 0.5 else [])

    def computation(*scalars):
        return latest(p.region(list(scalars), scalars=True), scalars[0].shape)

    return [ops.map(operands, computation)]


def call_op(p: Program):
    """A func.call of a function with a program of its own (what the reducer inlines)."""
    args = [p.array() for _ in range(p.rng.randint(1, 2))]
    callee = Builder(f"callee_{p.rng.getrandbits(16)}")
    params = [callee.parameter(a.shape) for a in args]
    inner = p.region(params, builder=callee)
    return as_list(ops.call(callee.build(*inner.sinks()), *args))


