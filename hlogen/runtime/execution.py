"""The module a backend runs, prepared from a Computation for its declaration.

Every backend gets the preflight checks, the `legalize` pipeline and the rewrites its
declaration lists (hlogen.backends: XLA's semantics where StableHLO leaves results open,
for all; the ops it lacks, for the interpreter). A module whose parameters or results
are tuples is wrapped in a `main` with one parameter and one result per leaf
(PJRT passes arrays, not tuples). Results of element types a backend does not hand back
as they are (`Backend.readable`: the interpreter's results are MLIR attributes, which
Python reads for bf16, f8, int4 or complex values only wrongly, or by ending the
process) are converted inside the module: floats to the unsigned integers of their bits
(f6 to f32), narrow integers to 8 bits, complex numbers split into real and imaginary
parts.

A module marked `as_written` (hlogen.differential's test sides: XLA is given what jax would
give it) gets neither `legalize` nor the rewrites on a backend that compiles: XLA's own
converter takes its CHLO ops and XLA's own semantics apply. Where XLA cannot compile it so,
hlogen.runtime.pjrt compiles hlogen's form and says what hlogen changed (`hlogen_changes`).

What a backend hands back is checked against the module's declared results
(`check_results`, for every backend, where results come back): a result of another
shape or element type (XLA CPU's bitcast_convert of tensor<8xi1> to tensor<i8> gives
s8[8]) is an ExecutionError, never shown as the answer.
"""
from __future__ import annotations

import enum

import numpy as np

from jaxlib.mlir import ir

from hlogen import dynamism, mlir, ops, passes, preflight, rewrites
from hlogen import types as T
from hlogen.backends import Backend
from hlogen.builder import Builder, Op
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, ShapeError
from hlogen.ops import tuples


class Reading(enum.Enum):
    """How a backend's raw result leaf becomes the user's array."""
    AS_IS = "as_is"
    COMPLEX = "complex"  # as real and imaginary parts
    BITS = "bits"        # a float as its carrier's unsigned bits
    CARRIER = "carrier"  # converted to its carrier's values


def _carrier(et: T.ElementType) -> T.ElementType:
    """How an unreadable leaf travels (complex ones go as (real, imag)): integers as a
    byte; floats as their bits (NaN payloads kept), widened to a byte, or where no
    integer has their width (f6, which has no NaN), as f32, which holds them exactly."""
    if et.kind != T.FLOAT:
        return T.ELEMENT_TYPES["s8" if et.kind == T.SIGNED else "u8"]
    return T.UNSIGNED_OF_WIDTH[max(et.bits, 8)] if et.bits in T.UNSIGNED_OF_WIDTH else T.f32


def _reading(backend: Backend, et: T.ElementType) -> Reading:
    """How `backend`'s result of type `et` is read."""
    if backend.reads_as_is(et):
        return Reading.AS_IS
    if et.kind == T.COMPLEX:
        return Reading.COMPLEX
    return Reading.BITS if et.kind == T.FLOAT and _carrier(et).kind == T.UNSIGNED else \
        Reading.CARRIER


AS_WRITTEN = "hlogen.as_written"  # a module attribute: compile it as written (as_written)


def as_written(computation: Computation) -> Computation:
    """`computation` marked so that a backend that compiles (XLA) gets it as written: no
    `legalize`, no rewrites (CHLO ops go to XLA's own converter, as jax gives them); the
    interpreter still gets hlogen's form. The same computation when already marked."""
    if is_as_written(computation):
        return computation
    marked = computation.clone()
    with mlir.context():
        marked.module.operation.attributes[AS_WRITTEN] = ir.UnitAttr.get()
    return marked


def is_as_written(computation: Computation) -> bool:
    return AS_WRITTEN in computation.module.operation.attributes


def hlogen_form(computation: Computation) -> Computation:
    """`computation` without the mark of `as_written`: what hlogen's form is made from."""
    if not is_as_written(computation):
        return computation
    plain = computation.clone()
    del plain.module.operation.attributes[AS_WRITTEN]
    return plain


