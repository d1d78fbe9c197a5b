"""Independent numpy references for XLA's data-movement ops, written from the specs alone.

Sources: the XLA operation semantics (spec/operation-semantics.zh.md: Collapse, Concatenate,
DynamicSlice, DynamicUpdateSlice, Gather, Pad, Reshape, Rev, Slice, Sort, Scatter, TopK,
Transpose) and the StableHLO specification (openxla/stablehlo docs/spec.md: concatenate,
dynamic_slice, dynamic_update_slice, gather, pad, reshape, reverse, scatter, slice, sort,
transpose), whose formal index mappings are followed literally, element by element, rather
than through numpy shortcuts wherever the mapping is not trivial.

Conventions:
  * Index values (start indices, gather / scatter index arrays) may be Python ints or numpy
    integers of any width and signedness; they are read as the mathematical integer they
    denote (an unsigned value is never wrapped to a negative one) and all index arithmetic is
    done with Python ints.
  * Element types: everything numpy and ml_dtypes offer (bool, every integer width, float16/
    32/64, bfloat16, the ml_dtypes small floats, complex). Results keep the operand's dtype.
  * Results are fresh arrays, never views of the inputs.
  * Nothing is validated beyond what a function needs: inputs are assumed valid.
"""
from __future__ import annotations

import functools
import math

import ml_dtypes
import numpy as np

__all__ = [
    "reshape", "collapse", "transpose", "rev", "slice", "slice_in_dim", "concatenate", "pad",
    "dynamic_slice", "dynamic_update_slice", "gather", "scatter", "sort", "top_k",
    "total_order_keys",
]

_builtin_slice = slice  # `slice` is shadowed by the reference of that name below


# -- helpers ------------------------------------------------------------------------------

def _int(v) -> int:
    """The mathematical integer a Python / numpy integer (any width, any signedness) denotes."""
    if isinstance(v, (bool, int)):
        return int(v)
    a = np.asarray(v)
    if a.dtype.kind not in "biu":  # ml_dtypes int1/int2/int4/uint*: exact in int64
        a = a.astype(np.int64)
    return int(a.reshape(()).tolist())


def _ints(vs) -> list[int]:
    return [_int(v) for v in (np.asarray(vs).reshape(-1) if isinstance(vs, np.ndarray) else vs)]


def _index_array(a) -> np.ndarray:
    """An integer array as an object array of Python ints (unsigned values stay unsigned)."""
    a = np.asarray(a)
    if a.dtype.kind not in "biu":
        a = a.astype(np.int64)
    out = np.empty(a.shape, dtype=object)
    for i in np.ndindex(*a.shape):
        out[i] = int(a[i])
    return out


def _clamp(v: int, lo: int, hi: int) -> int:
    return min(max(v, lo), hi)


