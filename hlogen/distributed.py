"""Replicas across processes, on jax's distributed runtime (no transport of hlogen's own).

Each process calls `initialize` before its first compile; then
`hg.compile(comp, num_replicas=N)` places N/P replicas on each of the P processes
(process p runs replicas p*N/P .. (p+1)*N/P - 1: `Executable.local_replicas`), and
`run_replicated` takes and returns the inputs and results of this process's replicas.
On the CPU, the collectives between processes use jaxlib's gloo implementation.

    hg.distributed.initialize("localhost:12345", num_processes=2, process_id=0)

What fails how: bad arguments, a coordinator host that does not resolve, a coordinator
port already in use (process 0), no coordinator listening within `timeout_seconds`
(the other processes) and a backend that already started raise `HlogenError`. Once the
coordinator answers, jax's runtime waits for every process up to `timeout_seconds`; a
process whose peers do not all come in that time is ended by jax (abort, exit status
134, "DEADLINE_EXCEEDED ... RegisterTask" on stderr) about 5 s after its timeout: it does
not return and does not hang. jax does the same to every process when one of them dies
after they joined (within its heartbeat timeout).
"""
from __future__ import annotations

import os
import socket
import time

from hlogen.errors import HlogenError

_joined: tuple | None = None


def initialize(coordinator: str, num_processes: int, process_id: int,
               timeout_seconds: int = 60) -> None:
    """Joins the distributed runtime whose coordinator (process 0 serves it) listens at
    `coordinator` ("HOST:PORT"). Waits up to `timeout_seconds` for the coordinator and
    every process (see the module's docstring for what happens when they do not come)."""
    global _joined
    for name, value, low in (("num_processes", num_processes, 1), ("process_id", process_id, 0),
                             ("timeout_seconds", timeout_seconds, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise HlogenError(f"distributed.initialize: {name} must be an int >= {low}, "
                              f"got {value!r}")
    if process_id >= num_processes:
        raise HlogenError(f"distributed.initialize: process_id={process_id} must be below "
                          f"num_processes={num_processes}")
    if not isinstance(coordinator, str):
        raise HlogenError(f"distributed.initialize: coordinator must be a string HOST:PORT "
                          f"(e.g. localhost:12345), got {coordinator!r}")
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or any(c.isspace() for c in coordinator):
        raise HlogenError(f"distributed.initialize: coordinator must be HOST:PORT (e.g. "
                          f"localhost:12345), got {coordinator!r}")
    if not 0 < int(port) < 65536:
        raise HlogenError(f"distributed.initialize: the port of coordinator {coordinator!r} "
                          f"must be in 1..65535")
    wanted = (coordinator, num_processes, process_id)
    if _joined == wanted:
        return
    if _joined is not None:
        raise HlogenError(f"distributed.initialize: this process already joined "
                          f"{_joined[0]} as process {_joined[2]} of {_joined[1]}")
    from hlogen.runtime import _jaxlib  # here, not at the top: it starts jax (start-up time)
    if _jaxlib.backends_started():
        raise HlogenError("distributed.initialize must come before the first compile or run: "
                          "the backend of this process has already started on its own")
    deadline = time.monotonic() + timeout_seconds
    # What jax's runtime would not survive (a port in use: a segfault) or would only end
    # by aborting the process (no coordinator): checked here, as errors.
    addresses = _resolve(coordinator, host.strip("[]"), int(port))
    if process_id == 0:
        _check_port_free(coordinator, int(port))
    else:
        _wait_for_coordinator(coordinator, addresses, deadline, timeout_seconds)
    remaining = max(1, round(deadline - time.monotonic()))
    try:
        _jaxlib.join_distributed(coordinator, num_processes, process_id, remaining)
    except Exception as e:  # jax raises RuntimeError/ValueError/JaxRuntimeError here
        raise HlogenError(f"distributed.initialize: could not join {coordinator} as process "
                          f"{process_id} of {num_processes}: {e}") from None
    _joined = wanted


def process_index() -> int:
    """This process's id (0 when not distributed)."""
    return _joined[2] if _joined else 0


def _resolve(coordinator: str, host: str, port: int) -> list:
    try:
        return [a[4] for a in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)]
    except (OSError, UnicodeError) as e:
        raise HlogenError(f"distributed.initialize: the coordinator's host in {coordinator!r} "
                          f"does not resolve: {e}") from None


def _check_port_free(coordinator: str, port: int) -> None:
    """Process 0 serves the coordinator on every address ([::]:PORT, as jax binds it,
    unless JAX_COORDINATOR_BIND_ADDRESS says otherwise): the port must be free."""
    if os.environ.get("JAX_COORDINATOR_BIND_ADDRESS"):
        return
    for family, address in ((socket.AF_INET6, ("::", port)), (socket.AF_INET, ("0.0.0.0", port))):
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here: the IPv4 wildcard
        with probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as gRPC does
            if family == socket.AF_INET6:
                probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                probe.bind(address)
            except OSError as e:
                raise HlogenError(f"distributed.initialize: process 0 serves the coordinator "
                                  f"{coordinator}, but port {port} is in use on this machine "
                                  f"({e.strerror}); choose a free port") from None
            return


def _wait_for_coordinator(coordinator: str, addresses: list, deadline: float,
                          timeout_seconds: int) -> None:
    """Until something listens at the coordinator's address (process 0 may start after
    this one), up to the deadline."""
    while True:
        for address in addresses:
            try:
                socket.create_connection(address[:2], timeout=1).close()
                return
            except OSError:
                pass
        if time.monotonic() >= deadline:
            raise HlogenError(f"distributed.initialize: no coordinator is listening at "
                              f"{coordinator} (process 0 serves it) after {timeout_seconds} s "
                              f"(timeout_seconds); start process 0 with the same address")
        time.sleep(0.1)
