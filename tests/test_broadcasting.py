"""spec/broadcasting.md: every example as data, the rules as pure functions, the
sample functions run on both backends, and every invalid combination."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import hlogen as hg
from hlogen import broadcasting as B
from hlogen import ops
from tests.helpers import BACKENDS, run
from tests.references import numpy_aligned

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"

# (lhs dims, rhs dims, broadcast_dimensions, result dims): every valid example of the spec.
VALID = [
    ((2, 3), (3,), (1,), (2, 3)),
    ((2, 3), (), (), (2, 3)),
    ((3, 3), (3,), (1,), (3, 3)),
    ((3, 3), (3,), (0,), (3, 3)),
    ((2, 3, 4), (3, 4), (1, 2), (2, 3, 4)),
    ((2, 3, 4, 5), (5,), (3,), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (4,), (2,), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (3,), (1,), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (2,), (0,), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (4, 5), (2, 3), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (3, 4), (1, 2), (2, 3, 4, 5)),
    ((2, 3, 4, 5), (2, 5), (0, 3), (2, 3, 4, 5)),
    ((2, 1), (2, 3), (), (2, 3)),
    ((1, 2, 5), (7, 2, 5), (), (7, 2, 5)),
    ((7, 2, 5), (7, 1, 5), (), (7, 2, 5)),
    ((2, 1), (1, 3), (), (2, 3)),
    ((4,), (1, 2), (0,), (4, 2)),
    ((1, 2), (4, 3, 1), (1, 2), (4, 3, 2)),
    ((3,), (2, 3), (1,), (2, 3)),   # the lower-rank operand may come first
    ((), (), (), ()),
]

# (lhs dims, rhs dims, broadcast_dimensions, the rule that is broken)
INVALID = [
    ((2, 3), (3,), (0,), B.RULE_DIMS_MATCH),     # spec: "a broadcasting dimension of 0 is invalid"
    ((7, 2, 5), (7, 2, 6), (), B.RULE_DEGENERATE),  # spec: "incompatible and cannot be broadcast"
    ((2, 3), (3,), (), B.RULE_RANKS),            # spec: "Without specifying broadcasting, ... invalid"
    ((2, 3, 4, 5), (4, 3), (2, 1), B.RULE_DIMS_ORDER),  # "illegal to match V to N and T to P"
    ((2, 3, 4, 5), (3, 3), (1, 1), B.RULE_DIMS_ORDER),  # "also illegal to match V to both P and N"
    ((2, 3), (3,), (2,), B.RULE_DIMS_RANGE),
    ((2, 3), (3,), (-1,), B.RULE_DIMS_RANGE),
    ((2, 3), (3,), (0, 1), B.RULE_DIMS_SIZE),
    ((2, 3), (), (0,), B.RULE_DIMS_SIZE),
    ((2, 3), (2, 3), (1, 0), B.RULE_SAME_RANK),
    ((4,), (3, 2), (0,), B.RULE_DIMS_MATCH),
    ((4,), (3, 2), (1,), B.RULE_DIMS_MATCH),
    ((2, 3), (4, 3, 1), (1, 2), B.RULE_DIMS_MATCH),
    ((2, 3), (4, 3, 1), (0, 2), B.RULE_DIMS_MATCH),
]


def _shapes(l, r):
    return hg.Shape(hg.f32, l), hg.Shape(hg.f32, r)


@pytest.mark.parametrize("lhs,rhs,dims,result", VALID)
def test_valid_examples_give_the_spec_result_shape(lhs, rhs, dims, result):
    plan = B.binary_broadcast("add", *_shapes(lhs, rhs), dims)
    assert plan.dimensions == result
    # and the op built from them has that shape
    b = hg.Builder("shape_only")
    x, y = b.parameter(hg.Shape(hg.f32, lhs)), b.parameter(hg.Shape(hg.f32, rhs))
    assert ops.add(x, y, broadcast_dimensions=dims).shape == hg.Shape(hg.f32, result)


@pytest.mark.parametrize("lhs,rhs,dims,rule", INVALID)
def test_invalid_combinations_name_op_shapes_dims_and_rule(lhs, rhs, dims, rule):
    b = hg.Builder("invalid")
    x, y = b.parameter(hg.Shape(hg.f32, lhs)), b.parameter(hg.Shape(hg.f32, rhs))
    with pytest.raises(hg.ShapeError) as info:
        ops.mul(x, y, broadcast_dimensions=dims)
    message = str(info.value)
    assert message.startswith("mul: ")
    assert str(x.shape) in message and str(y.shape) in message
    assert f"broadcast_dimensions={list(dims)}" in message
    assert f"(rule: {rule})" in message



@pytest.mark.parametrize("dims", [["a"], 3, [1.5], [True]])
def test_broadcast_dimensions_must_be_integers(dims):
    b = hg.Builder("not_integers")
    x, y = b.parameter(hg.f32[2, 3]), b.parameter(hg.f32[3])
    with pytest.raises(hg.ShapeError, match=r"add: broadcast_dimensions must be a sequence of integers"):
        ops.add(x, y, broadcast_dimensions=dims)


def test_broadcast_dimensions_may_be_numpy_integers():
    b = hg.Builder("numpy_dims")
    x, y = b.parameter(hg.f32[2, 3]), b.parameter(hg.f32[3])
    assert ops.add(x, y, broadcast_dimensions=np.array([1])).shape == hg.f32[2, 3]
    assert ops.add(x, x, broadcast_dimensions=np.array([0, 1])).shape == hg.f32[2, 3]

def _sample_module(name):
    spec = importlib.util.spec_from_file_location(f"sample_{name}", SAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SAMPLE = _sample_module("broadcasting")
# the broadcast_dimensions each rank-changing sample uses
SAMPLE_DIMS = {"matrix_plus_vector": (1,), "square_plus_vector_as_rows": (1,),
               "square_plus_vector_as_columns": (0,), "cuboid_plus_matrix": (1, 2),
               "formal_vector_dim_3": (3,), "formal_vector_dim_0": (0,),
               "formal_matrix_dims_0_3": (0, 3), "composition_vector_and_1x2": (0,),
               "composition_1x2_and_4x3x1": (1, 2)}
SAMPLE_FUNCTIONS = {n: f for n, f in vars(SAMPLE).items() if isinstance(f, hg.Function)}


@pytest.mark.parametrize("backend", BACKENDS)
def test_spec_values(backend):
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    comp = SAMPLE.matrix_plus_vector.computation
    np.testing.assert_array_equal(run(comp, backend, x, np.array([7, 8, 9], np.float32)),
                                  [[8, 10, 12], [11, 13, 15]])
    comp = SAMPLE.matrix_plus_scalar.computation
    np.testing.assert_array_equal(run(comp, backend, x, np.float32(7)), [[8, 9, 10], [11, 12, 13]])
    square = np.zeros((3, 3), np.float32)
    v = np.array([7, 8, 9], np.float32)
    np.testing.assert_array_equal(run(SAMPLE.square_plus_vector_as_rows.computation, backend, square, v),
                                  [[7, 8, 9]] * 3)
    np.testing.assert_array_equal(run(SAMPLE.square_plus_vector_as_columns.computation, backend, square, v),
                                  [[7, 7, 7], [8, 8, 8], [9, 9, 9]])
    got = run(SAMPLE.composition_vector_and_1x2.computation, backend,
              np.array([1, 2, 3, 4], np.float32), np.array([[5, 6]], np.float32))
    np.testing.assert_array_equal(got, [[6, 7], [7, 8], [8, 9], [9, 10]])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SAMPLE_FUNCTIONS))
def test_every_sample_matches_numpy(name, backend):
    comp = SAMPLE_FUNCTIONS[name].computation
    rng = np.random.default_rng(len(name))
    args = [rng.standard_normal(s.dimensions).astype(np.float32) for s in comp.parameter_shapes]
    lhs, rhs = args
    lhs_dims, rhs_dims = numpy_aligned(lhs.shape, rhs.shape, SAMPLE_DIMS.get(name, ()))
    np.testing.assert_allclose(run(comp, backend, *args), lhs.reshape(lhs_dims) + rhs.reshape(rhs_dims),
                               rtol=1e-6)
