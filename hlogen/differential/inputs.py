"""Arguments nobody has to write: random inputs as XLA's `run_hlo_module` makes them
(`MakeFakeArguments`, xla/tests/test_utils.cc), deterministic for a seed.

Values, by element type:
- floats uniform in [-0.1, 0.2); with `large_range`, sign * 2**uniform over the type's
  exponents (smallest normal up to the largest finite), with rare (1e-6 each) ±0, ±1 and
  ±inf where the type has them; never NaN (unsigned f8e8m0fnu: positive values);
- integers uniform over the type's range; predicates uniform; complex numbers: the real
  parts, then the imaginary parts, as floats.
Parameters whose values a use constrains, found by following each parameter through the
module (as XLA's dataflow does) into the ops listed in `_USES`:
- start indices of dynamic_slice and dynamic_update_slice in [0, dimension - size];
- gather and scatter indices whose windows fit in the operand: component k of an index
  vector in [0, dimension - window size] of the operand dimension it starts (XLA takes
  the smallest bound of every component, ignoring window sizes), sorted where the op
  says `indices_are_sorted`, distinct index vectors where scatter says `unique_indices`;
- init values of reduce, reduce_window and select_and_scatter: 0 for an add (or `or`,
  `xor`) reducer, 1 for multiply, all ones for `and`, the lowest value for max and the
  highest for min (XLA leaves those three random: "any value we generate will be just
  as wrong"); other reducers get random values;
- sort keys (operand 0 of a sort of several operands, or a stable one) without
  duplicates: a shuffled iota for integers (XLA's), distinct values for floats (XLA
  leaves floats unconstrained);
followed through reshape, transpose, convert, reduce_precision, slice, broadcast_in_dim,
concatenate, select (its values), tuples and get_tuple_element, optimization_barrier and
func.call into callees. A parameter with two kinds of constraint (an index and an init
value, say) is refused with an InputError, as XLA refuses it.
"""
from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir, preflight
from hlogen import types as T
from hlogen.computation import Computation, main_of
from hlogen.errors import InputError
from hlogen.ops.indexing import IndexMapping, scatter_window
from hlogen.runtime.arrays import check_signature

_SPECIAL_CHANCE = 1e-6  # per special value (XLA's kSpecialValueProbability)
_SPECIALS = (0.0, -0.0, 1.0, -1.0, np.inf, -np.inf)


@dataclasses.dataclass
class Need:
    """What the uses of one parameter (or tuple leaf) need of its values."""

    uses: list = dataclasses.field(default_factory=list)  # (kind, description)
    bounds: tuple | None = None  # indices: each value in [0, bound]; per component ...
    axis: int | None = None      # ... along this axis of the parameter, else the least
    sorted: bool = False
    unique: bool = False          # distinct index vectors (along `axis`)
    constant: str | None = None   # an init value: "zero", "one", "ones", "lowest", "highest"
    clash: bool = False           # init values of reducers with other identities
    distinct: bool = False        # sort keys

    @property
    def kinds(self) -> set:
        return {kind for kind, _ in self.uses}

    def describe(self) -> str:
        return "; ".join(text for _, text in self.uses)


# -- finding the uses -------------------------------------------------------------------------

# reducer op -> the identity of its init value (XLA's GetInitValue knows add and multiply)
_IDENTITY = {"stablehlo.add": "zero", "stablehlo.or": "zero", "stablehlo.xor": "zero",
             "stablehlo.multiply": "one", "stablehlo.and": "ones",
             "stablehlo.maximum": "lowest", "stablehlo.minimum": "highest"}
# ops whose result holds the values of the operand followed (its axes moved as each says)
_PASS_THROUGH = {"stablehlo.reshape", "stablehlo.transpose", "stablehlo.convert",
                 "stablehlo.reduce_precision", "stablehlo.slice", "stablehlo.broadcast_in_dim",
                 "stablehlo.concatenate", "stablehlo.select"}


