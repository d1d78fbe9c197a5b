"""Random well-typed StableHLO programs, built with hlogen's own op library: the programs a fuzzer runs on
two backends (hlogen.fuzz.mutation changes existing modules).

`generate(seed, ...)` builds a program with `hg.Builder` and `hlogen.ops`, so every op
passes the library's shape rules and is emitted the way users' programs are (XLA's
explicit broadcasting, XLA's semantics where StableHLO leaves results open). One table,
`GENERATORS`, holds one entry per op: how to pick operands and attributes that satisfy
that op's rules from the values built so far (or new parameters and constants when none
fits). Sizes are bounded by `max_rank` and `max_dim`, regions (loop bodies, branches,
mapped and called computations) nest at most `depth` deep, and only element types both
backends run are allowed. The same seed gives the same program. The table also holds,
with a low weight each, a dictionary of idioms (`IDIOMS`), as fuzzers keep one: small
compositions real code holds and compilers rewrite (log of exp, sqrt of a square, a
multiply undone by a divide, a large constant added and subtracted, x - x, a transpose
transposed back, a convert converted back, ...), on values of the program.
"""
from __future__ import annotations

import functools
import math
import random

import numpy as np

from hlogen import ops
from hlogen import types as T
from hlogen.builder import Builder, Op
from hlogen.computation import Computation
from hlogen.errors import HlogenError
from hlogen.fuzz.idioms import IDIOMS
from hlogen.fuzz.program import (DEFAULT_ELEMENT_TYPES, Generator, NoFit, Program, as_list,
                                 checked_options, checked_seed, permutation, reducer, reshaped)
from hlogen.fuzz.regions import (call_op, conditional_op, map_op, reduce_op, reduce_window_op,
                                 select_and_scatter_op, sort_op, top_k_op, while_op)
from hlogen.ops import elementwise
from hlogen.ops._common import ANY, ARITHMETIC, COMPLEX, FLOAT, FLOATING, INTEGER
from hlogen.ops.conversion import bitcast_convert_shape
from hlogen.ops.random import STATE_SIZES

# -- the generators: one per op --------------------------------------------------------------

def _unary(name, kinds, p: Program):
    x = p.array(kinds)
    return [getattr(ops, name)(x)]


def _binary(name, kinds, p: Program):
    if name == "complex":  # the one binary op whose operands are only f32 or f64
        et = p.rng.choice([t for t in p.types(kinds) if t.name in elementwise._COMPLEX_OF] or [None])
        if et is None:
            raise NoFit
        lhs = p.take(lambda s: s.element_type is et, make=lambda: T.Shape(et, p.dims()))
    else:
        lhs = p.array(kinds)
    et, dims = lhs.dtype, lhs.shape.dimensions
    mode = p.rng.random()
    if mode < 0.6 or not dims:  # same shape
        rhs, broadcast = p.like(lhs.shape), ()
    elif mode < 0.75:  # a scalar
        rhs, broadcast = p.like(T.Shape(et, ())), ()
    else:  # XLA's explicit broadcasting: rhs dimension i is lhs dimension broadcast[i]
        broadcast = tuple(p.subset(range(len(dims)), 1))
        rhs = p.like(T.Shape(et, tuple(dims[i] for i in broadcast)))
        if p.rng.random() < 0.5:
            lhs, rhs = rhs, lhs
    return [getattr(ops, name)(lhs, rhs, broadcast_dimensions=broadcast)]


def _compare(name, p: Program):
    kinds = ANY if name in ("eq", "ne") else ANY - {COMPLEX}
    lhs = p.array(kinds)
    return [getattr(ops, name)(lhs, p.like(lhs.shape))]


def _select(p: Program):
    on_true = p.array()
    pred = p.like(T.Shape(T.pred, on_true.shape.dimensions if p.rng.random() < 0.7 else ()))
    return [ops.select(pred, on_true, p.like(on_true.shape))]


