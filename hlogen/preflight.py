"""The checks every module passes before native code sees it.

MLIR's parser, XLA and the reference interpreter end the process (SIGSEGV,
SIGABRT, SIGFPE) on some inputs that look valid instead of reporting an error.
What can be known before running is checked here, and refused with an
hg.HlogenError that names the file, the op and its location:
- `check_module`: a public `@main` with a body, no other function declarations,
  region nesting within a bound, static shapes of element types hlogen supports
  whose byte sizes fit in 64 bits;
- `check_backend`: only what the backend runs (its declaration in hlogen.backends).
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
from hlogen.errors import HlogenError, InputError, ShapeError, UnsupportedError

# MLIR's parser crashes near 3,000 nested regions; XLA and the interpreter recurse on
# regions too. No real program comes near this bound (text nesting: mlir.MAX_TEXT_NESTING).
MAX_REGION_NESTING = 128


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
        name = mlir.symbol_name(op)
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
            if _unbounded_only(t):
                continue  # refined from the inputs before it runs (hlogen.passes.refine)
            raise InputError(f"{located(op, where)}: {op.name}: {e}") from None


def _unbounded_only(t) -> bool:
    """Whether `t` is a tensor of an element type hlogen has whose only trouble is a
    dynamic dimension with no bound."""
    found = mlir.bounds(t)
    if not found or mlir.DYNAMIC not in found:
        return False
    try:
        T.element_type_of_mlir(str(ir.RankedTensorType(t).element_type))
    except HlogenError:
        return False
    return True


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
@mlir.per_module(kept=2)
def inventory(module: ir.Module) -> Inventory:
    return Inventory(module)


def _check_nesting(op, where: str) -> None:
    depth, parent = 1, op.parent
    while parent is not None and parent.name != "builtin.module":
        depth += 1
        if depth > MAX_REGION_NESTING:
            raise InputError(f"{located(op, where)}: {op.name}: regions nest deeper than "
                             f"{MAX_REGION_NESTING} levels; hlogen refuses such modules")
        parent = parent.parent


def check_replicas(module: ir.Module, num_replicas: int, where: str,
                   num_partitions: int = 1) -> None:
    """Refuses collectives whose replica groups, permute pairs or shard counts do not fit
    `num_replicas` x `num_partitions` processes (rules: hlogen.ops.collectives.check_replicas,
    by the spec's modes)."""
    by_name = inventory(module).by_name
    for name in collectives.OPS:
        for op in by_name.get(name, ()):
            why = collectives.check_replicas(op, num_replicas, num_partitions)
            if why:
                grid = f"{num_replicas} replica(s)" + (
                    f" x {num_partitions} partitions" if num_partitions > 1 else "")
                raise ShapeError(f"{located(op, where)}: {why} (compiled for {grid})")


def check_backend(module: ir.Module, backend, where: str, num_replicas: int = 1) -> None:
    """Refuses what `backend` (its hlogen.backends declaration) cannot run, and values
    larger than this machine's memory (allocating them ends the process)."""
    memory = physical_memory()  # (once: a system call)
    found = inventory(module)
    for t, op in found.types.items():
        for leaf in T.leaves(mlir.shape_of_type(t)):
            if not isinstance(leaf, T.Shape):
                continue
            why = backend.refuses_types.get(leaf.element_type.name)
            if why:
                raise UnsupportedError(f"{located(op, where)}: {op.name}: {backend.words} "
                                       f"cannot run {leaf}: {why}")
            too_large = memory_refusal(leaf, memory)
            if too_large:
                raise UnsupportedError(f"{located(op, where)}: {op.name}: its result "
                                       f"{too_large}")
    for name, ops in found.by_name.items():
        if name not in backend.refuses:
            ops = ops[:1]  # what else is refused depends on the name only
        for op in ops:
            why = backend.refusal(op)
            if why:
                raise UnsupportedError(f"{located(op, where)}: {backend.words} cannot run "
                                       f"{name}: {why}")
    if backend.refuses_module is not None:
        refused = backend.refuses_module(module, num_replicas)
        if refused is not None:
            op, why = refused
            if op is None:
                raise UnsupportedError(f"{where}: {why}")
            raise UnsupportedError(f"{located(op, where)}: {backend.words} cannot run "
                                   f"{op.name} here: {why}")


def located(op, where: str) -> str:
    """`where:line:col` of `op` ("-" in MLIR's locations is the text hlogen parsed)."""
    found = mlir.file_location(op.location, where)
    return where if found is None else "{}:{}:{}".format(*found)


def memory_refusal(shape, memory: int | None = None) -> str | None:
    """Why an array of `shape` (an hg.Shape) is not made here: "SHAPE needs N bytes (G
    GiB), more than this machine's memory (M GiB)"; None when it fits in `memory` bytes
    (default: physical_memory()). Allocating more fails (numpy's MemoryError) or ends the
    process (the kernel's OOM killer): every array of a size the user chose (--input's
    literals, random and zero inputs, results) is checked first."""
    need = shape.size * shape.dtype.itemsize
    memory = physical_memory() if memory is None else memory
    if need <= memory:
        return None
    return (f"{shape} needs {need} bytes ({need / 2**30:.1f} GiB), more than this machine's "
            f"memory ({memory / 2**30:.1f} GiB)")


def physical_memory() -> int:
    """Bytes of memory of this machine (2**63 where the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2**63