def constraints(computation: Computation) -> list:
    """One Need (or None) per parameter leaf, in order (tuples flattened depth-first)."""
    main = main_of(computation.module, computation.source)
    functions = {ir.StringAttr(op.attributes["sym_name"]).value: op
                 for op in computation.module.body.operations if op.operation.name == "func.func"}
    where = computation.source or computation.name
    found = []
    for arg, shape in zip(main.regions[0].blocks[0].arguments, computation.parameter_shapes):
        for path, leaf in _leaf_paths(shape):
            need = Need()
            rank = leaf.rank if isinstance(leaf, T.Shape) else 0
            _follow(arg, path, tuple(range(rank)), need, functions, where, set())
            found.append(need if need.uses else None)
    return found


def _leaf_paths(shape, path=()):
    if isinstance(shape, T.TupleShape):
        return [p for i, s in enumerate(shape.elements) for p in _leaf_paths(s, path + (i,))]
    return [(path, shape)]


def _follow(value, path: tuple, axes: tuple, need: Need, functions: dict, where: str,
            seen: set) -> None:
    """Records in `need` the constrained uses of `value` (the leaf at tuple `path` in
    it), whose axes are the parameter's axes `axes` (None where one is lost)."""
    for use in value.uses:
        op, k = use.owner, use.operand_number
        key = (op, k, path, axes)
        if key in seen:
            continue
        seen.add(key)
        name = op.name
        if name == "stablehlo.get_tuple_element":
            if path and mlir.int_attribute(op, "index") == path[0]:
                _follow(op.results[0], path[1:], axes, need, functions, where, seen)
        elif name == "stablehlo.tuple":
            _follow(op.results[0], (k,) + path, axes, need, functions, where, seen)
        elif name in ("func.call", "stablehlo.optimization_barrier"):
            _into(op, k, path, axes, need, functions, where, seen)
        elif path:  # other uses of a tuple do not reach the leaf
            continue
        elif name in _PASS_THROUGH and not (name == "stablehlo.select" and k == 0):
            _follow(op.results[0], (), _moved(op, axes), need, functions, where, seen)
        else:
            _record(op, k, axes, need, where)


def _into(op, k: int, path, axes, need, functions, where, seen) -> None:
    if op.name == "stablehlo.optimization_barrier":
        _follow(op.results[k], path, axes, need, functions, where, seen)
        return
    callee = functions.get(ir.FlatSymbolRefAttr(op.attributes["callee"]).value)
    if callee is not None:
        _follow(callee.regions[0].blocks[0].arguments[k], path, axes, need, functions, where, seen)


def _moved(op, axes: tuple) -> tuple:
    """Where the parameter's axes are in the result of pass-through `op`."""
    name = op.name
    if name == "stablehlo.transpose":
        permutation = mlir.ints_attribute(op, "permutation")
        return tuple(None if a is None else permutation.index(a) for a in axes)
    if name == "stablehlo.broadcast_in_dim":
        dims = mlir.ints_attribute(op, "broadcast_dimensions")
        return tuple(None if a is None else dims[a] for a in axes)
    if name == "stablehlo.reshape" and op.operands[0].type != op.results[0].type:
        return (None,) * len(axes)
    if name == "stablehlo.concatenate":
        dimension = mlir.int_attribute(op, "dimension")
        return tuple(None if a == dimension else a for a in axes)
    return axes


def _shape(value) -> T.Shape:
    return mlir.shape_of_type(value.type)


