"""Bounded dynamic dimensions (XLA's SetDimensionSize), as each backend runs them.

A dimension that set_dimension_size makes dynamic keeps its bound as its size in hlogen's
shapes (hlogen's ops emit static types); its runtime size, at most the bound, travels
with it, and the ops below see only the first `size` elements of it, as XLA's dynamic
padder makes them: element-wise ops, broadcast_in_dim, reshapes that keep the dimension,
transpose, slice, concatenate, reduce (the padding is the init value) and dot_general
(the padding is zero); get_dimension_size gives the size. Before a backend runs a
module that has dynamic dimensions (`present`):
- `expose` (every backend) gives the values made dynamic their bounded types
  (`tensor<?xf32, #stablehlo.bounds<10>>`: XLA applies its dynamic padder to those); a
  bounded parameter is passed at its bound (XLA CPU has no PadToStatic to take it);
  each size given to set_dimension_size is clamped to [0, bound] (XLA CPU ends the
  process on a negative one) and returned as a hidden result, and so is the runtime size
  of each dynamic dimension of a result: `Cut` checks the first and cuts the results to
  the second on the host, for every backend (XLA's buffer holds a dynamic result's
  elements first, the interpreter's at their places in the bound's array). XLA's size of
  a slice of a dynamic dimension is numpy's only within the bound, so a slice is given
  numpy's size after it (`_resize_slice`).
- `RULES` (the interpreter's declaration), on the entry function: the interpreter has no
  dynamic dimensions, so every type becomes static and the sizes are carried as values:
  reductions and dots see their init value (zero) in the padding, concatenation moves
  each operand to the end of the previous one's size, get_dimension_size is the size.
Other ops on a dynamic dimension are refused (UnsupportedError naming the op).
"""
from __future__ import annotations

import math

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir, ops, preflight
from hlogen import types as T
from hlogen.builder import InsertingBuilder, Op
from hlogen.errors import ExecutionError, UnsupportedError
from hlogen.rewrites import Rewrite

SET, GET = "stablehlo.set_dimension_size", "stablehlo.get_dimension_size"

ELEMENTWISE = frozenset("stablehlo." + n for n in (
    "abs add and atan2 bitcast_convert cbrt ceil clamp compare complex convert cosine "
    "count_leading_zeros divide exponential exponential_minus_one floor imag is_finite log "
    "log_plus_one logistic maximum minimum multiply negate not or popcnt power real "
    "reduce_precision remainder round_nearest_afz round_nearest_even rsqrt select "
    "shift_left shift_right_arithmetic shift_right_logical sign sine sqrt subtract tan "
    "tanh xor").split())
SUPPORTED = ("element-wise ops, broadcast_in_dim, reshape keeping the dimension, transpose, "
             "slice, concatenate, reduce, dot_general, get_dimension_size")


def present(module: ir.Module, cached: bool = False) -> bool:
    """Whether `module` has a set_dimension_size or a bounded dynamic type (`cached`: a
    module that has not changed since preflight's checks, which read it once)."""
    found = preflight.inventory(module) if cached else preflight.Inventory(module)
    return SET in found.by_name or any(mlir.bounds(t) for t in found.types)


