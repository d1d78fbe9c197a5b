"""Ops that read or write at computed positions: DynamicSlice, DynamicUpdateSlice,
Gather, Scatter.

Start indices follow XLA on every backend. The reference interpreter reads
unsigned indices as signed (a u32 2**31 would be a negative start, clamped to 0),
and updates the in-bounds part of a partly out-of-bounds Scatter window, where XLA
skips the whole window. So hlogen converts indices to a signed type wide enough to
hold them exactly, and sends out-of-bounds scatter windows wholly out of bounds
(hlogen.semantics, which gives loaded modules the same).
"""
from __future__ import annotations

import dataclasses
import functools

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir, semantics
from hlogen import types as T
from hlogen.builder import Op, same_builder, trace
from hlogen.errors import ShapeError
from hlogen.mlir import i64_array
from hlogen.ops._common import (INTEGER, array_operand, as_operand_list, check_kind, flag,
                                int_list, sizes)

# -- index conversion (hlogen.semantics, which rewrites loaded modules the same way) ------------

def _as_signed(index: Op, target: T.ElementType) -> Op:
    """`index` converted to the signed `target` with its value kept."""
    if index.dtype is target:  # (the common case, on the hot path of emission)
        return index
    value = semantics.signed_index(index.builder, index.shape, index.value, target)
    return Op(index.builder, value, index.shape.with_element_type(target))


def _scalar_indices(op_name: str, operand: Op, start_indices) -> list[Op]:
    """`start_indices` (integer scalar Ops or Python ints, one per dimension of operand)
    as scalars of one signed type, as StableHLO requires."""
    shape = operand.shape
    if isinstance(start_indices, Op) or not isinstance(start_indices, (list, tuple)):
        raise ShapeError(f"{op_name}: start_indices must be a list of integer scalar Ops (one "
                         f"per dimension of {shape}), got {start_indices!r}")
    if len(start_indices) != shape.rank:
        raise ShapeError(f"{op_name}: start_indices has {len(start_indices)} entries; operand "
                         f"{shape} needs one per dimension ({shape.rank})")
    indices = []
    for i, s in enumerate(start_indices):
        if not isinstance(s, Op):
            try:
                s = operand.builder.constant(s, T.s64)
            except ShapeError:
                raise ShapeError(f"{op_name}: start_indices[{i}] must be an integer scalar Op or "
                                 f"a Python int, got {s!r}") from None
        check_kind(op_name, f"start_indices[{i}]", s, INTEGER)
        if s.shape.rank != 0:
            raise ShapeError(f"{op_name}: start_indices[{i}] must be a scalar, got {s.shape}")
        indices.append(s)
    same_builder(op_name, operand, *indices)
    target = semantics.index_type([s.dtype for s in indices], max(shape.dimensions, default=0))
    return [_as_signed(s, target) for s in indices]


# -- DynamicSlice, DynamicUpdateSlice -------------------------------------------------------------

def dynamic_slice(operand, start_indices, size_indices):
    """DynamicSlice(operand, start_indices, size_indices): the slice of sizes `size_indices`
    starting at runtime indices, each clamped to [0, dimension size - slice size]."""
    shape = array_operand("dynamic_slice", "operand", operand)
    size = sizes("dynamic_slice", "size_indices", size_indices)
    if len(size) != shape.rank:
        raise ShapeError(f"dynamic_slice: size_indices={list(size)} needs one size per dimension "
                         f"of operand {shape}")
    for d, (s, n) in enumerate(zip(size, shape.dimensions)):
        if s > n:
            raise ShapeError(f"dynamic_slice: size_indices={list(size)}: dimension {d} slices "
                             f"{s} elements of operand {shape}, which has {n}")
    indices = _scalar_indices("dynamic_slice", operand, start_indices)
    return operand.builder.add_op("stablehlo.dynamic_slice", T.Shape(shape.element_type, size),
                                  [operand, *indices], {"slice_sizes": i64_array(size)})


