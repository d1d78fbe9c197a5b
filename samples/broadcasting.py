"""Every example of spec/broadcasting.md, as an @hg.function.

    hlogen emit samples/broadcasting.py            # one .mlir per function
    hlogen run samples/broadcasting.py --function matrix_plus_vector \
        --input 2x3xf32=1,2,3,4,5,6 --input 3xf32=7,8,9
"""
import hlogen as hg
from hlogen import ops


@hg.function
def matrix_plus_vector(x: hg.f32[2, 3], v: hg.f32[3]):
    """|1 2 3| + |7 8 9| with broadcast_dimensions (1): v is replicated over rows."""
    return ops.add(x, v, broadcast_dimensions=[1])


@hg.function
def matrix_plus_scalar(x: hg.f32[2, 3], s: hg.f32[()]):
    """|1 2 3; 4 5 6| + 7: scalars broadcast without broadcast_dimensions."""
    return ops.add(x, s)


@hg.function
def square_plus_vector_as_rows(x: hg.f32[3, 3], v: hg.f32[3]):
    """broadcast_dimensions (1): each vector element becomes a column."""
    return ops.add(x, v, broadcast_dimensions=[1])


@hg.function
def square_plus_vector_as_columns(x: hg.f32[3, 3], v: hg.f32[3]):
    """broadcast_dimensions (0): each vector element becomes a row."""
    return ops.add(x, v, broadcast_dimensions=[0])


@hg.function
def cuboid_plus_matrix(x: hg.f32[2, 3, 4], m: hg.f32[3, 4]):
    """A 2x3x4 cuboid and a 3x4 matrix, matched to dimensions (1, 2)."""
    return ops.add(x, m, broadcast_dimensions=[1, 2])


@hg.function
def formal_vector_dim_3(x: hg.f32[2, 3, 4, 5], t: hg.f32[5]):
    """MxNxPxQ with a vector T at dimension 3."""
    return ops.add(x, t, broadcast_dimensions=[3])


@hg.function
def formal_vector_dim_0(x: hg.f32[2, 3, 4, 5], t: hg.f32[2]):
    """MxNxPxQ with a vector T at dimension 0."""
    return ops.add(x, t, broadcast_dimensions=[0])


@hg.function
def formal_matrix_dims_0_3(x: hg.f32[2, 3, 4, 5], tv: hg.f32[2, 5]):
    """MxNxPxQ with a TxV matrix at dimensions (0, 3)."""
    return ops.add(x, tv, broadcast_dimensions=[0, 3])


@hg.function
def degenerate_2x1_and_2x3(a: hg.f32[2, 1], b: hg.f32[2, 3]):
    """(2,1) and (2,3) broadcast to (2,3)."""
    return ops.add(a, b)


@hg.function
def degenerate_1x2x5_and_7x2x5(a: hg.f32[1, 2, 5], b: hg.f32[7, 2, 5]):
    """(1,2,5) and (7,2,5) broadcast to (7,2,5)."""
    return ops.add(a, b)


@hg.function
def degenerate_7x2x5_and_7x1x5(a: hg.f32[7, 2, 5], b: hg.f32[7, 1, 5]):
    """(7,2,5) and (7,1,5) broadcast to (7,2,5)."""
    return ops.add(a, b)


@hg.function
def outer_2x1_and_1x3(a: hg.f32[2, 1], b: hg.f32[1, 3]):
    """The outer operation: (2,1) and (1,3) broadcast to (2,3)."""
    return ops.add(a, b)


@hg.function
def composition_vector_and_1x2(v: hg.f32[4], m: hg.f32[1, 2]):
    """|1 2 3 4| + [5 6] with broadcast_dimensions (0): a 4x2 result."""
    return ops.add(v, m, broadcast_dimensions=[0])


@hg.function
def composition_1x2_and_4x3x1(m: hg.f32[1, 2], c: hg.f32[4, 3, 1]):
    """A 1x2 matrix and a 4x3x1 array with broadcast_dimensions (1, 2): 4x3x2."""
    return ops.add(m, c, broadcast_dimensions=[1, 2])
