"""The reference interpreter's rewrites: ops it lacks or gets wrong, written with ops it has.

Each is an entry of `RULES`, which the interpreter's declaration (hlogen.backends) lists
(`LINEAR_ALGEBRA`, its cholesky, triangular_solve and LAPACK entries, for compilers that
refuse those ops);
PJRT compiles the ops as they are, so the interpreter stays an independent oracle for them. Each
rewrite is the op's definition (the StableHLO spec's formula, or what XLA computes
where the spec leaves it open), emitted with hlogen's own ops before the op it replaces.
"""
from __future__ import annotations

import re

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir, ops
from hlogen import types as T
from hlogen.builder import Op
from hlogen.errors import UnsupportedError
from hlogen.mlir import enum_attribute, int_attribute, ints_attribute
from hlogen.rewrites import RewriteBuilder, region_callable, rule

RULES: list = []  # hlogen.rewrites entries, in the order they are tried


def _result_type(op: ir.Operation) -> T.Shape:
    return mlir.shape_of_type(op.results[0].type)


def _full(b, value, et: T.ElementType, dims) -> Op:
    return ops.broadcast(b.constant(value, et), tuple(dims))


# -- batch norm: the interpreter has none of the three ---------------------------------------

_BATCH_NORM = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference",
               "stablehlo.batch_norm_grad")