def dynamic_update_slice(operand, update, start_indices):
    """DynamicUpdateSlice(operand, update, start_indices): operand with `update` written at
    runtime indices, each clamped to [0, dimension size - update size]."""
    shape = array_operand("dynamic_update_slice", "operand", operand)
    update_shape = array_operand("dynamic_update_slice", "update", update)
    where = f"dynamic_update_slice: operand {shape}, update {update_shape}"
    if update_shape.element_type != shape.element_type:
        raise ShapeError(f"{where}: update must have the operand's element type")
    if update_shape.rank != shape.rank or any(
            u > n for u, n in zip(update_shape.dimensions, shape.dimensions)):
        raise ShapeError(f"{where}: update must have the operand's rank and fit inside it")
    same_builder("dynamic_update_slice", operand, update)
    indices = _scalar_indices("dynamic_update_slice", operand, start_indices)
    return operand.builder.add_op("stablehlo.dynamic_update_slice", shape,
                                  [operand, update, *indices])


# -- Gather and Scatter: the shared index mapping -----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class IndexMapping:
    """What Gather's and Scatter's dimension numbers have in common, under each op's names.

    `window_dims` are the result (gather) or updates (scatter) dimensions that hold the
    window; `collapsed_dims` and `operand_batching_dims` the operand dimensions whose
    window size is 1 and that have no window dimension; `index_map[k]` the operand
    dimension that component k of an index vector starts.
    """

    op_name: str
    names: tuple  # the op's argument names, in the field order below
    window_dims: tuple
    collapsed_dims: tuple
    operand_batching_dims: tuple
    indices_batching_dims: tuple
    index_map: tuple
    index_vector_dim: int

    def name(self, field: str) -> str:
        fields = ("window_dims", "collapsed_dims", "operand_batching_dims",
                  "indices_batching_dims", "index_map", "index_vector_dim")
        return self.names[fields.index(field)]

    def fail(self, rule: str, operand: T.Shape, indices: T.Shape):
        listed = ", ".join(f"{n}={v if isinstance(v, int) else list(v)}" for n, v in zip(
            self.names, (self.window_dims, self.collapsed_dims, self.operand_batching_dims,
                         self.indices_batching_dims, self.index_map, self.index_vector_dim)))
        raise ShapeError(f"{self.op_name}: operand {operand}, indices {indices}, {listed}: {rule}")

    def check(self, operand: T.Shape, indices: T.Shape, window_rank: int):
        """The rules both ops share (StableHLO's gather and scatter constraints)."""
        n = self.name
        ivd = self.index_vector_dim
        if not 0 <= ivd <= indices.rank:
            self.fail(f"{n('index_vector_dim')} must be in [0, {indices.rank}] (the rank of the "
                      f"indices; equal to it means an implicit trailing dimension of size 1)",
                      operand, indices)
        vector_size = indices.dimensions[ivd] if ivd < indices.rank else 1
        if len(self.index_map) != vector_size:
            self.fail(f"{n('index_map')} must have one entry per component of an index vector "
                      f"({vector_size}, the size of dimension {ivd} of the indices)", operand, indices)
        for field, bound in (("window_dims", window_rank), ("collapsed_dims", operand.rank),
                             ("operand_batching_dims", operand.rank), ("index_map", operand.rank),
                             ("indices_batching_dims", indices.rank)):
            values = getattr(self, field)
            if any(not 0 <= d < bound for d in values):
                self.fail(f"every entry of {n(field)} must be in [0, {bound})", operand, indices)
            if len(set(values)) != len(values):
                self.fail(f"{n(field)} must not repeat a dimension", operand, indices)
        for field in ("window_dims", "collapsed_dims", "operand_batching_dims"):
            values = getattr(self, field)
            if list(values) != sorted(values):
                self.fail(f"{n(field)} must be sorted", operand, indices)
        if set(self.collapsed_dims) & set(self.operand_batching_dims):
            self.fail(f"{n('collapsed_dims')} and {n('operand_batching_dims')} must not share a "
                      f"dimension", operand, indices)
        if set(self.index_map) & set(self.operand_batching_dims):
            self.fail(f"{n('index_map')} must not name a dimension of "
                      f"{n('operand_batching_dims')}", operand, indices)
        if ivd in self.indices_batching_dims:
            self.fail(f"{n('index_vector_dim')} must not be one of {n('indices_batching_dims')}",
                      operand, indices)
        if len(self.operand_batching_dims) != len(self.indices_batching_dims):
            self.fail(f"{n('operand_batching_dims')} and {n('indices_batching_dims')} must have "
                      f"the same length", operand, indices)
        for a, b in zip(self.operand_batching_dims, self.indices_batching_dims):
            if operand.dimensions[a] != indices.dimensions[b]:
                self.fail(f"batching dimension {a} of the operand (size {operand.dimensions[a]}) "
                          f"and {b} of the indices (size {indices.dimensions[b]}) must have the "
                          f"same size", operand, indices)
        if operand.rank != len(self.window_dims) + len(self.collapsed_dims) + len(
                self.operand_batching_dims):
            self.fail(f"the operand's rank ({operand.rank}) must equal the number of "
                      f"{n('window_dims')} + {n('collapsed_dims')} + {n('operand_batching_dims')}",
                      operand, indices)

    def batch_sizes(self, indices: T.Shape) -> list[int]:
        """The sizes of the indices' dimensions other than index_vector_dim, in order."""
        return [s for d, s in enumerate(indices.dimensions) if d != self.index_vector_dim]

    def windowed(self, operand: T.Shape) -> list[int]:
        """Operand dimensions that have a window dimension, in order."""
        skipped = set(self.collapsed_dims) | set(self.operand_batching_dims)
        return [d for d in range(operand.rank) if d not in skipped]


