"""The checks every module passes before native code sees it.

MLIR's parser, XLA and the reference interpreter end the process (SIGSEGV,
SIGABRT, SIGFPE) on some inputs that look valid instead of reporting an error.
What can be known before running is checked here, and refused with an
hg.HlogenError that names the file, the op and its location:
- `check_module`: a public `@main` with a body, no other function declarations,
  region nesting within a bound, static shapes of element types hlogen supports
  whose byte sizes fit in 64 bits;
- `check_backend`: only ops the backend can run (`UNSUPPORTED` is the table).
What depends on data (a sort comparator that is not a strict weak order, memory
exhausted while running) cannot be known here: the command line runs computations
in a child process for that (see hlogen_cli.isolation).
"""
from __future__ import annotations

import os

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.computation import is_public
from hlogen.ops import collectives
from hlogen.ops.custom_call import pjrt_refusal
from hlogen.ops.random import NORMAL_TYPES, UNIFORM_TYPES
from hlogen.errors import HlogenError, InputError, ShapeError, UnsupportedError

# MLIR's parser crashes near 3,000 nested regions; XLA and the interpreter recurse on
# regions too. No real program comes near this bound (text nesting: mlir.MAX_TEXT_NESTING).
MAX_REGION_NESTING = 128


def _tuple_operands(op) -> bool:
    return any(str(v.type).startswith("tuple<") for v in op.operands)


def _element_type(value) -> T.ElementType:
    return mlir.shape_of_type(value.type).element_type


def _rng_refusal(op):
    # XLA CPU aborts on types it does not generate (ops.random's table says which)
    et = _element_type(op.results[0])
    supported = NORMAL_TYPES if mlir.enum_attribute(op, "rng_distribution") == "NORMAL" else UNIFORM_TYPES
    if et.name not in supported:
        return f"XLA CPU generates only {', '.join(sorted(supported))} values, not {et.name}"
    return None


def _bits_refusal(op):
    # XLA CPU treats float or signed random bits as unsigned ones, and the ops that use
    # them too: ops.rng_bit_generator emits unsigned bits and bitcasts them
    et = _element_type(op.results[1])
    if et.kind != T.UNSIGNED:
        return (f"XLA CPU miscompiles random bits of type {et.name}; generate unsigned bits of "
                f"the same width and bitcast them (as ops.rng_bit_generator does)")
    return None


def _native_code(op):
    # what is left of the custom calls after hlogen.decompositions' LAPACK rewrites
    target = ir.StringAttr(op.attributes["call_target_name"]).value
    if target.startswith("lapack_") and any(isinstance(r.type, ir.TupleType) for r in op.results):
        return (f"{target}: hlogen rewrites LAPACK calls of several results, as jax emits "
                f"them (and hlogen reads XLA's HLO), not of one tuple result")
    if target.startswith("lapack_"):
        return (f"{target}: this LAPACK routine has no formulation here (the eigen, SVD and QR "
                f"solvers run on PJRT only; hlogen rewrites jaxlib's lapack_?potrf_ffi, "
                f"lapack_?trsm_ffi and lapack_?getrf_ffi)")
    return (f"{target} is native code, which the interpreter cannot call (hlogen rewrites only "
            f"jaxlib's LAPACK potrf, trsm and getrf)")


def _two_bit(what: str):
    """A predicate: `op` has s2/u2 operands, which XLA CPU `what` (s4 and wider work)."""
    def refusal(op):
        for value in op.operands:
            if _element_type(value).bits == 2:
                return (f"XLA CPU {what} {_element_type(value).name} values; convert them to "
                        f"s8/u8 first")
        return None
    return refusal


def _loop_in_map(op):
    # found by hlogen.differential's generator: XLA CPU's loop emitter CHECK-fails
    # ("operand_maps.size() == 1" in computation_partitioner.cc) on a while in a map
    found = []

    def visit(inner):
        if inner.name == "stablehlo.while":
            found.append(inner)
            return ir.WalkResult.INTERRUPT
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return bool(found)


def _variadic_with_channel(op):
    return len(op.operands) > 1 and "channel_handle" in op.attributes


# jax's host callbacks (io_callback, pure_callback, debug.callback and debug.print): they
# name a Python function of the process that lowered the module by its index (or address)
# there; in another process XLA calls whatever that is, and ends the process (SIGSEGV)
_HOST_CALLBACKS = frozenset({
    "xla_python_cpu_callback", "xla_ffi_python_cpu_callback",
    "xla_ffi_partitioned_python_cpu_callback", "xla_python_gpu_callback",
    "xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_gpu_callback"})


