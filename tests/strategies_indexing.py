"""Hypothesis strategies for random, valid cases of XLA's indexing / data-movement ops.

Every strategy returns a dict of plain Python / numpy values named after the op's arguments.
For gather, scatter and sort the keys are the keyword arguments of the functions in
tests/spec_reference.py (scatter's update_computation excepted: the test picks it):

    ref.gather(**case)      ref.scatter(update_computation=fn, **case)      ref.sort(**case)

The others name the array "operand" (the reference's first, positional parameter is `x`):

    ref.pad(c["operand"], c["padding_value"], c["padding_config"])
    ref.slice(c["operand"], c["start_indices"], c["limit_indices"], c["strides"])
    ref.dynamic_slice(c["operand"], c["start_indices"], c["size_indices"])
    ref.dynamic_update_slice(c["operand"], c["update"], c["start_indices"])

The cases satisfy every constraint of the StableHLO spec for the op (gather C1-C23,
scatter C1-C25, pad C1-C4, slice C1-C5, dynamic_slice / dynamic_update_slice, sort C1-C5),
and stay small (operand rank <= 4, dims <= 5, <= 200 operand elements, results of a few
hundred elements at most).

Index values are drawn both in and out of bounds: negative ones for signed index types,
huge ones for unsigned types (e.g. 2**31 or 2**63 + 1, which a wrong implementation would
read as negative), and the type's extremes.
"""
from __future__ import annotations

import math

import hypothesis.strategies as st
import ml_dtypes
import numpy as np

from tests.spec_reference import _kind  # one reading of dtype kinds

# Element types of data operands, and of index operands.
DATA_DTYPES = (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
               np.uint64, np.float16, np.float32, np.float64, ml_dtypes.bfloat16, np.complex64,
               np.complex128)
INDEX_DTYPES = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32, np.uint64)

_SPECIAL_FLOATS = (float("nan"), -float("nan"), float("inf"), -float("inf"), 0.0, -0.0)


# -- building blocks ----------------------------------------------------------------------

def _scalar_elements(dtype, specials: bool, pool: bool):
    """A strategy of Python values representable in `dtype` (floats may be NaN of either sign,
    infinities, signed zeros when `specials`; drawn from a few values only when `pool`, to
    make duplicates common)."""
    kind = _kind(dtype)
    if kind == "b":
        return st.booleans()
    if kind in "iu":
        info = ml_dtypes.iinfo(dtype)
        if pool:
            return st.sampled_from(sorted({0, 1, 3, int(info.max), int(info.min), int(info.min) + 1}))
        return st.one_of(st.integers(max(int(info.min), -100), min(int(info.max), 100)),
                         st.sampled_from([int(info.min), int(info.max)]),
                         st.integers(int(info.min), int(info.max)))
    if kind == "c":
        # No NaN and no -0 in complex data: complex comparisons are FLOAT comparisons (StableHLO
        # `compare` C3), where the total order and IEEE comparison would disagree on those.
        part = (st.sampled_from([0.0, 1.0, -1.0, 2.5, float("inf")]) if pool
                else st.floats(-1e3, 1e3, width=32).map(lambda v: v + 0.0))
        return st.builds(complex, part, part)
    if pool:
        base = [1.0, -2.0, 0.5, 3.0]
        return st.sampled_from(base + list(_SPECIAL_FLOATS) if specials else base + [0.0])
    limit = min(1e3, float(ml_dtypes.finfo(dtype).max))
    finite = st.floats(-limit, limit, width=16 if np.dtype(dtype).itemsize <= 2 else 32)
    if not specials:
        return finite.map(lambda v: v + 0.0)  # +0.0 turns -0.0 into +0.0
    return st.one_of(finite, st.sampled_from(_SPECIAL_FLOATS))


