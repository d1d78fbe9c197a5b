"""The executable seam: what every compiled thing meets, whichever compiler made it (as
XLA's HloRunnerInterface). hlogen.runtime.compile picks the compiler by the backend's
kind from one table (hlogen.runtime.COMPILERS): each kind's runtime module
(hlogen.runtime.pjrt, hlogen.runtime.interpreter) has

    compile(computation, backend, disk_cache=None, num_replicas=1, xla_options=()) -> Executable
    available(backend) -> bool   # whether it runs here

and the code above asks an executable only what this interface says.
"""
from __future__ import annotations

from typing import Protocol, runtime_checkable

from hlogen.backends import Backend
from hlogen.computation import Computation


@runtime_checkable
class Executable(Protocol):
    computation: Computation
    declaration: Backend  # the backend it runs on (with its XLA options, if any)
    backend: str          # that backend's name, as messages say it
    num_replicas: int
    local_replicas: list  # the replicas this process passes the inputs of
    devices: list         # the device of each replica; [] where it runs in this process
    compile_seconds: float
    # What a disk cache of executables did: "hit", "miss", "off" (none was given); None
    # where its compiler has none (the interpreter prepares, it compiles nothing).
    cache_outcome: str | None
    key: tuple            # its identity: what the in-memory cache of executables keys it by

    def __call__(self, *args):
        """numpy arrays in (one per parameter), numpy arrays out (a tuple for several)."""

    def run_replicated(self, per_replica_args) -> list:
        """One result per replica of this process; one list of arguments per replica."""

    def how_it_runs(self) -> str:
        """How it runs a sharded module (hlogen.sharding), in one line: "sharded: 1 replica
        x 8 partitions on 8 cpu devices", or its global program's words; "" for others."""

    def refusal(self, what: str) -> str | None:
        """Why it does not give `what` ("optimized HLO", "a cost analysis", "a memory
        analysis", "serialization"), or None where it may (its compiler may still fail)."""
