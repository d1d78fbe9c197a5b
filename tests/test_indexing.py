"""DynamicSlice, DynamicUpdateSlice, Gather, Scatter: the spec's examples as data, index
types (unsigned, negative, mixed, out of bounds) on PJRT and the interpreter against the
independent reference (tests/spec_reference.py), and every rule's error."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests import spec_reference as ref
from tests.helpers import BACKENDS, run

A = np.arange(5, dtype=np.float32)                       # the spec's 1-D "a"
B = np.arange(12, dtype=np.float32).reshape(4, 3)        # the spec's 2-D "b"
OPERAND = np.arange(16 * 11, dtype=np.float32).reshape(16, 11)  # Gather's [16,11] example

INDEX_TYPES = ["s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64"]


def build(fn, *values):
    """A computation of `fn` over one parameter per value (numpy arrays or scalars)."""
    b = hg.Builder("case")
    params = [b.parameter(hg.Shape(hg.element_type(np.asarray(v).dtype), np.shape(v)), f"p{i}")
              for i, v in enumerate(values)]
    result = fn(*params)
    return b.build(*result) if isinstance(result, tuple) else b.build(result)


def on(backend, fn, *values):
    return run(build(fn, *values), backend, *values)


# -- DynamicSlice / DynamicUpdateSlice: the spec's examples ------------------------------------------

@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_dynamic_slice_examples(backend):
    got = on(backend, lambda a, s: ops.dynamic_slice(a, [s], [2]), A, np.int32(2))
    np.testing.assert_array_equal(got, [2.0, 3.0])
    got = on(backend, lambda b, s0, s1: ops.dynamic_slice(b, [s0, s1], [2, 2]), B, np.int32(2), np.int32(1))
    np.testing.assert_array_equal(got, [[7.0, 8.0], [10.0, 11.0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_dynamic_update_slice_examples(backend):
    got = on(backend, lambda a, u, s: ops.dynamic_update_slice(a, u, [s]), A,
             np.array([5.0, 6.0], np.float32), np.int32(2))
    np.testing.assert_array_equal(got, [0.0, 1.0, 5.0, 6.0, 4.0])
    u = np.array([[12, 13], [14, 15], [16, 17]], np.float32)
    got = on(backend, lambda b, u, s0, s1: ops.dynamic_update_slice(b, u, [s0, s1]), B, u,
             np.int32(1), np.int32(1))
    np.testing.assert_array_equal(got, [[0, 1, 2], [3, 12, 13], [6, 14, 15], [9, 16, 17]])


def _index_values(name):
    """Start indices of type `name` in and out of bounds of a dimension of size 8."""
    et = hg.element_type(name)
    info = np.iinfo(np.int64) if name == "s64" else np.iinfo(np.uint64) if name == "u64" else None
    low, high = (-8, 7) if name == "s4" else (0, 15) if name == "u4" else (
        (int(info.min), int(info.max)) if info else (int(np.iinfo(et.dtype).min), int(np.iinfo(et.dtype).max)))
    candidates = {0, 3, 6, 7, high, high - 1, low, low + 1, -1, -3, 2**31, 2**31 - 1, 2**63}
    return [np.array(v).astype(et.dtype) if name not in ("s4", "u4") else np.array(v, et.dtype)
            for v in sorted(candidates) if low <= v <= high]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_dynamic_slicing_clamps_every_index_type(index_type, backend):
    """clamp(start, 0, dim - size), unsigned values read as unsigned (u32 2**31 is a large
    positive start, clamped to the end), negative ones clamped to 0."""
    x = np.arange(8, dtype=np.int32)
    update = np.array([-1, -2, -3], np.int32)
    slicer = build(lambda a, s: ops.dynamic_slice(a, [s], [3]), x, _index_values(index_type)[0])
    updater = build(lambda a, u, s: ops.dynamic_update_slice(a, u, [s]), x, update,
                    _index_values(index_type)[0])
    for start in _index_values(index_type):
        np.testing.assert_array_equal(run(slicer, backend, x, start), ref.dynamic_slice(x, [start], [3]),
                                      err_msg=f"dynamic_slice at {index_type} {start}")
        np.testing.assert_array_equal(run(updater, backend, x, update, start),
                                      ref.dynamic_update_slice(x, update, [start]),
                                      err_msg=f"dynamic_update_slice at {index_type} {start}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_index_types_and_python_ints(backend):
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    starts = [np.uint32(2**31), np.int8(-5), np.uint8(200)]
    got = on(backend, lambda a, i, j, k: ops.dynamic_slice(a, [i, j, 1], [2, 2, 2]), x, *starts)
    np.testing.assert_array_equal(got, ref.dynamic_slice(x, [starts[0], starts[1], 1], [2, 2, 2]))
    got = on(backend, lambda a, i: ops.dynamic_update_slice(a, ops.slice(a, [0, 0, 0], [1, 1, 5]),
                                                            [i, 2, np.uint64(2**64 - 1)]), x, starts[2])
    expected = x.copy()
    expected[2, 2, :] = x[0, 0, :]
    np.testing.assert_array_equal(got, expected)


# -- Gather ------------------------------------------------------------------------------------------

GATHER_EXAMPLES = {  # the spec's informal examples, as keyword arguments and indices
    "batch dynamic slice [16,11] with s64[5,2]": dict(
        indices=np.array([[0, 0], [8, 5], [3, 4], [-2, 9], [15, 10]], np.int64),
        offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1], index_vector_dim=1,
        slice_sizes=[8, 6]),
    "batch dynamic slice with [4,5,2] indices": dict(
        indices=np.arange(40, dtype=np.int64).reshape(4, 5, 2) % 13,
        offset_dims=[2, 3], collapsed_slice_dims=[], start_index_map=[0, 1], index_vector_dim=2,
        slice_sizes=[8, 6]),
    "tf.gather_nd with slice_sizes [1,11]": dict(
        indices=np.array([[[3], [0]], [[15], [99]], [[-4], [7]]], np.int32),
        offset_dims=[2], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=2,
        slice_sizes=[1, 11]),
    "implicit trailing index dimension": dict(
        indices=np.array([[1, 5], [16, -1]], np.int32),
        offset_dims=[2], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=2,
        slice_sizes=[1, 11]),
    "embedding lookup (a vector of row numbers)": dict(
        indices=np.array([2, 0, 15], np.uint32),
        offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0], index_vector_dim=1,
        slice_sizes=[1, 11]),
    "index vector dimension first": dict(
        indices=np.array([[1, 2, 30], [0, 10, 5]], np.int16),
        offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0, 1], index_vector_dim=0,
        slice_sizes=[1, 3]),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", GATHER_EXAMPLES)
def test_gather_examples(name, backend):
    kwargs = dict(GATHER_EXAMPLES[name])
    indices = kwargs.pop("indices")
    got = on(backend, lambda o, i: ops.gather(o, i, **kwargs), OPERAND, indices)
    np.testing.assert_array_equal(got, ref.gather(OPERAND, indices, **kwargs))


def test_gather_batch_dynamic_slice_by_hand():
    """[G, O0, O1] of the result is operand[X + O0, Y + O1] for (X, Y) = indices[G] (clamped)."""
    kwargs = dict(GATHER_EXAMPLES["batch dynamic slice [16,11] with s64[5,2]"])
    indices = kwargs.pop("indices")
    got = on("cpu", lambda o, i: ops.gather(o, i, **kwargs), OPERAND, indices)
    assert got.shape == (5, 8, 6)
    for g, (x, y) in enumerate(indices):
        x, y = min(max(x, 0), 16 - 8), min(max(y, 0), 11 - 6)
        np.testing.assert_array_equal(got[g], OPERAND[x:x + 8, y:y + 6])


@pytest.mark.parametrize("backend", BACKENDS)
def test_gather_with_batching_dimensions(backend):
    """operand_batching_dims / start_indices_batching_dims: batch b of the indices reads
    batch b of the operand (a per-example lookup)."""
    operand = np.arange(2 * 5 * 3, dtype=np.int32).reshape(2, 5, 3)
    indices = np.array([[4, 0, 9], [1, 1, -3]], np.int64)  # [batch, lookups]
    kwargs = dict(offset_dims=[2], collapsed_slice_dims=[1], start_index_map=[1],
                  index_vector_dim=2, slice_sizes=[1, 1, 3], operand_batching_dims=[0],
                  start_indices_batching_dims=[0])
    got = on(backend, lambda o, i: ops.gather(o, i, **kwargs), operand, indices)
    expected = np.stack([operand[b][np.clip(indices[b], 0, 4)] for b in range(2)])
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got, ref.gather(operand, indices, **kwargs))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_gather_clamps_every_index_type(index_type, backend):
    x = np.arange(8, dtype=np.float32)
    values = _index_values(index_type)
    indices = np.stack(values).reshape(-1, 1)
    kwargs = dict(offset_dims=[1], collapsed_slice_dims=[], start_index_map=[0],
                  index_vector_dim=1, slice_sizes=[3])
    got = on(backend, lambda o, i: ops.gather(o, i, **kwargs), x, indices)
    np.testing.assert_array_equal(got, ref.gather(x, indices, **kwargs))


# -- Scatter -----------------------------------------------------------------------------------------

def _add(current, update):
    return current + update


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_histogram(backend):
    """A histogram: scatter-add of ones at the bin of each value; bins out of range are skipped."""
    bins = np.array([1, 3, 3, 0, 7, 3, -1, 9, 1], np.int32)
    counts = np.zeros(8, np.int32)
    kwargs = dict(update_window_dims=[], inserted_window_dims=[0],
                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    got = on(backend, lambda c, i: ops.scatter(c, i, ops.broadcast(ops.reshape(ops.slice(
        ops.add(c, 1), [0], [1]), []), [9]), _add, **kwargs), counts, bins)
    np.testing.assert_array_equal(got, [1, 2, 0, 3, 0, 0, 0, 1])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("index_type", INDEX_TYPES)
def test_scatter_skips_windows_that_do_not_fit(index_type, backend):
    """A window partly out of bounds is skipped whole (XLA), on every backend."""
    x = np.zeros(8, np.float32)
    values = _index_values(index_type)
    indices = np.stack(values).reshape(-1, 1)
    updates = np.arange(1, 1 + 2 * len(values), dtype=np.float32).reshape(-1, 2)
    kwargs = dict(update_window_dims=[1], inserted_window_dims=[],
                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    got = on(backend, lambda o, i, u: ops.scatter(o, i, u, _add, **kwargs), x, indices, updates)
    np.testing.assert_array_equal(got, ref.scatter([x], indices, [updates], lambda a, b: a + b,
                                                   **kwargs)[0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_two_operands_of_different_types(backend):
    """N = 2: the update computation gets (current0, current1, update0, update1)."""
    values = np.array([1.0, 5.0, 2.0, 0.5], np.float32)
    indices = np.array([[0], [2], [0], [3]], np.int32)
    kwargs = dict(update_window_dims=[], inserted_window_dims=[0],
                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)

    def keep_max(v, w, uv, uw):  # max of the values, with the position it came from
        take = ops.gt(uv, v)
        return ops.select(take, uv, v), ops.select(take, uw, w)

    got = on(backend, lambda v, w, i, uv, uw: ops.scatter([v, w], i, [uv, uw], keep_max, **kwargs),
             np.full(4, -np.inf, np.float32), np.full(4, -1, np.int32), indices, values,
             np.arange(4, dtype=np.int32))
    expected = ref.scatter([np.full(4, -np.inf, np.float32), np.full(4, -1, np.int32)], indices,
                           [values, np.arange(4, dtype=np.int32)],
                           lambda v, w, uv, uw: (uv, uw) if uv > v else (v, w), **kwargs)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    np.testing.assert_array_equal(got[1], [2, -1, 1, 3])
    assert isinstance(got, tuple) and got[1].dtype == np.int32


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_with_batching_dimensions_and_a_computation(backend):
    replace = hg.Builder("replace")
    replace.parameter(hg.f32[()], "old")
    replace = replace.build(replace.parameter(hg.f32[()], "new"))
    operand = np.zeros((2, 4, 3), np.float32)
    indices = np.array([[3, 0], [1, 9]], np.int32)
    updates = np.arange(12, dtype=np.float32).reshape(2, 2, 3) + 1
    kwargs = dict(update_window_dims=[2], inserted_window_dims=[1], input_batching_dims=[0],
                  scatter_indices_batching_dims=[0], scatter_dims_to_operand_dims=[1],
                  index_vector_dim=2)
    got = on(backend, lambda o, i, u: ops.scatter(o, i, u, replace, unique_indices=True, **kwargs),
             operand, indices, updates)
    expected = ref.scatter([operand], indices, [updates], lambda old, new: new, **kwargs)[0]
    np.testing.assert_array_equal(got, expected)
    assert got[0, 3].tolist() == [1, 2, 3] and got[1, 1].tolist() == [7, 8, 9] and got.sum() == 45


# -- errors ------------------------------------------------------------------------------------------

def _gather_call(**changes):
    kwargs = dict(offset_dims=[1, 2], collapsed_slice_dims=[], start_index_map=[0, 1],
                  index_vector_dim=1, slice_sizes=[8, 6])
    kwargs.update(changes)
    b = hg.Builder("e")
    return lambda: ops.gather(b.parameter(hg.f32[16, 11]), b.parameter(hg.s64[5, 2]), **kwargs)


GATHER_ERRORS = [
    (dict(index_vector_dim=3), r"index_vector_dim must be in \[0, 2\]"),
    (dict(start_index_map=[0]), "one entry per component of an index vector"),
    (dict(offset_dims=[2, 1]), "offset_dims must be sorted"),
    (dict(offset_dims=[1, 1]), "must not repeat"),
    (dict(offset_dims=[1, 3]), r"offset_dims must be in \[0, 3\)"),
    (dict(offset_dims=[1], collapsed_slice_dims=[0], slice_sizes=[8, 6]),
     "dimension 0 is collapsed or batching, so its slice size must be 0 or 1"),
    (dict(offset_dims=[1], collapsed_slice_dims=[2]), r"collapsed_slice_dims must be in \[0, 2\)"),
    (dict(start_index_map=[0, 0]), "start_index_map must not repeat"),
    (dict(start_index_map=[0, 2]), r"start_index_map must be in \[0, 2\)"),
    (dict(slice_sizes=[8]), "one entry per operand dimension"),
    (dict(slice_sizes=[17, 6]), "slices 17 elements of 16"),
    (dict(slice_sizes=[-1, 6]), "non-negative"),
    (dict(offset_dims=[1, 2, 3]), "the operand's rank"),
    (dict(start_indices_batching_dims=[0]), "same length"),
    (dict(index_vector_dim=1.0), "must be an integer"),
    (dict(offset_dims="12"), "sequence of integers"),
    (dict(indices_are_sorted="yes"), "indices_are_sorted must be True or False"),
]


@pytest.mark.parametrize("changes,message", GATHER_ERRORS, ids=[m for _, m in GATHER_ERRORS])
def test_gather_errors_name_the_rule(changes, message):
    with pytest.raises(hg.ShapeError, match=message) as info:
        _gather_call(**changes)()
    assert str(info.value).startswith("gather: operand f32[16,11], indices s64[5,2]") or \
        "gather:" in str(info.value)


def test_gather_batching_dimension_rules():
    b = hg.Builder("e")
    o, i = b.parameter(hg.f32[2, 5, 3]), b.parameter(hg.s32[3, 4, 1])
    kwargs = dict(offset_dims=[2], collapsed_slice_dims=[1], start_index_map=[1], index_vector_dim=2,
                  slice_sizes=[1, 1, 3], operand_batching_dims=[0], start_indices_batching_dims=[0])
    with pytest.raises(hg.ShapeError, match=r"batching dimension 0 of the operand \(size 2\) and 0 "
                                            r"of the indices \(size 3\)"):
        ops.gather(o, i, **kwargs)
    with pytest.raises(hg.ShapeError, match="must not be one of start_indices_batching_dims"):
        ops.gather(o, i, **{**kwargs, "start_indices_batching_dims": [2]})
    with pytest.raises(hg.ShapeError, match="must not share a dimension"):
        ops.gather(o, i, **{**kwargs, "collapsed_slice_dims": [0, 1], "offset_dims": [2]})
    with pytest.raises(hg.ShapeError, match="start_index_map must not name a dimension of operand_batching_dims"):
        ops.gather(o, i, **{**kwargs, "start_index_map": [0]})


def test_gather_and_scatter_need_integer_indices():
    b = hg.Builder("e")
    o, i = b.parameter(hg.f32[4]), b.parameter(hg.f32[2, 1])
    with pytest.raises(hg.ShapeError, match="start_indices has element type f32"):
        ops.gather(o, i, offset_dims=[], collapsed_slice_dims=[0], start_index_map=[0],
                   index_vector_dim=1, slice_sizes=[1])
    with pytest.raises(hg.ShapeError, match="scatter_indices has element type f32"):
        ops.scatter(o, i, b.parameter(hg.f32[2]), _add, update_window_dims=[],
                    inserted_window_dims=[0], scatter_dims_to_operand_dims=[0], index_vector_dim=1)


def _scatter_call(updates=hg.f32[5, 2], computation=_add, operands=None, **changes):
    kwargs = dict(update_window_dims=[1], inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                  index_vector_dim=1)
    kwargs.update(changes)
    b = hg.Builder("e")
    o = b.parameter(hg.f32[8, 2])
    return lambda: ops.scatter(o if operands is None else operands(b, o), b.parameter(hg.s32[5, 1]),
                               b.parameter(updates), computation, **kwargs)


SCATTER_ERRORS = [
    (dict(updates=hg.f32[5, 3]), "the update window has size 3 in operand dimension 1"),
    (dict(updates=hg.f32[4, 2]), r"must be the sizes of the indices' dimensions other than index_vector_dim \(\[5\]\)"),
    (dict(updates=hg.f32[5]), "must have rank 2"),
    (dict(updates=hg.s32[5, 2]), "must have the element type of operand 0"),
    (dict(inserted_window_dims=[]), "the operand's rank"),
    (dict(scatter_dims_to_operand_dims=[0, 1]), "one entry per component"),
    (dict(update_window_dims=[2]), r"update_window_dims must be in \[0, 2\)"),
    (dict(computation=lambda a: a), "called with 2 parameters"),
    (dict(computation=lambda a, b: ops.lt(a, b)), r"result 0 of the update_computation must be f32\[\]"),
    (dict(computation=lambda a, b: (a, b)), r"must return 1 value\(s\)"),
    (dict(computation="add"), "must be a Python callable or an hg.Computation"),
    (dict(operands=lambda b, o: [o, o]), "2 operands need as many updates, got 1"),
    (dict(operands=lambda b, o: []), "non-empty list"),
]


@pytest.mark.parametrize("changes,message", SCATTER_ERRORS, ids=[m for _, m in SCATTER_ERRORS])
def test_scatter_errors_name_the_rule(changes, message):
    with pytest.raises(hg.ShapeError, match=message):
        _scatter_call(**changes)()


DYNAMIC_ERRORS = [
    (lambda x, i: ops.dynamic_slice(x, [i], [2]), "needs one size per dimension|one per dimension"),
    (lambda x, i: ops.dynamic_slice(x, [i, i], [5, 1]), "slices 5 elements"),
    (lambda x, i: ops.dynamic_slice(x, [i, i], [-1, 1]), "non-negative"),
    (lambda x, i: ops.dynamic_slice(x, i, [1, 1]), "must be a list of integer scalar Ops"),
    (lambda x, i: ops.dynamic_slice(x, [i, 1.5], [1, 1]), r"start_indices\[1\] must be an integer"),
    (lambda x, i: ops.dynamic_slice(x, [i, ops.convert_element_type(i, hg.f32)], [1, 1]),
     r"start_indices\[1\] has element type f32"),
    (lambda x, i: ops.dynamic_slice(x, [i, ops.broadcast(i, [2])], [1, 1]), "must be a scalar"),
    (lambda x, i: ops.dynamic_update_slice(x, ops.broadcast(x, [2]), [i, i]), "fit inside it"),
    (lambda x, i: ops.dynamic_update_slice(x, ops.convert_element_type(x, hg.f64), [i, i]),
     "update must have the operand's element type"),
]


@pytest.mark.parametrize("call,message", DYNAMIC_ERRORS, ids=[m for _, m in DYNAMIC_ERRORS])
def test_dynamic_slicing_errors(call, message):
    b = hg.Builder("e")
    with pytest.raises(hg.ShapeError, match=message):
        call(b.parameter(hg.f32[4, 3]), b.parameter(hg.s32[()]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_with_index_vectors_of_no_components(backend):
    """Every window starts at 0 (XLA CPU would skip the updates: the indices are empty)."""
    operand = np.zeros((1, 1), np.int8)
    indices = np.zeros((0, 2), np.int8)  # two index vectors of no components
    updates = np.array([1, 0], np.int8)
    kwargs = dict(update_window_dims=[], inserted_window_dims=[0, 1],
                  scatter_dims_to_operand_dims=[], index_vector_dim=0)
    got = on(backend, lambda o, i, u: ops.scatter(o, i, u, ops.max, **kwargs), operand, indices, updates)
    np.testing.assert_array_equal(got, [[1]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_scatter_of_floats_of_different_widths(backend):
    """The interpreter runs it; XLA's HLO verifier refuses mixed float precision in a
    scatter, and hlogen says so (no wrong number)."""
    a, b = np.zeros(3, np.float16), np.zeros(3, np.float32)
    indices = np.array([[2], [0]], np.int32)
    ua, ub = np.array([1, 2], np.float16), np.array([3, 4], np.float32)
    kwargs = dict(update_window_dims=[], inserted_window_dims=[0],
                  scatter_dims_to_operand_dims=[0], index_vector_dim=1)
    comp = build(lambda a, b, i, ua, ub: ops.scatter([a, b], i, [ua, ub],
                                                     lambda x, y, u, v: (u, v), **kwargs),
                 a, b, indices, ua, ub)
    if backend == "cpu":
        with pytest.raises(hg.ExecutionError, match="mixed precision"):
            run(comp, backend, a, b, indices, ua, ub)
        return
    got = run(comp, backend, a, b, indices, ua, ub)
    np.testing.assert_array_equal(got[0], [2, 0, 1])
    np.testing.assert_array_equal(got[1], [4, 0, 3])