def _parse(op_name, names, values) -> tuple:
    """The dimension-number arguments as tuples of ints, and index_vector_dim as an int."""
    ivd = values[-1]
    if isinstance(ivd, bool) or not isinstance(ivd, int):
        raise ShapeError(f"{op_name}: {names[-1]} must be an integer, got {ivd!r}")
    return (*(int_list(op_name, n, v) for n, v in zip(names[:-1], values[:-1])), ivd)


def _indices_operand(op_name: str, arg: str, indices) -> T.Shape:
    check_kind(op_name, arg, indices, INTEGER)
    return indices.shape


# -- Gather ----------------------------------------------------------------------------------------

_GATHER_NAMES = ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                 "start_indices_batching_dims", "start_index_map", "index_vector_dim")


def gather_shape(operand: T.Shape, start_indices: T.Shape, mapping: IndexMapping,
                 sizes_: tuple) -> T.Shape:
    """Gather's result shape, after every rule of the spec is checked."""
    batch = mapping.batch_sizes(start_indices) if 0 <= mapping.index_vector_dim <= \
        start_indices.rank else []
    rank = len(batch) + len(mapping.window_dims)
    mapping.check(operand, start_indices, rank)
    if len(sizes_) != operand.rank:
        mapping.fail(f"slice_sizes={list(sizes_)} needs one entry per operand dimension",
                     operand, start_indices)
    for d, (s, n) in enumerate(zip(sizes_, operand.dimensions)):
        if s > n:
            mapping.fail(f"slice_sizes={list(sizes_)}: dimension {d} slices {s} elements of "
                         f"{n}", operand, start_indices)
    for d in mapping.collapsed_dims + mapping.operand_batching_dims:
        if sizes_[d] > 1:
            mapping.fail(f"slice_sizes={list(sizes_)}: dimension {d} is collapsed or batching, "
                         f"so its slice size must be 0 or 1, not {sizes_[d]}", operand, start_indices)
    offsets = iter(sizes_[d] for d in mapping.windowed(operand))
    batches = iter(batch)
    window = set(mapping.window_dims)
    return T.Shape(operand.element_type,
                   tuple(next(offsets) if d in window else next(batches) for d in range(rank)))


