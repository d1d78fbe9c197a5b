"""Independent numpy references for XLA's ops with computations, written from the specs alone.

Sources: the XLA operation semantics (spec/operation-semantics.zh.md: Reduce, ReduceWindow,
SelectAndScatter, Map) and the StableHLO specification (openxla/stablehlo docs/spec.md:
reduce, reduce_window, select_and_scatter, map), whose formulas are followed element by
element with plain Python loops (no numpy reduction shortcuts).

Conventions:
  * A computation is a Python function of numpy scalars. Every value it returns is coerced
    to the element type of the operand it belongs to (an XLA computation of type
    T, ..., T -> T cannot return anything else), so `lambda a, b: a + b` on int8 wraps and a
    Python float returned for a float16 operand is rounded to float16.
  * Variadic computations (Reduce, ReduceWindow) take the N running accumulators first, then
    the N input values: XLA "运算数会按以下顺序提供给计算: 第一个运算元的运行减值 ... 第 N 个
    运算数的运行减值, 第一个操作数的输入值 ... 第 N 个运算数的输入值"; StableHLO
    `exec(node) = body(exec(node.left), exec(node.right))`, whose left operand is the earlier
    part of the in-order traversal. With N == 1 a computation may return a scalar or a
    1-tuple; with N > 1 it returns a tuple / list of N values.
  * Fixed evaluation order: every reduction is the left fold that the XLA variadic example
    spells out (f_0 = f(I, V_0), f_1 = f(f_0, V_1), ...): start from the init value, then
    the reduced elements in row-major (ascending lexicographic index) order, one computation
    call per element. Both specs leave the order (and, in StableHLO, how many times the init
    value enters) implementation-defined, so results are only comparable with XLA's where the
    computation is associative and commutative (or exact) and the init value is its identity.
  * Init values are converted to the operand's element type (both specs require them equal).
  * Results are fresh arrays. Nothing is validated beyond what a function needs.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

__all__ = ["reduce", "reduce_window", "select_and_scatter", "map", "padding_for"]


# -- helpers ------------------------------------------------------------------------------

def _ints(vs) -> list[int]:
    return [int(v) for v in (np.asarray(vs).reshape(-1).tolist() if isinstance(vs, np.ndarray) else vs)]


def _scalar(value, dtype):
    """`value` as a numpy scalar of `dtype` (how a T-typed computation result is stored)."""
    return np.asarray(value).astype(dtype).reshape(())[()]


def _results(ret, n: int) -> list:
    """A computation's return value as a list of n values."""
    if n == 1 and not isinstance(ret, (tuple, list)):
        return [ret]
    ret = list(ret)
    if len(ret) != n:
        raise ValueError(f"computation returned {len(ret)} values, expected {n}")
    return ret


def _fold(computation, accs: list, values: list, dtypes: list) -> list:
    """One step of the variadic fold: computation(acc_0..acc_{N-1}, val_0..val_{N-1})."""
    ret = _results(computation(*accs, *values), len(accs))
    return [_scalar(r, dt) for r, dt in zip(ret, dtypes)]


# -- Reduce --------------------------------------------------------------------------------

def reduce(operands: Sequence, init_values: Sequence, computation: Callable, dimensions) -> list:
    """Reduce (XLA "Reduce"; StableHLO `reduce`).

    results...[j0, ..., jR-1] = fold over input_slices = inputs...[j0, ..., :, ..., jR-1]
    (`:` at `dimensions`, an unordered set): acc = init_values; for every index of the slice in
    row-major order, acc = computation(*acc, *values_at_index). The result keeps the
    non-reduced dimensions in their original order (XLA: "输入中其余维度之间的相对顺序会保留在
    输出中"). Reducing no dimension applies computation(init, x) once per element; reducing an
    empty dimension gives the init values. Returns a list of N arrays (0-d when every
    dimension is reduced), each of its operand's dtype.
    """
    ops = [np.asarray(o) for o in operands]
    dtypes = [o.dtype for o in ops]
    inits = [_scalar(v, dt) for v, dt in zip(init_values, dtypes)]
    shape = ops[0].shape
    dims = sorted(set(_ints(dimensions)))
    kept = [d for d in range(len(shape)) if d not in dims]
    result_shape = tuple(shape[d] for d in kept)
    reduced_shape = tuple(shape[d] for d in dims)
    outs = [np.empty(result_shape, dtype=dt) for dt in dtypes]
    for ri in np.ndindex(*result_shape):
        accs = list(inits)
        for di in np.ndindex(*reduced_shape):
            full = [0] * len(shape)
            for d, i in zip(kept, ri):
                full[d] = i
            for d, i in zip(dims, di):
                full[d] = i
            full = tuple(full)
            accs = _fold(computation, accs, [o[full] for o in ops], dtypes)
        for out, acc in zip(outs, accs):
            out[ri] = acc
    return outs


# -- padding -------------------------------------------------------------------------------