def _clamp(p: Program):
    x = p.array(INTEGER | {FLOAT})  # XLA CPU: "Clamp unimplemented for PRED"
    bound = T.Shape(x.dtype, x.shape.dimensions if p.rng.random() < 0.5 else ())
    return [ops.clamp(p.like(bound), x, p.like(bound))]


def _convert(p: Program):
    x = p.array()
    return [ops.convert_element_type(x, p.element_type())]


def _bitcast(p: Program):
    x = p.array(INTEGER | {FLOAT})
    targets = []
    for t in p.types(INTEGER | {FLOAT}):
        try:
            shape = bitcast_convert_shape(x.shape, t)
        except HlogenError:
            continue
        if p.fits(shape):
            targets.append(t)
    if not targets:
        raise NoFit
    return [ops.bitcast_convert_type(x, p.rng.choice(targets))]


def _reduce_precision(p: Program):
    x = p.array({FLOAT})
    return [ops.reduce_precision(x, exponent_bits=p.rng.randint(1, 8),
                                 mantissa_bits=p.rng.randint(0, 10))]


def _iota(p: Program):
    dims = p.dims(1)
    return [ops.iota(p.builder, T.Shape(p.element_type(INTEGER | {FLOAT}), dims),
                     p.rng.randrange(len(dims)))]


def _broadcast(p: Program):
    x = p.array(high_rank=p.options.max_rank - 1)
    return [ops.broadcast(x, p.dims(1, p.options.max_rank - x.shape.rank))]


def _broadcast_in_dim(p: Program):
    x = p.array()
    rank = p.rng.randint(x.shape.rank, p.options.max_rank)
    where = sorted(p.rng.sample(range(rank), x.shape.rank))
    out = list(p.dims(rank, rank))
    for i, d in zip(where, x.shape.dimensions):
        out[i] = d if d != 1 or p.rng.random() < 0.5 else out[i]
    return [ops.broadcast_in_dim(x, out, where)]


def _reshape(p: Program):
    x = p.array()
    return [ops.reshape(x, reshaped(p, x))]


def _transpose(p: Program):
    x = p.array(low_rank=2)
    return [ops.transpose(x, permutation(p, x.shape.rank))]


def _rev(p: Program):
    x = p.array(low_rank=1)
    return [ops.rev(x, p.subset(range(x.shape.rank), 1))]


def _slice(p: Program):
    x = p.array(low_rank=1)
    start = [p.rng.randrange(d) for d in x.shape.dimensions]
    limit = [p.rng.randint(s + 1, d) for s, d in zip(start, x.shape.dimensions)]
    return [ops.slice(x, start, limit, [p.rng.randint(1, 3) for _ in start])]