def gather(operand, start_indices, *, offset_dims, collapsed_slice_dims, start_index_map,
           index_vector_dim, slice_sizes, indices_are_sorted=False, operand_batching_dims=(),
           start_indices_batching_dims=()):
    """Gather: one slice of sizes `slice_sizes` of operand per index vector of start_indices
    (the vectors run along index_vector_dim; start_index_map says which operand dimension
    each component starts). Starts are clamped so that the slice fits, as in DynamicSlice.
    The result has the indices' other dimensions as batch dimensions and the slice's
    (less collapsed_slice_dims and operand_batching_dims) at offset_dims."""
    shape = array_operand("gather", "operand", operand)
    indices = _indices_operand("gather", "start_indices", start_indices)
    same_builder("gather", operand, start_indices)
    numbers = _parse("gather", _GATHER_NAMES, (
        offset_dims, collapsed_slice_dims, operand_batching_dims, start_indices_batching_dims,
        start_index_map, index_vector_dim))
    result, index_type, attributes = _gather_plan(
        shape, indices, numbers, sizes("gather", "slice_sizes", slice_sizes),
        flag("gather", "indices_are_sorted", indices_are_sorted))
    return operand.builder.add_op("stablehlo.gather", result,
                                  [operand, _as_signed(start_indices, index_type)], attributes)


@functools.lru_cache(maxsize=1024)
def _gather_plan(shape, indices, numbers, slice_sizes, indices_are_sorted):
    """Result shape, index type and attributes of a gather: programs repeat the same
    gathers, and the rules are the costly part of emitting one."""
    mapping = IndexMapping("gather", _GATHER_NAMES, *numbers)
    result = gather_shape(shape, indices, mapping, slice_sizes)
    ctx = mlir.context()
    return result, semantics.index_type([indices.element_type], max(shape.dimensions, default=0)), {
        "dimension_numbers": stablehlo.GatherDimensionNumbers.get(
            list(mapping.window_dims), list(mapping.collapsed_dims),
            list(mapping.operand_batching_dims), list(mapping.indices_batching_dims),
            list(mapping.index_map), mapping.index_vector_dim, context=ctx),
        "slice_sizes": i64_array(slice_sizes),
        "indices_are_sorted": ir.BoolAttr.get(indices_are_sorted, context=ctx)}


# -- Scatter ----------------------------------------------------------------------------------------

_SCATTER_NAMES = ("update_window_dims", "inserted_window_dims", "input_batching_dims",
                  "scatter_indices_batching_dims", "scatter_dims_to_operand_dims",
                  "index_vector_dim")


def scatter_window(operand: T.Shape, indices: T.Shape, updates: T.Shape,
                   mapping: IndexMapping) -> list[int]:
    """Checks the Scatter rules on shapes; returns the window size of every operand dimension."""
    batch = mapping.batch_sizes(indices)
    if 0 <= mapping.index_vector_dim <= indices.rank and updates.rank != len(batch) + len(mapping.window_dims):
        mapping.fail(f"updates {updates} must have rank {len(batch) + len(mapping.window_dims)}: "
                     f"one dimension per indices dimension other than index_vector_dim "
                     f"({batch}) plus the {len(mapping.window_dims)} update_window_dims",
                     operand, indices)
    mapping.check(operand, indices, updates.rank)
    window = [updates.dimensions[d] for d in mapping.window_dims]
    scatter_sizes = [s for d, s in enumerate(updates.dimensions) if d not in mapping.window_dims]
    if scatter_sizes != batch:
        mapping.fail(f"updates {updates}: its dimensions other than update_window_dims "
                     f"({scatter_sizes}) must be the sizes of the indices' dimensions other "
                     f"than index_vector_dim ({batch})", operand, indices)
    full = [1] * operand.rank
    for d, w in zip(mapping.windowed(operand), window):
        if w > operand.dimensions[d]:
            mapping.fail(f"updates {updates}: the update window has size {w} in operand "
                         f"dimension {d}, which has size {operand.dimensions[d]}", operand, indices)
        full[d] = w
    return full