def _pjrt_custom_call(op):
    # jax's host callbacks, reserved targets, places XLA CPU does not run one
    target = ir.StringAttr(op.attributes["call_target_name"]).value
    if target in _HOST_CALLBACKS:
        return (f"{target} is a jax host callback: it calls a Python function of the process "
                f"that lowered the module, which this process does not have (XLA would end "
                f"the process); lower the function without the callback")
    return pjrt_refusal(op)


_DECOMPOSABLE = "the interpreter has no usable implementation of it (it aborts, or does not finish)"

# backend -> {op name: (why, when)}: the ops a backend cannot run, once hlogen.rewrites'
# table has rewritten what it can (the interpreter's cholesky, rng_bit_generator, c64
# FFTs, LAPACK custom calls...). `when` is None (always) or a predicate of the op (True,
# or a string that says why instead of `why`). Ops of dialects other than stablehlo and
# func are refused by the interpreter as well (it aborts on them).
UNSUPPORTED = {
    "interpret": {
        "stablehlo.rng": ("its state is XLA's, kept in the process, so no module can give the "
                          "same numbers; use rng_bit_generator, whose state is explicit", None),
        "stablehlo.custom_call": ("", _native_code),
        "stablehlo.einsum": ("hlogen rewrites einsums of two operands without '...' or a label "
                             "repeated within one of them; the interpreter has none", None),
        "stablehlo.unary_einsum": (_DECOMPOSABLE + "; XLA does not translate it either", None),
        **{name: ("the interpreter runs one module, with nothing outside it to exchange "
                  "data with", None) for name in (
            "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv")},
        "func.call": ("the interpreter aborts on tuples passed to func.call", _tuple_operands),
        "stablehlo.set_dimension_size": (_DECOMPOSABLE, None),
    },
    "pjrt": {
        "stablehlo.all_reduce": (
            "XLA CPU fails to compile an all-reduce of several operands that has a channel id "
            "(\"LogicalBuffer ... does not have a layout\"); replicas of one module need no "
            "channel id, or reduce the elements one by one", _variadic_with_channel),
        "stablehlo.infeed": ("jaxlib's PJRT client has no way to fill a device's infeed queue, "
                             "so the run would wait forever", None),
        "stablehlo.set_dimension_size": (
            "XLA returns the padding of a dynamic dimension as data and GetDimensionSize of it "
            "as the bound, so its results would be wrong", None),
        "stablehlo.custom_call": ("", _pjrt_custom_call),
        "stablehlo.rng": ("", _rng_refusal),
        "stablehlo.rng_bit_generator": ("", _bits_refusal),
        "stablehlo.sort": ("", _two_bit("sorts wrongly")),
        "stablehlo.concatenate": ("", _two_bit("ends the process (a CHECK in ir_array.cc) "
                                               "concatenating")),
        "stablehlo.map": ("XLA CPU ends the process (a CHECK in computation_partitioner.cc) "
                          "compiling a while loop inside a map's computation", _loop_in_map),
    },
}
_INTERPRETER_DIALECTS = ("stablehlo.", "func.")


def check_module(module: ir.Module, where: str) -> None:
    """The structural checks (see the module docstring); `where` names the source."""
    try:
        _check_structure(module, where)
    except RuntimeError as e:  # nanobind's conversion error: a name that is not UTF-8
        raise InputError(f"{where}: cannot read this module: it holds text that is not UTF-8 "
                         f"({e})") from None


def _check_structure(module: ir.Module, where: str) -> None:
    main = None
    for op in module.body.operations:
        op = op.operation
        if op.name != "func.func":
            continue
        name = ir.StringAttr(op.attributes["sym_name"]).value
        if not op.regions[0].blocks:
            raise InputError(f"{located(op, where)}: function @{name} is a declaration without "
                             f"a body; hlogen runs modules whose functions are all defined")
        if name == "main":
            main = op
    if main is None:
        raise InputError(f"{where}: the module has no function @main: hlogen runs the "
                         f"function named main")
    if not is_public(main):
        raise InputError(f"{located(main, where)}: @main must be public (it is the entry point)")
    found = inventory(module)
    for op in found.with_regions:
        _check_nesting(op, where)
    for t, op in found.types.items():
        try:
            T.leaves(mlir.shape_of_type(t))
        except HlogenError as e:
            raise InputError(f"{located(op, where)}: {op.name}: {e}") from None


