"""Running computations on the StableHLO reference interpreter (`eval_module`).

The interpreter is slow (about a microsecond per element operation) but exact:
it is the independent oracle PJRT results are compared with. The ops it lacks or gets
wrong reach it rewritten (the entries its declaration in hlogen.backends lists, applied
by hlogen.runtime.execution.prepare); what has no formulation is refused there.

Collectives run only in the interpreter's parallel runner: a module that has them,
or runs several replicas, is wrapped in a `main` that takes every replica's
arguments and calls the user's function once per replica through
`interpreter.run_parallel`. The runner meets the processes of a collective by
channel id, and two collectives of one channel in a row can mix their data (a fast
process enters the second before a slow one has left the first): so hlogen runs the
replicas as partitions of one replica, where every collective can have a channel id
of its own (`_parallel`; results are the same by the spec's process groups).
"""
from __future__ import annotations

import collections
import time

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir, sharding
from hlogen import types as T
from hlogen.backends import Backend
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, UnsupportedError
from hlogen.ops import collectives
from hlogen.runtime.arrays import (check_signature, flatten_arguments, replica_lists,
                                   replicated_call_error, structure_results)
from hlogen.runtime import manual
from hlogen.runtime.execution import Prepared, check_results, prepare
from hlogen.runtime import xla_options as _xla_options

_prepared: collections.OrderedDict = collections.OrderedDict()
_PREPARED_KEPT = 64
_REPLICA = "hlogen_replica"  # the user's main, renamed, in a parallel module


def available(backend: Backend) -> bool:
    return True  # it runs in this process


def compile(computation: Computation, backend: Backend, disk_cache=None, num_replicas: int = 1,
            xla_options: tuple = (), num_partitions: int | None = None) -> "Interpreted":
    """The interpreter's executable of `computation` (hlogen.runtime's table row): it takes
    no XLA options, and has no disk cache (`disk_cache` is not read). A sharded module
    runs as its global program (hlogen.sharding: the annotations dropped do not change
    what it computes); `num_partitions` is checked against what the module says. A
    shard_map module (Shardy's sdy.manual_computation) runs per partition: its body on
    the mesh's devices in the parallel runner (hlogen.runtime.manual). (A per-process
    program on replicas x partitions: hlogen.runtime.grid, which makes an Interpreted of
    its grid.)"""
    if xla_options:
        raise UnsupportedError(f"the reference interpreter takes no XLA options (given "
                               f"{_xla_options.text(xla_options)})")
    where = computation.source or computation.name
    partitioning = sharding.partitions_to_compile(computation.module, num_partitions, where)
    if partitioning is not None and partitioning.manual and num_replicas == 1 and \
            any(op.name in sharding.MANUAL_OPS for op in mlir.walk(computation.module)):
        return PerPartition(computation, backend, partitioning)
    if partitioning is not None:
        computation = sharding.global_program(computation, "the reference interpreter")
    exe = Interpreted(computation, backend, num_replicas)
    exe.partitioning = partitioning
    return exe


class Interpreted:
    """The interpreter as an executable (hlogen.runtime.executable.Executable)."""

    cache_outcome = None  # it compiles nothing: no disk cache
    devices: list = []  # it runs in this process

    def __init__(self, computation: Computation, backend: Backend, num_replicas: int = 1,
                 num_partitions: int = 1):
        check_signature(computation)
        self.computation = computation
        self.declaration = backend
        self.backend = backend.name
        self.num_partitions = num_partitions
        self.num_replicas = num_replicas * num_partitions  # the processes run_replicated runs
        self.local_replicas = list(range(self.num_replicas))
        self.key = (computation.fingerprint, backend.name, num_replicas, num_partitions)
        start = time.perf_counter()
        self._prepared, self._module = _prepare_cached(computation, backend, num_replicas,
                                                       num_partitions)
        self.compile_seconds = time.perf_counter() - start
        self._params = T.leaf_shapes(computation.parameter_shapes)

    partitioning = None  # hlogen.sharding.Partitioning of the sharded module it was given

    def refusal(self, what: str) -> str | None:
        return f"{self.declaration.words} compiles nothing: it gives no {what}"

    def how_it_runs(self) -> str:
        if self.partitioning is None:
            return ""
        return (f"the global program of a module sharded {self.partitioning.num_partitions} "
                f"ways, unpartitioned (its sharding annotations dropped)")

    def __repr__(self) -> str:
        replicas = f" x {self.num_replicas} replicas" if self.num_replicas > 1 else ""
        return f"<Executable {self.computation.signature()} on {self.backend}{replicas}>"

    def __call__(self, *args):
        if self.num_replicas > 1:
            raise replicated_call_error(self)
        return self.run_replicated([args])[0]

    def run_replicated(self, per_replica_args) -> list:
        """One result per replica; `per_replica_args` holds one list of arguments per replica."""
        attrs = [mlir.dense_attr(a, s)
                 for args in replica_lists(self, per_replica_args)
                 for a, s in zip(flatten_arguments(self.computation, args), self._params)]
        with mlir.collected_diagnostics() as messages:
            try:
                raw = stablehlo.eval_module(self._module, attrs)
            except Exception as e:
                detail = "\n".join(messages) or str(e)
                raise ExecutionError(f"{self.computation.name}: the reference interpreter "
                                     f"failed:\n{detail}") from None
        arrays = [np.array(r) for r in raw]
        per = len(arrays) // self.num_replicas
        results = [self._prepared.read_results(arrays[r * per:(r + 1) * per])
                   for r in range(self.num_replicas)]
        for flat in results:
            check_results(self.computation, self.backend, flat, self._prepared.cut)
        return [structure_results(self.computation.result_shapes, flat) for flat in results]