def _record(op, k: int, axes: tuple, need: Need, where: str) -> None:
    name, operands = op.name, op.operands
    at = preflight.located(op, where)
    if name in ("stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice"):
        first = 1 if name == "stablehlo.dynamic_slice" else 2
        if k < first:
            return
        d = k - first
        size = (mlir.ints_attribute(op, "slice_sizes")[d] if first == 1
                else _shape(operands[1]).dimensions[d])
        _index(need, (_shape(operands[0]).dimensions[d] - size,), None, False, False,
               f"start index {d} of {name} at {at}")
    elif name == "stablehlo.gather" and k == 1:
        numbers = stablehlo.GatherDimensionNumbers(op.attributes["dimension_numbers"])
        sizes = mlir.ints_attribute(op, "slice_sizes")
        dims = _shape(operands[0]).dimensions
        _indices(need, [dims[d] - sizes[d] for d in numbers.start_index_map],
                 numbers.index_vector_dim, axes, op, f"indices of {name} at {at}")
    elif name == "stablehlo.scatter" and k == (len(operands) - 1) // 2:
        numbers = stablehlo.ScatterDimensionNumbers(op.attributes["scatter_dimension_numbers"])
        mapping = IndexMapping("scatter", ("",) * 6, tuple(numbers.update_window_dims),
                               tuple(numbers.inserted_window_dims),
                               tuple(numbers.input_batching_dims),
                               tuple(numbers.scatter_indices_batching_dims),
                               tuple(numbers.scattered_dims_to_operand_dims),
                               numbers.index_vector_dim)
        operand = _shape(operands[0])
        window = scatter_window(operand, _shape(operands[k]), _shape(operands[k + 1]), mapping)
        _indices(need, [operand.dimensions[d] - window[d] for d in mapping.index_map],
                 mapping.index_vector_dim, axes, op, f"indices of {name} at {at}")
    elif name in ("stablehlo.reduce", "stablehlo.reduce_window") and k >= len(operands) // 2:
        _init(need, op.regions[0], k - len(operands) // 2, len(operands) // 2,
              f"init value of {name} at {at}")
    elif name == "stablehlo.select_and_scatter" and k == 2:
        _init(need, op.regions[1], 0, 1, f"init value of {name} at {at}")
    elif name == "stablehlo.sort" and k == 0 and (len(operands) > 1 or _flag(op, "is_stable")):
        need.uses.append(("distinct", f"keys of {name} at {at}"))
        need.distinct = True


