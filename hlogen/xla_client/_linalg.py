"""QR, Eigh, SVD and LU of the removed ops, by jaxlib's LAPACK kernels.

XLA built these in its client library from XLA ops (Householder QR, Jacobi
eigensolvers); jax computes them on the CPU with the LAPACK kernels jaxlib registers
with XLA (`lapack_<type><routine>_ffi`), and so does this module, through
hlogen.ops.custom_call, with the column-major layouts the kernels read and write, as jax
states them: PJRT on the CPU runs them (the reference interpreter runs only getrf, by its
rewrite; other backends refuse the targets when compiling). Where LAPACK reports a
failure (info != 0), the results are NaN, as jax makes them.
"""
from __future__ import annotations

import numpy as np

from hlogen import ops
from hlogen import types as T
from hlogen.builder import Op
from hlogen.errors import ShapeError

_PREFIX = {"f32": "s", "f64": "d", "c64": "c", "c128": "z"}
# LAPACK's names differ for complex matrices (Hermitian, unitary)
_ROUTINES = {"geqrf": ("geqrf", "geqrf"), "orgqr": ("orgqr", "ungqr"), "syevd": ("syevd", "heevd"),
             "gesdd": ("gesdd", "gesdd"), "getrf": ("getrf", "getrf")}


def _matrices(op_name: str, a) -> tuple:
    """(element type, batch dimensions, m, n) of a batch of matrices LAPACK takes."""
    if not isinstance(a, Op):
        raise ShapeError(f"{op_name}: operand must be an XlaOp, got {a!r}")
    shape = a.shape
    if not isinstance(shape, T.Shape) or shape.rank < 2 or shape.element_type.name not in _PREFIX:
        raise ShapeError(f"{op_name}: operand {shape} must be a matrix (or a batch of them) of "
                         f"f32, f64, c64 or c128, the types LAPACK computes with")
    return shape.element_type, shape.dimensions[:-2], *shape.dimensions[-2:]


def _target(routine: str, et: T.ElementType) -> str:
    return f"lapack_{_PREFIX[et.name]}{_ROUTINES[routine][et.kind == T.COMPLEX]}_ffi"


def _swap_last(rank: int) -> list:
    return [*range(rank - 2), rank - 1, rank - 2]


def _layout(shape: T.Shape, batch: tuple):
    """jax's layout for LAPACK: matrices column-major (each of a batch), the rest row-major."""
    rank = shape.rank
    return (rank - 2, rank - 1, *range(rank - 3, -1, -1)) if rank == len(batch) + 2 else None


def _call(routine: str, et: T.ElementType, operands: list, shapes: list, batch: tuple,
          **attributes) -> list:
    results = ops.custom_call(_target(routine, et), operands, T.tuple_shape(*shapes),
                              opaque={k: np.uint8(ord(v)) for k, v in attributes.items()},
                              operand_layouts=[_layout(o.shape, batch) for o in operands],
                              result_layouts=[_layout(s, batch) for s in shapes])
    return list(results)


def _nan_where_failed(x, info, batch: tuple):
    """`x` where LAPACK's info is 0, NaN in the matrices where it is not."""
    ok = ops.broadcast_in_dim(ops.eq(info, 0), x.shape.dimensions, list(range(len(batch))))
    nan = ops.broadcast(x.builder.constant(np.array(np.nan, x.shape.dtype)), x.shape.dimensions)
    return ops.select(ok, x, nan)


def _adjoint(x):
    x = ops.transpose(x, _swap_last(x.shape.rank))
    return ops.complex(ops.real(x), ops.neg(ops.imag(x))) if x.dtype.kind == T.COMPLEX else x


def _upper_triangle(x):
    dims = x.shape.dimensions
    rows = ops.iota(x.builder, T.Shape(T.s32, dims), len(dims) - 2)
    columns = ops.iota(x.builder, T.Shape(T.s32, dims), len(dims) - 1)
    zeros = ops.broadcast(x.builder.constant(np.zeros((), x.shape.dtype)), dims)
    return ops.select(ops.ge(columns, rows), x, zeros)


def qr_decomposition(a):
    """(q_and_r, taus) in LAPACK's GEQRF form."""
    et, batch, m, n = _matrices("QrDecomposition", a)
    return tuple(_call("geqrf", et, [a], [a.shape, et[(*batch, min(m, n))]], batch))