def _batch_norm(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    name = op.name
    epsilon = ir.FloatAttr(op.attributes["epsilon"]).value
    feature_index = int_attribute(op, "feature_index")
    x = operands[0]
    shape, et = x.shape, x.dtype
    axes = [d for d in range(shape.rank) if d != feature_index]
    count = shape.size // shape.dimensions[feature_index] if shape.dimensions[feature_index] else 0

    def spread(vector):  # a per-feature vector laid out like x
        return ops.broadcast_in_dim(vector, shape.dimensions, [feature_index])

    def total(value):  # the sum over everything but the feature dimension
        return ops.reduce(value, 0.0, ops.add, axes)

    def mean_of(value):
        return ops.div(total(value), b.constant(count, et))

    if name == "stablehlo.batch_norm_training":
        _, scale, offset = operands
        mean = mean_of(x)
        centered = ops.sub(x, spread(mean))
        variance = mean_of(ops.mul(centered, centered))
    elif name == "stablehlo.batch_norm_inference":
        _, scale, offset, mean, variance = operands
        centered = ops.sub(x, spread(mean))
    else:  # batch_norm_grad
        _, scale, mean, variance, grad_output = operands
        centered = ops.sub(x, spread(mean))
    inverse = ops.rsqrt(ops.add(variance, b.constant(epsilon, et)))
    normalized = ops.mul(centered, spread(inverse))
    if name != "stablehlo.batch_norm_grad":
        output = ops.add(ops.mul(normalized, spread(scale)), spread(offset))
        return [output, mean, variance] if name.endswith("training") else [output]
    grad_offset = total(grad_output)
    grad_scale = total(ops.mul(grad_output, normalized))
    # scale / stddev / N * (N dy - sum(dy) - normalized * sum(dy * normalized))
    inner = ops.sub(ops.sub(ops.mul(grad_output, b.constant(count, et)), spread(grad_offset)),
                    ops.mul(normalized, spread(grad_scale)))
    factor = ops.div(ops.mul(scale, inverse), b.constant(count, et))
    return [ops.mul(spread(factor), inner), grad_scale, grad_offset]



for _name in _BATCH_NORM:
    rule(RULES, _name, "the interpreter has no implementation of it")(_batch_norm)


# -- scatter: the interpreter scatters into its operands' own storage -----------------------

def _static_operands(op: ir.Operation) -> bool:
    n = (len(op.operands) - 1) // 2
    return all(ir.RankedTensorType(v.type).has_static_shape for v in list(op.operands)[:n])


@rule(RULES, "stablehlo.scatter", "the interpreter updates its operands in place, so every "
      "other use of them (a result, a later op, the next iteration) sees the scattered "
      "values: it scatters into copies", _static_operands)
def _scatter_into_copies(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> None:
    """Each operand is copied first by a reshape to its own type, which the interpreter
    computes element by element into a new tensor (and no pass runs after the rewrites
    to fold it away)."""
    for k in range((len(op.operands) - 1) // 2):
        value = op.operands[k]
        op.operands[k] = b.emit("stablehlo.reshape", [value.type], [value]).result
    return None


# -- select_and_scatter: the interpreter applies the init value twice where it scatters ------

@rule(RULES, "stablehlo.select_and_scatter",
      "the interpreter combines the init value twice into every selected element")
def _select_and_scatter(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """XLA's definition: in each window (padding never selected) the element `select`
    prefers to every later one, in row-major order, is picked; each source value is then
    combined by `scatter` into init_value at its window's pick, windows in row-major order.
    Written as a reduce_window of (valid, value, flat index) and a scatter."""
    operand, source, init = operands
    shape = operand.shape
    select, scatter = region_callable(op, 0), region_callable(op, 1)
    window = ints_attribute(op, "window_dimensions")
    strides = ints_attribute(op, "window_strides") or [1] * shape.rank
    flat = ints_attribute(op, "padding")
    padding = [(flat[2 * i], flat[2 * i + 1]) for i in range(shape.rank)] if flat else \
        [(0, 0)] * shape.rank
    index_type = T.s64
    valid = ops.broadcast(b.constant(True), shape.dimensions)
    position = ops.reshape(ops.iota(b, T.Shape(index_type, (shape.size,)), 0), shape.dimensions)

    def pick(valid_a, value_a, index_a, valid_b, value_b, index_b):
        (prefers_a,) = select(value_a, value_b)
        keep = ops.and_(valid_a, ops.or_(ops.not_(valid_b), prefers_a))
        return (ops.select(keep, valid_a, valid_b), ops.select(keep, value_a, value_b),
                ops.select(keep, index_a, index_b))

    # padding takes the init values: never valid, so never picked
    _, _, picked = ops.reduce_window(
        [valid, operand, position],
        [b.constant(False), b.constant(0, shape.element_type),
         b.constant(-1, index_type)],
        pick, window, strides, padding)
    count = source.shape.size
    result = ops.scatter(
        ops.broadcast(init, (shape.size,)), ops.reshape(picked, (count, 1)),
        ops.reshape(source, (count,)), lambda current, update: scatter(current, update)[0],
        update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
        index_vector_dim=1)
    return [ops.reshape(result, shape.dimensions)]


# -- cholesky, triangular_solve: the interpreter has neither ------------------------------

def _minor_transpose(x: Op) -> Op:
    rank = x.shape.rank
    return ops.transpose(x, list(range(rank - 2)) + [rank - 1, rank - 2])


def _conj(x: Op) -> Op:
    return ops.complex(ops.real(x), ops.neg(ops.imag(x))) if x.dtype.kind == T.COMPLEX else x


def _matmul(x: Op, y: Op) -> Op:
    """x @ y over the two minor dimensions, the others batch dimensions."""
    batch = tuple(range(x.shape.rank - 2))
    return ops.dot_general(x, y, {
        "lhs_contracting_dimensions": (x.shape.rank - 1,),
        "rhs_contracting_dimensions": (y.shape.rank - 2,),
        "lhs_batch_dimensions": batch, "rhs_batch_dimensions": batch})


def _minor(x: Op, rows: tuple[int, int], columns: tuple[int, int]) -> Op:
    """x[..., rows[0]:rows[1], columns[0]:columns[1]]."""
    batch = x.shape.dimensions[:-2]
    return ops.slice(x, [0] * len(batch) + [rows[0], columns[0]],
                     list(batch) + [rows[1], columns[1]])


def _in_triangle(x: Op, lower: bool, diagonal: bool = True) -> Op:
    """True in the lower (or upper) triangle of x's matrices (the diagonal if `diagonal`)."""
    b, dims = x.builder, x.shape.dimensions
    rows = ops.iota(b, T.Shape(T.s32, dims), x.shape.rank - 2)
    columns = ops.iota(b, T.Shape(T.s32, dims), x.shape.rank - 1)
    if diagonal:
        return ops.ge(rows, columns) if lower else ops.le(rows, columns)
    return ops.gt(rows, columns) if lower else ops.lt(rows, columns)


def _triangle(x: Op, lower: bool, diagonal: bool = True) -> Op:
    """The lower (or upper) triangle of x's matrices, zeros elsewhere (and on the diagonal
    unless `diagonal`)."""
    return ops.select(_in_triangle(x, lower, diagonal), x,
                      _full(x.builder, 0, x.dtype, x.shape.dimensions))


def _per_matrix(value: Op, like: Op) -> Op:
    """A value per matrix (batch + (1, 1)), or a row per matrix (batch + (1, n)), spread
    over `like`'s matrices."""
    return ops.broadcast_in_dim(value, like.shape.dimensions, list(range(like.shape.rank)))


def _cholesky_lower(a: Op) -> tuple[Op, list[Op]]:
    """(L, roots): the lower factor of a's matrices by XLA's unblocked CholeskyExpander
    (only a's lower triangle is read; zeros above the diagonal) and each column's root,
    the square root of its pivot, the real (a - L L^H)[j, j] (L's diagonal; NaN where
    the pivot is negative)."""
    b = a.builder
    n, rank = a.shape.dimensions[-1], a.shape.rank
    batch = a.shape.dimensions[:-2]
    complex_ = a.dtype.kind == T.COMPLEX
    columns, roots = [], []
    for j in range(n):
        column = _minor(a, (j, n), (j, j + 1))  # a[j:, j]
        if j:
            done = ops.concatenate(columns, rank - 1)  # L[:, :j]
            row = _minor(done, (j, j + 1), (0, j))
            column = ops.sub(column, _matmul(_minor(done, (j, n), (0, j)),
                                             _minor_transpose(_conj(row))))
        pivot = _minor(column, (0, 1), (0, 1))
        pivot = ops.real(pivot) if complex_ else pivot
        root = ops.sqrt(pivot)
        roots.append(root)
        if complex_:
            root = ops.complex(root, _full(b, 0, root.dtype, root.shape.dimensions))
        # as XLA does, the pivot too is divided by its root
        scaled = ops.div(column, _per_matrix(root, column))
        if j:
            scaled = ops.concatenate([_full(b, 0, a.dtype, batch + (j, 1)), scaled], rank - 2)
        columns.append(scaled)
    return (ops.concatenate(columns, rank - 1) if n > 1 else columns[0]), roots


@rule(RULES, "stablehlo.cholesky", "the interpreter has no implementation of it")
def _cholesky(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """XLA's CholeskyExpander: the upper factor is the transpose of the lower factor of
    a's transpose. A matrix with a pivot whose square root is NaN (a not positive
    definite) is NaN throughout."""
    (a,) = operands
    lower = ir.BoolAttr(op.attributes["lower"]).value if "lower" in op.attributes else False
    factor, roots = _cholesky_lower(a if lower else _minor_transpose(a))
    failed = None
    for root in roots:
        nan = ops.ne(root, root)
        failed = nan if failed is None else ops.or_(failed, nan)
    factor = ops.select(_per_matrix(failed, factor),
                        _full(b, float("nan"), a.dtype, a.shape.dimensions), factor)
    return [factor if lower else _minor_transpose(factor)]


def _solve(a: Op, rhs: Op, left_side: bool, lower: bool, unit: bool, kind: str) -> Op:
    """x with op(a) x = rhs (left_side) or x op(a) = rhs, by substitution: op(a) is the
    `lower` (or upper) triangle of a, with ones on the diagonal if `unit`, transposed or
    adjoint per `kind` (NO_TRANSPOSE, TRANSPOSE or ADJOINT); a right-side solve is the
    left-side solve of the transposes."""
    matrix = _triangle(a, lower, diagonal=not unit)
    if kind != "NO_TRANSPOSE":
        matrix, lower = _minor_transpose(matrix), not lower
        if kind == "ADJOINT":
            matrix = _conj(matrix)
    if not left_side:  # x m = rhs  <=>  m^T x^T = rhs^T
        matrix, lower, rhs = _minor_transpose(matrix), not lower, _minor_transpose(rhs)
    m, rank = matrix.shape.dimensions[-1], rhs.shape.rank
    columns = rhs.shape.dimensions[-1]
    rows: dict[int, Op] = {}
    for i in (range(m) if lower else range(m - 1, -1, -1)):
        row = _minor(rhs, (i, i + 1), (0, columns))
        solved = sorted(rows)  # contiguous: the rows before i, or those after it
        if solved:
            known = ops.concatenate([rows[k] for k in solved], rank - 2) \
                if len(solved) > 1 else rows[solved[0]]
            coefficients = _minor(matrix, (i, i + 1), (solved[0], solved[-1] + 1))
            row = ops.sub(row, _matmul(coefficients, known))
        if not unit:
            row = ops.div(row, _per_matrix(_minor(matrix, (i, i + 1), (i, i + 1)), row))
        rows[i] = row
    x = ops.concatenate([rows[i] for i in range(m)], rank - 2) if m > 1 else rows[0]
    return x if left_side else _minor_transpose(x)


@rule(RULES, "stablehlo.triangular_solve", "the interpreter has no implementation of it")
def _triangular_solve(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    a, rhs = operands

    def flag(name):
        return ir.BoolAttr(op.attributes[name]).value

    return [_solve(a, rhs, flag("left_side"), flag("lower"), flag("unit_diagonal"),
                   enum_attribute(op, "transpose_a"))]


# -- fft: the interpreter aborts on c64, and computes odd-length IRFFTs wrongly -------------

_WIDER = {"f32": T.f64, "c64": T.c128}


def _interpreter_fft_fails(op: ir.Operation) -> bool:
    types = [mlir.shape_of_type(v.type).element_type.name
             for v in list(op.operands) + list(op.results)]
    lengths = ints_attribute(op, "fft_length")
    return any(t in _WIDER for t in types) or 0 in lengths or (
        enum_attribute(op, "fft_type") == "IRFFT" and bool(lengths) and lengths[-1] % 2 == 1)


@rule(RULES, "stablehlo.fft",
      "the interpreter aborts on c64 (and f32) FFTs and on zero lengths, and computes "
      "odd-length IRFFTs wrongly",
      _interpreter_fft_fails)
def _fft(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """The FFT in double precision (c128, f64), converted back. The real transforms' last
    dimension is a DFT of real matrices (two dot_generals): half the interpreter's work for
    an RFFT (it computes the whole spectrum, then slices), and an IRFFT of any length as
    the real part of the inverse of its Hermitian spectrum."""
    (x,) = operands
    kind, lengths = enum_attribute(op, "fft_type"), ints_attribute(op, "fft_length")
    result = _result_type(op)
    if 0 in lengths:  # a transform of nothing: an empty result
        return [_full(b, 0, result.element_type, result.dimensions)]
    if x.dtype.name in _WIDER:
        x = ops.convert_element_type(x, _WIDER[x.dtype.name])
    if kind == "RFFT":
        y = _over_outer(_real_dft(x, lengths[-1], inverse=False), "FFT", lengths)
    elif kind == "IRFFT":
        y = _real_dft(_over_outer(x, "IFFT", lengths), lengths[-1], inverse=True)
    else:
        y = ops.fft(x, kind, lengths)
    return [ops.convert_element_type(y, result.element_type) if y.dtype != result.element_type
            else y]


def _over_outer(x: Op, kind: str, lengths: list[int]) -> Op:
    """The FFT or IFFT of x over the transformed dimensions but the last."""
    if len(lengths) == 1:
        return x
    rank = x.shape.rank
    outer = list(range(rank - len(lengths), rank - 1))
    moved = list(range(rank - len(lengths))) + [rank - 1] + outer
    back = [moved.index(d) for d in range(rank)]
    return ops.transpose(ops.fft(ops.transpose(x, moved), kind, lengths[:-1]), back)


def _real_dft(x: Op, n: int, inverse: bool) -> Op:
    """Over the last dimension: the n // 2 + 1 first values of the DFT of the real x, or
    the n real values of the inverse DFT of the Hermitian spectrum whose n // 2 + 1 first
    values x holds (value n - k is value k's conjugate; the imaginary parts of value 0,
    and of value n / 2 for an even n, do not count)."""
    half = n // 2 + 1
    # phase 2 pi r / n with r = k j mod n exact: rounded once, whatever k j
    r = np.arange(half)[:, None] * np.arange(n)[None, :] % n
    cos, sin = np.cos(2 * np.pi * r / n), np.sin(2 * np.pi * r / n)
    sin[(r == 0) | (2 * r == n)] = 0.0
    contract = {"lhs_contracting_dimensions": (x.shape.rank - 1,),
                "rhs_contracting_dimensions": (0,)}
    if not inverse:  # Y_k = sum_j x_j (cos - i sin)
        return ops.complex(ops.dot_general(x, _matrix(x, cos.T), contract),
                           ops.dot_general(x, _matrix(x, -sin.T), contract))
    # y_j = (1/n) sum_k w_k (Re X_k cos - Im X_k sin), w_k = 2 for the mirrored values
    mirrored = (np.arange(half) >= 1) & (np.arange(half) <= n - half)
    weight = np.where(mirrored, 2.0, 1.0)[:, None] / n
    re, im = ops.real(x), ops.imag(x)
    return ops.add(ops.dot_general(re, _matrix(re, weight * cos), contract),
                   ops.dot_general(im, _matrix(im, -weight * sin), contract))


def _matrix(like: Op, values: np.ndarray) -> Op:
    return like.builder.constant(values.astype(like.dtype.dtype))


# -- ops XLA CPU runs that the interpreter lacks (older forms of others) --------------------

@rule(RULES, "stablehlo.broadcast", "the interpreter has no implementation of it")
def _broadcast(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    return [ops.broadcast(operands[0], ints_attribute(op, "broadcast_sizes"))]


@rule(RULES, "stablehlo.dot", "the interpreter has no implementation of it")
def _dot(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    lhs, rhs = operands  # rank 1 or 2: the lhs's last dimension with the rhs's first
    return [ops.dot_general(lhs, rhs, {"lhs_contracting_dimensions": (lhs.shape.rank - 1,),
                                       "rhs_contracting_dimensions": (0,)},
                            preferred_element_type=_result_type(op).element_type)]


@rule(RULES, "stablehlo.create_token", "the interpreter has no implementation of it")
def _create_token(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    return [ops.create_token(b)]


@rule(RULES, "stablehlo.cross-replica-sum", "the interpreter has no implementation of it")
def _cross_replica_sum(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    groups = np.array(ir.DenseIntElementsAttr(op.attributes["replica_groups"])).tolist()
    return [ops.all_reduce(operands[0], ops.add,
                           replica_groups=groups or [list(range(b.num_replicas))])]


@rule(RULES, "stablehlo.torch_index_select", "the interpreter has no implementation of it")
def _torch_index_select(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """result = operand[..., index, ...] along `dim`, the first batch_dims dimensions of
    operand and index paired: operand.shape[:dim] + index.shape[batch_dims:] +
    operand.shape[dim + 1:], as a gather."""
    operand, index = operands
    dim, batch = int_attribute(op, "dim"), int_attribute(op, "batch_dims")
    rank, indexed = operand.shape.rank, index.shape.rank - batch
    offset = list(range(batch, dim)) + list(range(dim + indexed, rank - 1 + indexed))
    sizes = [1 if d == dim or d < batch else n for d, n in enumerate(operand.shape.dimensions)]
    return [ops.gather(operand, index, offset_dims=offset, collapsed_slice_dims=[dim],
                       start_index_map=[dim], index_vector_dim=index.shape.rank,
                       slice_sizes=sizes, operand_batching_dims=list(range(batch)),
                       start_indices_batching_dims=list(range(batch)))]


def _einsum_terms(op: ir.Operation) -> list[str] | None:
    """[lhs, rhs, out] labels of a two-operand einsum config, or None for the forms not
    rewritten (an ellipsis, a label repeated within a term)."""
    config = ir.StringAttr(op.attributes["einsum_config"]).value.replace(" ", "")
    m = re.fullmatch(r"([a-zA-Z]*),([a-zA-Z]*)->([a-zA-Z]*)", config)
    if m is None or any(len(set(t)) != len(t) for t in m.groups()):
        return None
    lhs, rhs, out = m.groups()
    return [lhs, rhs, out] if set(out) <= set(lhs) | set(rhs) else None


@rule(RULES, "stablehlo.einsum", "the interpreter has no implementation of it",
      lambda op: _einsum_terms(op) is not None)
def _einsum(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """A dot_general: labels in both operands are batch dimensions (in the output) or
    contracted (not); labels of one operand only that the output lacks are summed first."""
    lhs_labels, rhs_labels, out = _einsum_terms(op)
    lhs, rhs = operands

    def summed(x: Op, labels: str, other: str) -> tuple[Op, str]:
        gone = [i for i, c in enumerate(labels) if c not in other and c not in out]
        if not gone:
            return x, labels
        x = ops.reduce(x, b.constant(0, x.dtype), ops.add, gone)
        return x, "".join(c for i, c in enumerate(labels) if i not in gone)

    lhs, lhs_labels = summed(lhs, lhs_labels, rhs_labels)
    rhs, rhs_labels = summed(rhs, rhs_labels, lhs_labels)
    batch = [c for c in lhs_labels if c in rhs_labels and c in out]
    contracted = [c for c in lhs_labels if c in rhs_labels and c not in out]
    product = ops.dot_general(lhs, rhs, {
        "lhs_contracting_dimensions": [lhs_labels.index(c) for c in contracted],
        "rhs_contracting_dimensions": [rhs_labels.index(c) for c in contracted],
        "lhs_batch_dimensions": [lhs_labels.index(c) for c in batch],
        "rhs_batch_dimensions": [rhs_labels.index(c) for c in batch]},
        preferred_element_type=_result_type(op).element_type)
    order = batch + [c for c in lhs_labels if c not in rhs_labels] + \
        [c for c in rhs_labels if c not in lhs_labels]
    return [ops.transpose(product, [order.index(c) for c in out])]


# -- LAPACK custom calls (what jax exports for linear algebra on the CPU) --------------------
# jaxlib's lapack_?potrf_ffi, lapack_?trsm_ffi and lapack_?getrf_ffi, ? in s, d, c, z; their
# flags are LAPACK's characters (uplo "L"/"U", side "L"/"R", trans_x "N"/"T"/"C", diag "N"/"U")
# in mhlo.backend_config, and the leading dimensions are batch dimensions. The other
# routines, eigen, SVD and QR solvers among them, the interpreter's declaration refuses. The
# kernels read their matrices column-major, and jax states those layouts: the rewrites
# are of the calls with them (a call whose layouts differ computes on other matrices).
_LAPACK = re.compile(r"lapack_[sdcz](potrf|trsm|getrf)_ffi")
# routine -> (its matrix operands, its matrix results), by position
_MATRICES = {"potrf": ((0,), (0,)), "trsm": ((0, 1), (0,)), "getrf": ((0,), (0,))}




def _lapack_routine(op: ir.Operation) -> str | None:
    m = _LAPACK.fullmatch(mlir.call_target(op))
    # several results, as jax emits them; a call whose results are one tuple (HLO's form,
    # which hlogen.hlo turns into this one where it can) is left to the preflight
    tuples = any(isinstance(r.type, ir.TupleType) for r in op.results)
    if not m or tuples:
        return None
    operands, results = _MATRICES[m.group(1)]
    column_major = all(_column_major(op, "operand_layouts", i) for i in operands) and \
        all(_column_major(op, "result_layouts", i) for i in results)
    return m.group(1) if column_major else None


def _column_major(op: ir.Operation, kind: str, index: int) -> bool:
    """Whether the matrices of operand (or result) `index` are column-major, as jax states."""
    if kind not in op.attributes:
        return False  # XLA's default: row-major
    order = [int(v) for v in ir.DenseIntElementsAttr(ir.ArrayAttr(op.attributes[kind])[index])]
    rank = len(order)
    return rank >= 2 and order[:2] == [rank - 2, rank - 1]


def _lapack_flag(op: ir.Operation, name: str) -> str:
    # jax's lowering puts the attributes in mhlo.backend_config; XLA's HLO converter, for
    # the typed FFI (api_version 4), in backend_config as a dictionary
    for key in ("mhlo.backend_config", "backend_config"):
        if key in op.attributes and isinstance(op.attributes[key], ir.DictAttr) \
                and name in op.attributes[key]:
            return chr(ir.IntegerAttr(op.attributes[key][name]).value)
    raise UnsupportedError(f"{mlir.call_target(op)}: the reference interpreter runs it rewritten, which "
                           f"needs its attribute {name!r} (in mhlo.backend_config or "
                           f"backend_config); this call has none")


def _first_failure(failures: list[Op]) -> Op:
    """LAPACK's info: 1 + the index of the first true of `failures` (s32 per matrix), or 0."""
    b = failures[0].builder
    info = _full(b, 0, T.s32, failures[0].shape.dimensions)
    for j in reversed(range(len(failures))):
        info = ops.select(failures[j], _full(b, j + 1, T.s32, info.shape.dimensions), info)
    return ops.reshape(info, info.shape.dimensions[:-2])


def _potrf(op: ir.Operation, a: Op) -> list[Op]:
    """(the factor in the uplo triangle, the input's values in the other; info): info is
    the first column whose pivot is not positive (the factor's values are then LAPACK's
    own, which jax replaces by NaN)."""
    lower = _lapack_flag(op, "uplo") == "L"
    factor, roots = _cholesky_lower(a if lower else _minor_transpose(_conj(a)))
    if not lower:
        factor = _minor_transpose(_conj(factor))
    # a pivot is positive where its root is
    info = _first_failure([ops.not_(ops.gt(r, a.builder.constant(0, r.dtype))) for r in roots])
    return [ops.select(_in_triangle(a, lower), factor, a), info]  # the rest is not touched


def _trsm(op: ir.Operation, a: Op, rhs: Op) -> list[Op]:
    kind = {"N": "NO_TRANSPOSE", "T": "TRANSPOSE", "C": "ADJOINT"}[_lapack_flag(op, "trans_x")]
    return [_solve(a, rhs, _lapack_flag(op, "side") == "L", _lapack_flag(op, "uplo") == "L",
                   _lapack_flag(op, "diag") == "U", kind)]


def _pick_row(a: Op, rows: Op, index: Op) -> Op:
    """Row `index` (s32 per matrix, batch + (1, 1)) of a's matrices, exactly (no arithmetic)."""
    b, rank = a.builder, a.shape.rank
    chosen = ops.eq(rows, _per_matrix(index, a))
    _, row = ops.reduce([chosen, a], [b.constant(False), b.constant(0, a.dtype)],
                        lambda c1, v1, c2, v2: (ops.or_(c1, c2), ops.select(c1, v1, v2)),
                        [rank - 2])
    return ops.reshape(row, a.shape.dimensions[:-2] + (1, a.shape.dimensions[-1]))


def _getrf(op: ir.Operation, a: Op) -> list[Op]:
    """LU with partial pivoting (LAPACK's getf2): at column j, the row of the largest
    |a| (|re| + |im| for complex; the first of equals) below the diagonal is swapped with
    row j (whole rows), the column below the pivot is multiplied by its reciprocal and the
    trailing matrix updated. (lu, 1-based pivot rows, info: the first zero pivot's column)."""
    b = a.builder
    m, n = a.shape.dimensions[-2:]
    rank, batch = a.shape.rank, a.shape.dimensions[:-2]
    rows = ops.iota(b, T.Shape(T.s32, a.shape.dimensions), rank - 2)
    pivots, zeros = [], []
    for j in range(min(m, n)):
        column = _minor(a, (j, m), (j, j + 1))
        size = (ops.add(ops.abs(ops.real(column)), ops.abs(ops.imag(column)))
                if a.dtype.kind == T.COMPLEX else ops.abs(column))
        largest = ops.reduce(size, float("-inf"), ops.max, [rank - 2])
        at = ops.iota(b, T.Shape(T.s32, size.shape.dimensions), rank - 2)
        is_largest = ops.eq(size, ops.broadcast_in_dim(
            largest, size.shape.dimensions, list(range(rank - 2)) + [rank - 1]))
        first = ops.reduce(ops.select(is_largest, at, _full(b, m, T.s32, at.shape.dimensions)),
                           b.constant(m, T.s32), ops.min, [rank - 2])
        pivot_row = ops.reshape(ops.add(first, b.constant(j, T.s32)), batch + (1, 1))
        pivots.append(ops.reshape(ops.add(pivot_row, b.constant(1, T.s32)), batch + (1,)))
        row_j, row_p = _minor(a, (j, j + 1), (0, n)), _pick_row(a, rows, pivot_row)
        a = ops.select(ops.eq(rows, b.constant(j, T.s32)), _per_matrix(row_p, a), ops.select(
            ops.eq(rows, _per_matrix(pivot_row, a)), _per_matrix(row_j, a), a))
        pivot = _minor(a, (j, j + 1), (j, j + 1))
        zero = ops.eq(pivot, b.constant(0, a.dtype))
        zeros.append(zero)
        if j + 1 == m:
            continue
        below = _minor(a, (j + 1, m), (j, j + 1))
        scaled = ops.select(_per_matrix(zero, below), below, ops.mul(
            below, _per_matrix(ops.div(b.constant(1, a.dtype), pivot), below)))
        parts = [_minor(a, (j + 1, m), (0, j))] if j else []
        parts.append(scaled)
        if j + 1 < n:
            right = _minor(a, (j, j + 1), (j + 1, n))
            trailing = ops.sub(_minor(a, (j + 1, m), (j + 1, n)), _matmul(scaled, right))
            parts.append(trailing)
        lower_rows = ops.concatenate(parts, rank - 1) if len(parts) > 1 else parts[0]
        a = ops.concatenate([_minor(a, (0, j + 1), (0, n)), lower_rows], rank - 2)
    ipiv = ops.concatenate(pivots, rank - 2) if len(pivots) > 1 else pivots[0]
    return [a, ipiv, _first_failure(zeros)]


_ROUTINES = {"potrf": _potrf, "trsm": _trsm, "getrf": _getrf}


@rule(RULES, "stablehlo.custom_call",
      "custom calls run native code; jaxlib's LAPACK Cholesky, triangular solve and LU "
      "have formulations here", _lapack_routine)
def _lapack(b: RewriteBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    return _ROUTINES[_lapack_routine(op)](op, *operands)


# The linear algebra alone (cholesky, triangular_solve, jaxlib's LAPACK potrf, trsm and
# getrf), written with ops every compiler has: for the declaration of a compiler that
# refuses these ops and custom calls (IREE) but runs the rest as it is.
LINEAR_ALGEBRA: list = [r for r in RULES if r.op in (
    "stablehlo.cholesky", "stablehlo.triangular_solve") or r.expand is _lapack]

__all__ = ["LINEAR_ALGEBRA", "RULES"]
