"""Replicas across processes: `hg.distributed.initialize` on jax's distributed runtime.

Two local processes (tests/distributed_worker.py, loopback coordinator on a free port)
join, compile one computation for 4 replicas (two per process) and run an all-reduce, an
all-gather, an all-reduce whose groups span both processes, a collective permute around
both, replica ids, then a 2-replica sum (one per process); the results are compared with
numpy here. Beside them, in separate processes: a process 0 whose peer never comes, and
the errors `initialize` raises in a fresh process. Every process runs under a time bound
(TIMEOUT) and is killed when it runs past it or when its peer fails: these tests finish
or fail, they never hang.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import hlogen as hg
from tests.distributed_worker import REPLICAS, replica_input

WORKER = Path(__file__).with_name("distributed_worker.py")
TIMEOUT = 120    # seconds, for every process of this module
LONE_TIMEOUT = 2  # timeout_seconds of the process whose peer never comes


def _free_ports(n: int) -> list[int]:
    """n distinct ports that nothing listens on (held together while chosen)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _run_all(runs: dict, out_dir: Path, pair: tuple) -> dict:
    """Starts every run (name -> worker arguments) at once; waits for all of them up to
    TIMEOUT. A run past it is killed; when one of `pair` fails, the other is killed at
    once (it would wait for its peer). Returns name -> {returncode, seconds, output}."""
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    procs, logs, started, ended = {}, {}, {}, {}
    try:
        for name, args in runs.items():
            logs[name] = open(out_dir / f"{name}.log", "wb")
            started[name] = time.monotonic()
            procs[name] = subprocess.Popen([sys.executable, str(WORKER), *map(str, args)],
                                           stdout=logs[name], stderr=subprocess.STDOUT,
                                           stdin=subprocess.DEVNULL, env=env)
        deadline = time.monotonic() + TIMEOUT
        while len(ended) < len(procs) and time.monotonic() < deadline:
            for name, p in procs.items():
                if name not in ended and p.poll() is not None:
                    ended[name] = time.monotonic()
            if any(n in ended and procs[n].returncode != 0 for n in pair):
                for n in pair:
                    if n not in ended:
                        procs[n].kill()
            time.sleep(0.05)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
        for f in logs.values():
            f.close()
    return {name: {"returncode": p.returncode if name in ended else None,  # None: timed out
                   "seconds": ended.get(name, time.monotonic()) - started[name],
                   "output": (out_dir / f"{name}.log").read_text(errors="replace")}
            for name, p in procs.items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("distributed")
    pair_port, lone_port, free_port = _free_ports(3)
    coordinator = f"127.0.0.1:{pair_port}"
    busy = socket.socket()  # a port in use, for process 0's coordinator
    busy.bind(("", 0))
    busy.listen()
    try:
        results = _run_all({
            "process0": ["collectives", coordinator, 2, 0, out],
            "process1": ["collectives", coordinator, 2, 1, out],
            "lone": ["join", f"127.0.0.1:{lone_port}", 2, 0, LONE_TIMEOUT],
            "errors": ["errors", busy.getsockname()[1], free_port, "-", out / "errors.json"],
        }, out, pair=("process0", "process1"))
    finally:
        busy.close()
    results["out"] = out
    return results


def _succeeded(run: dict) -> None:
    assert run["returncode"] == 0, (f"exit status {run['returncode']} (None: killed after "
                                    f"{TIMEOUT} s) after {run['seconds']:.1f} s; output:\n"
                                    f"{run['output'][-4000:]}")


def _process(runs, p: int):
    _succeeded(runs["process0"])
    _succeeded(runs["process1"])
    with open(runs["out"] / f"process{p}.json") as f:
        info = json.load(f)
    return info, np.load(runs["out"] / f"process{p}.npz")


def test_collectives_across_two_processes(runs):
    xs = [replica_input(r) for r in range(REPLICAS)]
    total = np.sum(xs, axis=0)
    groups = [[0, 2], [1, 3]]
    for p in (0, 1):
        _, got = _process(runs, p)
        for r in (2 * p, 2 * p + 1):
            group = next(g for g in groups if r in g)
            expected = {
                "all_reduce": total,
                "all_gather": np.concatenate(xs, axis=0),
                "grouped_all_reduce": np.sum([xs[i] for i in group], axis=0),
                "permute": xs[(r - 1) % REPLICAS],  # the ring 0->1->2->3->0
                "replica_id": np.uint32(r),
            }
            for name, want in expected.items():
                value = got[f"{name}_{r}"]
                assert value.dtype == np.asarray(want).dtype, (name, r, value.dtype)
                np.testing.assert_array_equal(value, want, err_msg=f"{name}, replica {r}")
        # one replica per process: replica p gets p + 1 from each, the sum of 1 and 2
        np.testing.assert_array_equal(got["sum2"], np.full(4, 3, np.float32))


def test_each_process_runs_only_its_own_replicas(runs):
    for p in (0, 1):
        info, got = _process(runs, p)
        assert info["process_index"] == p
        assert info["local_replicas"] == [2 * p, 2 * p + 1]
        assert info["local_replicas_2"] == [p]
        assert sorted(k.rsplit("_", 1)[1] for k in got.files if k.startswith("all_reduce_")) \
            == [str(2 * p), str(2 * p + 1)]
        # the arguments of all 4 replicas are refused, naming this process's replicas
        message = info["checked"]["all_replicas_args"]
        assert message is not None and message.startswith("InputError")
        assert f"this process runs replicas [{2 * p}, {2 * p + 1}]" in message


def test_joining_again_as_another_process_is_refused(runs):
    for p in (0, 1):
        info, _ = _process(runs, p)
        assert info["checked"]["rejoin"] is not None
        assert "already joined 127.0.0.1:" in info["checked"]["rejoin"]
        assert f"as process {p} of 2" in info["checked"]["rejoin"]


def test_process_whose_peer_never_comes_ends_within_its_timeout(runs):
    """Process 0 of 2 alone: jax's runtime waits timeout_seconds for process 1, then ends
    the process (it does not return, and it does not hang)."""
    run = runs["lone"]
    assert run["returncode"] is not None, f"still waiting after {TIMEOUT} s:\n{run['output'][-4000:]}"
    assert run["returncode"] != 0 and "joined" not in run["output"].splitlines()
    assert "DEADLINE_EXCEEDED" in run["output"], run["output"][-4000:]
    # the import of jax, the timeout, and the few seconds jax's RPC deadline adds to it
    assert run["seconds"] < LONE_TIMEOUT + 30


@pytest.fixture(scope="module")
def errors(runs):
    _succeeded(runs["errors"])
    with open(runs["out"] / "errors.json") as f:
        return json.load(f)


@pytest.mark.parametrize("case, words", [
    ("unresolvable_host", ["'bad..host:1234'", "does not resolve"]),
    ("port_in_use", ["is in use", "choose a free port"]),
    ("no_coordinator", ["no coordinator is listening", "after 1 s"]),
    ("after_backend_started", ["must come before the first compile",
                               "already started"]),
])
def test_initialize_errors_in_a_fresh_process(errors, case, words):
    found = errors[case]
    assert found["error"] is not None, f"{case}: initialize did not raise"
    for w in words:
        assert w in found["error"], found["error"]
    assert found["seconds"] < 10, found  # the coordinator's absence: within timeout_seconds=1


@pytest.mark.parametrize("coordinator", [
    "localhost", "localhost:", ":1234", "localhost:12a",
    "local host:1234", "localhost:-1", "", None, 1234, ("localhost", 1234),
])
def test_bad_coordinator(coordinator):
    with pytest.raises(hg.HlogenError, match="coordinator must be"):
        hg.distributed.initialize(coordinator, 2, 0)


@pytest.mark.parametrize("coordinator", ["localhost:0", "localhost:65536", "localhost:99999"])
def test_coordinator_port_out_of_range(coordinator):
    with pytest.raises(hg.HlogenError, match=r"the port of coordinator .* must be in 1\.\.65535"):
        hg.distributed.initialize(coordinator, 2, 0)


@pytest.mark.parametrize("num_processes, process_id, timeout, rule", [
    (2, 2, 60, "process_id=2 must be below num_processes=2"),
    (2, 5, 60, "process_id=5 must be below num_processes=2"),
    (2, -1, 60, "process_id must be an int >= 0"),
    (0, 0, 60, "num_processes must be an int >= 1"),
    (2, True, 60, "process_id must be an int >= 0"),
    (2.0, 0, 60, "num_processes must be an int >= 1"),
    (2, 0, 0, "timeout_seconds must be an int >= 1"),
])
def test_bad_process_numbers(num_processes, process_id, timeout, rule):
    """Refused before anything starts (so these run in this test's own process)."""
    with pytest.raises(hg.HlogenError, match=rule.replace("(", r"\(")):
        hg.distributed.initialize("localhost:12345", num_processes, process_id,
                                  timeout_seconds=timeout)


def test_initialize_after_the_backend_started_is_refused():
    b = hg.Builder("start_the_backend")
    x = b.parameter(hg.f32[2], "x")
    hg.compile(b.build(hg.ops.add(x, x)))
    (port,) = _free_ports(1)
    with pytest.raises(hg.HlogenError, match="must come before the first compile"):
        hg.distributed.initialize(f"127.0.0.1:{port}", 2, 0, timeout_seconds=1)
