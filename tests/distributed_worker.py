"""One process of tests/test_distributed.py: joins jax's distributed runtime with
`hg.distributed.initialize`, runs collectives across the processes, and writes what it
got to OUT_DIR/process<I>.npz (plus process<I>.json: its local replicas and the errors it
checked). The test compares them with numpy. Stdlib, numpy and hlogen only.

    python tests/distributed_worker.py collectives COORDINATOR NUM_PROCESSES PROCESS_ID OUT_DIR
    python tests/distributed_worker.py join        COORDINATOR NUM_PROCESSES PROCESS_ID TIMEOUT_S
    python tests/distributed_worker.py errors      PORT_IN_USE FREE_PORT - OUT_JSON

`join` only joins (with the given timeout) and prints "joined", or the HlogenError it got
(exit status 3): for a process whose peers never come. `errors` makes `initialize` fail
in the ways it reports as HlogenError in a fresh process (no jax runtime joined, no
backend started: what the test's own process cannot promise) and records the messages.
Any other failure is a traceback and a non-zero status.
"""
from __future__ import annotations

import json
import os
import sys
import time
import traceback

import numpy as np

import hlogen as hg
from hlogen import ops

REPLICAS = 4           # two per process
SHAPE = (2, 3)


def replica_input(r: int) -> np.ndarray:
    """Replica r's operand (the test computes the expected results from the same rule)."""
    return (np.arange(6, dtype=np.float32).reshape(SHAPE) * (r + 1) + 10 * r)


def collectives_computation():
    b = hg.Builder("across_processes")
    x = b.parameter(hg.f32[SHAPE], "x")
    add = lambda a, c: ops.add(a, c)
    return b.build(
        ops.all_reduce(x, add),                                   # every replica
        ops.all_gather(x, 0, REPLICAS),                           # f32[8, 3]
        ops.all_reduce(x, add, replica_groups=[[0, 2], [1, 3]]),  # each group spans both processes
        ops.collective_permute(x, [(0, 1), (1, 2), (2, 3), (3, 0)]),  # a ring through both
        ops.replica_id(b),
    )


def collectives(coordinator: str, num_processes: int, process_id: int, out_dir: str) -> None:
    started = time.monotonic()
    hg.distributed.initialize(coordinator, num_processes, process_id, timeout_seconds=60)
    joined = time.monotonic() - started
    checked = {}
    # the same call again is allowed; another one is an error
    hg.distributed.initialize(coordinator, num_processes, process_id, timeout_seconds=60)
    try:
        hg.distributed.initialize(coordinator, num_processes, 1 - process_id)
        checked["rejoin"] = None
    except hg.HlogenError as e:
        checked["rejoin"] = str(e)

    exe = hg.compile(collectives_computation(), num_replicas=REPLICAS)
    local = list(exe.local_replicas)
    results = exe.run_replicated([[replica_input(r)] for r in local])
    # passing every replica's arguments is an error in a multi-process run
    try:
        exe.run_replicated([[replica_input(r)] for r in range(REPLICAS)])
        checked["all_replicas_args"] = None
    except hg.HlogenError as e:
        checked["all_replicas_args"] = f"{type(e).__name__}: {e}"

    # one replica per process: the same processes, another replica count
    b = hg.Builder("sum_of_two")
    y = b.parameter(hg.f32[4], "y")
    exe2 = hg.compile(b.build(ops.cross_replica_sum(y)), num_replicas=2)
    (sum2,) = exe2.run_replicated([[np.full(4, r + 1, np.float32)] for r in exe2.local_replicas])

    arrays = {"sum2": np.asarray(sum2)}
    names = ["all_reduce", "all_gather", "grouped_all_reduce", "permute", "replica_id"]
    for r, result in zip(local, results):
        for name, value in zip(names, result):
            arrays[f"{name}_{r}"] = np.asarray(value)
    np.savez(os.path.join(out_dir, f"process{process_id}.npz"), **arrays)
    with open(os.path.join(out_dir, f"process{process_id}.json"), "w") as f:
        json.dump({"local_replicas": local, "local_replicas_2": list(exe2.local_replicas),
                   "process_index": hg.distributed.process_index(),
                   "join_seconds": joined, "checked": checked}, f)


def errors(port_in_use: int, free_port: int, out_path: str) -> None:
    """The errors `initialize` raises before it touches jax's runtime, then the one after
    the backend started; each message and how long it took, to `out_path` (JSON)."""
    found = {}

    def attempt(name, *args, **kwargs):
        started = time.monotonic()
        try:
            hg.distributed.initialize(*args, **kwargs)
            found[name] = {"error": None}
        except hg.HlogenError as e:
            found[name] = {"error": str(e)}
        found[name]["seconds"] = time.monotonic() - started

    attempt("unresolvable_host", "bad..host:1234", 2, 1, timeout_seconds=1)
    attempt("port_in_use", f"127.0.0.1:{port_in_use}", 2, 0, timeout_seconds=1)
    attempt("no_coordinator", f"127.0.0.1:{free_port}", 2, 1, timeout_seconds=1)
    b = hg.Builder("started")
    x = b.parameter(hg.f32[2], "x")
    hg.compile(b.build(ops.add(x, x)))  # starts the backend
    attempt("after_backend_started", f"127.0.0.1:{free_port}", 2, 0, timeout_seconds=1)
    with open(out_path, "w") as f:
        json.dump(found, f)


def join(coordinator: str, num_processes: int, process_id: int, timeout: int) -> int:
    try:
        hg.distributed.initialize(coordinator, num_processes, process_id, timeout_seconds=timeout)
    except hg.HlogenError as e:
        print(f"HlogenError: {e}", flush=True)
        return 3
    print("joined", flush=True)
    return 0


def main(argv: list[str]) -> int:
    mode, coordinator, num_processes, process_id, last = argv
    if mode == "collectives":
        collectives(coordinator, int(num_processes), int(process_id), last)
        return 0
    if mode == "errors":
        errors(int(coordinator), int(num_processes), last)
        return 0
    if mode == "join":
        return join(coordinator, int(num_processes), int(process_id), int(last))
    raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    try:
        status = main(sys.argv[1:])
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        # jax's distributed runtime waits for every process when one exits (a barrier in
        # its atexit handler): a process that failed leaves at once, without it.
        os._exit(1)
    sys.exit(status)
