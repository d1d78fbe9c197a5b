"""Random well-typed StableHLO programs, built with hlogen's own op library, and small
type-preserving mutations of existing modules: the programs a fuzzer runs on two backends.

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

`mutate(computation, seed)` changes one thing in a module while keeping every type: an
element-wise op swapped for another of the same operand kinds, a constant changed, a
comparison direction changed, or an op inserted on a value.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import random
from typing import Callable

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import backends, mlir, ops
from hlogen import types as T
from hlogen.builder import Builder, Op
from hlogen.computation import Computation
from hlogen.differential.reduce import WHOLE, valid
from hlogen.errors import HlogenError, UnsupportedError
from hlogen.loading import load
from hlogen.ops import elementwise
from hlogen.ops._common import ANY, ARITHMETIC, COMPLEX, FLOAT, FLOATING, INTEGER, PRED, UNSIGNED
from hlogen.ops.conversion import bitcast_convert_shape
from hlogen.ops.random import STATE_SIZES

DEFAULT_ELEMENT_TYPES = ("f32", "f16", "bf16", "f64", "s8", "s32", "s64", "u8", "u32", "pred")
_MAX_PARAMETERS = 8      # new values become constants after this many parameters
_REGION_OPS = (1, 4)     # how many ops a region's own program has (bounds)
_MUTATION_TRIES = 16     # changes tried until one verifies


@dataclasses.dataclass(frozen=True)
class Options:
    """The bounds of a generated program (see `generate`)."""

    ops: int = 20
    max_rank: int = 3
    max_dim: int = 8
    element_types: tuple = ()
    depth: int = 2


def generate(seed: int, *, ops: int = 20, max_rank: int = 3, max_dim: int = 8,
             element_types=DEFAULT_ELEMENT_TYPES, depth: int = 2) -> Computation:
    """A random, verifier-clean StableHLO program (a Computation) of `ops` library ops,
    deterministic for `seed`: values of rank <= `max_rank` with dimensions <= `max_dim`,
    of `element_types` (hg types or names; each must run on both the interpreter and
    PJRT), regions (while bodies, branches, mapped and called computations, each with a
    program of its own) nested at most `depth` deep. Its results are the values nothing
    else uses."""
    options = checked_options(ops, max_rank, max_dim, element_types, depth)
    rng = random.Random(_seed(seed))
    builder = Builder(f"fuzz_{seed}")
    program = _Program(rng, options, builder, options.depth, top=True)
    for _ in range(options.ops):
        program.step()
    return builder.build(*program.sinks())


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise HlogenError(f"seed must be an int, got {type(seed).__name__} {seed!r}")
    return seed


def checked_options(ops_, max_rank, max_dim, element_types, depth) -> Options:
    """The bounds of `generate`, checked (hg.HlogenError, UnsupportedError for an element
    type that one of the backends cannot run)."""
    for name, value, low in (("ops", ops_, 1), ("max_rank", max_rank, 0), ("max_dim", max_dim, 1),
                             ("depth", depth, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise HlogenError(f"generate: {name} must be an int >= {low}, got {value!r}")
    types = []
    for t in element_types:
        et = T.element_type(t)
        refused = [f"{b.words}: {b.refuses_types[et.name]}"
                   for b in (backends.CPU, backends.INTERPRET) if et.name in b.refuses_types]
        if refused:
            raise UnsupportedError(f"generate: element type {et.name} cannot run on both "
                                   f"backends ({'; '.join(refused)})")
        if et.bits == 2:
            raise UnsupportedError(f"generate: element type {et.name}: XLA CPU sorts and "
                                   f"concatenates 2-bit integers wrongly (hlogen.preflight "
                                   f"refuses them there)")
        if et not in types:
            types.append(et)
    if not types:
        raise HlogenError("generate: element_types must name at least one element type")
    return Options(ops_, max_rank, max_dim, tuple(types), depth)


class _NoFit(Exception):
    """A generator found no operands or attributes that fit; another one is tried."""


# -- the program under construction ---------------------------------------------------------

class _Program:
    """Values built so far in one block (main, or a region), and how to make more."""

    def __init__(self, rng: random.Random, options: Options, builder, depth: int, top: bool,
                 values=()):
        self.rng, self.options, self.builder = rng, options, builder
        self.depth, self.top = depth, top
        self.pool: list[Op] = list(values)
        self.parameters = 0

    # the table's entries that fit this block, by weight
    def step(self) -> None:
        entries = [g for g in GENERATORS if g.regions <= self.depth
                   and (g.kinds is None or self.types(g.kinds))]
        tries = self.rng.choices(entries, weights=[g.weight for g in entries], k=32)
        for entry in tries + entries:  # then every entry, in the table's order
            try:
                made = entry.make(self)
            except _NoFit:
                continue
            self.pool.extend(m for m in made if isinstance(m.shape, T.Shape))
            return
        raise HlogenError(f"generate: no op of the table fits {self.options}")

    def sinks(self) -> list[Op]:
        """The values nothing uses (the latest value when every one is used)."""
        found = [v for v in self.pool if v.builder is self.builder and not list(v.value.uses)]
        return found or [self.pool[-1]]

    # -- choosing types, shapes and values --------------------------------------------------

    def types(self, kinds) -> list[T.ElementType]:
        return [t for t in self.options.element_types if t.kind in kinds]

    def element_type(self, kinds=ANY) -> T.ElementType:
        found = self.types(kinds)
        if not found:
            raise _NoFit
        return self.rng.choice(found)

    def dims(self, low_rank: int = 0, high_rank: int | None = None) -> tuple:
        high = self.options.max_rank if high_rank is None else min(high_rank, self.options.max_rank)
        if low_rank > high:
            raise _NoFit
        return tuple(self.rng.randint(1, self.options.max_dim)
                     for _ in range(self.rng.randint(low_rank, high)))

    def take(self, fits=lambda s: True, kinds=ANY, make=None) -> Op:
        """A value of the pool whose shape `fits` (recent ones more likely), or, now and
        then or when none fits, a new one of shape `make()` (a new parameter or
        constant); without `make`, _NoFit when none fits."""
        found = [v for v in self.pool if v.shape.element_type.kind in kinds and fits(v.shape)]
        if make is not None and (not found or self.rng.random() < 0.15):
            return self.new(make())
        if not found:
            raise _NoFit
        return self.rng.choices(found, weights=range(1, len(found) + 1))[0]

    def like(self, shape: T.Shape) -> Op:
        """A value of exactly `shape`: from the pool, or new."""
        return self.take(lambda s: s == shape, make=lambda: shape)

    def array(self, kinds=ANY, low_rank: int = 0, high_rank: int | None = None,
              fits=lambda s: True) -> Op:
        """Any value of these kinds and ranks, made when none is there."""
        high = self.options.max_rank if high_rank is None else high_rank

        def make():
            shape = T.Shape(self.element_type(kinds), self.dims(low_rank, high))
            if not fits(shape):
                raise _NoFit
            return shape
        return self.take(lambda s: low_rank <= s.rank <= high and fits(s), kinds, make)

    def new(self, shape: T.Shape) -> Op:
        """A new parameter of main (values the fuzzer chooses) or a constant."""
        if self.top and self.parameters < _MAX_PARAMETERS and self.rng.random() < 0.6:
            self.parameters += 1
            return self.builder.parameter(shape, f"p{self.parameters - 1}")
        return self.constant(shape)

    def constant(self, shape: T.Shape, values=None) -> Op:
        data = _random_values(self.rng, shape) if values is None else \
            np.full(shape.dimensions, values)
        return self.builder.constant(data, shape.element_type)

    def scalar_index(self) -> Op:
        """A start index: a scalar integer value (a parameter where one can be made)."""
        kinds = [t for t in self.options.element_types if t.kind in INTEGER]
        et = T.s32 if T.s32 in kinds or not kinds else self.rng.choice(kinds)
        return self.take(lambda s: s.rank == 0, INTEGER, make=lambda: T.Shape(et, ()))

    def subset(self, items, low: int = 0) -> list:
        items = list(items)
        return sorted(self.rng.sample(items, self.rng.randint(min(low, len(items)), len(items))))

    def region(self, values, *, builder=None, scalars=False) -> "_Program":
        """A program of its own for a region's block (or a called function's body) on its
        parameters `values`, one level deeper; for `scalars` (a map's computation), of
        scalars and without regions (XLA refuses calls and aborts on loops in a map)."""
        options = dataclasses.replace(self.options, max_rank=0) if scalars else self.options
        inner = _Program(self.rng, options, builder if builder is not None else values[0].builder,
                         0 if scalars else self.depth - 1, top=False, values=values)
        for _ in range(self.rng.randint(*_REGION_OPS)):
            inner.step()
        return inner

    def fits(self, shape: T.Shape) -> bool:
        return shape.rank <= self.options.max_rank and all(
            1 <= d <= self.options.max_dim for d in shape.dimensions)


def _random_values(rng: random.Random, shape: T.Shape) -> np.ndarray:
    """Small numbers mostly; now and then a value at the edge of the type (the extremes of
    integers; zeros, 100, infinities, NaN and a subnormal for floats)."""
    gen = np.random.default_rng(rng.getrandbits(64))
    et, dims = shape.element_type, shape.dimensions
    if et.kind == PRED:
        return gen.integers(0, 2, dims).astype(bool)
    if et.kind in INTEGER:
        info = ml_dtypes.iinfo(et.dtype)
        low = 0 if et.kind == UNSIGNED else max(info.min, -8)
        data = gen.integers(low, min(info.max, 8) + 1, dims).astype(et.dtype)
        edges = np.array([info.min, info.max], et.dtype)[gen.integers(0, 2, dims)]
        return np.where(gen.random(dims) < 0.05, edges, data)
    real = np.round(gen.uniform(-4, 4, dims), 2)
    # and a subnormal: half the type's smallest normal (what XLA CPU flushes to zero)
    subnormal = float(ml_dtypes.finfo(np.real(np.zeros((), et.dtype)).dtype).smallest_normal) / 2
    special = gen.choice([0.0, -0.0, 1.0, 100.0, np.inf, -np.inf, np.nan, subnormal], dims)
    real = np.where(gen.random(dims) < 0.1, special, real)
    if et.kind == COMPLEX:
        return (real + 1j * np.round(gen.uniform(-4, 4, dims), 2)).astype(et.dtype)
    return real.astype(et.dtype)


def _as_list(result) -> list[Op]:
    """The values an op returned: one Op, or a tuple of them."""
    return [result] if isinstance(result, Op) else list(result)


def _latest(program: _Program, shape) -> Op:
    """The latest value of `shape` in `program` (a region's result of a required shape)."""
    return next(v for v in reversed(program.pool) if v.shape == shape)


# -- reducers: the computations of reduce, reduce_window, scatter, select_and_scatter --------

def _lowest(et: T.ElementType):
    """The identity of max: the type's lowest value (-inf where it has one)."""
    if et.kind == PRED:
        return False
    if et.kind != FLOAT:
        return ml_dtypes.iinfo(et.dtype).min
    with np.errstate(all="ignore"):
        has_inf = np.isinf(np.array(-np.inf).astype(et.dtype).astype(np.float64))
    return -np.inf if has_inf else ml_dtypes.finfo(et.dtype).min


def _highest(et: T.ElementType):
    """The identity of min."""
    return True if et.kind == PRED else -_lowest(et) if et.kind == FLOAT else \
        ml_dtypes.iinfo(et.dtype).max


# name: (the op, the kinds it folds, its identity): a reduction's result does not depend on
# the order an implementation folds in (up to rounding) and its init value is the identity
REDUCERS = {
    "add": (ops.add, ARITHMETIC, lambda et: 0),
    "mul": (ops.mul, ARITHMETIC, lambda et: 1),
    "max": (ops.max, INTEGER | {FLOAT}, _lowest),
    "min": (ops.min, INTEGER | {FLOAT}, _highest),
    "or": (ops.or_, {PRED}, lambda et: False),
    "and": (ops.and_, {PRED}, lambda et: True),
}


def _reducer(program: _Program, et: T.ElementType):
    """A reducer of `et` values: (the op, its identity as a scalar of `et`)."""
    names = [n for n, (_, kinds, _) in REDUCERS.items() if et.kind in kinds]
    op, _, identity = REDUCERS[program.rng.choice(names)]
    return op, identity(et)


# -- the generators: one per op --------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Generator:
    """How to emit one op: `make(program)` returns the values it made (or raises _NoFit);
    `kinds`: the element kinds it needs among the allowed types (None: any); `regions`:
    the nesting depth it needs for regions with programs of their own."""

    name: str
    make: Callable
    weight: float = 1.0
    kinds: frozenset | None = None
    regions: int = 0


def _unary(name, kinds, p: _Program):
    x = p.array(kinds)
    return [getattr(ops, name)(x)]


def _binary(name, kinds, p: _Program):
    if name == "complex":  # the one binary op whose operands are only f32 or f64
        et = p.rng.choice([t for t in p.types(kinds) if t.name in elementwise._COMPLEX_OF] or [None])
        if et is None:
            raise _NoFit
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


def _compare(name, p: _Program):
    kinds = ANY if name in ("eq", "ne") else ANY - {COMPLEX}
    lhs = p.array(kinds)
    return [getattr(ops, name)(lhs, p.like(lhs.shape))]


def _select(p: _Program):
    on_true = p.array()
    pred = p.like(T.Shape(T.pred, on_true.shape.dimensions if p.rng.random() < 0.7 else ()))
    return [ops.select(pred, on_true, p.like(on_true.shape))]


def _clamp(p: _Program):
    x = p.array(INTEGER | {FLOAT})  # XLA CPU: "Clamp unimplemented for PRED"
    bound = T.Shape(x.dtype, x.shape.dimensions if p.rng.random() < 0.5 else ())
    return [ops.clamp(p.like(bound), x, p.like(bound))]


def _convert(p: _Program):
    x = p.array()
    return [ops.convert_element_type(x, p.element_type())]


def _bitcast(p: _Program):
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
        raise _NoFit
    return [ops.bitcast_convert_type(x, p.rng.choice(targets))]


def _reduce_precision(p: _Program):
    x = p.array({FLOAT})
    return [ops.reduce_precision(x, exponent_bits=p.rng.randint(1, 8),
                                 mantissa_bits=p.rng.randint(0, 10))]


def _iota(p: _Program):
    dims = p.dims(1)
    return [ops.iota(p.builder, T.Shape(p.element_type(INTEGER | {FLOAT}), dims),
                     p.rng.randrange(len(dims)))]


def _broadcast(p: _Program):
    x = p.array(high_rank=p.options.max_rank - 1)
    return [ops.broadcast(x, p.dims(1, p.options.max_rank - x.shape.rank))]


def _broadcast_in_dim(p: _Program):
    x = p.array()
    rank = p.rng.randint(x.shape.rank, p.options.max_rank)
    where = sorted(p.rng.sample(range(rank), x.shape.rank))
    out = list(p.dims(rank, rank))
    for i, d in zip(where, x.shape.dimensions):
        out[i] = d if d != 1 or p.rng.random() < 0.5 else out[i]
    return [ops.broadcast_in_dim(x, out, where)]


def _reshape(p: _Program):
    x = p.array()
    return [ops.reshape(x, _reshaped(p, x))]


def _reshaped(p: _Program, x: Op) -> list:
    """Dimensions of x's element count within the bounds (x's own, shuffled, at worst)."""
    factors = [f for d in x.shape.dimensions for f in _prime_factors(d)]
    p.rng.shuffle(factors)
    dims: list = []
    for f in factors:  # packed into dimensions of at most max_dim
        if dims and dims[-1] * f <= p.options.max_dim and p.rng.random() < 0.7:
            dims[-1] *= f
        else:
            dims.append(f)
    dims += [1] * p.rng.randint(0, 1)
    if len(dims) > p.options.max_rank:
        dims = list(x.shape.dimensions)
    p.rng.shuffle(dims)
    return dims


@functools.lru_cache(maxsize=None)
def _prime_factors(n: int) -> tuple:
    found, f = [], 2
    while f * f <= n:
        while n % f == 0:
            found.append(f)
            n //= f
        f += 1
    return tuple(found + ([n] if n > 1 else []))


def _transpose(p: _Program):
    x = p.array(low_rank=2)
    return [ops.transpose(x, _permutation(p, x.shape.rank))]


def _permutation(p: _Program, rank: int) -> list:
    perm = list(range(rank))
    p.rng.shuffle(perm)
    return perm


def _rev(p: _Program):
    x = p.array(low_rank=1)
    return [ops.rev(x, p.subset(range(x.shape.rank), 1))]


def _slice(p: _Program):
    x = p.array(low_rank=1)
    start = [p.rng.randrange(d) for d in x.shape.dimensions]
    limit = [p.rng.randint(s + 1, d) for s, d in zip(start, x.shape.dimensions)]
    return [ops.slice(x, start, limit, [p.rng.randint(1, 3) for _ in start])]


def _pad(p: _Program):
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


def _concatenate(p: _Program):
    x = p.array(low_rank=1, fits=lambda s: min(s.dimensions) < p.options.max_dim)
    dimension = p.rng.choice([i for i, d in enumerate(x.shape.dimensions) if d < p.options.max_dim])
    dims = list(x.shape.dimensions)
    dims[dimension] = p.rng.randint(1, p.options.max_dim - dims[dimension])
    return [ops.concatenate([x, p.like(T.Shape(x.dtype, tuple(dims)))], dimension)]


def _collapse(p: _Program):
    x = p.array(low_rank=2)
    first = p.rng.randrange(x.shape.rank - 1)
    last = p.rng.randint(first + 1, x.shape.rank - 1)
    if math.prod(x.shape.dimensions[first:last + 1]) > p.options.max_dim:
        raise _NoFit
    return [ops.collapse(x, list(range(first, last + 1)))]


def _dynamic_slice(p: _Program):
    x = p.array(low_rank=1)
    starts = [p.scalar_index() for _ in x.shape.dimensions]
    return [ops.dynamic_slice(x, starts, [p.rng.randint(1, d) for d in x.shape.dimensions])]


def _dynamic_update_slice(p: _Program):
    x = p.array(low_rank=1)
    update = p.like(T.Shape(x.dtype, tuple(p.rng.randint(1, d) for d in x.shape.dimensions)))
    return [ops.dynamic_update_slice(x, update, [p.scalar_index() for _ in x.shape.dimensions])]


def _indices(p: _Program, batch: tuple, components: int, bound: int) -> Op:
    """Start indices: index vectors of `components` along the last dimension, values in
    [-1, bound] (out of bounds now and then: clamped or skipped, as the ops define)."""
    if components > p.options.max_dim:
        raise _NoFit
    shape = T.Shape(T.s32, batch + (components,))
    if p.top and p.rng.random() < 0.5:
        return p.new(shape)
    gen = np.random.default_rng(p.rng.getrandbits(64))
    return p.builder.constant(gen.integers(-1, bound + 1, shape.dimensions).astype(np.int32))


def _gather(p: _Program):
    x = p.array(low_rank=1)
    rank, dims = x.shape.rank, x.shape.dimensions
    start_map = p.rng.sample(range(rank), p.rng.randint(1, rank))
    collapsed = p.subset(start_map)
    sizes = [1 if i in collapsed else p.rng.randint(1, dims[i]) for i in range(rank)]
    batch = p.dims(0, min(1, p.options.max_rank - 1))
    out_rank = len(batch) + rank - len(collapsed)
    if out_rank > p.options.max_rank:
        raise _NoFit
    offset = sorted(p.rng.sample(range(out_rank), rank - len(collapsed)))
    indices = _indices(p, batch, len(start_map), max(dims))
    return [ops.gather(x, indices, offset_dims=offset, collapsed_slice_dims=collapsed,
                       start_index_map=start_map, index_vector_dim=len(batch),
                       slice_sizes=sizes, indices_are_sorted=False)]


def _scatter(p: _Program):
    x = p.array(INTEGER | FLOATING, low_rank=1)
    rank, dims = x.shape.rank, x.shape.dimensions
    to_operand = p.rng.sample(range(rank), p.rng.randint(1, rank))
    inserted = p.subset(to_operand)
    window = [d for i, d in enumerate(dims) if i not in inserted]
    window = [p.rng.randint(1, d) for d in window]
    batch = p.dims(0, min(1, p.options.max_rank - 1))
    updates_rank = len(batch) + len(window)
    if updates_rank > p.options.max_rank:
        raise _NoFit
    window_dims = sorted(p.rng.sample(range(updates_rank), len(window)))
    updates_dims, w, b = [], iter(window), iter(batch)
    for i in range(updates_rank):
        updates_dims.append(next(w) if i in window_dims else next(b))
    combine = _reducer(p, x.dtype)[0]
    updates = p.like(T.Shape(x.dtype, tuple(updates_dims)))
    return [ops.scatter(x, _indices(p, batch, len(to_operand), max(dims)), updates,
                        lambda a, u: combine(a, u), update_window_dims=window_dims,
                        inserted_window_dims=inserted, scatter_dims_to_operand_dims=to_operand,
                        index_vector_dim=len(batch))]


def _dot_general(p: _Program):
    lhs = p.array(ARITHMETIC, low_rank=1)
    rank, dims = lhs.shape.rank, lhs.shape.dimensions
    batch = p.subset(range(rank))
    contracting = p.subset([i for i in range(rank) if i not in batch])
    free = rank - len(batch) - len(contracting)
    rhs_free = list(p.dims(0, p.options.max_rank - len(batch) - free))
    if len(batch) + len(contracting) + len(rhs_free) > p.options.max_rank:
        raise _NoFit
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


def _dot(p: _Program):
    lhs = p.array(ARITHMETIC, low_rank=1, high_rank=2)
    k = lhs.shape.dimensions[-1]
    # vector . vector, matrix . vector, matrix . matrix
    rhs_dims = (k, p.rng.randint(1, p.options.max_dim)) if lhs.shape.rank == 2 and \
        p.rng.random() < 0.5 else (k,)
    return [ops.dot(lhs, p.like(T.Shape(lhs.dtype, rhs_dims)))]


def _convolution(p: _Program):
    if p.options.max_rank < 3:
        raise _NoFit
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
            raise _NoFit
    sizes = {"N": batch, "C": features, "I": features // groups, "O": outputs,
             **dict(zip(letters, size))}
    if max(sizes.values()) > p.options.max_dim:
        raise _NoFit
    et = p.element_type({FLOAT})
    lhs = p.like(T.Shape(et, tuple(sizes[c] for c in lhs_layout)))
    sizes.update(zip(letters, kernel))
    rhs = p.like(T.Shape(et, tuple(sizes[c] for c in rhs_layout)))
    return [ops.conv_general_dilated(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation,
                                     (lhs_layout, rhs_layout, lhs_layout),
                                     feature_group_count=groups)]


def _reduce(p: _Program):
    x = p.array(low_rank=1)
    combine, identity = _reducer(p, x.dtype)
    init = p.constant(T.Shape(x.dtype, ()), identity)
    return [ops.reduce(x, init, lambda a, b: combine(a, b), p.subset(range(x.shape.rank), 1))]


def _window(p: _Program, dims) -> tuple:
    window = [p.rng.randint(1, min(d, 3)) for d in dims]
    strides = [p.rng.randint(1, 2) for _ in dims]
    return window, strides


def _reduce_window(p: _Program):
    x = p.array(low_rank=1)
    combine, identity = _reducer(p, x.dtype)
    window, strides = _window(p, x.shape.dimensions)
    padding = p.rng.choice(["VALID", "SAME", [(p.rng.randint(0, 1), p.rng.randint(0, 1))
                                               for _ in window]])
    if not isinstance(padding, str) and any(
            (d + lo + hi - w) // s + 1 > p.options.max_dim
            for d, (lo, hi), w, s in zip(x.shape.dimensions, padding, window, strides)):
        raise _NoFit
    init = p.constant(T.Shape(x.dtype, ()), identity)
    return [ops.reduce_window(x, init, lambda a, b: combine(a, b), window, strides, padding)]


def _select_and_scatter(p: _Program):
    x = p.array(INTEGER | {FLOAT}, low_rank=1)
    window, strides = _window(p, x.shape.dimensions)
    # VALID padding: with padding, XLA CPU does not keep the first of tied elements
    out = tuple((d - w) // s + 1 for d, w, s in zip(x.shape.dimensions, window, strides))
    select = p.rng.choice([ops.ge, ops.le])
    source = p.like(T.Shape(x.dtype, out))
    zero = p.constant(T.Shape(x.dtype, ()), 0)
    return [ops.select_and_scatter(x, lambda a, b: select(a, b), window, strides, "VALID",
                                   source, zero, lambda a, b: ops.add(a, b))]


def _sort(p: _Program):
    keys = p.array(ANY - {COMPLEX}, low_rank=1)
    operands = [keys]
    if p.rng.random() < 0.4:  # values sorted along with the keys
        operands.append(p.like(T.Shape(p.element_type(), keys.shape.dimensions)))
    order = p.rng.choice(["lt", "gt"])
    compare = getattr(ops, f"{order}_total_order" if keys.dtype.kind == FLOAT else order)
    # stable: with several operands, the order of tied keys decides the other results
    return _as_list(ops.sort(operands, lambda a, b, *_: compare(a, b),
                             p.rng.randrange(keys.shape.rank), is_stable=True))


def _top_k(p: _Program):
    x = p.array(ANY - {COMPLEX}, low_rank=1)
    values, indices = ops.top_k(x, p.rng.randint(1, x.shape.dimensions[-1]),
                                largest=p.rng.random() < 0.5)
    return [values, indices]


def _while(p: _Program):
    """A loop that runs a bounded number of times: a counter next to the loop's values,
    a body with a program of its own."""
    state = [p.array() for _ in range(p.rng.randint(1, 2))]
    trips = p.rng.randint(0, 3)

    def body(i, *values):
        inner = p.region(list(values))
        return (i + 1, *[_latest(inner, v.shape) for v in values])

    counter = p.builder.constant(np.int32(0))
    return _as_list(ops.while_loop(lambda i, *_: ops.lt(i, trips), body, (counter, *state)))[1:]


def _conditional(p: _Program):
    operands = tuple(p.array() for _ in range(p.rng.randint(1, 2)))

    def branch(*values):
        inner = p.region(list(values))
        return tuple(_latest(inner, v.shape) for v in operands)

    if p.rng.random() < 0.5:
        pred = p.take(lambda s: s.rank == 0, {PRED}, make=lambda: T.Shape(T.pred, ()))
        return _as_list(ops.conditional(pred, operands, branch, operands, branch))
    index = p.take(lambda s: s == T.Shape(T.s32, ()), {T.SIGNED}, make=lambda: T.Shape(T.s32, ()))
    count = p.rng.randint(1, 3)
    return _as_list(ops.conditional(index, [branch] * count, [operands] * count))


def _map(p: _Program):
    # one element type: XLA's verifier refuses floats of several precisions in a map
    x = p.array(low_rank=1)
    operands = [x] + ([p.like(x.shape)] if p.rng.random() < 0.5 else [])

    def computation(*scalars):
        return _latest(p.region(list(scalars), scalars=True), scalars[0].shape)

    return [ops.map(operands, computation)]


def _call(p: _Program):
    """A func.call of a function with a program of its own (what the reducer inlines)."""
    args = [p.array() for _ in range(p.rng.randint(1, 2))]
    callee = Builder(f"callee_{p.rng.getrandbits(16)}")
    params = [callee.parameter(a.shape) for a in args]
    inner = p.region(params, builder=callee)
    return _as_list(ops.call(callee.build(*inner.sinks()), *args))


def _rng_bit_generator(p: _Program):
    algorithm = p.rng.choice(["THREE_FRY", "PHILOX"])
    if STATE_SIZES[algorithm][0] > p.options.max_dim or p.options.max_rank < 1:
        raise _NoFit
    state = p.like(T.Shape(T.u64, (STATE_SIZES[algorithm][0],)))
    kinds = INTEGER | {FLOAT}
    new_state, data = ops.rng_bit_generator(algorithm, state,
                                            T.Shape(p.element_type(kinds), p.dims(1)))
    return [new_state, data]


def _optimization_barrier(p: _Program):
    return _as_list(ops.optimization_barrier(tuple(p.array() for _ in range(p.rng.randint(1, 2)))))


def _get_dimension_size(p: _Program):
    x = p.array(low_rank=1)
    return [ops.get_dimension_size(x, p.rng.randrange(x.shape.rank))]


def _cholesky(p: _Program):
    n = p.rng.randint(1, p.options.max_dim)
    batch = p.dims(0, p.options.max_rank - 2)
    et = p.element_type({FLOAT})
    if et.bits < 32:  # XLA CPU factors f32 and f64 matrices
        raise _NoFit
    a = p.like(T.Shape(et, batch + (n, n)))
    return [ops.cholesky(a, lower=p.rng.random() < 0.5)]


def _triangular_solve(p: _Program):
    n = p.rng.randint(1, p.options.max_dim)
    et = p.element_type({FLOAT})
    if et.bits < 32 or p.options.max_rank < 2:
        raise _NoFit
    left = p.rng.random() < 0.5
    m = p.rng.randint(1, p.options.max_dim)
    a = p.like(T.Shape(et, (n, n)))
    b = p.like(T.Shape(et, (n, m) if left else (m, n)))
    # a unit diagonal: a is never singular (where it is, the result is the algorithm's:
    # XLA CPU's and the interpreter's differ, NaN against infinity)
    return [ops.triangular_solve(a, b, left_side=left, lower=p.rng.random() < 0.5,
                                 unit_diagonal=True,
                                 transpose_a=p.rng.choice(["NO_TRANSPOSE", "TRANSPOSE"]))]


# -- idioms: compositions compilers rewrite --------------------------------------------------
# A dictionary of idioms, as fuzzers keep one (AFL's and libFuzzer's dictionaries hold
# tokens; this one compositions): small compositions real programs hold and compilers'
# algebraic simplifiers know, built from the same op library and shape rules on values of
# the program, each a GENERATORS entry of low weight. None names a bug: the spec defines
# each composition's value, and a rewrite keeps it only where the operands are not extreme
# (large, tiny, infinite, between integers), so the inputs must reach there too (the
# fuzzer draws some programs' inputs over the whole exponent range: hlogen.fuzzing).

def _composed(first, then, kinds, p: _Program):
    """then(first(x)): log of exp, exp of log, a negation negated."""
    return [then(first(p.array(kinds)))]


def _square_root_of_square(p: _Program):
    x = p.array({FLOAT})
    return [ops.sqrt(ops.mul(x, x))]


def _squared(p: _Program):
    x = p.array({FLOAT})
    return [ops.pow(x, p.constant(T.Shape(x.dtype, ()), 2))]


def _scaled_back(p: _Program):
    """(x * c) / c."""
    x = p.array(INTEGER | {FLOAT})
    c = p.constant(T.Shape(x.dtype, ()), p.rng.choice([3, 10, 100]))
    return [ops.div(ops.mul(x, c), c)]


def _shifted_back(p: _Program):
    """(x + c) - c, c the constant of code that rounds to an integer so: 1.5 * 2**(the
    type's mantissa bits)."""
    x = p.array({FLOAT})
    c = p.constant(T.Shape(x.dtype, ()), 1.5 * 2.0 ** ml_dtypes.finfo(x.dtype.dtype).nmant)
    return [ops.sub(ops.add(x, c), c)]


def _exponentials_divided(p: _Program):
    """exp(a) / exp(b)."""
    a = p.array({FLOAT})
    return [ops.div(ops.exp(a), ops.exp(p.like(a.shape)))]


def _with_itself(name, kinds, p: _Program):
    """x - x, x / x, max(x, x)."""
    x = p.array(kinds)
    return [getattr(ops, name)(x, x)]


def _selected_either_way(p: _Program):
    x = p.array()
    pred = p.like(T.Shape(T.pred, x.shape.dimensions if p.rng.random() < 0.7 else ()))
    return [ops.select(pred, x, x)]


def _transposed_back(p: _Program):
    x = p.array(low_rank=2)
    perm = _permutation(p, x.shape.rank)
    if perm == sorted(perm):  # (no transpose: the library emits none)
        perm.reverse()
    return [ops.transpose(ops.transpose(x, perm), [perm.index(i) for i in range(len(perm))])]


def _reshaped_back(p: _Program):
    x = p.array(low_rank=1)
    dims = _reshaped(p, x)
    if tuple(dims) == x.shape.dimensions:  # (no reshape: the library emits none)
        raise _NoFit
    return [ops.reshape(ops.reshape(x, dims), list(x.shape.dimensions))]


def _converted_back(p: _Program):
    x = p.array()
    return [ops.convert_element_type(ops.convert_element_type(x, p.element_type()), x.dtype)]


_IDIOM_WEIGHT = 0.15  # each: about one program in ten holds a given idiom (20 ops)
IDIOMS: list[Generator] = [Generator(name, make, _IDIOM_WEIGHT, kinds and frozenset(kinds))
                           for name, make, kinds in [
    ("log(exp(x))", functools.partial(_composed, ops.exp, ops.log, {FLOAT}), {FLOAT}),
    ("exp(log(x))", functools.partial(_composed, ops.log, ops.exp, {FLOAT}), {FLOAT}),
    ("-(-x)", functools.partial(_composed, ops.neg, ops.neg, {FLOAT}), {FLOAT}),
    ("sqrt(x * x)", _square_root_of_square, {FLOAT}),
    ("x ** 2", _squared, {FLOAT}),
    ("(x * c) / c", _scaled_back, INTEGER | {FLOAT}),
    ("(x + c) - c", _shifted_back, {FLOAT}),
    ("exp(a) / exp(b)", _exponentials_divided, {FLOAT}),
    ("x - x", functools.partial(_with_itself, "sub", ARITHMETIC), ARITHMETIC),
    ("x / x", functools.partial(_with_itself, "div", INTEGER | {FLOAT}), INTEGER | {FLOAT}),
    ("max(x, x)", functools.partial(_with_itself, "max", INTEGER | {FLOAT}), INTEGER | {FLOAT}),
    ("select(p, x, x)", _selected_either_way, None),
    ("transpose(transpose(x))", _transposed_back, None),
    ("reshape(reshape(x))", _reshaped_back, None),
    ("convert(convert(x))", _converted_back, None),
]]


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
    Generator("reduce", _reduce),
    Generator("reduce_window", _reduce_window),
    Generator("select_and_scatter", _select_and_scatter, 0.5, INTEGER | {FLOAT}),
    Generator("sort", _sort, kinds=ANY - {COMPLEX}),
    Generator("top_k", _top_k, 0.5, kinds=ANY - {COMPLEX}),
    Generator("while_loop", _while, regions=1),
    Generator("conditional", _conditional, regions=1),
    Generator("map", _map, 0.5, regions=1),
    Generator("call", _call, 0.5, regions=1),
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
    rng = random.Random(_seed(seed))
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
    op.attributes["value"] = mlir.dense_attr(_random_values(rng, shape), shape)


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