class Cut:
    """How a module's hidden results (`expose`) are checked and cut on the host."""

    def __init__(self, results: int, checks: list, cuts: list):
        self.results = results  # the user's results; the hidden ones follow
        self.checks = checks    # (hidden index, bound, where): a size given set_dimension_size
        self.cuts = cuts        # (result, dimension, hidden index)
        self.hidden = len(checks) + len(cuts)

    def apply(self, raw: list, compact: bool = False) -> list:
        """The user's results of `raw` (theirs, then the hidden ones) cut to their sizes;
        an ExecutionError where a size given set_dimension_size is outside its bound.
        `compact`: a dynamic result's buffer holds its elements first, in order (XLA's),
        rather than at their places in the bound's array (the interpreter's)."""
        arrays, hidden = list(raw[:self.results]), [int(np.asarray(h)) for h in raw[self.results:]]
        for index, bound, where in self.checks:
            if not 0 <= hidden[index] <= bound:
                raise ExecutionError(f"{where}: set_dimension_size was given size "
                                     f"{hidden[index]}, outside [0, {bound}] (the dimension's "
                                     f"bound): XLA CPU ends the process on a negative size and "
                                     f"reports a larger one over the bound's data")
        sizes: dict = {}
        for result, dimension, index in self.cuts:
            sizes.setdefault(result, {})[dimension] = hidden[index]
        for result, cut in sizes.items():
            a = np.asarray(arrays[result])
            shape = tuple(cut.get(d, n) for d, n in enumerate(a.shape))
            arrays[result] = a.reshape(-1)[:math.prod(shape)].reshape(shape) if compact else \
                a[tuple(slice(0, n) for n in shape)]
        return arrays


def _where(op) -> str:
    found = mlir.file_location(op.location)
    return f"{op.name} at {'{}:{}:{}'.format(*found)}" if found else op.name


def _refuse(op, what: str):
    raise UnsupportedError(f"{_where(op)}: {what} on a dynamic dimension (set_dimension_size); "
                           f"hlogen runs {SUPPORTED} on one")


def _main(module: ir.Module):
    return mlir.functions(module).get("main")


def _update_function_type(function, block) -> None:
    returned = [v.type for v in block.operations[len(block.operations) - 1].operands]
    with mlir.context():
        function.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
            [a.type for a in block.arguments], returned))


# -- the walk: which dimensions of each value are dynamic, and their sizes --------------------

class _Walk:
    """Over the top-level ops of a function, in order: `dims[value]` maps each dynamic
    dimension to its size, an s32[] value where sizes are carried (`carry`), else None."""

    def __init__(self, module: ir.Module, carry: bool):
        self.module, self.carry, self.dims = module, carry, {}
        self.replaced = None  # what an op's rule replaced it with (concatenate's writes)

    def of(self, value) -> dict:
        return self.dims.get(value) or {}

    def builder(self, op) -> InsertingBuilder:
        return InsertingBuilder(self.module, op, f"the dynamic dimensions of {op.name}")

    def size(self, op, fn, *sizes):
        """fn(b, *sizes).value where sizes are carried (s32[] values or ints), else None."""
        if not self.carry:
            return None
        b = self.builder(op)
        return fn(b, *[_size(b, s) for s in sizes]).value

    def results(self, op, ins: list) -> list:
        name = op.name
        if name in ELEMENTWISE:
            rank = len(mlir.shape_of_type(op.results[0].type).dimensions)
            out: dict = {}
            for v, dyn in zip(op.operands, ins):
                if len(mlir.shape_of_type(v.type).dimensions) == rank:
                    for d, s in dyn.items():
                        out.setdefault(d, s)
            return [out] * len(op.results)
        rule = _RULES.get(name)
        if rule is None:
            _refuse(op, name)
        return rule(self, op, ins)


def _size(b, size) -> Op:
    """A size (an s32[] value or an int) as an Op of `b`."""
    return b.constant(np.int32(size)) if isinstance(size, int) else Op(b, size, T.Shape(T.s32, ()))


def _dims(value) -> tuple:
    return mlir.shape_of_type(value.type).dimensions


def _broadcast_in_dim(w, op, ins):
    mapping = mlir.ints_attribute(op, "broadcast_dimensions")
    src, dst = _dims(op.operands[0]), _dims(op.results[0])
    for d in ins[0]:
        if src[d] != dst[mapping[d]]:
            _refuse(op, f"a broadcast of dimension {d} (bound {src[d]}) to size {dst[mapping[d]]}")
    return [{mapping[d]: s for d, s in ins[0].items()}]


