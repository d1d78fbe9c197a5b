"""The one mechanism that traces a computation (a Python callable or an hg.Computation)
into a region: signatures, results, errors that point at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests.helpers import BACKENDS, run
from tests.test_indexing import build


def test_an_error_inside_the_callable_names_the_op_and_the_users_line():
    def comparator(a, b):
        return ops.add(a, ops.convert_element_type(b, hg.s32))  # the mistake, on this line

    line = comparator.__code__.co_firstlineno + 1
    x = hg.Builder("e").parameter(hg.f32[3])
    with pytest.raises(hg.ShapeError) as info:
        ops.sort(x, comparator)
    message = str(info.value)
    assert message.startswith(f"sort: in the comparator ({__file__}:{line}): add:"), message


def test_python_values_returned_become_constants_of_the_required_type():
    x = np.array([3.0, 1.0, 2.0], np.float32)
    comp = build(lambda a: ops.scatter(a, ops.reshape(ops.get_dimension_size(a, 0), [1, 1]),
                                       ops.reshape(ops.slice(a, [0], [1]), [1]),
                                       lambda old, new: 7.5, update_window_dims=[],
                                       inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                                       index_vector_dim=1), x)
    for backend in BACKENDS:  # index 3 is out of bounds: skipped
        np.testing.assert_array_equal(run(comp, backend, x), x)
    comp = build(lambda a: ops.scatter(a, ops.reshape(ops.sub(ops.get_dimension_size(a, 0), 2),
                                                      [1, 1]),
                                       ops.reshape(ops.slice(a, [0], [1]), [1]),
                                       lambda old, new: 7.5, update_window_dims=[],
                                       inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                                       index_vector_dim=1), x)
    for backend in BACKENDS:
        np.testing.assert_array_equal(run(comp, backend, x), [3.0, 7.5, 2.0])


def test_a_computation_that_calls_other_functions_is_inlined_with_them():
    comparator = hg.load("""
      func.func private @key(%a: tensor<f32>) -> tensor<f32> {
        %0 = stablehlo.abs %a : tensor<f32>
        return %0 : tensor<f32>
      }
      func.func @main(%a: tensor<f32>, %b: tensor<f32>) -> tensor<i1> {
        %0 = func.call @key(%a) : (tensor<f32>) -> tensor<f32>
        %1 = func.call @key(%b) : (tensor<f32>) -> tensor<f32>
        %2 = stablehlo.compare LT, %0, %1 : (tensor<f32>, tensor<f32>) -> tensor<i1>
        return %2 : tensor<i1>
      }""")
    x = np.array([-3.0, 1.0, -0.5, 2.0], np.float32)
    b = hg.Builder("by_magnitude")
    p = b.parameter(hg.f32[4])
    comp = b.build(ops.sort(p, comparator), ops.sort(p, comparator, dimension=0))  # used twice
    assert comp.as_text().count("func.func private @key") == 1
    for backend in BACKENDS:
        got = run(comp, backend, x)
        np.testing.assert_array_equal(got[0], [-0.5, 1.0, 2.0, -3.0])


def test_values_of_a_traced_computation_cannot_escape():
    escaped = []
    x = hg.Builder("e").parameter(hg.f32[3])
    ops.sort(x, lambda a, b: escaped.append(a) or ops.lt(a, b))
    with pytest.raises(hg.HlogenError, match="was already traced"):
        ops.neg(escaped[0])
    with pytest.raises(hg.ShapeError, match="different builders"):
        ops.add(x, escaped[0], broadcast_dimensions=[])


def test_a_region_builder_has_no_parameters_or_build():
    x = hg.Builder("e").parameter(hg.f32[3])

    def comparator(a, b):
        with pytest.raises(hg.HlogenError, match="gets its parameters from the op"):
            a.builder.parameter(hg.f32[()])
        with pytest.raises(hg.HlogenError, match="built by the op that takes it"):
            a.builder.build(a)
        return ops.lt(a, b)

    ops.sort(x, comparator)


def test_a_computation_with_the_wrong_number_of_results():
    b = hg.Builder("two")
    p, q = b.parameter(hg.f32[()]), b.parameter(hg.f32[()])
    two = b.build(ops.lt(p, q), ops.lt(q, p))
    x = hg.Builder("e").parameter(hg.f32[3])
    with pytest.raises(hg.ShapeError, match=r"must return 1 value\(s\) \(pred\[\]\); computation "
                                            r"'two' returns 2"):
        ops.sort(x, two)
