"""The reference interpreter's rewrites: ops it lacks or gets wrong, written with ops it has.

Each is an entry of hlogen.rewrites' table for the "interpret" backend; PJRT compiles
the ops as they are, so the interpreter stays an independent oracle for them. Each
rewrite is the op's definition (the StableHLO spec's formula, or what XLA computes
where the spec leaves it open), emitted with hlogen's own ops before the op it replaces.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func
from jaxlib.mlir._mlir_libs import _jax_mlir_ext

from hlogen import mlir, ops, random_bits  # noqa: F401 - random_bits registers its rewrites
from hlogen import types as T
from hlogen.builder import InsertingBuilder, Op
from hlogen.rewrites import register, rewrite_module

INTERPRET = "interpret"


def _attr_int(op: ir.Operation, name: str) -> int:
    return ir.IntegerAttr(op.attributes[name]).value


def _attr_ints(op: ir.Operation, name: str) -> list[int]:
    if name not in op.attributes:
        return []
    attr = op.attributes[name]
    try:
        return list(ir.DenseI64ArrayAttr(attr))
    except ValueError:  # a DenseIntElementsAttr (padding, older forms)
        return [int(x) for x in np.array(ir.DenseIntElementsAttr(attr)).reshape(-1)]


def _scalar(b, value, et: T.ElementType) -> Op:
    return b.constant(np.array(value, et.dtype))


def _full(b, value, et: T.ElementType, dims) -> Op:
    return ops.broadcast(_scalar(b, value, et), tuple(dims))


def _region_callable(op: ir.Operation, index: int):
    """Region `index` of `op` as a callable of Ops (for hlogen's ops that take a
    computation); the region's block is moved out of `op`, which is about to be erased."""
    block = op.regions[index].blocks[0]
    arguments = [a.type for a in block.arguments]
    terminator = list(block.operations)[-1]
    results = [v.type for v in terminator.operands]
    holder = ir.Module.create(op.location)
    with ir.InsertionPoint(holder.body), op.location:
        function = func.FuncOp("region", ir.FunctionType.get(arguments, results))
    block.append_to(function.regions[0])
    func.ReturnOp(list(terminator.operands), loc=terminator.location,
                  ip=ir.InsertionPoint(terminator))
    terminator.erase()

    def call(*args: Op) -> list[Op]:
        b = args[0].builder
        with b._ip, op.location:
            values = _jax_mlir_ext.inlined_func_call(function.operation, [a.value for a in args])
        return [Op(b, v, mlir.shape_of_type(v.type)) for v in values]
    call.holder = holder  # keeps the function alive while the callable is
    return call


# -- batch norm: the interpreter has none of the three ---------------------------------------

_BATCH_NORM = ("stablehlo.batch_norm_training", "stablehlo.batch_norm_inference",
               "stablehlo.batch_norm_grad")