def _pad(p: Program):
    x = p.array(low_rank=1)
    config = []
    for d in x.shape.dimensions:  # (low, high, interior), the result in [1, max_dim]
        interior = p.rng.randint(0, 1)
        size = d + (d - 1) * interior
        if size > p.options.max_dim:
            interior, size = 0, d
        low = p.rng.randint(-((size - 1) // 2), max((p.options.max_dim - size) // 2, 0))
        high = p.rng.randint(-((size + low - 1) // 2), max(p.options.max_dim - size - low, 0))
        config.append((low, high, interior))
    return [ops.pad(x, p.like(T.Shape(x.dtype, ())), config)]


def _concatenate(p: Program):
    x = p.array(low_rank=1, fits=lambda s: min(s.dimensions) < p.options.max_dim)
    dimension = p.rng.choice([i for i, d in enumerate(x.shape.dimensions) if d < p.options.max_dim])
    dims = list(x.shape.dimensions)
    dims[dimension] = p.rng.randint(1, p.options.max_dim - dims[dimension])
    return [ops.concatenate([x, p.like(T.Shape(x.dtype, tuple(dims)))], dimension)]


def _collapse(p: Program):
    x = p.array(low_rank=2)
    first = p.rng.randrange(x.shape.rank - 1)
    last = p.rng.randint(first + 1, x.shape.rank - 1)
    if math.prod(x.shape.dimensions[first:last + 1]) > p.options.max_dim:
        raise NoFit
    return [ops.collapse(x, list(range(first, last + 1)))]


def _dynamic_slice(p: Program):
    x = p.array(low_rank=1)
    starts = [p.scalar_index() for _ in x.shape.dimensions]
    return [ops.dynamic_slice(x, starts, [p.rng.randint(1, d) for d in x.shape.dimensions])]


def _dynamic_update_slice(p: Program):
    x = p.array(low_rank=1)
    update = p.like(T.Shape(x.dtype, tuple(p.rng.randint(1, d) for d in x.shape.dimensions)))
    return [ops.dynamic_update_slice(x, update, [p.scalar_index() for _ in x.shape.dimensions])]


def _indices(p: Program, batch: tuple, components: int, bound: int) -> Op:
    """Start indices: index vectors of `components` along the last dimension, values in
    [-1, bound] (out of bounds now and then: clamped or skipped, as the ops define)."""
    if components > p.options.max_dim:
        raise NoFit
    shape = T.Shape(T.s32, batch + (components,))
    if p.top and p.rng.random() < 0.5:
        return p.new(shape)
    gen = np.random.default_rng(p.rng.getrandbits(64))
    return p.builder.constant(gen.integers(-1, bound + 1, shape.dimensions).astype(np.int32))


def _gather(p: Program):
    x = p.array(low_rank=1)
    rank, dims = x.shape.rank, x.shape.dimensions
    start_map = p.rng.sample(range(rank), p.rng.randint(1, rank))
    collapsed = p.subset(start_map)
    sizes = [1 if i in collapsed else p.rng.randint(1, dims[i]) for i in range(rank)]
    batch = p.dims(0, min(1, p.options.max_rank - 1))
    out_rank = len(batch) + rank - len(collapsed)
    if out_rank > p.options.max_rank:
        raise NoFit
    offset = sorted(p.rng.sample(range(out_rank), rank - len(collapsed)))
    indices = _indices(p, batch, len(start_map), max(dims))
    return [ops.gather(x, indices, offset_dims=offset, collapsed_slice_dims=collapsed,
                       start_index_map=start_map, index_vector_dim=len(batch),
                       slice_sizes=sizes, indices_are_sorted=False)]


def _scatter(p: Program):
    x = p.array(INTEGER | FLOATING, low_rank=1)
    rank, dims = x.shape.rank, x.shape.dimensions
    to_operand = p.rng.sample(range(rank), p.rng.randint(1, rank))
    inserted = p.subset(to_operand)
    window = [d for i, d in enumerate(dims) if i not in inserted]
    window = [p.rng.randint(1, d) for d in window]
    batch = p.dims(0, min(1, p.options.max_rank - 1))
    updates_rank = len(batch) + len(window)
    if updates_rank > p.options.max_rank:
        raise NoFit
    window_dims = sorted(p.rng.sample(range(updates_rank), len(window)))
    updates_dims, w, b = [], iter(window), iter(batch)
    for i in range(updates_rank):
        updates_dims.append(next(w) if i in window_dims else next(b))
    combine = reducer(p, x.dtype)[0]
    updates = p.like(T.Shape(x.dtype, tuple(updates_dims)))
    return [ops.scatter(x, _indices(p, batch, len(to_operand), max(dims)), updates,
                        lambda a, u: combine(a, u), update_window_dims=window_dims,
                        inserted_window_dims=inserted, scatter_dims_to_operand_dims=to_operand,
                        index_vector_dim=len(batch))]


def _dot_general(p: Program):
    lhs = p.array(ARITHMETIC, low_rank=1)
    rank, dims = lhs.shape.rank, lhs.shape.dimensions
    batch = p.subset(range(rank))
    contracting = p.subset([i for i in range(rank) if i not in batch])
    free = rank - len(batch) - len(contracting)
    rhs_free = list(p.dims(0, p.options.max_rank - len(batch) - free))
    if len(batch) + len(contracting) + len(rhs_free) > p.options.max_rank:
        raise NoFit
    # rhs: its batch, contracting and free dimensions in a random order
    roles = [("b", i) for i in batch] + [("c", i) for i in contracting] + [("f", d) for d in rhs_free]
    p.rng.shuffle(roles)
    rhs_dims = tuple(dims[v] if role != "f" else v for role, v in roles)
    position = {(role, v): k for k, (role, v) in enumerate(roles)}
    rhs = p.like(T.Shape(lhs.dtype, rhs_dims))
    return [ops.dot_general(lhs, rhs, {
        "lhs_batch_dimensions": batch, "rhs_batch_dimensions": [position["b", i] for i in batch],
        "lhs_contracting_dimensions": contracting,
        "rhs_contracting_dimensions": [position["c", i] for i in contracting]})]


def _dot(p: Program):
    lhs = p.array(ARITHMETIC, low_rank=1, high_rank=2)
    k = lhs.shape.dimensions[-1]
    # vector . vector, matrix . vector, matrix . matrix
    rhs_dims = (k, p.rng.randint(1, p.options.max_dim)) if lhs.shape.rank == 2 and \
        p.rng.random() < 0.5 else (k,)
    return [ops.dot(lhs, p.like(T.Shape(lhs.dtype, rhs_dims)))]


def _convolution(p: Program):
    if p.options.max_rank < 3:
        raise NoFit
    spatial = p.rng.randint(1, min(2, p.options.max_rank - 2))
    letters = "HW"[:spatial]
    lhs_layout, rhs_layout = p.rng.choice([("N" + letters + "C", letters + "IO"),
                                           ("NC" + letters, "OI" + letters)])
    groups = p.rng.choice([1, 1, 2])
    batch = p.rng.randint(1, 2)
    features = groups * p.rng.randint(1, 2)
    outputs = groups * p.rng.randint(1, 2)
    size = [p.rng.randint(1, p.options.max_dim) for _ in letters]
    kernel = [p.rng.randint(1, s) for s in size]
    strides = [p.rng.randint(1, 2) for _ in letters]
    lhs_dilation = [p.rng.choice([1, 1, 2]) for _ in letters]
    rhs_dilation = [p.rng.choice([1, 1, 2]) for _ in letters]
    padding = [(p.rng.randint(0, 1), p.rng.randint(0, 1)) for _ in letters]
    for s, k, st, ld, rd, (lo, hi) in zip(size, kernel, strides, lhs_dilation, rhs_dilation,
                                          padding):
        out = ((s - 1) * ld + 1 + lo + hi - ((k - 1) * rd + 1)) // st + 1
        if not 1 <= out <= p.options.max_dim:
            raise NoFit
    sizes = {"N": batch, "C": features, "I": features // groups, "O": outputs,
             **dict(zip(letters, size))}
    if max(sizes.values()) > p.options.max_dim:
        raise NoFit
    et = p.element_type({FLOAT})
    lhs = p.like(T.Shape(et, tuple(sizes[c] for c in lhs_layout)))
    sizes.update(zip(letters, kernel))
    rhs = p.like(T.Shape(et, tuple(sizes[c] for c in rhs_layout)))
    return [ops.conv_general_dilated(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation,
                                     (lhs_layout, rhs_layout, lhs_layout),
                                     feature_group_count=groups)]


def _rng_bit_generator(p: Program):
    algorithm = p.rng.choice(["THREE_FRY", "PHILOX"])
    if STATE_SIZES[algorithm][0] > p.options.max_dim or p.options.max_rank < 1:
        raise NoFit
    state = p.like(T.Shape(T.u64, (STATE_SIZES[algorithm][0],)))
    kinds = INTEGER | {FLOAT}
    new_state, data = ops.rng_bit_generator(algorithm, state,
                                            T.Shape(p.element_type(kinds), p.dims(1)))
    return [new_state, data]


def _optimization_barrier(p: Program):
    return as_list(ops.optimization_barrier(tuple(p.array() for _ in range(p.rng.randint(1, 2)))))


def _get_dimension_size(p: Program):
    x = p.array(low_rank=1)
    return [ops.get_dimension_size(x, p.rng.randrange(x.shape.rank))]


def _cholesky(p: Program):
    n = p.rng.randint(1, p.options.max_dim)
    batch = p.dims(0, p.options.max_rank - 2)
    et = p.element_type({FLOAT})
    if et.bits < 32:  # XLA CPU factors f32 and f64 matrices
        raise NoFit
    a = p.like(T.Shape(et, batch + (n, n)))
    return [ops.cholesky(a, lower=p.rng.random() < 0.5)]


def _triangular_solve(p: Program):
    n = p.rng.randint(1, p.options.max_dim)
    et = p.element_type({FLOAT})
    if et.bits < 32 or p.options.max_rank < 2:
        raise NoFit
    left = p.rng.random() < 0.5
    m = p.rng.randint(1, p.options.max_dim)
    a = p.like(T.Shape(et, (n, n)))
    b = p.like(T.Shape(et, (n, m) if left else (m, n)))
    # a unit diagonal: a is never singular (where it is, the result is the algorithm's:
    # XLA CPU's and the interpreter's differ, NaN against infinity)
    return [ops.triangular_solve(a, b, left_side=left, lower=p.rng.random() < 0.5,
                                 unit_diagonal=True,
                                 transpose_a=p.rng.choice(["NO_TRANSPOSE", "TRANSPOSE"]))]


def generate(seed: int, *, ops: int = 20, max_rank: int = 3, max_dim: int = 8,
             element_types=DEFAULT_ELEMENT_TYPES, depth: int = 2) -> Computation:
    """A random, verifier-clean StableHLO program (a Computation) of `ops` library ops,
    deterministic for `seed`: values of rank <= `max_rank` with dimensions <= `max_dim`,
    of `element_types` (hg types or names; each must run on both the interpreter and
    PJRT), regions (while bodies, branches, mapped and called computations, each with a
    program of its own) nested at most `depth` deep. Its results are the values nothing
    else uses."""
    options = checked_options(ops, max_rank, max_dim, element_types, depth)
    rng = random.Random(checked_seed(seed))
    builder = Builder(f"fuzz_{seed}")
    program = Program(rng, options, builder, options.depth, top=True, generators=GENERATORS)
    for _ in range(options.ops):
        program.step()
    return builder.build(*program.sinks())


GENERATORS: list[Generator] = [
    *[Generator(name, functools.partial(_unary, name, kinds), 0.5, frozenset(kinds))
      for name, kinds in ((name, row.kinds) for name, row in elementwise.UNARY.items())],
    *[Generator(name, functools.partial(_binary, name, kinds), 0.6, frozenset(kinds))
      for name, kinds in ((name, row.kinds) for name, row in elementwise.BINARY_ARITHMETIC.items())],
    *[Generator(name, functools.partial(_compare, name), 0.3)
      for base in elementwise.COMPARISONS for name in (base, f"{base}_total_order")],
    Generator("select", _select),
    Generator("clamp", _clamp, kinds=INTEGER | {FLOAT}),
    Generator("convert_element_type", _convert),
    Generator("bitcast_convert_type", _bitcast, 0.5),
    Generator("reduce_precision", _reduce_precision, 0.3, frozenset({FLOAT})),
    Generator("iota", _iota, 0.5, ARITHMETIC),
    Generator("broadcast", _broadcast, 0.5),
    Generator("broadcast_in_dim", _broadcast_in_dim),
    Generator("reshape", _reshape),
    Generator("transpose", _transpose),
    Generator("rev", _rev, 0.5),
    Generator("slice", _slice),
    Generator("pad", _pad),
    Generator("concatenate", _concatenate),
    Generator("collapse", _collapse, 0.3),
    Generator("dynamic_slice", _dynamic_slice),
    Generator("dynamic_update_slice", _dynamic_update_slice),
    Generator("gather", _gather),
    Generator("scatter", _scatter, kinds=ARITHMETIC),
    Generator("dot_general", _dot_general, kinds=ARITHMETIC),
    Generator("dot", _dot, 0.5, kinds=ARITHMETIC),
    Generator("conv_general_dilated", _convolution, kinds=frozenset({FLOAT})),
    Generator("reduce", reduce_op),
    Generator("reduce_window", reduce_window_op),
    Generator("select_and_scatter", select_and_scatter_op, 0.5, INTEGER | {FLOAT}),
    Generator("sort", sort_op, kinds=ANY - {COMPLEX}),
    Generator("top_k", top_k_op, 0.5, kinds=ANY - {COMPLEX}),
    Generator("while_loop", while_op, regions=1),
    Generator("conditional", conditional_op, regions=1),
    Generator("map", map_op, 0.5, regions=1),
    Generator("call", call_op, 0.5, regions=1),
    Generator("rng_bit_generator", _rng_bit_generator, 0.3, INTEGER | {FLOAT}),
    Generator("optimization_barrier", _optimization_barrier, 0.3),
    Generator("get_dimension_size", _get_dimension_size, 0.2),
    Generator("cholesky", _cholesky, 0.2, frozenset({FLOAT})),
    Generator("triangular_solve", _triangular_solve, 0.2, frozenset({FLOAT})),
    *IDIOMS,
]

# The ops of hlogen.ops that GENERATORS leaves out on purpose, and why (tests/test_recipes.py:
# every op is generated or here)
_ONE_REPLICA = "a collective: a fuzzed program runs on one replica, where it has nothing to do"
NOT_GENERATED = {
    "conv": "conv_general_dilated in XLA's fixed layout: generated as conv_general_dilated",
    "conv_with_general_padding": "conv_general_dilated in XLA's fixed layout: generated as "
                                 "conv_general_dilated",
    "slice_in_dim": "a slice along one dimension: generated as slice",
    "cross_replica_sum": _ONE_REPLICA,
    "all_reduce": _ONE_REPLICA, "all_gather": _ONE_REPLICA, "all_to_all": _ONE_REPLICA,
    "reduce_scatter": _ONE_REPLICA, "collective_permute": _ONE_REPLICA,
    "replica_id": _ONE_REPLICA,
    "after_all": "tokens order side effects: no value to compare",
    "create_token": "tokens order side effects: no value to compare",
    "infeed": "a transfer from the host: nothing feeds a fuzzed run",
    "send": "a transfer to another program or the host: no value to compare",
    "recv": "a transfer from another program or the host: nothing sends to a fuzzed run",
    "rng_uniform": "stablehlo.rng's numbers are the backend's own: two backends never agree "
                   "(rng_bit_generator, whose bits the spec defines, is generated)",
    "rng_normal": "stablehlo.rng's numbers are the backend's own: two backends never agree "
                  "(rng_bit_generator, whose bits the spec defines, is generated)",
    "custom_call": "a target of one backend's own: nothing both sides run",
    "composite_call": "backends run its decomposition, a call: generated as call",
    "tuple": "a tuple only holds values: nothing to compare beyond its elements",
    "get_tuple_element": "takes a tuple apart: nothing to compare beyond its elements",
    "set_dimension_size": "dynamic dimensions end XLA CPU's process on some programs "
                          "(tests/test_dynamism_crash.py)",
    "fft": "not yet: a row is welcome once the differences its rounding allows have a bound "
           "(hlogen.differential)",
    "batch_norm_inference": "not yet: XLA expands it into element-wise ops and reductions "
                            "(BatchNormExpander), which are generated",
    "batch_norm_training": "not yet: XLA expands it into element-wise ops and reductions "
                           "(BatchNormExpander), which are generated",
    "batch_norm_grad": "not yet: XLA expands it into element-wise ops and reductions "
                       "(BatchNormExpander), which are generated",
}