def scatter(operands, scatter_indices, updates, update_computation, *, update_window_dims,
            inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim,
            indices_are_sorted=False, unique_indices=False, input_batching_dims=(),
            scatter_indices_batching_dims=()):
    """Scatter: the operands with each update window combined into them by
    `update_computation` at the position an index vector of scatter_indices gives.

    operands and updates are N arrays each (a bare Op for N = 1, which returns a bare
    Op); update_computation (a callable or a Computation) takes 2N scalars, the N
    current values then the N updates, and returns N. A window that does not fit
    entirely in the operand is skipped, as XLA defines.
    """
    single = isinstance(operands, Op)
    indices_are_sorted = flag("scatter", "indices_are_sorted", indices_are_sorted)
    unique_indices = flag("scatter", "unique_indices", unique_indices)
    operands = as_operand_list("scatter", "operands", operands)
    updates_list = as_operand_list("scatter", "updates", updates)
    if len(operands) != len(updates_list):
        raise ShapeError(f"scatter: {len(operands)} operands need as many updates, got "
                         f"{len(updates_list)}")
    indices = _indices_operand("scatter", "scatter_indices", scatter_indices)
    builder = same_builder("scatter", *operands, scatter_indices, *updates_list)
    shape = operands[0].shape
    for i, (o, u) in enumerate(zip(operands, updates_list)):
        if o.shape.dimensions != shape.dimensions:
            raise ShapeError(f"scatter: operands must have the same dimensions, got "
                             f"{', '.join(str(x.shape) for x in operands)}")
        if u.shape.dimensions != updates_list[0].shape.dimensions:
            raise ShapeError(f"scatter: updates must have the same dimensions, got "
                             f"{', '.join(str(x.shape) for x in updates_list)}")
        if u.dtype != o.dtype:
            raise ShapeError(f"scatter: updates {i} ({u.shape}) must have the element type of "
                             f"operand {i} ({o.shape})")
    mapping = IndexMapping("scatter", _SCATTER_NAMES, *_parse("scatter", _SCATTER_NAMES, (
        update_window_dims, inserted_window_dims, input_batching_dims,
        scatter_indices_batching_dims, scatter_dims_to_operand_dims, index_vector_dim)))
    scatter_window(shape, indices, updates_list[0].shape, mapping)
    scalars = [T.Shape(o.dtype, ()) for o in operands]
    region = trace(builder, "scatter", "update_computation", update_computation,
                   scalars + scalars, scalars)
    safe_indices, index_map = semantics.scatter_indices(
        builder, shape, updates_list[0].shape, indices, scatter_indices.value, mapping.window_dims,
        mapping.collapsed_dims, mapping.operand_batching_dims, mapping.index_map,
        mapping.index_vector_dim)
    mapping = dataclasses.replace(mapping, index_map=index_map)
    safe_indices = Op(builder, safe_indices, mlir.shape_of_type(safe_indices.type))
    ctx = mlir.context()
    results = builder.add_op_with_regions(
        "stablehlo.scatter", [o.shape for o in operands], [*operands, safe_indices, *updates_list], {
            "scatter_dimension_numbers": stablehlo.ScatterDimensionNumbers.get(
                list(mapping.window_dims), list(mapping.collapsed_dims),
                list(mapping.operand_batching_dims), list(mapping.indices_batching_dims),
                list(mapping.index_map), mapping.index_vector_dim, context=ctx),
            "indices_are_sorted": ir.BoolAttr.get(indices_are_sorted, context=ctx),
            "unique_indices": ir.BoolAttr.get(unique_indices, context=ctx)}, [region])
    return results[0] if single else tuple(results)
