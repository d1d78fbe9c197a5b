"""A per-process program on a grid of replicas x partitions (StableHLO's process grid).

The program is what each process runs (as `interpreter.run_parallel` runs it, and as a
shard_map body is): PJRT compiles it for R replicas x P partitions with every argument
and result `{manual}` (XLA's SPMD partitioner then leaves it as it is), replica r's
partition p on device r * P + p; the interpreter runs the R x P processes in its parallel
runner (hlogen.runtime.interpreter). Arguments and results are per process, in process
order (r * P + p).
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from hlogen import backends, mlir
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, HlogenError, UnsupportedError
from hlogen.runtime import _jaxlib, interpreter, manual, pjrt
from hlogen.runtime.arrays import check_signature, flatten_arguments, structure_results
from hlogen.runtime.execution import check_results, prepare



def compile(computation: Computation, backend, num_replicas: int, num_partitions: int):
    """An executable of `computation` as the program of each of num_replicas x
    num_partitions processes on `backend` (a name or declaration): `.run_replicated(
    [[args of process 0], ...])` gives one result per process."""
    declared = backends.get(backend)
    for name, n in (("num_replicas", num_replicas), ("num_partitions", num_partitions)):
        if type(n) is not int or n < 1:
            raise HlogenError(f"{name} must be a positive int, got {n!r}")
    if not declared.compiles:
        return interpreter.Interpreted(computation, declared, num_replicas, num_partitions)
    return GridExecutable(computation, declared, num_replicas, num_partitions)


def run_manual(computation: Computation, arguments: list, backend="interpret") -> list:
    """The global results of shard_map module `computation` on global `arguments`, its
    body run per device on `backend` (the mesh's devices as partitions of one replica)."""
    found = manual.split(computation)
    exe = compile(found.program, backend, 1, len(found.mesh.device_ids))
    return manual.execute(found, exe, arguments, computation.name)


class GridExecutable:
    """A PJRT executable of a per-process program on replicas x partitions."""

    def __init__(self, computation: Computation, backend, num_replicas: int,
                 num_partitions: int):
        check_signature(computation)
        self.computation = computation
        self.backend = backend.name
        self.num_partitions = num_partitions
        count = num_replicas * num_partitions
        self.num_replicas = count  # the processes run_replicated runs (as the interpreter's)
        client = pjrt.client(backend.platform, count)
        devices = sorted(client.local_devices(), key=lambda d: d.id)
        if len(devices) < count:
            raise UnsupportedError(f"{num_replicas} replica(s) x {num_partitions} partitions "
                                   f"need {count} {client.platform} devices; {len(devices)} "
                                   f"are available (start the backend with more: "
                                   f"HLOGEN_CPU_DEVICES={count})")
        self.devices = devices[:count]
        self._prepared = prepare(computation, backend, num_replicas, num_partitions)
        module = self._prepared.computation.module
        if num_partitions > 1:
            _manual(module)
        try:
            self._loaded = _jaxlib.compile(
                client, self._prepared.computation.to_bytecode(), self.devices,
                options=_jaxlib.grid_options(num_replicas, num_partitions, self.devices))
        except _jaxlib.JaxRuntimeError as e:
            error = UnsupportedError if str(e).startswith("UNIMPLEMENTED") else ExecutionError
            raise error(f"{computation.name}: the {self.backend} backend cannot compile it "
                        f"for {num_replicas} replica(s) x {num_partitions} partitions: "
                        f"{e}") from None
        self._params = T.leaf_shapes(computation.parameter_shapes)

    def run_replicated(self, per_process_args) -> list:
        """One result per process; `per_process_args` holds one list of arguments per
        process, in process order."""
        per_process_args = list(per_process_args)
        if len(per_process_args) != self.num_replicas:
            raise HlogenError(f"{self.computation.name}: run_replicated takes one list of "
                              f"arguments per process ({self.num_replicas}), got "
                              f"{len(per_process_args)}")
        flat = [flatten_arguments(self.computation, args) for args in per_process_args]
        previous = _jaxlib.swap_x64(True)  # 64-bit arguments stay 64-bit
        try:
            joined = [_jaxlib.join_shards(
                [_jaxlib.Placement(s.dimensions, s.dtype, d).put(f[i])
                 for f, d in zip(flat, self.devices)], self.devices)
                for i, s in enumerate(self._params)]
            try:
                outs = _jaxlib.execute_replicated(self._loaded, joined)
            except _jaxlib.JaxRuntimeError as e:
                raise ExecutionError(f"{self.computation.name} failed on {self.backend}: "
                                     f"{e}") from None
        finally:
            _jaxlib.swap_x64(previous)
        results = []
        for k in range(self.num_replicas):
            leaves = self._prepared.read_results([np.asarray(per[k]) for per in outs])
            check_results(self.computation, self.backend, leaves)
            results.append(structure_results(self.computation.result_shapes, leaves))
        return results


def _manual(module: ir.Module) -> None:
    """Every argument and result of main `{manual}`: each device's values are its own."""
    main = mlir.functions(module)["main"]
    ftype = mlir.function_type(main)
    with mlir.context():
        manual = ir.DictAttr.get({"mhlo.sharding": ir.StringAttr.get("{manual}")})
        main.attributes["arg_attrs"] = ir.ArrayAttr.get([manual] * len(ftype.inputs))
        main.attributes["res_attrs"] = ir.ArrayAttr.get([manual] * len(ftype.results))
