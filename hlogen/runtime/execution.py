"""The module a backend runs, prepared from a Computation.

Both backends get the preflight checks, the `legalize` pipeline and XLA's semantics
where StableHLO leaves results open. A module whose parameters or results
are tuples is wrapped in a `main` with one parameter and one result per leaf
(PJRT passes arrays, not tuples). For the reference interpreter, results that
Python cannot read back from MLIR attributes (bf16, f8, int4, complex; reading a
complex attribute can even end the process) are converted inside the module:
floats to the unsigned integers of their bits (f6 to f32), narrow integers to 8 bits,
complex numbers split into real and imaginary parts.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir._mlir_libs import _jax_mlir_ext

# imported for what they register: the interpreter's entries of hlogen.rewrites' table
from hlogen import decompositions, random_bits  # noqa: F401
from hlogen import mlir, ops, passes, preflight, rewrites, semantics
from hlogen import types as T
from hlogen.builder import Builder, Op
from hlogen.computation import Computation
from hlogen.ops._common import int_attr
from hlogen.runtime.arrays import leaf_shapes

# Result element types the interpreter's attributes convert to numpy as they are.
_READABLE = {"pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "f32", "f64"}


def _carrier(et: T.ElementType) -> T.ElementType:
    """How an unreadable leaf travels (complex ones go as (real, imag)): integers as a
    byte; floats as their bits (NaN payloads kept), widened to a byte, or where no
    integer has their width (f6, which has no NaN), as f32, which holds them exactly."""
    if et.kind != T.FLOAT:
        return T.ELEMENT_TYPES["s8" if et.kind == T.SIGNED else "u8"]
    return T.UNSIGNED_OF_WIDTH[max(et.bits, 8)] if et.bits in T.UNSIGNED_OF_WIDTH else T.f32


_CARRIER = {t.name: _carrier(t) for t in T.ELEMENT_TYPES.values()
            if t.name not in _READABLE and t.kind != T.COMPLEX}


def _reading(et: T.ElementType) -> str:
    """How the interpreter's result of type `et` is read: "as_is", "complex" (as real and
    imaginary parts), "bits" (a float as its carrier's unsigned bits) or "carrier"
    (converted to its carrier's values)."""
    if et.name in _READABLE:
        return "as_is"
    if et.kind == T.COMPLEX:
        return "complex"
    return "bits" if et.kind == T.FLOAT and _CARRIER[et.name].kind == T.UNSIGNED else "carrier"


class Prepared:
    """A module ready for a backend and how to turn its raw results into leaf arrays."""

    def __init__(self, computation: Computation, original_results: list, read_leaf: list[str]):
        self.computation = computation
        self.original_leaves = leaf_shapes(original_results)  # the user's result leaves
        self._read_leaf = read_leaf  # per original leaf: as _reading says
        # one raw result per user result, read as it is
        self.plain_results = not any(isinstance(s, T.TupleShape) for s in original_results) and \
            all(r == "as_is" for r in read_leaf)

    def read_results(self, raw: list) -> list[np.ndarray]:
        """Raw backend results -> one numpy array per leaf of the original results."""
        it = iter(raw)
        flat = []
        for leaf, how in zip(self.original_leaves, self._read_leaf):
            if how == "complex":
                re, im = np.asarray(next(it)), np.asarray(next(it))
                out = np.empty(re.shape, leaf.dtype)
                out.real, out.imag = re, im
            else:
                out = np.asarray(next(it))
                if how == "bits":
                    out = out.view(leaf.dtype)
                elif how == "carrier":
                    out = out.astype(leaf.dtype)
            flat.append(out)
        return flat


def prepare(computation: Computation, for_interpreter: bool, num_replicas: int = 1,
            num_partitions: int = 1) -> Prepared:
    """The module a backend runs: checked (hlogen.preflight, including its collectives
    against `num_replicas`), legalized, with XLA's semantics where StableHLO leaves
    results open (hlogen.semantics), then checked for the ops the backend can run.
    `num_partitions` above 1 is for XLA's SPMD partitioner (hlogen.xla_client)."""
    where = computation.source or computation.name
    preflight.check_module(computation.module, where)
    preflight.check_replicas(computation.module, num_replicas, where)
    legal = passes.run(computation, "legalize")
    with mlir.context():  # what XLA reads the replica count from, besides its options
        attributes = legal.module.operation.attributes
        attributes["mhlo.num_replicas"] = int_attr(num_replicas, 32)
        attributes["mhlo.num_partitions"] = int_attr(num_partitions, 32)
    semantics.rewrite_module(legal.module)
    semantics.explicit_replica_groups(legal.module, num_replicas)
    # what the backend lacks or gets wrong, rewritten into ops it runs (hlogen.rewrites)
    rewrites.rewrite_module(legal.module, "interpret" if for_interpreter else "pjrt")
    leaves_out = leaf_shapes(computation.result_shapes)
    read = [_reading(leaf.element_type) if for_interpreter else "as_is" for leaf in leaves_out]
    has_tuples = any(isinstance(s, T.TupleShape)
                     for s in computation.parameter_shapes + computation.result_shapes)
    if has_tuples or any(r != "as_is" for r in read):
        legal = _wrap(legal, read)
    preflight.check_backend(legal.module, "interpret" if for_interpreter else "pjrt", where)
    return Prepared(legal, computation.result_shapes, read)


def _wrap(entry: Computation, read: list[str]) -> Computation:
    """A module whose `main` has one parameter per leaf and one result per leaf (or two
    for a complex leaf read as real and imaginary parts), with the original inlined."""
    main, result_shapes = entry._main, entry.result_shapes
    b = Builder(entry.name)
    module_attributes = entry.module.operation.attributes
    for name in module_attributes:  # e.g. mhlo.num_replicas
        if name != "sym_name":
            b.module.operation.attributes[name] = module_attributes[name]
    leaves = iter([b.parameter(leaf, f"{name}.{i}" if isinstance(shape, T.TupleShape) else name)
                   for name, shape in zip(entry.parameter_names, entry.parameter_shapes)
                   for i, leaf in enumerate(T.leaves(shape))])

    def rebuild(shape):
        if isinstance(shape, T.TupleShape):
            return ops.tuple([rebuild(s) for s in shape.elements], builder=b)
        return next(leaves)

    args = [rebuild(s) for s in entry.parameter_shapes]
    # Inlined, not called: the interpreter aborts on tuple arguments to func.call.
    with b._ip, mlir.user_location():
        values = _jax_mlir_ext.inlined_func_call(main, [a.value for a in args])
    main.erase()
    for op in list(entry.module.body.operations):  # functions the entry calls come along
        b.module.body.append(op)

    def flatten(op):
        if isinstance(op.shape, T.TupleShape):
            return [leaf for i in range(len(op.shape.elements))
                    for leaf in flatten(ops.get_tuple_element(op, i))]
        return [op]

    outs = [leaf for s, v in zip(result_shapes, values) for leaf in flatten(Op(b, v, s))]
    results = []
    for leaf, how in zip(outs, read):
        if how == "complex":
            results += [ops.real(leaf), ops.imag(leaf)]
        elif how in ("bits", "carrier"):
            carrier = _CARRIER[leaf.dtype.name]
            if how == "bits":
                leaf = ops.bitcast_convert_type(leaf, T.UNSIGNED_OF_WIDTH[leaf.dtype.bits])
            results.append(leaf if leaf.dtype is carrier else
                           ops.convert_element_type(leaf, carrier))
        else:
            results.append(leaf)
    return b.build(*results)