def householder_product(a, taus):
    """The first n columns of the product of the Householder reflectors a and taus hold
    (LAPACK's ORGQR / UNGQR)."""
    et, batch, m, n = _matrices("ProductOfElementaryHouseholderReflectors", a)
    k = taus.shape.dimensions[-1] if isinstance(taus.shape, T.Shape) and taus.shape.rank else -1
    if taus.shape != et[(*batch, k)] or not k <= n <= m:
        raise ShapeError(f"ProductOfElementaryHouseholderReflectors: a {a.shape} and taus "
                         f"{taus.shape}: taus must be {et.name}[{', '.join(map(str, batch + (k,)))}] "
                         f"with k <= n <= m (a is m x n)")
    (q,) = _call("orgqr", et, [a, taus], [a.shape], batch)
    return q


def qr(a, full_matrices: bool):
    """(q, r): q m x m (full_matrices) or m x min(m, n), r its match, a = q r."""
    et, batch, m, n = _matrices("QR", a)
    k = min(m, n)
    packed, taus = qr_decomposition(a)
    columns = m if full_matrices else k
    reflectors = ops.slice_in_dim(packed, 0, k, 1, len(batch) + 1)
    if columns > k:
        zero = a.builder.constant(np.zeros((), et.dtype))
        reflectors = ops.pad(reflectors, zero, [(0, 0, 0)] * (len(batch) + 1) + [(0, columns - k, 0)])
    q = householder_product(reflectors, taus)
    r = _upper_triangle(ops.slice_in_dim(packed, 0, m if full_matrices else k, 1, len(batch)))
    return q, r


def eigh(a, lower: bool):
    """(v, w): the eigenvectors (columns of v) and ascending eigenvalues of each
    Hermitian matrix, reading its lower (or upper) triangle."""
    et, batch, m, n = _matrices("Eigh", a)
    if m != n:
        raise ShapeError(f"Eigh: operand {a.shape} must be square matrices")
    v, w, info = _call("syevd", et, [a], [a.shape, et.component[(*batch, n)], T.s32[batch]],
                       batch, mode="V", uplo="L" if lower else "U")
    return _nan_where_failed(v, info, batch), _nan_where_failed(w, info, batch)


def svd(a):
    """(u, d, v): u m x m, d the min(m, n) singular values (descending), v n x n."""
    et, batch, m, n = _matrices("SVD", a)
    _, d, u, vt, info = _call("gesdd", et, [a],
                              [a.shape, et.component[(*batch, min(m, n))], et[(*batch, m, m)],
                               et[(*batch, n, n)], T.s32[batch]], batch, mode="A")
    return (_nan_where_failed(u, info, batch), _nan_where_failed(d, info, batch),
            _nan_where_failed(_adjoint(vt), info, batch))


def lu(a):
    """(lu, pivots, permutation): LAPACK's packed factors, its row swaps made 0-based, and
    the permutation the swaps make (row i of the factored matrix is row permutation[i])."""
    et, batch, m, n = _matrices("LU", a)
    k = min(m, n)
    packed, ipiv, _ = _call("getrf", et, [a], [a.shape, T.s32[(*batch, k)], T.s32[batch]], batch)
    pivots = ops.sub(ipiv, 1)
    return packed, pivots, _permutation(pivots, batch, m, k)


def _permutation(pivots, batch: tuple, m: int, k: int):
    """The permutation of m rows that the swaps (i, pivots[i]), i = 0..k-1, make in turn."""
    builder = pivots.builder
    rows = T.Shape(T.s32, (*batch, m))
    last = len(batch)

    def condition(i, permutation, swaps):
        return ops.lt(i, k)

    def body(i, permutation, swaps):
        b = i.builder
        columns = ops.iota(b, rows, last)
        start = [b.constant(np.int32(0))] * last + [i]
        p = ops.reshape(ops.dynamic_slice(swaps, start, (*batch, 1)), batch)
        at_i = ops.eq(columns, i)
        at_p = ops.eq(columns, ops.broadcast_in_dim(p, rows.dimensions, list(range(last))))

        def value_at(mask):  # the element of each row of the permutation where mask holds
            picked = ops.select(mask, permutation, ops.broadcast(b.constant(np.int32(0)), rows.dimensions))
            value = ops.reduce(picked, b.constant(np.int32(0)), lambda x, y: ops.add(x, y), [last])
            return ops.broadcast_in_dim(value, rows.dimensions, list(range(last)))

        swapped = ops.select(at_i, value_at(at_p), ops.select(at_p, value_at(at_i), permutation))
        return ops.add(i, 1), swapped, swaps

    start = (builder.constant(np.int32(0)), ops.iota(builder, rows, last), pivots)
    return ops.while_loop(condition, body, start)[1]