def _indices(need: Need, bounds: list, vector_dim: int, axes: tuple, op, what: str) -> None:
    if not bounds:  # index vectors of no components: nothing indexes
        return
    indices = _shape(op.operands[1] if op.name == "stablehlo.gather"
                     else op.operands[(len(op.operands) - 1) // 2])
    axis = axes.index(vector_dim) if vector_dim < indices.rank and vector_dim in axes else None
    _index(need, tuple(bounds), axis, _flag(op, "indices_are_sorted"), _flag(op, "unique_indices"),
           what)


def _flag(op, name: str) -> bool:
    return name in op.attributes and ir.BoolAttr(op.attributes[name]).value


def _index(need: Need, bounds: tuple, axis, is_sorted: bool, unique: bool, what: str) -> None:
    need.uses.append(("index", what))
    if need.bounds is None:
        need.bounds, need.axis = bounds, axis
    elif axis is not None and axis == need.axis and len(bounds) == len(need.bounds):
        need.bounds = tuple(map(min, bounds, need.bounds))
    else:  # different layouts of components: every value under the least bound
        need.bounds, need.axis = (min(bounds + need.bounds),), None
    need.sorted |= is_sorted
    need.unique |= unique


def _init(need: Need, region, j: int, n: int, what: str) -> None:
    """An init value (of result j of n): the identity of the reducer, where known."""
    block = region.blocks[0]
    returned = list(block.operations)[-1].operands[j]
    identity = None
    if isinstance(returned, ir.OpResult):
        producer = returned.owner
        args = sorted(v.arg_number for v in producer.operands
                      if isinstance(v, ir.BlockArgument) and v.owner == block)
        if producer.name in _IDENTITY and args == [j, j + n]:
            identity = _IDENTITY[producer.name]
    need.uses.append(("constant", what + (f" ({identity})" if identity else "")))
    need.clash |= identity is not None and need.constant not in (None, identity)
    need.constant = need.constant or identity


# -- making values -----------------------------------------------------------------------------

def random_inputs(computation: Computation, seed: int = 0, large_range: bool = False) -> list:
    """One argument per parameter of `computation` (a tuple for a tuple parameter), made
    as XLA's run_hlo_module makes them (this module's docstring), the same for the same
    seed."""
    return _inputs(computation, np.random.default_rng(_seed(seed)), large_range)


def random_inputs_apart(computation: Computation, seeds: dict,
                        large_range: bool = False) -> dict:
    """The arguments of the parameters `seeds` names (index -> seed), each as
    random_inputs makes it but from a generator of its own: the same whatever the other
    parameters are (the reducer's new parameters get theirs so)."""
    check_signature(computation)
    _check_sizes(computation, "random", seeds)
    needs = constraints(computation)
    made, before = {}, 0
    for i, (name, shape) in enumerate(zip(computation.parameter_names,
                                          computation.parameter_shapes)):
        paths = _leaf_paths(shape)
        if i in seeds:
            rng = np.random.default_rng(_seed(seeds[i]))
            made[i] = _rebuild(shape, iter([
                _leaf(rng, leaf, need, large_range, name + "".join(f".{k}" for k in path))
                for (path, leaf), need in zip(paths, needs[before:])]))
        before += len(paths)
    return made


def zero_inputs(computation: Computation) -> list:
    """One argument per parameter, all zeros, except the init values of the reductions,
    which get their reducer's identity (as run_hlo_module without random inputs)."""
    return _inputs(computation, None, False)


def _seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise InputError(f"seed must be a whole number >= 0, got {seed!r}")
    return int(seed)


def _inputs(computation: Computation, rng, large_range: bool) -> list:
    if not isinstance(computation, Computation):
        raise InputError(f"random inputs are made for a Computation, got "
                         f"{type(computation).__name__}")
    check_signature(computation)
    _check_sizes(computation, "zero" if rng is None else "random")
    needs = iter(constraints(computation))
    made = []
    for name, shape in zip(computation.parameter_names, computation.parameter_shapes):
        leaves = [_leaf(rng, leaf, next(needs), large_range, name + "".join(f".{i}" for i in path))
                  for path, leaf in _leaf_paths(shape)]
        made.append(_rebuild(shape, iter(leaves)))
    return made


def _check_sizes(computation: Computation, kind: str, only=None) -> None:
    """Refuses (InputError) inputs larger than this machine's memory, before any is
    made, naming the parameter, its shape and the bytes (hlogen.preflight.memory_refusal,
    as --input's literals are refused): `only` the parameters of these indices."""
    memory, total = preflight.physical_memory(), 0
    where = computation.source or computation.name
    for i, (name, shape) in enumerate(zip(computation.parameter_names,
                                          computation.parameter_shapes)):
        if only is not None and i not in only:
            continue
        for path, leaf in _leaf_paths(shape):
            if not isinstance(leaf, T.Shape):
                continue
            why = preflight.memory_refusal(leaf, memory)
            if why:
                leaf_name = name + "".join(f".{k}" for k in path)
                raise InputError(f"{where}: parameter {i} {leaf_name!r}: {why}: no {kind} "
                                 f"inputs are made for it")
            total += leaf.size * leaf.dtype.itemsize
    if total > memory:
        raise InputError(f"{where}: the parameters need {total} bytes ({total / 2**30:.1f} "
                         f"GiB) of {kind} inputs together, more than this machine's memory "
                         f"({memory / 2**30:.1f} GiB)")


def _rebuild(shape, leaves):
    if isinstance(shape, T.TupleShape):
        return tuple(_rebuild(s, leaves) for s in shape.elements)
    return next(leaves)


def _leaf(rng, shape: T.Shape, need: Need | None, large_range: bool, name: str) -> np.ndarray:
    if need is not None and (len(need.kinds) > 1 or need.clash):
        raise InputError(f"parameter {name!r} ({shape}) has conflicting constraints: "
                         f"{need.describe()}")
    et, dims = shape.element_type, shape.dimensions
    if need is not None and need.constant is not None:
        return np.full(dims, _constant(et, need.constant), et.dtype)
    if rng is None:
        return np.zeros(dims, et.dtype)
    if need is not None and need.bounds is not None:
        return _index_values(rng, shape, need, name)
    if need is not None and need.distinct and et.kind != T.PRED:
        return _distinct(rng, shape, large_range, name, need)
    return _values(rng, et, dims, large_range)


def _constant(et: T.ElementType, identity: str):
    if identity == "zero":
        return 0
    if identity == "one":
        return 1
    if et.kind == T.PRED:
        return identity != "lowest"
    if et.kind in T.INTEGER:
        info = ml_dtypes.iinfo(et.dtype)
        return {"ones": -1 if et.kind == T.SIGNED else info.max, "lowest": info.min,
                "highest": info.max}[identity]
    if _has_inf(et.component):
        return -np.inf if identity == "lowest" else np.inf
    info = ml_dtypes.finfo(et.component.dtype)  # (types without infinities: their extremes)
    return float(info.min) if identity == "lowest" else float(info.max)


def _has_inf(et: T.ElementType) -> bool:
    with np.errstate(all="ignore"):
        return bool(np.isinf(np.array(np.inf).astype(et.dtype).astype(np.float64)))


def _values(rng, et: T.ElementType, dims: tuple, large_range: bool) -> np.ndarray:
    n = math.prod(dims)
    if et.kind == T.COMPLEX:
        out = np.empty(n, et.dtype)
        out.real = _floats(rng, et.component, n, large_range)
        out.imag = _floats(rng, et.component, n, large_range)
        return out.reshape(dims)
    if et.kind == T.FLOAT:
        return _floats(rng, et, n, large_range).reshape(dims)
    if et.kind == T.PRED:
        return rng.integers(0, 2, dims, dtype=np.bool_)
    info = ml_dtypes.iinfo(et.dtype)
    carrier = et.dtype if et.bits >= 8 else np.dtype(np.int8 if et.kind == T.SIGNED else np.uint8)
    return rng.integers(info.min, info.max, dims, dtype=carrier, endpoint=True).astype(et.dtype)


def _floats(rng, et: T.ElementType, n: int, large_range: bool) -> np.ndarray:
    if large_range:
        out = _large(rng, et, n)
    elif et.dtype == np.float64:
        out = rng.random(n)
        out *= 0.3
        out -= 0.1
    else:
        out = rng.random(n, dtype=np.float32)
        out *= np.float32(0.3)
        out -= np.float32(0.1)
        if not et.has_sign:  # f8e8m0fnu: magnitudes
            np.abs(out, out=out)
    out = out.astype(et.dtype, copy=False)
    if et.is_narrow_float:  # what the type cannot hold (f8e8m0fnu's 0) would be NaN
        bad = np.isnan(out.astype(np.float32))
        if bad.any():
            out[bad] = ml_dtypes.finfo(et.dtype).smallest_normal
    return out


def _large(rng, et: T.ElementType, n: int) -> np.ndarray:
    """sign * 2**u, u uniform over [smallest normal's exponent, largest's + 1), drawn as
    an integer part (made a power of two from its bits) and 2**(a fraction); computed in
    f32 (f64 for f64 and exponents f32 lacks); rare special values."""
    info = ml_dtypes.finfo(et.dtype)
    wide = et.dtype == np.float64 or info.minexp < np.finfo(np.float32).minexp
    floats, words, mantissa, bias = (np.float64, np.uint64, 52, 1023) if wide else \
        (np.float32, np.uint32, 23, 127)
    # (16-bit draws: numpy's bounded integers are several times faster in them)
    whole = rng.integers(0, info.maxexp - 1 - info.minexp, n, dtype=np.uint16).astype(words)
    whole += words(info.minexp + bias)
    bits = whole << words(mantissa)
    if et.has_sign:
        bits |= rng.integers(0, 2, n, dtype=words) << words(8 * np.dtype(words).itemsize - 1)
    out = np.exp2(rng.random(n, dtype=floats))
    out *= bits.view(floats)
    if et.bits < 32:  # rounding past the largest finite
        np.clip(out, -float(info.max), float(info.max), out=out)
    specials = _specials(et)
    count = rng.binomial(n, min(1.0, _SPECIAL_CHANCE * len(specials))) if specials and n else 0
    if count:
        out[rng.integers(0, n, count)] = rng.choice(specials, count)
    return out


def _specials(et: T.ElementType) -> list:
    """The special values `et` holds as they are (no NaN where it has no -0 or inf)."""
    kept = []
    with np.errstate(all="ignore"):
        for v in _SPECIALS:
            back = np.array(v).astype(et.dtype).astype(np.float64)
            if back == v and np.signbit(back) == np.signbit(v):
                kept.append(v)
    return kept


def _index_values(rng, shape: T.Shape, need: Need, name: str) -> np.ndarray:
    """Values in [0, bound] (per component along need.axis), sorted and distinct as the
    uses say."""
    dims, et = shape.dimensions, shape.element_type
    top = {T.PRED: 1, T.FLOAT: 2**24}.get(et.kind) or min(int(ml_dtypes.iinfo(et.dtype).max), 2**62)
    highs = np.clip(np.array(need.bounds, np.int64), 0, top)
    axis = need.axis if need.axis is not None and dims[need.axis] == len(highs) else None
    if axis is None:
        highs = highs.min(keepdims=True)
    vectors = tuple(d for i, d in enumerate(dims) if i != axis)
    count, sizes = math.prod(vectors), tuple(int(h) + 1 for h in highs)
    space = math.prod(sizes)
    if need.unique and count > space:
        raise InputError(f"parameter {name!r} ({shape}): {count} distinct index vectors are "
                         f"needed ({need.describe()}), but only {space} fit in bounds")
    if need.unique and space < 2**62:  # (beyond, a duplicate is as good as impossible)
        codes = rng.choice(space, count, replace=False)
        if need.sorted:  # codes order as their index vectors do
            codes.sort()
        flat = np.stack(np.unravel_index(codes, sizes), -1)
    else:
        flat = rng.integers(0, highs + 1, (count, len(sizes)))
        if need.sorted:
            flat = flat[np.lexsort(flat.T[::-1])]
    values = flat.reshape(vectors + (len(sizes),))
    values = np.moveaxis(values, -1, axis) if axis is not None else values.reshape(dims)
    return values.astype(et.dtype)


def _distinct(rng, shape: T.Shape, large_range: bool, name: str, need: Need) -> np.ndarray:
    """Values without duplicates (sort keys): a shuffled iota for integers, as XLA makes
    them; floats drawn as usual, duplicates drawn again (types of 16 bits or fewer: drawn
    from their values, without replacement)."""
    et, n = shape.element_type, shape.size
    if et.kind in T.INTEGER:
        info = ml_dtypes.iinfo(et.dtype)
        span = int(info.max) - int(info.min) + 1
        if n > span:
            raise _too_many(name, shape, need, span)
        values = rng.permutation(n) if n <= info.max + 1 else \
            rng.choice(span, n, replace=False) + int(info.min)
        return values.astype(et.dtype).reshape(shape.dimensions)
    if et.kind == T.FLOAT and et.bits <= 16:
        every = np.arange(2 ** et.bits, dtype=np.uint16 if et.bits > 8 else np.uint8)
        with np.errstate(invalid="ignore"):  # (NaNs of the narrow types)
            wide = every.view(et.dtype).astype(np.float64)
        numbers = np.unique(wide[np.isfinite(wide)])  # one zero, each value once
        usual = numbers if large_range else numbers[(numbers >= -0.1) & (numbers < 0.2)]
        pool = usual if n <= usual.size else numbers
        if n > pool.size:
            raise _too_many(name, shape, need, pool.size)
        return rng.choice(pool, n, replace=False).astype(et.dtype).reshape(shape.dimensions)
    values = _values(rng, et, (n,), large_range)
    while True:
        _, first = np.unique(values, return_index=True)
        again = np.setdiff1d(np.arange(n), first)
        if not again.size:
            return values.reshape(shape.dimensions)
        values[again] = _values(rng, et, (again.size,), large_range)


def _too_many(name: str, shape: T.Shape, need: Need, count: int) -> InputError:
    return InputError(f"parameter {name!r} ({shape}): its {shape.size} values must be "
                      f"distinct ({need.describe()}), but {shape.element_type} holds only "
                      f"{count} distinct values")