def _reshape(w, op, ins):
    src, dst = _dims(op.operands[0]), _dims(op.results[0])
    out = {}
    for d, s in ins[0].items():
        before = math.prod(src[:d])
        kept = [e for e in range(len(dst)) if math.prod(dst[:e]) == before and dst[e] == src[d]]
        if not kept:
            _refuse(op, f"a reshape of {list(src)} to {list(dst)} that does not keep dimension {d}")
        out[kept[0]] = s
    return [out]


def _transpose(w, op, ins):
    permutation = mlir.ints_attribute(op, "permutation")
    return [{e: ins[0][d] for e, d in enumerate(permutation) if d in ins[0]}]


def _slice(w, op, ins):
    starts, limits, strides = (mlir.ints_attribute(op, n)
                               for n in ("start_indices", "limit_indices", "strides"))
    out_dims = _dims(op.results[0])
    out = {}
    for d, s in ins[0].items():
        if out_dims[d] == 1:  # one element: static, as XLA has it
            continue
        start, limit, stride = starts[d], limits[d], strides[d]
        out[d] = w.size(op, lambda b, s: _sliced_size(b, s, start, limit, stride), s)
    return [out]


def _sliced_size(b, size: Op, start: int, limit: int, stride: int) -> Op:
    """numpy's len(x[:size][start:limit:stride]): ceil((min(size, limit) - start) / stride),
    at least 0."""
    def c(n):
        return b.constant(np.int32(n))
    return ops.div(ops.add(ops.max(ops.sub(ops.min(size, c(limit)), c(start)), c(0)),
                           c(stride - 1)), c(stride))


def _resize_slice(module, op, following, dims: dict):
    """XLA gives a slice of a dynamic dimension the size (size - start) / stride, rounded
    up, however far past its bound or below zero (a negative one ends the process): the
    slice's result is given numpy's size with a set_dimension_size after it."""
    b = InsertingBuilder(module, following, "the size of a slice")
    result = op.results[0]
    x = Op(b, result, mlir.shape_of_type(result.type))
    starts, limits, strides = (mlir.ints_attribute(op, n)
                               for n in ("start_indices", "limit_indices", "strides"))
    y, operand = x, op.operands[0]
    for d in dims:
        size = ops.get_dimension_size(Op(b, operand, mlir.shape_of_type(operand.type)), d)
        y = ops.set_dimension_size(y, _sliced_size(b, size, starts[d], limits[d], strides[d]), d)
    made = [mlir.defining_op(y.value)]
    while mlir.defining_op(made[-1].operands[0], SET) is not None:
        made.append(mlir.defining_op(made[-1].operands[0]))
    result.replace_all_uses_with(y.value)
    made[-1].operands[0] = result
    y.value.set_type(mlir.bounded_type(y.shape, dims))
    for m in made[:-1]:
        m.results[0].set_type(mlir.bounded_type(y.shape, dims))
    return y.value


def _concatenate(w, op, ins):
    dimension = mlir.int_attribute(op, "dimension")
    out: dict = {}
    for dyn in ins:
        for d, s in dyn.items():
            if d != dimension:
                out.setdefault(d, s)
    if any(dimension in dyn for dyn in ins):
        total = None
        if w.carry:
            b = w.builder(op)
            sizes = [_size(b, dyn[dimension] if dimension in dyn else _dims(v)[dimension])
                     for v, dyn in zip(op.operands, ins)]
            total = sizes[0]
            for s in sizes[1:]:
                total = ops.add(total, s)
            # each operand written whole after the sizes before it: its padding is
            # overwritten by the next one (start + bound never passes the result's size)
            result = ops.broadcast_in_dim(b.constant(np.zeros((), mlir.shape_of_type(
                op.results[0].type).dtype)), _dims(op.results[0]), ())
            start = b.constant(np.int32(0))
            for v, s in zip(op.operands, sizes):
                x = Op(b, v, mlir.shape_of_type(v.type))
                zero = b.constant(np.int32(0))
                result = ops.dynamic_update_slice(result, x, [start if d == dimension else zero
                                                              for d in range(x.shape.rank)])
                start = ops.add(start, s)
            op.results[0].replace_all_uses_with(result.value)
            w.replaced = result.value
            total = total.value
        out[dimension] = total
    return [out]