def hlogen_changes(computation: Computation, backend: Backend) -> list[str]:
    """What hlogen's form of `computation` for `backend` changes of the module as written:
    each CHLO or shape op `legalize` expands, each op a rewrite of the backend's
    declaration replaces (with why), once per op name and reason."""
    plain = hlogen_form(computation)
    said = [f"{name} expanded into StableHLO ops (legalize)"
            for name in dict.fromkeys(passes.foreign_ops(plain))]
    legal = passes.run(plain, "legalize")
    for rule in dict.fromkeys(rewrites.applicable(legal.module, backend.rewrites)):
        said.append(f"{rule.op} rewritten ({rule.why})")
    return said


class Prepared:
    """A module ready for a backend and how to turn its raw results into leaf arrays."""

    def __init__(self, computation: Computation, original_results: list,
                 read_leaf: list[Reading], cut=None, as_written: bool = False):
        self.computation = computation
        self.as_written = as_written  # given to XLA as written (no legalize, no rewrites)
        self.cut = cut  # hlogen.dynamism.Cut of a module with dynamic dimensions, or None
        self.original_leaves = T.leaf_shapes(original_results)  # the user's result leaves
        self._read_leaf = read_leaf  # per original leaf: as _reading says

    def read_results(self, raw: list) -> list[np.ndarray]:
        """Raw backend results -> one numpy array per leaf of the original results."""
        it = iter(raw)
        flat = []
        for leaf, how in zip(self.original_leaves, self._read_leaf):
            if how is Reading.COMPLEX:
                re, im = np.asarray(next(it)), np.asarray(next(it))
                out = np.empty(re.shape, leaf.dtype)
                out.real, out.imag = re, im
            else:
                out = np.asarray(next(it))
                if how is Reading.BITS:
                    out = out.view(leaf.dtype)
                elif how is Reading.CARRIER:
                    out = out.astype(leaf.dtype)
            flat.append(out)
        if self.cut is not None:
            flat = self.cut.apply(flat + [np.asarray(r) for r in it])
        return flat


def check_results(computation: Computation, backend: str, results: list, cut=None) -> None:
    """ExecutionError where `backend`'s results (one array per leaf of `computation`'s
    results, as read) are not as many, or not of the shapes and element types, as the
    module declares: a backend's wrong answer of another type is no answer. A dimension
    `cut` (hlogen.dynamism.Cut) cut to its runtime size may be shorter than declared."""
    declared = T.leaf_shapes(computation.result_shapes)
    if len(results) != len(declared):
        raise ExecutionError(f"{computation.name}: the {backend} backend returned "
                             f"{len(results)} result(s) where the module declares "
                             f"{len(declared)}: {', '.join(map(str, declared))}")
    dynamic = {(r, d) for r, d, _ in cut.cuts} if cut is not None else set()
    for i, (leaf, got) in enumerate(zip(declared, results)):
        got = np.asarray(got)
        fits = got.ndim == len(leaf.dimensions) and all(
            n == bound or ((i, d) in dynamic and n <= bound)
            for d, (n, bound) in enumerate(zip(got.shape, leaf.dimensions)))
        if not fits or got.dtype != leaf.dtype:
            raise ExecutionError(
                f"{computation.name}: the {backend} backend returned result {i} as "
                f"{T.shape_text(got)}, where the module declares {leaf}: not an answer of the "
                f"module (a bug of the backend's, its values not shown)")