class PerPartition:
    """A shard_map module on the interpreter: global arguments in, global results out,
    its manual computation's body run on each partition with its shards (an Interpreted
    of the body on 1 replica x the mesh's devices; hlogen.runtime.manual)."""

    cache_outcome = None
    devices: list = []
    num_replicas = 1
    local_replicas = [0]

    def __init__(self, computation: Computation, backend: Backend, partitioning):
        check_signature(computation)
        self.computation = computation
        self.declaration = backend
        self.backend = backend.name
        self.partitioning = partitioning
        start = time.perf_counter()
        self._split = manual.split(computation)
        devices = len(self._split.mesh.device_ids)
        self._per_partition = Interpreted(self._split.program, backend, 1, devices)
        self.key = (computation.fingerprint, backend.name, "per partition")
        self.compile_seconds = time.perf_counter() - start
        self._execute = manual.execute

    def refusal(self, what: str) -> str | None:
        return f"{self.declaration.words} compiles nothing: it gives no {what}"

    def how_it_runs(self) -> str:
        return (f"the shard_map body on each of {self._per_partition.num_replicas} "
                f"partitions, in the interpreter's parallel runner")

    def __repr__(self) -> str:
        return (f"<Executable {self.computation.signature()} on {self.backend} per partition "
                f"x {self._per_partition.num_replicas}>")

    def __call__(self, *args):
        results = self._execute(self._split, self._per_partition,
                                flatten_arguments(self.computation, args), self.computation.name)
        check_results(self.computation, self.backend, results)
        return structure_results(self.computation.result_shapes, results)

    def run_replicated(self, per_replica_args) -> list:
        return [self(*args) for args in replica_lists(self, per_replica_args)]


def _prepare_cached(computation: Computation, backend: Backend, num_replicas: int,
                    num_partitions: int = 1) -> tuple[Prepared, ir.Module]:
    key = (computation.fingerprint, backend.name, num_replicas, num_partitions)
    found = _prepared.get(key)
    if found is None:
        # refuses what would abort it (the parallel runner's limits included)
        prepared = prepare(computation, backend, num_replicas, num_partitions)
        module = prepared.computation.module
        if num_replicas * num_partitions > 1 or \
                any(op.name in collectives.OPS for op in mlir.walk(module)):
            module = _parallel(module, num_replicas, num_partitions)
        found = _prepared[key] = (prepared, module)
        while len(_prepared) > _PREPARED_KEPT:
            _prepared.popitem(last=False)
    return found


# Ops that name processes by flattened id with a channel and use_global_device_ids
# (flattened_ids mode), and ops whose channel makes their pairs or groups partition ids
# (cross_partition mode): on one replica of R x P partitions, both are the flattened ids
# r * P + p of the user's processes.
_FLATTENED_IDS = ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter")
_CROSS_PARTITION = ("stablehlo.all_to_all", "stablehlo.collective_permute",
                    "stablehlo.collective_broadcast")