def _mask(b, x: Op, dyn: dict, dimensions, fill: Op) -> Op:
    """x with fill where an index of one of `dimensions` is past its size."""
    keep = None
    for d in dimensions:
        if d in dyn:
            index = ops.iota(b, T.Shape(T.s32, x.shape.dimensions), d)
            inside = ops.lt(index, ops.broadcast_in_dim(_size(b, dyn[d]), x.shape.dimensions, ()))
            keep = inside if keep is None else ops.and_(keep, inside)
    if keep is None:
        return x
    return ops.select(keep, x, ops.broadcast_in_dim(fill, x.shape.dimensions, ()))


def _reduce(w, op, ins):
    dimensions = mlir.ints_attribute(op, "dimensions")
    n = len(op.operands) // 2
    if w.carry:
        b = w.builder(op)
        for i in range(n):
            if any(d in ins[i] for d in dimensions):
                x, init = op.operands[i], op.operands[n + i]
                masked = _mask(b, Op(b, x, mlir.shape_of_type(x.type)), ins[i], dimensions,
                               Op(b, init, mlir.shape_of_type(init.type)))
                op.operands[i] = masked.value
    kept = [d for d in range(len(_dims(op.operands[0]))) if d not in dimensions]
    out: dict = {}
    for dyn in ins[:n]:
        for d, s in dyn.items():
            if d in kept:
                out.setdefault(kept.index(d), s)
    return [out] * len(op.results)


def _dot_general(w, op, ins):
    numbers = stablehlo.DotDimensionNumbers(op.attributes["dot_dimension_numbers"])
    lb, rb = list(numbers.lhs_batching_dimensions), list(numbers.rhs_batching_dimensions)
    lc, rc = list(numbers.lhs_contracting_dimensions), list(numbers.rhs_contracting_dimensions)
    if w.carry:
        b = w.builder(op)
        for i, contracting in ((0, lc), (1, rc)):
            if any(d in ins[i] for d in contracting):
                v = op.operands[i]
                x = Op(b, v, mlir.shape_of_type(v.type))
                zero = b.constant(np.zeros((), x.dtype.dtype))
                op.operands[i] = _mask(b, x, ins[i], contracting, zero).value
    lhs_rank, rhs_rank = len(_dims(op.operands[0])), len(_dims(op.operands[1]))
    lf = [d for d in range(lhs_rank) if d not in lb + lc]
    rf = [d for d in range(rhs_rank) if d not in rb + rc]
    out: dict = {}
    for e, (l, r) in enumerate(zip(lb, rb)):
        if l in ins[0] or r in ins[1]:
            out[e] = ins[0].get(l) or ins[1].get(r)
    for e, d in enumerate(lf, len(lb)):
        if d in ins[0]:
            out[e] = ins[0][d]
    for e, d in enumerate(rf, len(lb) + len(lf)):
        if d in ins[1]:
            out[e] = ins[1][d]
    return [out]


def _get_dimension_size(w, op, ins):
    dyn = ins[0].get(mlir.int_attribute(op, "dimension"))
    if w.carry and dyn is not None:
        op.results[0].replace_all_uses_with(dyn)
    return [{}]


_RULES = {
    "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.reshape": _reshape,
    "stablehlo.transpose": _transpose,
    "stablehlo.slice": _slice,
    "stablehlo.concatenate": _concatenate,
    "stablehlo.reduce": _reduce,
    "stablehlo.dot_general": _dot_general,
    GET: _get_dimension_size,
    "func.return": lambda w, op, ins: [],
}


# -- every backend: bounded types, hidden results ----------------------------------------------