def prepare(computation: Computation, backend: Backend, num_replicas: int = 1,
            num_partitions: int = 1, hlo_passes: bool = True) -> Prepared:
    """The module `backend` runs: checked (hlogen.preflight, including its collectives
    against `num_replicas`), legalized, rewritten as the backend's declaration lists
    (hlogen.rewrites), then checked for what the backend refuses; a module marked
    `as_written` skips legalize and the rewrites where the backend compiles. `num_partitions`
    above 1 is for XLA's SPMD partitioner (hlogen.xla_client)."""
    written = backend.compiles and is_as_written(computation)
    computation = hlogen_form(computation) if is_as_written(computation) else computation
    where = computation.source or computation.name
    preflight.check_module(computation.module, where)
    left = passes.unbounded(computation.module, cached=True, source=computation.source)
    if left is not None:
        raise ShapeError(f"{where}: {left} is dynamic with no bound: refine it from inputs "
                         f"first (hlogen.passes.refine; hlogen run does with its --input)")
    preflight.check_replicas(computation.module, num_replicas, where)
    legal = computation.clone() if written else passes.run(computation, "legalize")
    with mlir.context():  # what XLA reads the replica count from, besides its options
        attributes = legal.module.operation.attributes
        attributes["mhlo.num_replicas"] = mlir.int_attr(num_replicas, 32)
        attributes["mhlo.num_partitions"] = mlir.int_attr(num_partitions, 32)
    # (legalize makes no dynamic dimension: asked of the module preflight has just read)
    cut = dynamism.expose(legal.module) if dynamism.present(computation.module, cached=True) \
        else None
    if not written:
        rewrites.rewrite_module(legal.module, backend.rewrites, num_replicas)
    if not hlo_passes:  # no layout assignment: where layouts matter, data moved instead
        rewrites.rewrite_module(legal.module, rewrites.LAYOUTS, num_replicas)
    read = [_reading(backend, leaf.element_type)
            for leaf in T.leaf_shapes(computation.result_shapes)]
    if cut is not None:  # the hidden results: s32 sizes
        read += [Reading.AS_IS] * cut.hidden
        if backend.compiles:  # XLA: ops the rewrites made read the dynamic values too
            dynamism.expose_again(legal.module)
    has_tuples = any(isinstance(s, T.TupleShape)
                     for s in computation.parameter_shapes + computation.result_shapes)
    if has_tuples or any(r is not Reading.AS_IS for r in read):
        legal = _wrap(legal, read)
    preflight.check_backend(legal.module, backend, where, num_replicas)
    return Prepared(legal, computation.result_shapes, read, cut, written)


def _wrap(entry: Computation, read: list[Reading]) -> Computation:
    """A module whose `main` has one parameter per leaf and one result per leaf (or two
    for a complex leaf read as real and imaginary parts), with the original inlined."""
    main, result_shapes = entry.main, entry.result_shapes
    b = Builder(entry.name)
    module_attributes = entry.module.operation.attributes
    for name in module_attributes:  # e.g. mhlo.num_replicas
        if name != "sym_name":
            b.module.operation.attributes[name] = module_attributes[name]
    leaves = [b.parameter(leaf, f"{name}.{i}" if isinstance(shape, T.TupleShape) else name)
              for name, shape in zip(entry.parameter_names, entry.parameter_shapes)
              for i, leaf in enumerate(T.leaves(shape))]
    args = tuples.rebuild(entry.parameter_shapes, leaves, b)
    # Inlined, not called: the interpreter aborts on tuple arguments to func.call.
    values = mlir.inline_call(main, [a.value for a in args], b.insertion_point,
                              mlir.user_location())
    main.erase()
    for op in list(entry.module.body.operations):  # functions the entry calls come along
        b.module.body.append(op)

    outs = tuples.leaves([Op(b, v, s) for s, v in zip(result_shapes, values)])
    results = []
    for leaf, how in zip(outs, read):
        if how is Reading.COMPLEX:
            results += [ops.real(leaf), ops.imag(leaf)]
        elif how is not Reading.AS_IS:
            carrier = _carrier(leaf.dtype)
            if how is Reading.BITS:
                leaf = ops.bitcast_convert_type(leaf, T.UNSIGNED_OF_WIDTH[leaf.dtype.bits])
            results.append(leaf if leaf.dtype is carrier else
                           ops.convert_element_type(leaf, carrier))
        else:
            results.append(leaf)
    return b.build(*results)