def _parallel(module: ir.Module, num_replicas: int, num_partitions: int = 1) -> ir.Module:
    """A copy of `module` whose main runs the original main on every process, the
    replicas x partitions being partitions of one replica (process r * P + p): every
    collective gets a channel id of its own and its spec's process groups as flattened
    ids; replica_id and partition_id are computed from the flattened id."""
    with mlir.context():
        parallel = ir.Module.parse(module.operation.get_asm(enable_debug_info=True))
        channel = 0
        for op in mlir.walk(parallel):
            if op.name in _FLATTENED_IDS or op.name in _CROSS_PARTITION:
                _flatten_groups(op, num_replicas, num_partitions)
                channel += 1
                op.attributes["channel_handle"] = stablehlo.ChannelHandle.get(channel, 1)
                if op.name in _FLATTENED_IDS:
                    op.attributes["use_global_device_ids"] = ir.UnitAttr.get()
            elif op.name in ("stablehlo.replica_id", "stablehlo.partition_id"):
                _process_id(op, num_partitions)
        main = mlir.functions(parallel)["main"]
        main.attributes["sym_name"] = ir.StringAttr.get(_REPLICA)
        _append_run_parallel_main(parallel, mlir.function_type(main),
                                  num_replicas * num_partitions)
    return parallel


def _flatten_groups(op: ir.Operation, num_replicas: int, num_partitions: int) -> None:
    """`op`'s groups (or pairs) as the flattened ids of its spec's process groups."""
    P = num_partitions
    mode = collectives.mode_of(op)
    if op.name == "stablehlo.collective_permute":
        pairs = collectives.pairs_of(op)
        if mode == collectives.CROSS_REPLICA:
            flat = [(s * P + p, t * P + p) for s, t in pairs for p in range(P)]
        else:
            flat = [(r * P + s, r * P + t) for r in range(num_replicas) for s, t in pairs]
        op.attributes["source_target_pairs"] = ir.DenseIntElementsAttr.get(
            np.array(flat, np.int64).reshape(len(flat), 2))
        return
    groups = collectives.process_groups(mode, collectives.groups_of(op), num_replicas, P)
    op.attributes["replica_groups"] = collectives.groups_attr(
        [[r * P + p for r, p in g] for g in groups])


def _process_id(op: ir.Operation, num_partitions: int) -> None:
    """replica_id (flattened id / P) or partition_id (flattened id % P) from the
    flattened id, which partition_id gives on one replica."""
    at, loc, t = ir.InsertionPoint(op), op.location, op.results[0].type
    flat = ir.Operation.create("stablehlo.partition_id", results=[t], loc=loc, ip=at).results[0]
    if op.name == "stablehlo.replica_id" and num_partitions == 1:
        value = flat
    else:
        count = ir.Operation.create("stablehlo.constant", results=[t], loc=loc, ip=at, attributes={
            "value": ir.DenseElementsAttr.get(np.array(num_partitions, np.uint32), type=t)})
        name = "stablehlo.divide" if op.name == "stablehlo.replica_id" else "stablehlo.remainder"
        value = ir.Operation.create(name, results=[t], operands=[flat, count.results[0]],
                                    loc=loc, ip=at).results[0]
    op.results[0].replace_all_uses_with(value)
    op.erase()


def _append_run_parallel_main(module: ir.Module, ftype: ir.FunctionType,
                              num_replicas: int) -> None:
    """Appends `main`: every replica's arguments in, `interpreter.run_parallel` of the
    renamed main on each (as partitions of one replica), every replica's results out."""
    ins = [str(t) for t in ftype.inputs] * num_replicas
    outs = [str(t) for t in ftype.results] * num_replicas
    args = ", ".join(f"%a{i}" for i in range(len(ins)))
    results = ", ".join(f"%r#{i}" for i in range(len(outs)))
    programs = ", ".join([f"@{_REPLICA}"] * num_replicas)
    text = (f"func.func @main({', '.join(f'%a{i}: {t}' for i, t in enumerate(ins))}) -> "
            f"({', '.join(outs)}) {{\n"
            f"  %r:{len(outs)} = \"interpreter.run_parallel\"({args}) "
            f"{{programs = [[{programs}]]}} : ({', '.join(ins)}) -> ({', '.join(outs)})\n"
            f"  return {results} : {', '.join(outs)}\n}}")
    # run_parallel's programs must resolve where it is parsed: a declaration stands in
    declaration = (f"func.func private @{_REPLICA}({', '.join(map(str, ftype.inputs))}) -> "
                   f"({', '.join(map(str, ftype.results))})\n")
    wrapper = ir.Module.parse(declaration + text)  # owns the op until it is moved
    module.body.append(list(wrapper.body.operations)[1])