def expose(module: ir.Module) -> Cut | None:
    """Gives `module`'s dynamic values their bounded types and appends the hidden results
    (module docstring); None where it has no dynamic dimension."""
    main = _main(module)
    if main is None:
        return None
    block = main.regions[0].blocks[0]
    if any(isinstance(mlir.shape_of_type(t), T.TupleShape)
           for t in list(mlir.function_type(main).inputs) + list(mlir.function_type(main).results)):
        raise UnsupportedError("main: dynamic dimensions with tuple parameters or results: "
                               "hlogen runs them with arrays only")
    first = block.operations[0].operation
    for arg in block.arguments:  # a bounded parameter is passed at its bound
        found = mlir.bounds(arg.type)
        if not found:
            continue
        shape = mlir.shape_of_type(arg.type)
        arg.set_type(mlir.ir_type(shape))
        b = InsertingBuilder(module, first, "a bounded parameter")
        x, chain = Op(b, arg, shape), []
        for d, bound in enumerate(found):
            if bound is not None:
                x = ops.set_dimension_size(x, b.constant(np.int32(bound)), d)
                chain.append(mlir.defining_op(x.value))
        arg.replace_all_uses_with(x.value)
        chain[0].operands[0] = arg  # the chain itself reads the parameter
        made = {}
        for link in chain:  # the module's own bounded types: XLA takes its ops on them
            made[mlir.int_attribute(link, "dimension")] = None
            link.results[0].set_type(mlir.bounded_type(shape, made))
    requested = _propagate(module, block, clamp=True)
    returned = block.operations[len(block.operations) - 1].operation
    # hidden results: the sizes asked for, then the sizes of the results' dynamic dimensions
    b = InsertingBuilder(module, returned, "the sizes of dynamic results")
    outs = list(returned.operands)
    hidden, checks, cuts = [], [], []
    for n, bound, where in requested:
        checks.append((len(hidden), bound, where))
        hidden.append(n.value)
    for i, v in enumerate(outs):
        for d, bound in enumerate(mlir.bounds(v.type) or ()):
            if bound is not None:
                shape = mlir.shape_of_type(v.type)
                cuts.append((i, d, len(hidden)))
                hidden.append(ops.get_dimension_size(Op(b, v, shape), d).value)
    if not hidden:
        return None
    with mlir.context(), returned.location:
        ir.Operation.create("func.return", operands=outs + hidden,
                                  ip=ir.InsertionPoint(returned))
    returned.erase()
    _update_function_type(main, block)
    return Cut(len(outs), checks, cuts)


def expose_again(module: ir.Module) -> None:
    """The bounded types given again to ops made since `expose` (the rewrites' own)."""
    _propagate(module, _main(module).regions[0].blocks[0], clamp=False)
    _update_function_type(_main(module), _main(module).regions[0].blocks[0])