def _dilated(n: int, d: int) -> int:
    """Extent of a dimension of size n with dilation d: (n - 1) * d + 1, 0 when n == 0
    (StableHLO reduce_window (C15))."""
    return 0 if n == 0 else (n - 1) * d + 1


def padding_for(padding, input_dims, window_dimensions, window_strides,
                base_dilations=None, window_dilations=None) -> list[tuple[int, int]]:
    """The explicit (low, high) padding per dimension for `padding`:

      * "VALID": (0, 0) everywhere.
      * "SAME": XLA's MakePadding (xla/client/padding.cc), applied to the dilated base and the
        dilated window:
            base   = (input_dim - 1) * base_dilation + 1   (0 for an empty dimension)
            window = (window_dim - 1) * window_dilation + 1
            out    = ceil(base / stride)
            total  = max((out - 1) * stride + window - base, 0)
            low, high = floor(total / 2), ceil(total / 2)   -- the odd element goes high
        so with stride 1 the output has the (dilated) base's size, as "kSame ... 如果步长为 1,
        则进行填充以使输出形状与输入相同" asks. Without dilations this is exactly MakePadding.
        (jax.lax.reduce_window uses the dilated window but the UNdilated input size; the two
        differ only when a base dilation > 1 meets a stride > 1.)
      * a sequence of (low, high) pairs (or an [rank, 2] array): returned as ints; negative
        values are allowed (StableHLO pads with `pad`, which removes elements for them).
    """
    rank = len(input_dims)
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            return [(0, 0)] * rank
        if kind != "SAME":
            raise ValueError(f"unknown padding {padding!r}")
        strides = [1] * rank if window_strides is None else _ints(window_strides)
        bd = [1] * rank if base_dilations is None else _ints(base_dilations)
        wd = [1] * rank if window_dilations is None else _ints(window_dilations)
        out = []
        for n, w, s, b, d in zip(_ints(input_dims), _ints(window_dimensions), strides, bd, wd):
            base, window = _dilated(n, b), _dilated(w, d)
            o = -(-base // s)
            total = max((o - 1) * s + window - base, 0)
            out.append((total // 2, -(-total // 2)))
        return out
    pairs = np.asarray(padding).reshape(-1, 2).tolist() if isinstance(padding, np.ndarray) else padding
    return [(int(lo), int(hi)) for lo, hi in pairs]


def _window_geometry(shape, window_dimensions, window_strides, padding, base_dilations,
                     window_dilations):
    rank = len(shape)
    wdims = _ints(window_dimensions)
    strides = [1] * rank if window_strides is None else _ints(window_strides)
    bd = [1] * rank if base_dilations is None else _ints(base_dilations)
    wd = [1] * rank if window_dilations is None else _ints(window_dilations)
    pads = padding_for(padding, shape, wdims, strides, bd, wd)
    num_windows = []
    for n, w, s, b, d, (lo, hi) in zip(shape, wdims, strides, bd, wd, pads):
        padded = lo + _dilated(n, b) + hi
        window = _dilated(w, d)
        num_windows.append(0 if padded <= 0 or window > padded else (padded - window) // s + 1)
    return wdims, strides, bd, wd, pads, tuple(num_windows)


def _operand_index(result_index, window_index, strides, wd, bd, pads, shape):
    """The operand index a window element reads, or None for an edge-padding or base-dilation
    hole element. Padded position p = result_index * stride + window_index * window_dilation
    (StableHLO: window_start = result_index * window_strides, windows = slice(padded_inputs,
    window_start, window_end, window_dilations)); it is dilated-base position q = p - low, an
    operand element iff 0 <= q < dilated size and q % base_dilation == 0 (`pad` with interior
    padding base_dilations - 1 puts operand_index * base_dilation at low + that)."""
    idx = []
    for r, k, s, d, b, (lo, _), n in zip(result_index, window_index, strides, wd, bd, pads, shape):
        q = r * s + k * d - lo
        if q < 0 or q % b or q // b >= n:
            return None
        idx.append(q // b)
    return tuple(idx)


# -- ReduceWindow --------------------------------------------------------------------------

def reduce_window(operands: Sequence, init_values: Sequence, computation: Callable,
                  window_dimensions, window_strides=None, padding="VALID", base_dilations=None,
                  window_dilations=None) -> list:
    """ReduceWindow (XLA "ReduceWindow"; StableHLO `reduce_window`).

    results...[result_index] = reduce(windows, init_values, all axes, computation) where
    (StableHLO): padded_inputs = pad(inputs, init_values, padding low, padding high,
    interior = base_dilations - 1); window_start = result_index * window_strides;
    windows = slice(padded_inputs, window_start, window_start + (window_dimensions - 1) *
    window_dilations + 1, window_dilations). So edge padding AND base-dilation holes take the
    init value (XLA: kSame pads "在两侧添加初始元素"), and each window is folded, row-major
    over window_dimensions, from the init value: acc = init; acc = computation(*acc, *elem)
    for each of its prod(window_dimensions) elements (padding elements included, as the init
    value). Output shape: num_windows of StableHLO (C15). `padding`: "VALID", "SAME" or
    (low, high) pairs, see padding_for. Strides and dilations default to 1.
    """
    ops = [np.asarray(o) for o in operands]
    dtypes = [o.dtype for o in ops]
    inits = [_scalar(v, dt) for v, dt in zip(init_values, dtypes)]
    shape = ops[0].shape
    wdims, strides, bd, wd, pads, num_windows = _window_geometry(
        shape, window_dimensions, window_strides, padding, base_dilations, window_dilations)
    outs = [np.empty(num_windows, dtype=dt) for dt in dtypes]
    for ri in np.ndindex(*num_windows):
        accs = list(inits)
        for wi in np.ndindex(*wdims):
            oi = _operand_index(ri, wi, strides, wd, bd, pads, shape)
            values = list(inits) if oi is None else [o[oi] for o in ops]
            accs = _fold(computation, accs, values, dtypes)
        for out, acc in zip(outs, accs):
            out[ri] = acc
    return outs


# -- SelectAndScatter ----------------------------------------------------------------------

def select_and_scatter(operand, select: Callable, window_dimensions, window_strides, padding,
                       source, init_value, scatter: Callable):
    """SelectAndScatter (XLA "SelectAndScatter"; StableHLO `select_and_scatter`).

    Windows as in reduce_window with base and window dilations 1 (`padding`: "VALID", "SAME"
    or (low, high) pairs); shape(source) must be their number (StableHLO (C2)).

    Selection, per window (source index): the window's operand elements are visited in
    row-major window order (= ascending lexicographic operand index); the first is the
    selection, and each next element `b` replaces the current selection `a` exactly when
    select(a, b) is False. That is XLA's "在调用该函数时,第一个参数的索引矢量在字典顺序上小于第二个
    参数的索引矢量。如果选择第一个参数,select 函数会返回 true;如果选择第二个参数,则会返回 false"
    and StableHLO's reduce_window_without_init with body `select(arg0, arg1) ? arg0 : arg1`.
    Padding elements are never candidates: StableHLO's reduce "without init" has no value for
    them, so only operand elements enter the schedule. A window with no operand element is
    unspecified (StableHLO #731); here its source value is dropped.

    Scatter: the result starts as init_value everywhere; for each source index in row-major
    order, result[sel] = scatter(result[sel], source[source_index]) -- the current output
    value first, the source value second (XLA: "1. 输出数组中所选索引处的当前值 2. 应用于所选
    索引的 source 中的散射值"; StableHLO: reduce([source_values], [init_value], [0], scatter),
    a fold from the init value over the source values in ascending source index).
    """
    operand, source = np.asarray(operand), np.asarray(source)
    dtype = operand.dtype
    shape = operand.shape
    wdims, strides, bd, wd, pads, num_windows = _window_geometry(
        shape, window_dimensions, window_strides, padding, None, None)
    if tuple(source.shape) != num_windows:
        raise ValueError(f"source shape {source.shape} != number of windows {num_windows}")
    result = np.full(shape, _scalar(init_value, dtype), dtype=dtype)
    for si in np.ndindex(*num_windows):
        selected = None
        for wi in np.ndindex(*wdims):
            oi = _operand_index(si, wi, strides, wd, bd, pads, shape)
            if oi is None:
                continue
            if selected is None or not bool(select(operand[selected], operand[oi])):
                selected = oi
        if selected is not None:
            result[selected] = _scalar(scatter(result[selected], source[si]), dtype)
    return result


# -- Map -----------------------------------------------------------------------------------

def map(operands: Sequence, computation: Callable, dtype=None):  # the op's name
    """Map (XLA "Map"; StableHLO `map`): result[index] = computation(inputs...[index]) for
    every index of the (common) operand shape, computation called with N numpy scalars.

    Result element type S (the computation's output type): `dtype` when given; otherwise the
    dtype of the first value returned when it is a numpy scalar / array, bool for a Python
    bool, and operands[0]'s dtype for a Python int / float / complex (or an empty operand).
    XLA's extra M static parameters ("Map(op1, op2, op3, computation, par1)") are what a
    closure over them gives.
    """
    ops = [np.asarray(o) for o in operands]
    shape = ops[0].shape
    values = {}
    for i in np.ndindex(*shape):
        values[i] = computation(*(o[i] for o in ops))
    if dtype is None:
        first = next(iter(values.values()), None)
        if isinstance(first, (np.generic, np.ndarray)):
            dtype = np.asarray(first).dtype
        elif isinstance(first, bool):
            dtype = np.dtype(np.bool_)
        else:
            dtype = ops[0].dtype
    out = np.empty(shape, dtype=dtype)
    for i, v in values.items():
        out[i] = _scalar(v, dtype)
    return out