def _kind(dtype) -> str:
    """'b' bool, 'i' signed, 'u' unsigned, 'f' float, 'c' complex (ml_dtypes types included)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return "b"
    if dtype.kind in "iufc":
        return dtype.kind
    try:
        info = ml_dtypes.iinfo(dtype)
        return "i" if info.min < 0 else "u"
    except (ValueError, TypeError):
        pass
    ml_dtypes.finfo(dtype)  # raises for anything that is not a float type
    return "f"


def total_order_keys(a) -> list:
    """Python sort keys of the elements of `a` (flattened, row-major) in the total order used
    by the default comparator and by top_k:

      * bool: false < true; integers: by value (unsigned read as unsigned);
      * floats: IEEE-754 totalOrder, -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN, computed
        on the bit pattern (sign-magnitude), as XLA's TOTALORDER comparison does; a float type
        without a sign bit (float8_e8m0fnu) orders by its bit pattern;
      * complex: lexicographic on (real, imag), each in the float total order (StableHLO
        `compare`: "lexicographic comparison of (real, imag) pairs").
    """
    a = np.ascontiguousarray(np.asarray(a).reshape(-1))
    kind = _kind(a.dtype)
    if kind in "biu":
        return [_int(v) for v in (a if a.dtype.kind in "biu" else a.astype(np.int64)).tolist()]
    if kind == "c":
        return list(zip(total_order_keys(a.real.copy()), total_order_keys(a.imag.copy())))
    if a.dtype.itemsize not in (1, 2, 4, 8):  # long double: no unsigned view; order by value
        return [(-1 if np.signbit(v) else 1, 0, 0) if np.isnan(v) else (0, v, 0 if np.signbit(v) else 1)
                for v in a]
    info = ml_dtypes.finfo(a.dtype)
    bits = info.bits
    raw = [int(u) & ((1 << bits) - 1) for u in a.view(np.dtype(f"u{a.dtype.itemsize}")).tolist()]
    if float(info.min) > 0:  # no sign bit
        return raw
    sign, mag_mask = 1 << (bits - 1), (1 << (bits - 1)) - 1
    return [-(u & mag_mask) - 1 if u & sign else u for u in raw]


# -- shape ops --------------------------------------------------------------------------

def reshape(x, new_sizes):
    """Reshape (XLA "Reshape"; StableHLO `reshape`): result_index and operand_index have the
    same position in the lexicographic (row-major) ordering of the two index spaces. A
    one-element array may become a scalar (new_sizes == ()) and vice versa."""
    x = np.asarray(x)
    return np.array(x.reshape(tuple(_ints(new_sizes)), order="C"), copy=True)


def collapse(x, dimensions):
    """Collapse (XLA "Collapse"): the in-order, consecutive `dimensions` are replaced by one
    dimension, at their position, whose size is the product of theirs; the lower-numbered
    dimension varies slowest (row-major). Fewer than two dimensions: the operand unchanged."""
    x = np.asarray(x)
    dims = _ints(dimensions)
    if len(dims) <= 1:
        return np.array(x, copy=True)
    first, last = dims[0], dims[-1]
    shape = x.shape[:first] + (math.prod(x.shape[first:last + 1]),) + x.shape[last + 1:]
    return reshape(x, shape)


def transpose(x, permutation):
    """Transpose (XLA: input_dimensions[permutation[i]] = output_dimensions[i]; StableHLO
    `transpose`: result_index[d] = operand_index[permutation[d]])."""
    x = np.asarray(x)
    perm = _ints(permutation)
    out = np.empty(tuple(x.shape[p] for p in perm), dtype=x.dtype)
    for operand_index in np.ndindex(*x.shape):
        out[tuple(operand_index[p] for p in perm)] = x[operand_index]
    return out


def rev(x, dimensions):
    """Rev (XLA "Rev"; StableHLO `reverse`): operand_index[d] = dim(result, d) -
    result_index[d] - 1 if d in dimensions, else result_index[d]."""
    x = np.asarray(x)
    dims = set(_ints(dimensions))
    out = np.empty_like(x)
    for ri in np.ndindex(*x.shape):
        out[ri] = x[tuple(x.shape[d] - ri[d] - 1 if d in dims else ri[d] for d in range(x.ndim))]
    return out


def slice(x, start_indices, limit_indices, strides=None):  # the op's name
    """Slice (XLA "Slice"; StableHLO `slice`): operand_index = start_indices + result_index *
    strides, shape(result) = ceil((limit_indices - start_indices) / strides). Strides default
    to 1."""
    x = np.asarray(x)
    start, limit = _ints(start_indices), _ints(limit_indices)
    stride = [1] * x.ndim if strides is None else _ints(strides)
    shape = tuple(-(-(lim - s) // st) for s, lim, st in zip(start, limit, stride))
    out = np.empty(shape, dtype=x.dtype)
    for ri in np.ndindex(*shape):
        out[ri] = x[tuple(s + r * st for s, r, st in zip(start, ri, stride))]
    return out


def slice_in_dim(x, start_index, limit_index, stride, dimno):
    """SliceInDim: Slice with (start_index, limit_index, stride) in dimension `dimno` and the
    whole extent, stride 1, in every other dimension."""
    x = np.asarray(x)
    start, limit, strides = [0] * x.ndim, list(x.shape), [1] * x.ndim
    d = _int(dimno)
    start[d], limit[d], strides[d] = _int(start_index), _int(limit_index), _int(stride)
    return slice(x, start, limit, strides)


def concatenate(arrays, dimension):
    """Concatenate (XLA "Concatenate"; StableHLO `concatenate`): result[i0, ..., id, ...] =
    inputs[k][i0, ..., kd, ...] where id = d0 + ... + d(k-1) + kd."""
    arrays = [np.asarray(a) for a in arrays]
    d = _int(dimension)
    shape = list(arrays[0].shape)
    shape[d] = sum(a.shape[d] for a in arrays)
    out = np.empty(tuple(shape), dtype=arrays[0].dtype)
    offset = 0
    for a in arrays:
        for i in np.ndindex(*a.shape):
            out[i[:d] + (offset + i[d],) + i[d + 1:]] = a[i]
        offset += a.shape[d]
    return out


def pad(x, padding_value, padding_config):
    """Pad (XLA "Pad"; StableHLO `pad`): result[result_index] = operand[operand_index] if
    result_index = edge_padding_low + operand_index * (interior_padding + 1), else
    padding_value; shape(result) = shape(operand) + low + max(shape(operand) - 1, 0) *
    interior + high. Negative edge padding removes elements of the interior-padded operand
    (the operand elements whose result_index falls outside the result are dropped)."""
    x = np.asarray(x)
    config = [tuple(_ints(c)) for c in padding_config]
    shape = tuple(lo + n + max(n - 1, 0) * interior + hi
                  for n, (lo, hi, interior) in zip(x.shape, config))
    out = np.full(shape, np.asarray(padding_value, dtype=x.dtype), dtype=x.dtype)
    for oi in np.ndindex(*x.shape):
        ri = tuple(lo + i * (interior + 1) for i, (lo, _, interior) in zip(oi, config))
        if all(0 <= r < s for r, s in zip(ri, shape)):
            out[ri] = x[oi]
    return out


def dynamic_slice(x, start_indices, size_indices):
    """DynamicSlice (XLA "DynamicSlice"; StableHLO `dynamic_slice`): adjusted_start =
    clamp(start, 0, dim - size) per dimension, operand_index = adjusted_start + result_index.
    Start values are read as the integers they denote (unsigned never negative)."""
    x = np.asarray(x)
    sizes = _ints(size_indices)
    starts = [_clamp(s, 0, n - z) for s, n, z in zip(_ints(start_indices), x.shape, sizes)]
    out = np.empty(tuple(sizes), dtype=x.dtype)
    for ri in np.ndindex(*sizes):
        out[ri] = x[tuple(s + r for s, r in zip(starts, ri))]
    return out


def dynamic_update_slice(x, update, start_indices):
    """DynamicUpdateSlice (XLA "DynamicUpdateSlice"; StableHLO `dynamic_update_slice`):
    adjusted_start = clamp(start, 0, dim - update_dim); result[result_index] =
    update[result_index - adjusted_start] where that is within shape(update), else
    operand[result_index]."""
    x, update = np.asarray(x), np.asarray(update)
    starts = [_clamp(s, 0, n - u) for s, n, u in zip(_ints(start_indices), x.shape, update.shape)]
    out = np.array(x, copy=True)
    for ui in np.ndindex(*update.shape):
        out[tuple(s + u for s, u in zip(starts, ui))] = update[ui]
    return out


# -- gather / scatter --------------------------------------------------------------------

def _start_index(indices, batch_index, index_vector_dim):
    """start_indices[bi0, ..., :, ..., biN] with `:` at index_vector_dim (indices already has
    the implicit trailing dimension when index_vector_dim == its original rank)."""
    head, tail = tuple(batch_index[:index_vector_dim]), tuple(batch_index[index_vector_dim:])
    return [indices[head + (k,) + tail] for k in range(indices.shape[index_vector_dim])]


def gather(operand, start_indices, *, offset_dims, collapsed_slice_dims, start_index_map,
           index_vector_dim, slice_sizes, operand_batching_dims=(), start_indices_batching_dims=(),
           indices_are_sorted=False):
    """Gather, following the StableHLO `gather` formula (which extends XLA's with batching
    dims); result[result_index] = operand[operand_index] where:

      batch_dims = [d for d in axes(result) if d not in offset_dims]
      batch_index = result_index[batch_dims...]
      start_index = start_indices[bi0, ..., :, ..., biN] (`:` at index_vector_dim), or
                    [start_indices[batch_index]] when index_vector_dim == rank(start_indices)
      full_start_index[d_operand] = clamp(start_index[d_start], 0,
                                          dim(operand, d_operand) - slice_sizes[d_operand])
                    if d_operand = start_index_map[d_start], else 0
      full_batching_index[d_operand] = batch_index[d_start - (d_start < index_vector_dim ? 0 : 1)]
                    if d_operand = operand_batching_dims[i], d_start = start_indices_batching_dims[i],
                    else 0
      full_offset_index = result_index[offset_dims...] with 0 inserted at collapsed_slice_dims
                    and operand_batching_dims
      operand_index = full_start_index + full_batching_index + full_offset_index

    shape(result) (C22): the start_indices dims other than index_vector_dim at batch_dims, the
    slice_sizes other than collapsed_slice_dims / operand_batching_dims at offset_dims.
    index_vector_dim == rank(start_indices) means an implicit trailing dimension of size 1.
    indices_are_sorted is accepted and ignored (a promise that cannot change a correct result).
    """
    operand = np.asarray(operand)
    indices = _index_array(start_indices)
    offset_dims, collapsed = _ints(offset_dims), _ints(collapsed_slice_dims)
    start_index_map, sizes = _ints(start_index_map), _ints(slice_sizes)
    operand_batching, indices_batching = _ints(operand_batching_dims), _ints(start_indices_batching_dims)
    ivd = _int(index_vector_dim)
    if ivd == indices.ndim:
        indices = indices.reshape(indices.shape + (1,))
    rank = operand.ndim

    batch_sizes = indices.shape[:ivd] + indices.shape[ivd + 1:]
    offset_operand_dims = [d for d in range(rank) if d not in collapsed and d not in operand_batching]
    result_rank = len(batch_sizes) + len(offset_dims)
    batch_dims = [d for d in range(result_rank) if d not in offset_dims]
    shape = [0] * result_rank
    for d, n in zip(batch_dims, batch_sizes):
        shape[d] = n
    for d, od in zip(offset_dims, offset_operand_dims):
        shape[d] = sizes[od]

    result = np.empty(tuple(shape), dtype=operand.dtype)
    for result_index in np.ndindex(*shape):
        batch_index = [result_index[d] for d in batch_dims]
        start_index = _start_index(indices, batch_index, ivd)
        full_start = [0] * rank
        for d_start, d_operand in enumerate(start_index_map):
            full_start[d_operand] = _clamp(start_index[d_start], 0, operand.shape[d_operand] - sizes[d_operand])
        full_batching = [0] * rank
        for d_operand, d_start in zip(operand_batching, indices_batching):
            full_batching[d_operand] = batch_index[d_start - (0 if d_start < ivd else 1)]
        full_offset = [0] * rank
        for d_result, d_operand in zip(offset_dims, offset_operand_dims):
            full_offset[d_operand] = result_index[d_result]
        result[result_index] = operand[tuple(s + b + o for s, b, o in zip(full_start, full_batching, full_offset))]
    return result


def scatter(operands, scatter_indices, updates, update_computation, *, update_window_dims,
            inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim,
            input_batching_dims=(), scatter_indices_batching_dims=(), indices_are_sorted=False,
            unique_indices=False, out_of_bounds="window"):
    """Scatter, following the StableHLO `scatter` formula; for every update_index in
    index_space(updates[0]), in row-major order:

      update_scatter_dims = [d for d in axes(updates[0]) if d not in update_window_dims]
      update_scatter_index = update_index[update_scatter_dims...]
      start_index = scatter_indices[si0, ..., :, ..., siN] (`:` at index_vector_dim), or
                    [scatter_indices[update_scatter_index]] when index_vector_dim == rank
      full_start_index[d_input] = start_index[d_start] if d_input =
                    scatter_dims_to_operand_dims[d_start], else 0      (no clamping)
      full_batching_index[d_input] = update_scatter_index[d_start - (d_start < index_vector_dim
                    ? 0 : 1)] if d_input = input_batching_dims[i], d_start =
                    scatter_indices_batching_dims[i], else 0
      full_window_index = update_index[update_window_dims...] with 0 inserted at
                    inserted_window_dims and input_batching_dims
      result_index = full_start_index + full_batching_index + full_window_index
      results...[result_index] = update_computation(results...[result_index], updates...[update_index])

    Out-of-bounds updates are skipped. With out_of_bounds="window" (the default, XLA's
    behaviour, as the brief asks) the whole update window of a scatter index is skipped when
    the window does not fit entirely in the operand, i.e. unless, for every operand dimension
    d, 0 <= full_start_index[d] + full_batching_index[d] and that plus the window's extent in
    d (the update window dim size; 1 for inserted and batching dims) <= dim(inputs, d). With
    out_of_bounds="element" only the elements whose result_index is out of bounds are skipped,
    the literal reading of the StableHLO text ("If result_index is in bounds for
    shape(results...)").

    update_computation gets N operand values then N update values (numpy scalars) and
    returns N values (a tuple / list, or a single value when N == 1). Returns a list of N
    arrays. indices_are_sorted and unique_indices are accepted and ignored (promises about the
    inputs that cannot change the result when they hold).
    """
    results = [np.array(o, copy=True) for o in operands]
    updates = [np.asarray(u) for u in updates]
    indices = _index_array(scatter_indices)
    window_dims, inserted = _ints(update_window_dims), _ints(inserted_window_dims)
    to_operand, input_batching = _ints(scatter_dims_to_operand_dims), _ints(input_batching_dims)
    indices_batching = _ints(scatter_indices_batching_dims)
    ivd = _int(index_vector_dim)
    if ivd == indices.ndim:
        indices = indices.reshape(indices.shape + (1,))
    shape = results[0].shape
    rank = len(shape)
    update_shape = updates[0].shape
    scatter_dims = [d for d in range(len(update_shape)) if d not in window_dims]
    window_operand_dims = [d for d in range(rank) if d not in inserted and d not in input_batching]
    extent = [1] * rank
    for d_update, d_operand in zip(window_dims, window_operand_dims):
        extent[d_operand] = update_shape[d_update]

    for update_index in np.ndindex(*update_shape):
        scatter_index = [update_index[d] for d in scatter_dims]
        start_index = _start_index(indices, scatter_index, ivd)
        full_start = [0] * rank
        for d_start, d_input in enumerate(to_operand):
            full_start[d_input] = start_index[d_start]
        full_batching = [0] * rank
        for d_input, d_start in zip(input_batching, indices_batching):
            full_batching[d_input] = scatter_index[d_start - (0 if d_start < ivd else 1)]
        full_window = [0] * rank
        for d_update, d_input in zip(window_dims, window_operand_dims):
            full_window[d_input] = update_index[d_update]
        result_index = tuple(s + b + w for s, b, w in zip(full_start, full_batching, full_window))
        if out_of_bounds == "window":
            corner = [s + b for s, b in zip(full_start, full_batching)]
            in_bounds = all(0 <= c and c + e <= n for c, e, n in zip(corner, extent, shape))
        else:
            in_bounds = all(0 <= r < n for r, n in zip(result_index, shape))
        if not in_bounds:
            continue
        values = update_computation(*[r[result_index] for r in results],
                                    *[u[update_index] for u in updates])
        if len(results) == 1 and not isinstance(values, (tuple, list)):
            values = (values,)
        for r, v in zip(results, values):
            r[result_index] = np.asarray(v).astype(r.dtype)
    return results


# -- sort / top_k ----------------------------------------------------------------------

def sort(operands, comparator=None, dimension=-1, is_stable=False):
    """Sort (XLA "Sort"; StableHLO `sort`): the 1-D slices along `dimension` (negative counts
    from the end: adjusted_dimension = dimension + rank) of all operands are sorted together
    as tuples; the comparator gets 2N scalars, p[2k] / p[2k+1] = operand k at the two
    positions being compared, and says whether the first sorts before the second. Without a
    comparator: ascending by the first operand in the total order of `total_order_keys`
    (floats: -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN), the others permuted alongside.
    The sort is always stable (a valid result of an unstable sort too, for a strict weak
    order); `is_stable` is accepted and ignored. Returns a list of N arrays."""
    operands = [np.asarray(o) for o in operands]
    rank = operands[0].ndim
    d = _int(dimension)
    d = d + rank if d < 0 else d
    moved = [np.moveaxis(o, d, -1) for o in operands]
    outs = [np.empty_like(m) for m in moved]
    n = moved[0].shape[-1]
    for row in np.ndindex(*moved[0].shape[:-1]):
        rows = [m[row] for m in moved]
        if comparator is None:
            keys = total_order_keys(rows[0])
            order = sorted(range(n), key=keys.__getitem__)
        else:
            def args(i, j):
                return [v for r in rows for v in (r[i], r[j])]

            def cmp(i, j):
                if bool(comparator(*args(i, j))):
                    return -1
                return 1 if bool(comparator(*args(j, i))) else 0

            order = sorted(range(n), key=functools.cmp_to_key(cmp))
        for out, r in zip(outs, rows):
            out[row] = r[np.asarray(order, dtype=np.intp)]
    return [np.ascontiguousarray(np.moveaxis(o, -1, d)) for o in outs]


def top_k(x, k, largest=True):
    """TopK (XLA "TopK"): along the last dimension, the k largest (largest=True) or smallest
    entries, values[..., j] = the j-th largest / smallest, indices[..., j] its position (int32);
    "如果某行中的两个元素相等,则编号较小的元素会显示在前面" (equal elements: the lower
    index first). Floats are ordered by the total order of `total_order_keys` (+NaN largest,
    -NaN smallest). Returns (values, indices)."""
    x = np.asarray(x)
    k = _int(k)
    n = x.shape[-1]
    shape = x.shape[:-1] + (k,)
    values, indices = np.empty(shape, dtype=x.dtype), np.empty(shape, dtype=np.int32)
    for row in np.ndindex(*x.shape[:-1]):
        keys = total_order_keys(x[row])
        if largest:
            order = sorted(range(n), key=lambda i: (keys[i], -i), reverse=True)[:k]
        else:
            order = sorted(range(n), key=lambda i: (keys[i], i))[:k]
        values[row] = x[row][np.asarray(order, dtype=np.intp)]
        indices[row] = np.asarray(order, dtype=np.int32)
    return values, indices
