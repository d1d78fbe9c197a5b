"""Bounded dynamic dimensions (SetDimensionSize): the seed's example, and each op that
runs on a dynamic dimension against numpy on the data cut to its size, on both backends
(hlogen.dynamism)."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests.helpers import BACKENDS

V = np.arange(1, 11, dtype=np.float32)


def _seed():
    b = hg.Builder("seed")
    v, n = b.parameter(hg.f32[10], "v"), b.parameter(hg.s32[()], "n")
    d = ops.set_dimension_size(v, n, 0)
    total = ops.reduce(d, b.constant(np.float32(0)), lambda x, y: x + y, [0])
    product = ops.reduce(d, b.constant(np.float32(1)), lambda x, y: x * y, [0])
    return b.build(total, product, ops.get_dimension_size(d, 0), d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_seeds_example(backend):
    run = hg.compile(_seed(), backend=backend)
    for size, total, product in ((0, 0, 1), (5, 15, 120), (6, 21, 720), (10, 55, 3628800)):
        got = run(V, np.int32(size))
        assert [float(got[0]), float(got[1]), int(got[2])] == [total, product, size]
        np.testing.assert_array_equal(got[3], V[:size])  # the dynamic result, cut


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size", [11, -1])
def test_sizes_past_the_bound_are_refused(backend, size):
    with pytest.raises(hg.ExecutionError, match=rf"given size {size}, outside \[0, 10\]"):
        hg.compile(_seed(), backend=backend)(V, np.int32(size))


def test_a_constant_size_past_the_bound_is_a_shape_error():
    b = hg.Builder("c")
    with pytest.raises(hg.ShapeError, match=r"size 11 of dimension 0 of f32\[10\] is outside"):
        ops.set_dimension_size(b.parameter(hg.f32[10]), b.constant(np.int32(11)), 0)


X = np.arange(1, 25, dtype=np.float32).reshape(6, 4) / 7
Y = np.arange(1, 21, dtype=np.float32).reshape(4, 5) / 3
W = np.arange(1, 19, dtype=np.float32).reshape(6, 3) / 5


def _dot(lhs, rhs, lc, rc):
    return ops.dot_general(lhs, rhs, {"lhs_contracting_dimensions": (lc,),
                                      "rhs_contracting_dimensions": (rc,)})


# (name, fn of (x dynamic on dim 0 or 1, the other operands), numpy of the cut x)
CASES = {
    "elementwise": (0, lambda x: ops.mul(ops.add(x, x), ops.exp(x)), lambda x: (x + x) * np.exp(x)),
    "convert": (1, lambda x: ops.convert_element_type(x, hg.s32), lambda x: x.astype(np.int32)),
    "broadcast_in_dim": (0, lambda x: ops.broadcast_in_dim(x, [2, 6, 4], [1, 2]),
                         lambda x: np.broadcast_to(x, (2,) + x.shape)),
    "reshape": (0, lambda x: ops.reshape(x, [6, 2, 2]), lambda x: x.reshape(len(x), 2, 2)),
    "transpose": (0, lambda x: ops.transpose(x, [1, 0]), lambda x: x.T),
    "slice": (0, lambda x: ops.slice(x, [1, 0], [5, 4], [2, 1]), lambda x: x[1:5:2]),
    "concatenate": (0, lambda x: ops.concatenate([x, x * 2, x], 0),
                    lambda x: np.concatenate([x, x * 2, x])),
    "concatenate_other_dim": (0, lambda x: ops.concatenate([x, x], 1),
                              lambda x: np.concatenate([x, x], 1)),
    "reduce_sum": (0, lambda x: ops.reduce(x, x.builder.constant(np.float32(0)),
                                           lambda a, b: a + b, [0]), lambda x: x.sum(0)),
    "reduce_max_kept": (1, lambda x: ops.reduce(x, x.builder.constant(np.float32(-np.inf)),
                                                ops.max, [0]), lambda x: x.max(0)),
    "dot_contracting": (1, lambda x: _dot(x, x.builder.constant(Y), 1, 0), lambda x: x @ Y[:x.shape[1]]),
    "dot_free": (0, lambda x: _dot(x, x.builder.constant(Y), 1, 0), lambda x: x @ Y),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_each_op_on_a_dynamic_dimension(backend, name):
    dimension, fn, reference = CASES[name]
    b = hg.Builder(name)
    x, n = b.parameter(hg.f32[6, 4], "x"), b.parameter(hg.s32[()], "n")
    comp = b.build(fn(ops.set_dimension_size(x, n, dimension)))
    run = hg.compile(comp, backend=backend)
    for size in range(X.shape[dimension] + 1):
        cut = X[:size] if dimension == 0 else X[:, :size]
        want = reference(cut)
        got = run(X, np.int32(size))
        assert got.shape == want.shape, (size, got.shape, want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"size {size}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_op_without_a_rule_is_refused_naming_it(backend):
    b = hg.Builder("sort")
    x, n = b.parameter(hg.f32[6]), b.parameter(hg.s32[()])
    comp = b.build(ops.sort(ops.set_dimension_size(x, n, 0)))
    with pytest.raises(hg.UnsupportedError, match="stablehlo.sort.*on a dynamic dimension"):
        hg.compile(comp, backend=backend)(X[:, 0], np.int32(3))