class Inventory:
    """What the checks read of a module, from one walk (in C++, calling back per op):
    its ops by name, each type its values have (with the first op that makes one), and
    the ops that hold regions. A walk in Python costs several times MLIR's parse."""

    def __init__(self, module: ir.Module):
        self.by_name: dict = {}
        self.types: dict = {}  # ir.Type -> the first op whose result or block argument has it
        by_name, types = self.by_name, self.types
        advance = ir.WalkResult.ADVANCE

        def visit(op):  # (the hot loop: one call per op)
            found = by_name.get(op.name)
            if found is None:
                found = by_name[op.name] = []
            found.append(op)
            for t in op.results.types:
                if t not in types:
                    types[t] = op
            return advance

        for op in module.body.operations:
            op.operation.walk(visit, ir.WalkOrder.PRE_ORDER)
        # an op's definition fixes how many regions it has: asked once per name
        self.with_regions = [op for ops in by_name.values() if len(ops[0].regions)
                             for op in ops]
        for op in self.with_regions:
            for region in op.regions:
                for block in region.blocks:
                    for arg in block.arguments:
                        if arg.type not in types:
                            types[arg.type] = op


# the inventories of the last modules checked, with the modules themselves (kept alive, so
# that `is` identifies them): loading and then preparing one module walks it once. Modules
# that passes change are clones (hlogen.passes), not these. Two: a run checks the module
# it was given and the one it prepared from it; more would keep large modules alive.
_inventories: list = []
_INVENTORIES_KEPT = 2


def inventory(module: ir.Module) -> Inventory:
    for kept, found in _inventories:
        if kept is module:
            return found
    found = Inventory(module)
    _inventories.insert(0, (module, found))
    del _inventories[_INVENTORIES_KEPT:]
    return found


def _check_nesting(op, where: str) -> None:
    depth, parent = 1, op.parent
    while parent is not None and parent.name != "builtin.module":
        depth += 1
        if depth > MAX_REGION_NESTING:
            raise InputError(f"{located(op, where)}: {op.name}: regions nest deeper than "
                             f"{MAX_REGION_NESTING} levels; hlogen refuses such modules")
        parent = parent.parent


def check_replicas(module: ir.Module, num_replicas: int, where: str) -> None:
    """Refuses collectives whose replica groups, permute pairs or shard counts do not fit
    `num_replicas` replicas (rules: hlogen.ops.collectives.check_replicas)."""
    by_name = inventory(module).by_name
    for name in collectives.OPS:
        for op in by_name.get(name, ()):
            why = collectives.check_replicas(op, num_replicas)
            if why:
                raise ShapeError(f"{located(op, where)}: {why} (compiled for {num_replicas} "
                                 f"replica(s))")


def check_backend(module: ir.Module, backend: str, where: str) -> None:
    """Refuses ops `backend` ("interpret" or "pjrt") cannot run, by UNSUPPORTED, and
    values larger than this machine's memory (allocating them ends the process)."""
    table = UNSUPPORTED[backend]
    memory = physical_memory()
    found = inventory(module)
    for t, op in found.types.items():
        for leaf in T.leaves(mlir.shape_of_type(t)):
            why = isinstance(leaf, T.Shape) and leaf.element_type.limits.get(backend)
            if why:  # the types table's fact
                raise UnsupportedError(f"{located(op, where)}: {op.name}: "
                                       f"{_backend_words(backend)} cannot run {leaf}: {why}")
            if isinstance(leaf, T.Shape) and leaf.size * leaf.dtype.itemsize > memory:
                raise UnsupportedError(
                    f"{located(op, where)}: {op.name}: its result {leaf} needs "
                    f"{leaf.size * leaf.dtype.itemsize / 2**30:.1f} GiB, more than this "
                    f"machine's memory ({memory / 2**30:.1f} GiB)")
    for name, ops in found.by_name.items():
        entry = table.get(name)
        if entry is not None:
            for op in ops:
                verdict = entry[1] is None or entry[1](op)
                if verdict:  # a predicate may say why itself
                    raise UnsupportedError(
                        f"{located(op, where)}: {_backend_words(backend)} cannot run {name}: "
                        f"{verdict if isinstance(verdict, str) else entry[0]}")
        if backend == "interpret" and not name.startswith(_INTERPRETER_DIALECTS):
            raise UnsupportedError(f"{located(ops[0], where)}: {_backend_words(backend)} cannot "
                                   f"run {name}: it runs StableHLO and func ops only")


def _backend_words(backend: str) -> str:
    return "the reference interpreter" if backend == "interpret" else "XLA (PJRT)"


def located(op, where: str) -> str:
    """`where:line:col` of `op` ("-" in MLIR's locations is the text hlogen parsed)."""
    found = mlir.file_location(op.location, where)
    return where if found is None else "{}:{}:{}".format(*found)


def physical_memory() -> int:
    """Bytes of memory of this machine (2**63 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**63
