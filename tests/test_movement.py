"""Reshape, Collapse, Transpose, Rev, Slice, SliceInDim, Concatenate, Pad,
GetDimensionSize, SetDimensionSize: the spec's examples as data, every op on PJRT and
the interpreter against the independent reference (tests/spec_reference.py), and
every rule's error."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests import spec_reference as ref
from tests.helpers import BACKENDS, run, single_op

# The spec's 24-element array of the Collapse and Reshape examples.
V = np.array([[[10, 11, 12], [15, 16, 17]], [[20, 21, 22], [25, 26, 27]],
              [[30, 31, 32], [35, 36, 37]], [[40, 41, 42], [45, 46, 47]]], np.float32)
B = np.arange(12, dtype=np.float32).reshape(4, 3)  # the 2-D "b" of Slice and DynamicSlice


def shape_of(x):
    return hg.Shape(hg.element_type(x.dtype), x.shape)


def on(backend, fn, *arrays):
    return run(single_op(fn, *[shape_of(a) for a in arrays]), backend, *arrays)


# The spec's Collapse example labels v01 as f32[4x6] and v12 as f32[8x3]; its text (and XLA)
# say that the collapsed dimensions are replaced in place: {0,1} of [4,2,3] is [8,3].
SPEC_EXAMPLES = [  # (name, fn, inputs, expected)
    ("collapse v012", lambda v: ops.collapse(v, [0, 1, 2]), [V], V.reshape(24)),
    ("collapse v01", lambda v: ops.collapse(v, [0, 1]), [V], V.reshape(8, 3)),
    ("collapse v12", lambda v: ops.collapse(v, [1, 2]), [V], V.reshape(4, 6)),
    ("reshape v012_24", lambda v: ops.reshape(v, [24]), [V], V.reshape(24)),
    ("reshape v012_83", lambda v: ops.reshape(v, [8, 3]), [V], V.reshape(8, 3)),
    ("reshape 1x1 to scalar", lambda v: ops.reshape(v, []), [np.array([[5]], np.float32)],
     np.float32(5)),
    ("reshape scalar to 1x1", lambda v: ops.reshape(v, [1, 1]), [np.float32(5)],
     np.array([[5]], np.float32)),
    ("concat 1-D", lambda a, b, c: ops.concatenate([a, b, c], 0),
     [np.array([2, 3], np.float32), np.array([4, 5], np.float32), np.array([6, 7], np.float32)],
     np.array([2, 3, 4, 5, 6, 7], np.float32)),
    ("concat 2-D", lambda a, b: ops.concatenate([a, b], 0),
     [np.array([[1, 2], [3, 4], [5, 6]], np.float32), np.array([[7, 8]], np.float32)],
     np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.float32)),
    ("slice 1-D", lambda a: ops.slice(a, [2], [4]), [np.arange(5, dtype=np.float32)],
     np.array([2, 3], np.float32)),
    ("slice 2-D", lambda b: ops.slice(b, [2, 1], [4, 3]), [B], np.array([[7, 8], [10, 11]], np.float32)),
    ("rev", lambda v: ops.rev(v, [0, 2]), [V], V[::-1, :, ::-1]),
    ("transpose", lambda v: ops.transpose(v, [2, 0, 1]), [V], V.transpose(2, 0, 1)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,fn,inputs,expected", SPEC_EXAMPLES, ids=[e[0] for e in SPEC_EXAMPLES])
def test_spec_examples(name, fn, inputs, expected, backend):
    got = on(backend, fn, *inputs)
    assert got.dtype == expected.dtype and got.shape == np.shape(expected)
    np.testing.assert_array_equal(got, expected)


# -- every op against the reference, on both backends, over element types ------------------------

TYPES = ["pred", "s4", "s8", "u16", "s32", "u64", "f8e5m2", "bf16", "f16", "f32", "f64", "c64"]


def sample(et, dims, seed=0):
    rng = np.random.default_rng(seed)
    raw = rng.integers(-7, 8, size=dims)
    et = hg.element_type(et)
    if et.kind == "pred":
        return (raw > 0).astype(np.bool_)
    if et.kind == "unsigned":
        raw = np.abs(raw)
    if et.kind == "complex":
        return (raw + 1j * rng.integers(-3, 4, size=dims)).astype(et.dtype)
    return raw.astype(et.dtype)


CASES = [  # (name, ops fn, reference fn, operand dims)
    ("reshape", lambda x: ops.reshape(x, [3, 2, 4]), lambda x: ref.reshape(x, [3, 2, 4]), (2, 3, 4)),
    ("collapse", lambda x: ops.collapse(x, [0, 1]), lambda x: ref.collapse(x, [0, 1]), (2, 3, 4)),
    ("transpose", lambda x: ops.transpose(x, [1, 2, 0]), lambda x: ref.transpose(x, [1, 2, 0]), (2, 3, 4)),
    ("rev", lambda x: ops.rev(x, [1]), lambda x: ref.rev(x, [1]), (2, 3, 4)),
    ("slice", lambda x: ops.slice(x, [0, 1, 1], [2, 3, 4], [2, 1, 2]),
     lambda x: ref.slice(x, [0, 1, 1], [2, 3, 4], [2, 1, 2]), (2, 3, 4)),
    ("slice_in_dim", lambda x: ops.slice_in_dim(x, 1, 4, 2, 2),
     lambda x: ref.slice_in_dim(x, 1, 4, 2, 2), (2, 3, 4)),
    ("concatenate", lambda x: ops.concatenate([x, ops.rev(x, [0])], 1),
     lambda x: ref.concatenate([x, ref.rev(x, [0])], 1), (2, 3, 4)),
    ("pad", lambda x: ops.pad(x, ops.reshape(ops.slice(x, [1, 2, 3], [2, 3, 4]), []),
                              [(1, -1, 1), (-2, 2, 0), (0, 1, 2)]),
     lambda x: ref.pad(x, x[1, 2, 3], [(1, -1, 1), (-2, 2, 0), (0, 1, 2)]), (2, 3, 4)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("et", TYPES)
@pytest.mark.parametrize("name,fn,reference,dims", CASES, ids=[c[0] for c in CASES])
def test_against_reference(name, fn, reference, dims, et, backend):
    x = sample(et, dims)
    got = on(backend, fn, x)
    expected = reference(x)
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.complex128) if et == "c64" else got.astype(np.float64),
                                  expected.astype(np.complex128) if et == "c64" else
                                  expected.astype(np.float64))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("config", [
    [(0, 0, 0)], [(2, 1, 0)], [(-2, -1, 0)], [(0, 0, 3)], [(-3, -3, 2)], [(-5, 0, 1)],
    [(1, -9, 3)],
])
def test_pad_1d_configs(config, backend):
    x = np.arange(1, 5, dtype=np.int32)
    got = on(backend, lambda a: ops.pad(a, -1, config), x)
    np.testing.assert_array_equal(got, ref.pad(x, np.int32(-1), config))


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_sized_dimensions(backend):
    x = np.zeros((0, 3), np.float32)
    got = on(backend, lambda a: ops.concatenate([a, a], 0), x)
    assert got.shape == (0, 3)
    got = on(backend, lambda a: ops.pad(a, 1.0, [(1, 1, 1), (0, 0, 0)]), x)
    np.testing.assert_array_equal(got, np.ones((2, 3), np.float32))
    assert on(backend, lambda a: ops.reshape(a, [3, 0, 5]), x).shape == (3, 0, 5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_get_dimension_size(backend):
    got = on(backend, lambda a: ops.get_dimension_size(a, 1), V)
    assert got.dtype == np.int32 and got == 2


def test_set_dimension_size_runs_and_its_result_comes_back_cut():
    b = hg.Builder("dyn")
    x = b.parameter(hg.f32[8])
    n = b.parameter(hg.s32[()])
    comp = b.build(ops.set_dimension_size(x, n, 0))
    assert "stablehlo.set_dimension_size" in comp.as_text()
    for backend in BACKENDS:  # tests/test_dynamism.py has the rest
        got = hg.compile(comp, backend=backend)(np.arange(8, dtype=np.float32), np.int32(3))
        np.testing.assert_array_equal(got, [0, 1, 2])


def test_trivial_collapse_and_reshape_return_the_operand():
    b = hg.Builder("t")
    x = b.parameter(hg.f32[2, 3])
    assert ops.collapse(x, [1]) is x and ops.reshape(x, (2, 3)) is x


# -- errors: every rule, named, before MLIR sees anything -------------------------------------------

def param(shape):
    return hg.Builder("e").parameter(shape)


ERRORS = [  # (call, expected message fragment)
    (lambda x: ops.reshape(x, [5, 5]), "element count must not change"),
    (lambda x: ops.reshape(x, [-1, 24]), "non-negative"),
    (lambda x: ops.reshape(x, [2.5]), "sequence of integers"),
    (lambda x: ops.collapse(x, [0, 2]), "consecutive and in increasing order"),
    (lambda x: ops.collapse(x, [1, 0]), "consecutive and in increasing order"),
    (lambda x: ops.collapse(x, [2, 3]), "not a dimension"),
    (lambda x: ops.transpose(x, [0, 1]), "each of the 3 dimensions once"),
    (lambda x: ops.transpose(x, [0, 1, 1]), "repeats a dimension"),
    (lambda x: ops.transpose(x, [0, 1, 3]), "not a dimension"),
    (lambda x: ops.rev(x, [3]), "not a dimension"),
    (lambda x: ops.slice(x, [0, 0, 0], [4, 2, 4]), "limit <= 3"),
    (lambda x: ops.slice(x, [0, 0, 2], [4, 2, 1]), "start <= limit"),
    (lambda x: ops.slice(x, [-1, 0, 0], [4, 2, 3]), "0 <= start"),
    (lambda x: ops.slice(x, [0, 0, 0], [4, 2, 3], [1, 0, 1]), "strides must be >= 1"),
    (lambda x: ops.slice(x, [0, 0, 0], [4, 2, 3], [1, -1, 1]), "strides must be >= 1"),
    (lambda x: ops.slice(x, [0, 0], [4, 2]), "one entry per dimension"),
    (lambda x: ops.slice_in_dim(x, 0, 1, 1, 3), "dimno=3"),
    (lambda x: ops.concatenate([x, ops.reshape(x, [8, 3])], 0), "ranks must be equal"),
    (lambda x: ops.concatenate([x, ops.slice(x, [0, 0, 0], [4, 1, 3])], 0),
     "sizes must be equal except in dimension 0"),
    (lambda x: ops.concatenate([x, ops.convert_element_type(x, hg.f64)], 0), "element type"),
    (lambda x: ops.concatenate([ops.reshape(ops.slice(x, [0, 0, 0], [1, 1, 1]), [])] * 2, 0),
     "scalars cannot be concatenated"),
    (lambda x: ops.concatenate([], 0), "non-empty|at least one"),
    (lambda x: ops.concatenate([x, x], 3), "dimension=3"),
    (lambda x: ops.pad(x, 0.0, [(0, 0, -1)] * 3), "interior padding -1"),
    (lambda x: ops.pad(x, 0.0, [(0, 0, 0)] * 2), r"one \(low, high, interior\) per dimension \(3\)"),
    (lambda x: ops.pad(x, 0.0, [(-3, -2, 0), (0, 0, 0), (0, 0, 0)]), "would have size -1"),
    (lambda x: ops.pad(x, 0.0, [(0, 0), (0, 0), (0, 0)]), "edge_padding_low"),
    (lambda x: ops.pad(x, 0.0, 5), "edge_padding_low"),
    (lambda x: ops.pad(x, 0.0, [(-2**64, 2**64, 0)] * 3), "64-bit integers"),
    (lambda x: ops.pad(x, ops.convert_element_type(ops.reshape(ops.slice(x, [0, 0, 0], [1, 1, 1]), []),
                                                   hg.s32), [(0, 0, 0)] * 3), r"padding_value must be a scalar f32\[\]"),
    (lambda x: ops.pad(x, x, [(0, 0, 0)] * 3), "must be a scalar"),
    (lambda x: ops.get_dimension_size(x, 3), "dimension=3"),
    (lambda x: ops.set_dimension_size(x, 2, 0), "size must be an s32"),
]


@pytest.mark.parametrize("call,message", ERRORS, ids=[m for _, m in ERRORS])
def test_errors_name_the_rule(call, message):
    with pytest.raises(hg.ShapeError, match=message):
        call(param(hg.f32[4, 2, 3]))


def test_tuple_operand_is_refused():
    b = hg.Builder("t")
    x = b.parameter(hg.f32[2])
    t = ops.tuple([x, x])
    for call in (lambda: ops.reshape(t, [4]), lambda: ops.slice(t, [0], [1]),
                 lambda: ops.concatenate([t], 0), lambda: ops.transpose(t, [0])):
        with pytest.raises(hg.ShapeError, match="must be an array"):
            call()
