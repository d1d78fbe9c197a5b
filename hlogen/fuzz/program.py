"""A random program under construction: its bounds (Options), the values built so far
in a block and how to make more (Program), and the table entry of one op's generator."""
from __future__ import annotations

import dataclasses
import functools
import random
from typing import Callable

import ml_dtypes
import numpy as np

from hlogen import backends, ops
from hlogen import types as T
from hlogen.builder import Op
from hlogen.errors import HlogenError, UnsupportedError
from hlogen.ops._common import ANY, ARITHMETIC, COMPLEX, FLOAT, INTEGER, PRED, UNSIGNED

DEFAULT_ELEMENT_TYPES = ("f32", "f16", "bf16", "f64", "s8", "s32", "s64", "u8", "u32", "pred")
_MAX_PARAMETERS = 8      # new values become constants after this many parameters
_REGION_OPS = (1, 4)     # how many ops a region's own program has (bounds)


@dataclasses.dataclass(frozen=True)
class Options:
    """The bounds of a generated program (see `generate`)."""

    ops: int = 20
    max_rank: int = 3
    max_dim: int = 8
    element_types: tuple = ()
    depth: int = 2


def checked_seed(seed) -> int:
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


class NoFit(Exception):
    """A generator found no operands or attributes that fit; another one is tried."""


# -- the program under construction ---------------------------------------------------------

class Program:
    """Values built so far in one block (main, or a region), and how to make more."""

    def __init__(self, rng: random.Random, options: Options, builder, depth: int, top: bool,
                 values=(), generators=()):
        self.rng, self.options, self.builder = rng, options, builder
        self.generators = generators  # the table (hlogen.fuzz.generate.GENERATORS)
        self.depth, self.top = depth, top
        self.pool: list[Op] = list(values)
        self.parameters = 0

    # the table's entries that fit this block, by weight
    def step(self) -> None:
        entries = [g for g in self.generators if g.regions <= self.depth
                   and (g.kinds is None or self.types(g.kinds))]
        tries = self.rng.choices(entries, weights=[g.weight for g in entries], k=32)
        for entry in tries + entries:  # then every entry, in the table's order
            try:
                made = entry.make(self)
            except NoFit:
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
            raise NoFit
        return self.rng.choice(found)

    def dims(self, low_rank: int = 0, high_rank: int | None = None) -> tuple:
        high = self.options.max_rank if high_rank is None else min(high_rank, self.options.max_rank)
        if low_rank > high:
            raise NoFit
        return tuple(self.rng.randint(1, self.options.max_dim)
                     for _ in range(self.rng.randint(low_rank, high)))

    def take(self, fits=lambda s: True, kinds=ANY, make=None) -> Op:
        """A value of the pool whose shape `fits` (recent ones more likely), or, now and
        then or when none fits, a new one of shape `make()` (a new parameter or
        constant); without `make`, NoFit when none fits."""
        found = [v for v in self.pool if v.shape.element_type.kind in kinds and fits(v.shape)]
        if make is not None and (not found or self.rng.random() < 0.15):
            return self.new(make())
        if not found:
            raise NoFit
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
                raise NoFit
            return shape
        return self.take(lambda s: low_rank <= s.rank <= high and fits(s), kinds, make)

    def new(self, shape: T.Shape) -> Op:
        """A new parameter of main (values the fuzzer chooses) or a constant."""
        if self.top and self.parameters < _MAX_PARAMETERS and self.rng.random() < 0.6:
            self.parameters += 1
            return self.builder.parameter(shape, f"p{self.parameters - 1}")
        return self.constant(shape)

    def constant(self, shape: T.Shape, values=None) -> Op:
        data = random_values(self.rng, shape) if values is None else \
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

    def region(self, values, *, builder=None, scalars=False) -> "Program":
        """A program of its own for a region's block (or a called function's body) on its
        parameters `values`, one level deeper; for `scalars` (a map's computation), of
        scalars and without regions (XLA refuses calls and aborts on loops in a map)."""
        options = dataclasses.replace(self.options, max_rank=0) if scalars else self.options
        inner = Program(self.rng, options, builder if builder is not None else values[0].builder,
                         0 if scalars else self.depth - 1, top=False, values=values,
                         generators=self.generators)
        for _ in range(self.rng.randint(*_REGION_OPS)):
            inner.step()
        return inner

    def fits(self, shape: T.Shape) -> bool:
        return shape.rank <= self.options.max_rank and all(
            1 <= d <= self.options.max_dim for d in shape.dimensions)


def random_values(rng: random.Random, shape: T.Shape) -> np.ndarray:
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


def as_list(result) -> list[Op]:
    """The values an op returned: one Op, or a tuple of them."""
    return [result] if isinstance(result, Op) else list(result)


def latest(program: Program, shape) -> Op:
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


def reducer(program: Program, et: T.ElementType):
    """A reducer of `et` values: (the op, its identity as a scalar of `et`)."""
    names = [n for n, (_, kinds, _) in REDUCERS.items() if et.kind in kinds]
    op, _, identity = REDUCERS[program.rng.choice(names)]
    return op, identity(et)


@dataclasses.dataclass(frozen=True)
class Generator:
    """How to emit one op: `make(program)` returns the values it made (or raises NoFit);
    `kinds`: the element kinds it needs among the allowed types (None: any); `regions`:
    the nesting depth it needs for regions with programs of their own."""

    name: str
    make: Callable
    weight: float = 1.0
    kinds: frozenset | None = None
    regions: int = 0


def reshaped(p: Program, x: Op) -> list:
    """Dimensions of x's element count within the bounds (x's own, shuffled, at worst)."""
    factors = [f for d in x.shape.dimensions for f in prime_factors(d)]
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
def prime_factors(n: int) -> tuple:
    found, f = [], 2
    while f * f <= n:
        while n % f == 0:
            found.append(f)
            n //= f
        f += 1
    return tuple(found + ([n] if n > 1 else []))


def permutation(p: Program, rank: int) -> list:
    perm = list(range(rank))
    p.rng.shuffle(perm)
    return perm