def _propagate(module: ir.Module, block, clamp: bool) -> list:
    """Bounded types through the top-level ops of `block`; with `clamp`, each size given
    set_dimension_size clamped to its bound: returns (size, bound, where) of each."""
    walk = _Walk(module, carry=False)
    requested, retyped = [], set()  # retyped: values given bounded types here
    snapshot = [o.operation for o in block.operations]
    for i, op in enumerate(snapshot):
        if op.name == SET:
            x, size = op.operands[0], op.operands[1]
            d = mlir.int_attribute(op, "dimension")
            shape = mlir.shape_of_type(x.type)
            bound = shape.dimensions[d]
            if clamp:
                b = InsertingBuilder(module, op, "set_dimension_size")
                n = Op(b, size, T.Shape(T.s32, ()))
                requested.append((n, bound, _where(op)))
                clamped = ops.clamp(b.constant(np.int32(0)), n, b.constant(np.int32(bound)))
                op.operands[1] = clamped.value
            dyn = {**walk.of(x), d: None}
            if not mlir.bounds(op.results[0].type):
                retyped.add(op.results[0])
            op.results[0].set_type(mlir.bounded_type(shape, dyn))
            walk.dims[op.results[0]] = dyn
            continue
        ins = [walk.of(v) for v in op.operands]
        if not any(ins):
            for r in op.results:  # a loaded module's own bounded types
                found = mlir.bounds(r.type)
                if found:
                    walk.dims[r] = {d: None for d, n in enumerate(found) if n is not None}
            continue
        if op.name not in ELEMENTWISE and op.name not in _RULES and \
                not any(v in retyped for v in op.operands):
            for r in op.results:  # a loaded module's op on its bounded types: XLA's to take
                found = mlir.bounds(r.type)
                if found:
                    walk.dims[r] = {d: None for d, n in enumerate(found) if n is not None}
            continue
        for r, dyn in zip(op.results, walk.results(op, ins)):
            shape = mlir.shape_of_type(r.type)
            if isinstance(shape, T.Shape) and dyn and not mlir.bounds(r.type):
                r.set_type(mlir.bounded_type(shape, dyn))
                retyped.add(r)
            walk.dims[r] = dyn
        if op.name == "stablehlo.slice" and clamp and walk.dims.get(op.results[0]):
            walk.dims[_resize_slice(module, op, snapshot[i + 1], walk.dims[op.results[0]])] = \
                walk.dims[op.results[0]]
    return requested


# -- the interpreter: static shapes and masks ---------------------------------------------------

def _static(module: ir.Module, function) -> None:
    """Every bounded type of `function` made static (its bound)."""
    for op in mlir.walk_op(function):
        for region in op.regions:
            for block in region.blocks:
                for arg in block.arguments:
                    if mlir.bounds(arg.type):
                        arg.set_type(mlir.ir_type(mlir.shape_of_type(arg.type)))
        for r in op.results:
            if mlir.bounds(r.type):
                r.set_type(mlir.ir_type(mlir.shape_of_type(r.type)))
    _update_function_type(function, function.regions[0].blocks[0])


def _has_dynamism(function) -> bool:
    return mlir.symbol_name(function) == "main" and any(
        op.name == SET or any(mlir.bounds(t) for t in op.results.types)
        for op in mlir.walk_op(function))


def _carry_sizes(b, function, operands):
    """The interpreter's rewrite of a function with dynamic dimensions (module docstring)."""
    module = b.module
    block = function.regions[0].blocks[0]
    for op in mlir.walk_op(function):
        if op.name == SET and op.parent.name != "func.func":
            _refuse(op, "a set_dimension_size inside the region of "
                        f"{op.parent.name}, which the interpreter's rewrite does not reach,")
    _static(module, function)
    walk = _Walk(module, carry=True)
    for op in [o.operation for o in block.operations]:
        if op.name == SET:
            x, size = op.operands[0], op.operands[1]
            d = mlir.int_attribute(op, "dimension")
            wb = walk.builder(op)
            shape = mlir.shape_of_type(x.type)
            # a value of its own (the interpreter has no set_dimension_size; ops.reshape
            # would give x itself)
            same = wb.add_op("stablehlo.reshape", shape, [Op(wb, x, shape)], {})
            walk.dims[same.value] = {**walk.of(x), d: size}
            op.results[0].replace_all_uses_with(same.value)
            op.erase()
            continue
        ins = [walk.of(v) for v in op.operands]
        if not any(ins):
            continue
        walk.replaced = None
        outs = walk.results(op, ins)
        if walk.replaced is not None:  # concatenate: replaced by its writes
            walk.dims[walk.replaced] = outs[0]
            op.erase()
            continue
        for r, dyn in zip(op.results, outs):
            walk.dims[r] = dyn
        if op.name == GET and mlir.int_attribute(op, "dimension") in ins[0]:
            op.erase()
    return None


RULES: list[Rewrite] = [Rewrite(
    "func.func", "the interpreter has no dynamic dimensions: static shapes with masks, sizes "
    "carried as values, as XLA's dynamic padder makes them", _carry_sizes, _has_dynamism)]