def _batch_norm(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    name = op.name
    epsilon = ir.FloatAttr(op.attributes["epsilon"]).value
    feature_index = _attr_int(op, "feature_index")
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
    register(INTERPRET, _name, "the interpreter has no implementation of it")(_batch_norm)


# -- select_and_scatter: the interpreter applies the init value twice where it scatters ------

@register(INTERPRET, "stablehlo.select_and_scatter",
          "the interpreter combines the init value twice into every selected element")
def _select_and_scatter(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """XLA's definition: in each window (padding never selected) the element `select`
    prefers to every later one, in row-major order, is picked; each source value is then
    combined by `scatter` into init_value at its window's pick, windows in row-major order.
    Written as a reduce_window of (valid, value, flat index) and a scatter."""
    operand, source, init = operands
    shape = operand.shape
    select, scatter = _region_callable(op, 0), _region_callable(op, 1)
    window = _attr_ints(op, "window_dimensions")
    strides = _attr_ints(op, "window_strides") or [1] * shape.rank
    flat = _attr_ints(op, "padding")
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
        [b.constant(False), _scalar(b, 0, shape.element_type),
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


def _triangle(x: Op, lower: bool, diagonal: bool = True) -> Op:
    """The lower (or upper) triangle of x's matrices, zeros elsewhere (and on the diagonal
    unless `diagonal`)."""
    b, dims = x.builder, x.shape.dimensions
    rows = ops.iota(b, T.Shape(T.s32, dims), x.shape.rank - 2)
    columns = ops.iota(b, T.Shape(T.s32, dims), x.shape.rank - 1)
    if diagonal:
        kept = ops.ge(rows, columns) if lower else ops.le(rows, columns)
    else:
        kept = ops.gt(rows, columns) if lower else ops.lt(rows, columns)
    return ops.select(kept, x, _full(b, 0, x.dtype, dims))


@register(INTERPRET, "stablehlo.cholesky", "the interpreter has no implementation of it")
def _cholesky(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """XLA's CholeskyExpander: the upper factor is the transpose of the lower factor of
    a's transpose; column j of the lower factor is (a[:, j] - L L[j, :]^H)[j:] / its
    diagonal's square root (only the lower triangle of a is read). A matrix where that
    square root is NaN (a not positive definite) is NaN throughout."""
    (a,) = operands
    lower = ir.BoolAttr(op.attributes["lower"]).value if "lower" in op.attributes else False
    if not lower:
        a = _minor_transpose(a)
    n = a.shape.dimensions[-1]
    batch = a.shape.dimensions[:-2]
    complex_ = a.dtype.kind == T.COMPLEX
    columns, failed = [], None
    for j in range(n):
        column = _minor(a, (j, n), (j, j + 1))  # a[j:, j], read from the lower triangle
        if j:
            done = ops.concatenate(columns, a.shape.rank - 1)  # L[:, :j], rows 0..n-1
            row = _minor(done, (j, j + 1), (0, j))
            column = ops.sub(column, _matmul(_minor(done, (j, n), (0, j)),
                                             _minor_transpose(_conj(row))))
        pivot = _minor(column, (0, 1), (0, 1))
        root = ops.sqrt(ops.real(pivot) if complex_ else pivot)
        nan = ops.ne(root, root)
        failed = nan if failed is None else ops.or_(failed, nan)
        if complex_:
            root = ops.complex(root, _full(b, 0, root.dtype, root.shape.dimensions))
        # as XLA does, the pivot too is divided by its root
        scaled = ops.div(column, ops.broadcast_in_dim(root, column.shape.dimensions,
                                                      list(range(a.shape.rank))))
        if j:
            scaled = ops.concatenate(
                [_full(b, 0, a.dtype, batch + (j, 1)), scaled], a.shape.rank - 2)
        columns.append(scaled)
    factor = ops.concatenate(columns, a.shape.rank - 1) if n > 1 else columns[0]
    nan = _full(b, float("nan"), a.dtype, a.shape.dimensions)
    factor = ops.select(ops.broadcast_in_dim(failed, a.shape.dimensions,
                                             list(range(a.shape.rank))), nan, factor)
    return [factor if lower else _minor_transpose(factor)]


def _transpose_kind(op: ir.Operation) -> str:
    text = str(op.attributes["transpose_a"])  # #stablehlo<transpose ADJOINT>
    return text.split()[-1].rstrip(">")


@register(INTERPRET, "stablehlo.triangular_solve", "the interpreter has no implementation of it")
def _triangular_solve(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """x with op(a) x = b (left_side) or x op(a) = b, by substitution: op(a) is the
    `lower` (or upper) triangle of a, with ones on the diagonal if unit_diagonal,
    transposed or adjoint per transpose_a; a right-side solve is the left-side solve of
    the transposes."""
    a, rhs = operands

    def flag(name):
        return ir.BoolAttr(op.attributes[name]).value

    left_side, lower, unit = flag("left_side"), flag("lower"), flag("unit_diagonal")
    kind = _transpose_kind(op)
    matrix = _triangle(a, lower, diagonal=not unit)
    if kind != "NO_TRANSPOSE":
        matrix, lower = _minor_transpose(matrix), not lower
        if kind == "ADJOINT":
            matrix = _conj(matrix)
    if not left_side:  # x m = rhs  <=>  m^T x^T = rhs^T
        matrix, lower, rhs = _minor_transpose(matrix), not lower, _minor_transpose(rhs)
    m = matrix.shape.dimensions[-1]
    columns = rhs.shape.dimensions[-1]
    rows: dict[int, Op] = {}
    order = range(m) if lower else range(m - 1, -1, -1)
    for i in order:
        row = _minor(rhs, (i, i + 1), (0, columns))
        solved = sorted(rows)
        if solved:
            known = ops.concatenate([rows[k] for k in solved], rhs.shape.rank - 2) \
                if len(solved) > 1 else rows[solved[0]]
            low, high = solved[0], solved[-1] + 1  # contiguous: before i, or after it
            row = ops.sub(row, _matmul(_minor(matrix, (i, i + 1), (low, high)), known))
        if not unit:
            diagonal = _minor(matrix, (i, i + 1), (i, i + 1))
            row = ops.div(row, ops.broadcast_in_dim(diagonal, row.shape.dimensions,
                                                    list(range(rhs.shape.rank))))
        rows[i] = row
    x = ops.concatenate([rows[i] for i in range(m)], rhs.shape.rank - 2) if m > 1 else rows[0]
    return [x if left_side else _minor_transpose(x)]


# -- fft: the interpreter aborts on c64, and computes odd-length IRFFTs wrongly -------------

_WIDER = {"f32": T.f64, "c64": T.c128}


def _fft_kind(op: ir.Operation) -> str:
    return str(op.attributes["fft_type"]).split()[-1].rstrip(">")  # #stablehlo<fft_type FFT>


def _interpreter_fft_fails(op: ir.Operation) -> bool:
    types = [mlir.shape_of_type(v.type).element_type.name
             for v in list(op.operands) + list(op.results)]
    lengths = _attr_ints(op, "fft_length")
    return any(t in _WIDER for t in types) or (
        _fft_kind(op) == "IRFFT" and bool(lengths) and lengths[-1] % 2 == 1)


@register(INTERPRET, "stablehlo.fft",
          "the interpreter aborts on c64 (and f32) FFTs and computes odd-length IRFFTs wrongly",
          _interpreter_fft_fails)
def _fft(b: InsertingBuilder, op: ir.Operation, operands: list[Op]) -> list[Op]:
    """The FFT in double precision (c128, f64), converted back; an odd-length IRFFT as
    the real part of the inverse FFT of its Hermitian spectrum."""
    (x,) = operands
    kind, lengths = _fft_kind(op), _attr_ints(op, "fft_length")
    result = mlir.shape_of_type(op.results[0].type)
    if x.dtype.name in _WIDER:
        x = ops.convert_element_type(x, _WIDER[x.dtype.name])
    if kind == "IRFFT" and lengths[-1] % 2 == 1:
        y = _odd_irfft(x, lengths)
    else:
        y = ops.fft(x, kind, lengths)
    return [ops.convert_element_type(y, result.element_type) if y.dtype != result.element_type
            else y]


def _odd_irfft(x: Op, lengths: list[int]) -> Op:
    rank, n = x.shape.rank, lengths[-1]
    if len(lengths) > 1:  # the inverse FFT over the outer dimensions first
        outer = list(range(rank - len(lengths), rank - 1))
        moved = list(range(rank - len(lengths))) + [rank - 1] + outer
        back = [moved.index(d) for d in range(rank)]
        x = ops.transpose(ops.fft(ops.transpose(x, moved), "IFFT", lengths[:-1]), back)
    kept = x.shape.dimensions[-1]  # n // 2 + 1 values; value n - k is value k's conjugate
    mirrored = ops.slice_in_dim(x, 1, n - kept + 1, 1, rank - 1)
    spectrum = ops.concatenate([x, _conj(ops.rev(mirrored, [rank - 1]))], rank - 1)
    return ops.real(ops.fft(spectrum, "IFFT", [n]))


def decompose_for_interpreter(module: ir.Module) -> int:
    """Rewrites the ops the interpreter lacks or gets wrong (the "interpret" entries of
    hlogen.rewrites' table); returns how many."""
    return rewrite_module(module, INTERPRET)


__all__ = ["decompose_for_interpreter"]