@st.composite
def _array(draw, shape, dtype, specials=None, pool=False):
    """An array of `shape` and `dtype` with random elements."""
    if specials is None:
        specials = draw(st.booleans())
    n = math.prod(shape)
    values = draw(st.lists(_scalar_elements(dtype, specials, pool), min_size=n, max_size=n))
    kind = _kind(dtype)
    if kind in "biu":
        return np.array(values, dtype=dtype).reshape(shape)
    wide = np.complex128 if kind == "c" else np.float64
    with np.errstate(over="ignore"):
        return np.array(values, dtype=wide).astype(dtype).reshape(shape)


def _zero_ok(draw) -> bool:
    """Whether a case may have zero-size dimensions (one case in six): rarer than hypothesis'
    own bias towards 0 would make them, so that most results are not empty."""
    return draw(st.integers(0, 5)) == 0


def _size(draw, hi: int, zero_ok: bool) -> int:
    """A dimension size in [0, hi], or in [1, hi] (when hi >= 1) unless zero_ok."""
    return draw(st.integers(0 if zero_ok or hi < 1 else 1, max(hi, 0)))


@st.composite
def _shape(draw, min_rank=0, max_rank=4, max_dim=5, max_size=200, zero_ok=None):
    """A shape whose non-zero dims multiply to at most max_size."""
    if zero_ok is None:
        zero_ok = _zero_ok(draw)
    rank = draw(st.integers(min_rank, max_rank))
    shape, size = [], 1
    for _ in range(rank):
        n = _size(draw, max(1, min(max_dim, max_size // size)), zero_ok)
        shape.append(n)
        size *= max(n, 1)
    return tuple(shape)


def _index_value(dtype, bound: int, dim: int | None = None, near_only: bool = False):
    """A strategy of index values for a start whose in-bounds values are [0, bound] in an
    operand dimension of size `dim`: in bounds, inside the dimension but too large for the
    slice / window to fit (clamped by gather, skipped by scatter), just out of bounds, negative
    (signed types), and extremes (large unsigned values included). With near_only, only the
    first two kinds."""
    info = ml_dtypes.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    bound = max(bound, 0)
    dim = bound if dim is None else dim
    inside = st.integers(0, min(hi, bound))
    partial = st.integers(bound + 1, dim - 1) if dim - 1 > bound and dim - 1 <= hi else inside
    if near_only:
        return st.one_of(inside, partial, partial)
    near = st.integers(max(lo, -3), min(hi, max(bound, dim) + 3))
    extremes = sorted({v for v in (lo, hi, hi - 1, lo + 1, 1 << (info.bits - 1), (1 << (info.bits - 1)) + 1,
                                   -(1 << (info.bits - 1)), 2**31, -2**31, 2**31 - 1, 2**32 + 2, -2**32)
                       if lo <= v <= hi})
    return st.one_of(inside, inside, partial, near, near, st.sampled_from(extremes), st.integers(lo, hi))


@st.composite
def _index_array(draw, batch_sizes, index_vector_dim, implicit, dtype, bounds, dims):
    """An index array: batch_sizes with the index vector dimension (len(bounds)) inserted at
    index_vector_dim, or not (implicit). Component k of the index vectors has in-bounds
    values [0, bounds[k]] in an operand dimension of size dims[k]. The values are all in
    bounds, or in bounds or too large for the slice / window to fit, or anything."""
    n = math.prod(batch_sizes)
    mode = draw(st.integers(0, 2))
    columns = []
    for bound, dim in zip(bounds, dims):
        values = (st.integers(0, max(bound, 0)) if mode == 0 else _index_value(dtype, bound, dim, mode == 1))
        columns.append(draw(st.lists(values, min_size=n, max_size=n)))
    arr = np.array(columns, dtype=dtype).reshape((len(bounds),) + tuple(batch_sizes))
    if implicit:
        return np.ascontiguousarray(arr[0])
    return np.ascontiguousarray(np.moveaxis(arr, 0, index_vector_dim))


@st.composite
def _index_scalar(draw, dtype, bound, dim):
    return np.dtype(dtype).type(draw(_index_value(dtype, bound, dim)))


def _subset(draw, items, max_size=None):
    """A sorted subset of `items`."""
    items = list(items)
    keep = draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
    chosen = [x for x, k in zip(items, keep) if k]
    return sorted(chosen[:max_size] if max_size is not None else chosen)


@st.composite
def _indexing(draw, operand_shape, zero_ok, max_batch=3, batch_budget=24):
    """What gather and scatter share: batching dims, the index-vector mapping, the index array's
    shape and index_vector_dim. Returns a dict with operand_batching (sorted),
    indices_batching (paired with it), index_map, batch_sizes, index_shape, index_vector_dim."""
    rank = len(operand_shape)
    positive = [d for d in range(rank) if operand_shape[d] >= 1]
    operand_batching = _subset(draw, positive, max_size=2) if draw(st.booleans()) else []
    rest = [d for d in range(rank) if d not in operand_batching]
    m = draw(st.integers(0, len(rest)))
    index_map = list(draw(st.permutations(rest)))[:m]

    nb = len(operand_batching)
    n_batch = draw(st.integers(nb, max(nb, max_batch)))
    positions = list(draw(st.permutations(range(n_batch))))
    batching_positions = positions[:nb]  # batch position of operand_batching[i]
    batch_sizes, size = [0] * n_batch, 1
    for i, p in enumerate(batching_positions):
        batch_sizes[p] = operand_shape[operand_batching[i]]
        size *= batch_sizes[p]
    for p in positions[nb:]:
        batch_sizes[p] = _size(draw, max(1, min(4, batch_budget // max(size, 1))), zero_ok)
        size *= max(batch_sizes[p], 1)

    implicit = m == 1 and draw(st.booleans())
    if implicit:
        ivd, index_shape = n_batch, list(batch_sizes)
    else:
        ivd = draw(st.integers(0, n_batch))
        index_shape = batch_sizes[:ivd] + [m] + batch_sizes[ivd:]
    indices_batching = [p if p < ivd else p + 1 for p in batching_positions]
    return dict(operand_batching=operand_batching, indices_batching=indices_batching,
                index_map=index_map, batch_sizes=batch_sizes, index_shape=tuple(index_shape),
                index_vector_dim=ivd, implicit=implicit, rest=rest)


# -- gather / scatter ----------------------------------------------------------------------

@st.composite
def gather_cases(draw, dtypes=DATA_DTYPES, index_dtypes=INDEX_DTYPES, max_result=400):
    """Random valid StableHLO gathers (C1-C23), with and without batching dims."""
    zero_ok = _zero_ok(draw)
    operand_shape = draw(_shape(min_rank=1, max_rank=4, zero_ok=zero_ok))
    ix = draw(_indexing(operand_shape, zero_ok))
    operand_batching, rest = ix["operand_batching"], ix["rest"]
    collapsed = _subset(draw, [d for d in rest if operand_shape[d] >= 1])  # slice size 1 (C9)
    offset_operand_dims = [d for d in rest if d not in collapsed]

    slice_sizes = [1] * len(operand_shape)  # 1 for collapsed (C9) and batching (C12) dims
    budget = max_result // max(math.prod(max(n, 1) for n in ix["batch_sizes"]), 1)
    for d in offset_operand_dims:
        slice_sizes[d] = _size(draw, min(operand_shape[d], max(budget, 1)), zero_ok)
        budget //= max(slice_sizes[d], 1)

    result_rank = len(ix["batch_sizes"]) + len(offset_operand_dims)
    offset_dims = sorted(list(draw(st.permutations(range(result_rank))))[:len(offset_operand_dims)])

    dtype = draw(st.sampled_from(dtypes))
    index_dtype = draw(st.sampled_from(index_dtypes))
    return {
        "operand": draw(_array(operand_shape, dtype)),
        "start_indices": draw(_index_array(ix["batch_sizes"], ix["index_vector_dim"], ix["implicit"], index_dtype,
                                           [operand_shape[d] - slice_sizes[d] for d in ix["index_map"]],
                                           [operand_shape[d] for d in ix["index_map"]])),
        "offset_dims": offset_dims,
        "collapsed_slice_dims": collapsed,
        "start_index_map": ix["index_map"],
        "index_vector_dim": ix["index_vector_dim"],
        "slice_sizes": slice_sizes,
        "operand_batching_dims": operand_batching,
        "start_indices_batching_dims": ix["indices_batching"],
    }


@st.composite
def scatter_cases(draw, dtypes=DATA_DTYPES, index_dtypes=INDEX_DTYPES, max_updates=400):
    """Random valid StableHLO scatters (C1-C25) of 1 or 2 operands (element types may differ),
    with and without batching dims; scatter indices in bounds, partly out of bounds (a window
    that only partly fits) and far out of bounds."""
    zero_ok = _zero_ok(draw)
    operand_shape = draw(_shape(min_rank=1, max_rank=4, zero_ok=zero_ok))
    ix = draw(_indexing(operand_shape, zero_ok))
    input_batching, rest = ix["operand_batching"], ix["rest"]
    inserted = _subset(draw, rest)
    window_operand_dims = [d for d in rest if d not in inserted]

    window_sizes = []
    budget = max_updates // max(math.prod(max(n, 1) for n in ix["batch_sizes"]), 1)
    for d in window_operand_dims:
        n = operand_shape[d]
        if n >= 3 and budget >= 2 and draw(st.booleans()):  # windows that can stick out partly
            window_sizes.append(draw(st.integers(2, min(n - 1, budget))))
        else:
            window_sizes.append(_size(draw, min(n, max(budget, 1)), zero_ok))
        budget //= max(window_sizes[-1], 1)

    update_rank = len(ix["batch_sizes"]) + len(window_operand_dims)
    update_window_dims = sorted(list(draw(st.permutations(range(update_rank))))[:len(window_operand_dims)])
    update_shape, scatter_sizes, window_iter = [], iter(ix["batch_sizes"]), iter(window_sizes)
    for d in range(update_rank):
        update_shape.append(next(window_iter) if d in update_window_dims else next(scatter_sizes))

    extent = [1] * len(operand_shape)  # the window's extent in each operand dimension
    for d, w in zip(window_operand_dims, window_sizes):
        extent[d] = w

    n = draw(st.integers(1, 2))
    dtypes_ = [draw(st.sampled_from(dtypes)) for _ in range(n)]
    index_dtype = draw(st.sampled_from(index_dtypes))
    return {
        "operands": [draw(_array(operand_shape, dt)) for dt in dtypes_],
        "scatter_indices": draw(_index_array(ix["batch_sizes"], ix["index_vector_dim"], ix["implicit"], index_dtype,
                                             [operand_shape[d] - extent[d] for d in ix["index_map"]],
                                             [operand_shape[d] for d in ix["index_map"]])),
        "updates": [draw(_array(tuple(update_shape), dt)) for dt in dtypes_],
        "update_window_dims": update_window_dims,
        "inserted_window_dims": inserted,
        "scatter_dims_to_operand_dims": ix["index_map"],
        "index_vector_dim": ix["index_vector_dim"],
        "input_batching_dims": input_batching,
        "scatter_indices_batching_dims": ix["indices_batching"],
    }


# -- pad / slice / dynamic slices -----------------------------------------------------

@st.composite
def pad_cases(draw, dtypes=DATA_DTYPES, max_result=1000):
    """Random valid pads: negative and positive edge padding, interior padding, zero-size
    dimensions; every result dimension >= 0 (C4)."""
    zero_ok = _zero_ok(draw)
    operand_shape = draw(_shape(min_rank=0, max_rank=4, max_dim=4, zero_ok=zero_ok))
    config, size = [], 1
    for n in operand_shape:
        interior = draw(st.integers(0, 2))
        padded = n + max(n - 1, 0) * interior
        max_dim = max(0, max_result // size)
        low = draw(st.integers(-(padded + 1), 3))
        high_lo = -(padded + low) + (0 if zero_ok else 1)  # result dim low + padded + high >= 0 (>= 1)
        high = draw(st.integers(high_lo, max(high_lo, min(3, max_dim - (padded + low)))))
        config.append((low, high, interior))
        size *= max(low + padded + high, 1)
    dtype = draw(st.sampled_from(dtypes))
    return {
        "operand": draw(_array(operand_shape, dtype)),
        "padding_value": draw(_array((), dtype)),
        "padding_config": config,
    }


@st.composite
def slice_cases(draw, dtypes=DATA_DTYPES):
    """Random valid slices: 0 <= start <= limit <= dim, stride >= 1 (C3, C4)."""
    zero_ok = _zero_ok(draw)
    shape = draw(_shape(min_rank=0, max_rank=4, zero_ok=zero_ok))
    start, limit, strides = [], [], []
    for n in shape:
        s = draw(st.integers(0, n if zero_ok else max(n - 1, 0)))
        start.append(s)
        limit.append(draw(st.integers(s if zero_ok else min(s + 1, n), n)))
        strides.append(draw(st.integers(1, 4)))
    return {"operand": draw(_array(shape, draw(st.sampled_from(dtypes)))),
            "start_indices": start, "limit_indices": limit, "strides": strides}


@st.composite
def _start_scalars(draw, bounds, dims, index_dtypes):
    """One numpy integer scalar per dimension (in-bounds values [0, bounds[d]], and out of
    bounds); the same type for all, or mixed types."""
    if draw(st.booleans()):
        dts = [draw(st.sampled_from(index_dtypes))] * len(bounds)
    else:
        dts = [draw(st.sampled_from(index_dtypes)) for _ in bounds]
    return [draw(_index_scalar(dt, b, n)) for dt, b, n in zip(dts, bounds, dims)]


@st.composite
def dynamic_slice_cases(draw, dtypes=DATA_DTYPES, index_dtypes=INDEX_DTYPES):
    """Random valid dynamic slices: 0 <= size <= dim; start indices numpy scalars of possibly
    different integer types, in and out of bounds."""
    zero_ok = _zero_ok(draw)
    shape = draw(_shape(min_rank=0, max_rank=4, zero_ok=zero_ok))
    sizes = [_size(draw, n, zero_ok) for n in shape]
    return {"operand": draw(_array(shape, draw(st.sampled_from(dtypes)))),
            "start_indices": draw(_start_scalars([n - z for n, z in zip(shape, sizes)], shape, index_dtypes)),
            "size_indices": sizes}


@st.composite
def dynamic_update_slice_cases(draw, dtypes=DATA_DTYPES, index_dtypes=INDEX_DTYPES):
    """Random valid dynamic update slices: 0 <= update dim <= operand dim (C6); start
    indices as for dynamic_slice_cases."""
    zero_ok = _zero_ok(draw)
    shape = draw(_shape(min_rank=0, max_rank=4, zero_ok=zero_ok))
    dtype = draw(st.sampled_from(dtypes))
    update_shape = tuple(_size(draw, n, zero_ok) for n in shape)
    return {"operand": draw(_array(shape, dtype)),
            "update": draw(_array(update_shape, dtype)),
            "start_indices": draw(_start_scalars([n - u for n, u in zip(shape, update_shape)], shape, index_dtypes))}


# -- sort --------------------------------------------------------------------------------

@st.composite
def sort_cases(draw, dtypes=DATA_DTYPES):
    """Random valid sorts: 1 to 3 operands of the same dims (element types may differ),
    duplicates common, floats with NaN of both signs / +-0 / +-inf sometimes; dimension in
    [-rank, rank) (C4)."""
    shape = draw(_shape(min_rank=1, max_rank=3, max_dim=6, max_size=60))
    n = draw(st.integers(1, 3))
    operands = [draw(_array(shape, draw(st.sampled_from(dtypes)), pool=draw(st.booleans())))
                for _ in range(n)]
    return {"operands": operands,
            "dimension": draw(st.integers(-len(shape), len(shape) - 1))}


# -- self-test ------------------------------------------------------------------------------

if __name__ == "__main__":
    import sys
    from pathlib import Path

    from hypothesis import HealthCheck, given, settings

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import spec_reference as ref

    SETTINGS = settings(max_examples=200, deadline=None, database=None,
                        suppress_health_check=list(HealthCheck))
    counts = {}

    def tally(name, **flags):
        c = counts.setdefault(name, {"cases": 0})
        c["cases"] += 1
        for k, v in flags.items():
            c[k] = c.get(k, 0) + bool(v)

    def same(a, b):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()

    def as_ints(a):
        return [int(v) for v in np.asarray(a).reshape(-1).tolist()]

    def start_vectors(indices, ivd):
        """Per batch index (row-major), the index vector, as Python ints."""
        idx = np.asarray(indices)
        if ivd == idx.ndim:
            idx = idx[..., None]
        moved = np.moveaxis(idx, ivd, -1)
        return [(b, as_ints(moved[b])) for b in np.ndindex(*moved.shape[:-1])]


    def gather_constraints(c):
        """StableHLO gather (C1)-(C22), literally."""
        op, si = c["operand"], c["start_indices"]
        od, cd, obd = c["offset_dims"], c["collapsed_slice_dims"], c["operand_batching_dims"]
        sibd, sim, ivd, ss = c["start_indices_batching_dims"], c["start_index_map"], c["index_vector_dim"], c["slice_sizes"]
        uniq = lambda xs: len(set(xs)) == len(xs)
        assert op.ndim == len(od) + len(cd) + len(obd)                                  # C1
        assert 0 <= ivd <= si.ndim                                                      # C2
        assert len(sim) == (si.shape[ivd] if ivd < si.ndim else 1)                      # C3
        assert uniq(od) and od == sorted(od)                                            # C4
        result_rank = si.ndim - (1 if ivd < si.ndim else 0) + len(od)
        assert all(0 <= d < result_rank for d in od)                                    # C5
        assert uniq(cd + obd) and cd == sorted(cd)                                      # C6, C7
        assert all(0 <= d < op.ndim for d in cd) and all(ss[d] <= 1 for d in cd)        # C8, C9
        assert obd == sorted(obd) and all(0 <= d < op.ndim for d in obd)                # C10, C11
        assert all(ss[d] <= 1 for d in obd) and uniq(sibd)                              # C12, C13
        assert all(0 <= d < si.ndim for d in sibd) and ivd not in sibd                  # C14, C15
        assert len(obd) == len(sibd)                                                    # C16
        assert [op.shape[d] for d in obd] == [si.shape[d] for d in sibd]                # C17
        assert uniq(sim + obd) and all(0 <= d < op.ndim for d in sim)                   # C18, C19
        assert len(ss) == op.ndim and all(0 <= z <= n for z, n in zip(ss, op.shape))   # C20, C21
        assert si.dtype.kind in "iu"

    def scatter_constraints(c):
        """StableHLO scatter (C1)-(C22), literally (C23-C25 concern the computation)."""
        ins, si, ups = c["operands"], c["scatter_indices"], c["updates"]
        uwd, iwd, ibd = c["update_window_dims"], c["inserted_window_dims"], c["input_batching_dims"]
        sibd, sdod, ivd = c["scatter_indices_batching_dims"], c["scatter_dims_to_operand_dims"], c["index_vector_dim"]
        uniq = lambda xs: len(set(xs)) == len(xs)
        rank = ins[0].ndim
        assert len({a.shape for a in ins}) == 1                                         # C1
        assert rank == len(uwd) + len(iwd) + len(ibd)                                   # C2
        assert len({u.shape for u in ups}) == 1                                         # C3
        scatter_sizes = [n for d, n in enumerate(si.shape) if d != ivd]
        window_bounds = [n for d, n in enumerate(ins[0].shape) if d not in iwd and d not in ibd]
        usd = [d for d in range(ups[0].ndim) if d not in uwd]
        assert ups[0].ndim == len(usd) + len(uwd) and len(usd) == len(scatter_sizes)
        assert [ups[0].shape[d] for d in usd] == scatter_sizes                          # C4
        assert all(ups[0].shape[d] <= b for d, b in zip(uwd, window_bounds))
        assert 0 < len(ins) == len(ups)                                                 # C5
        assert all(a.dtype == u.dtype for a, u in zip(ins, ups))                        # C6
        assert uniq(uwd) and uwd == sorted(uwd)                                         # C7
        assert all(0 <= d < ups[0].ndim for d in uwd)                                   # C8
        assert uniq(iwd + ibd) and iwd == sorted(iwd)                                   # C9, C10
        assert all(0 <= d < rank for d in iwd) and ibd == sorted(ibd)                   # C11, C12
        assert all(0 <= d < rank for d in ibd) and uniq(sibd)                           # C13, C14
        assert all(0 <= d < si.ndim for d in sibd) and ivd not in sibd                  # C15, C16
        assert len(ibd) == len(sibd)                                                    # C17
        assert [ins[0].shape[d] for d in ibd] == [si.shape[d] for d in sibd]            # C18
        assert len(sdod) == (si.shape[ivd] if ivd < si.ndim else 1)                     # C19
        assert uniq(sdod + ibd) and all(0 <= d < rank for d in sdod)                    # C20, C21
        assert 0 <= ivd <= si.ndim                                                      # C22

    @SETTINGS
    @given(case=gather_cases())
    def check_gather(case):
        gather_constraints(case)
        out = ref.gather(**case)
        operand, ivd = case["operand"], case["index_vector_dim"]
        # Cross-check: at each batch index, the result is a clamped dynamic slice of the operand
        # (batching dims sliced at the batch index) with collapsed / batching dims dropped.
        batch_dims = [d for d in range(out.ndim) if d not in case["offset_dims"]]
        dropped = set(case["collapsed_slice_dims"]) | set(case["operand_batching_dims"])
        for b, vector in start_vectors(case["start_indices"], ivd):
            starts = [0] * operand.ndim
            for k, d in enumerate(case["start_index_map"]):
                starts[d] = vector[k]
            for d_op, d_idx in zip(case["operand_batching_dims"], case["start_indices_batching_dims"]):
                starts[d_op] = b[d_idx - (0 if d_idx < ivd else 1)]
            piece = ref.dynamic_slice(operand, starts, case["slice_sizes"])
            piece = piece.reshape([n for d, n in enumerate(piece.shape) if d not in dropped])
            sel = [slice(None)] * out.ndim
            for d, i in zip(batch_dims, b):
                sel[d] = i
            assert same(out[tuple(sel)], piece), case
        tally("gather", batching=case["operand_batching_dims"], implicit_ivd=ivd == case["start_indices"].ndim,
              empty_result=out.size == 0, unsigned=case["start_indices"].dtype.kind == "u")

    @SETTINGS
    @given(case=scatter_cases())
    def check_scatter(case):
        scatter_constraints(case)
        n = len(case["operands"])

        def first(*args):  # keep the operand values: a no-op update
            return args[:n] if n > 1 else args[0]

        kept = ref.scatter(update_computation=first, **case)
        assert all(same(k, o) for k, o in zip(kept, case["operands"]))

        def take(*args):  # replace by the update
            return args[n:] if n > 1 else args[n]

        window = ref.scatter(update_computation=take, **case)
        element = ref.scatter(update_computation=take, out_of_bounds="element", **case)
        # Cross-check with "count" scatters: the number of updates landing on each element.
        ones = [np.ones(case["updates"][0].shape, np.int64)]
        zero = [np.zeros(case["operands"][0].shape, np.int64)]
        kw = {k: v for k, v in case.items() if k not in ("operands", "updates")}
        hits_w = ref.scatter(zero, updates=ones, update_computation=lambda a, b: a + b, **kw)[0]
        hits_e = ref.scatter(zero, updates=ones, update_computation=lambda a, b: a + b,
                             out_of_bounds="element", **kw)[0]
        assert (hits_w <= hits_e).all()
        for r, o in zip(window, case["operands"]):
            assert same(r[hits_w == 0], o[hits_w == 0])
        tally("scatter", batching=case["input_batching_dims"], two_operands=n == 2,
              partial_window_differs=not all(same(a, b) for a, b in zip(window, element)),
              some_updates_applied=hits_w.any(), duplicates=(hits_w > 1).any())

    @SETTINGS
    @given(case=pad_cases())
    def check_pad(case):
        out = ref.pad(case["operand"], case["padding_value"], case["padding_config"])
        assert out.dtype == case["operand"].dtype
        tally("pad", negative=any(lo < 0 or hi < 0 for lo, hi, _ in case["padding_config"]),
              interior=any(i > 0 for _, _, i in case["padding_config"]), empty=out.size == 0)

    @SETTINGS
    @given(case=slice_cases())
    def check_slice(case):
        out = ref.slice(case["operand"], case["start_indices"], case["limit_indices"], case["strides"])
        numpy_ = case["operand"][tuple(slice(s, l, st_) for s, l, st_ in
                                       zip(case["start_indices"], case["limit_indices"], case["strides"]))]
        assert same(out, numpy_)
        tally("slice", empty=out.size == 0)

    @SETTINGS
    @given(case=dynamic_slice_cases())
    def check_dynamic_slice(case):
        out = ref.dynamic_slice(case["operand"], case["start_indices"], case["size_indices"])
        assert out.shape == tuple(case["size_indices"])
        tally("dynamic_slice", mixed_types=len({s.dtype for s in case["start_indices"]}) > 1,
              out_of_bounds=any(int(s) < 0 or int(s) + z > n for s, z, n in
                                zip(case["start_indices"], case["size_indices"], case["operand"].shape)))

    @SETTINGS
    @given(case=dynamic_update_slice_cases())
    def check_dynamic_update_slice(case):
        out = ref.dynamic_update_slice(case["operand"], case["update"], case["start_indices"])
        # The update lands where dynamic_slice with the same starts reads.
        back = ref.dynamic_slice(out, case["start_indices"], case["update"].shape)
        assert same(back, case["update"])
        tally("dynamic_update_slice")

    @SETTINGS
    @given(case=sort_cases())
    def check_sort(case):
        outs = ref.sort(case["operands"], dimension=case["dimension"])
        # Sorted by the first operand; the tuples are a permutation of the input tuples.
        d = case["dimension"] % case["operands"][0].ndim
        keys = np.moveaxis(outs[0], d, -1)
        for row in np.ndindex(*keys.shape[:-1]):
            k = ref.total_order_keys(keys[row])
            assert k == sorted(k)
        rows_in = [np.moveaxis(o, d, -1) for o in case["operands"]]
        rows_out = [np.moveaxis(o, d, -1) for o in outs]
        for row in np.ndindex(*rows_in[0].shape[:-1]):
            tuples_in = sorted(zip(*[[v.tobytes() for v in r[row]] for r in rows_in]))
            tuples_out = sorted(zip(*[[v.tobytes() for v in r[row]] for r in rows_out]))
            assert tuples_in == tuples_out
        # An explicit comparator equal to the default gives the same result.
        def less(*p):
            return ref.total_order_keys(np.array([p[0]]))[0] < ref.total_order_keys(np.array([p[1]]))[0]
        outs2 = ref.sort(case["operands"], comparator=less, dimension=case["dimension"])
        assert all(same(a, b) for a, b in zip(outs, outs2))
        vals, idx = ref.top_k(case["operands"][0], min(2, case["operands"][0].shape[-1]))
        assert idx.dtype == np.int32
        tally("sort", operands_2_or_3=len(case["operands"]) > 1, negative_dim=case["dimension"] < 0)

    for check in (check_gather, check_scatter, check_pad, check_slice, check_dynamic_slice,
                  check_dynamic_update_slice, check_sort):
        check()
    for name, c in counts.items():
        print(f"{name:22s}", c)
