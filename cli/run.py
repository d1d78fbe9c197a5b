"""The work of `hlogen run`, `hlogen compile` and `hlogen samples run`, done in the
child process that isolation.py watches: read and check the module and the inputs
(exit 2 before any backend starts), join the distributed runtime, compile (through
the executable cache), run, print, compare, save.

`RunOptions` is what `hlogen run` was asked; its `check` runs in the parent, before
the child starts.
"""
from __future__ import annotations

import dataclasses

import click

from hlogen_cli import isolation


@dataclasses.dataclass
class RunOptions:
    input_specs: tuple = ()
    backend: str | None = None
    check_interpret: bool = False
    explain: bool = False
    expected_specs: tuple = ()
    rtol: float = 1e-5
    atol: float = 1e-6
    replicas: int = 1
    num_processes: int = 1
    process_id: int = 0
    coordinator: str | None = None
    timeout: float | None = None
    output_specs: tuple = ()
    repeat: int = 1
    no_cache: bool = False
    verbose: bool = False

    @property
    def is_distributed(self) -> bool:
        return self.num_processes > 1 or self.coordinator is not None

    def check(self) -> None:
        """Refuses options that do not go together (HlogenError: exit 2), naming them."""
        n, p = self.replicas, self.num_processes
        refusals = [
            (self.explain and not self.check_interpret,
             "--explain needs --check-interpret (it explains a difference between PJRT and "
             "the interpreter)"),
            (self.check_interpret and self.backend == "interpret",
             "--check-interpret compares a PJRT backend with the interpreter: choose --backend "
             "cpu or gpu (or none)"),
            (self.explain and n > 1, f"--explain follows one replica: not with --replicas {n}"),
            (p > 1 and self.coordinator is None,
             f"--num-processes {p} needs --coordinator HOST:PORT (where process 0 serves jax's "
             f"distributed runtime; every process gives the same)"),
            (self.process_id >= p,
             f"--process-id {self.process_id} is out of range: --num-processes {p} numbers "
             f"the processes 0..{p - 1}"),
            (p == 1 and self.coordinator is not None,
             "--coordinator needs --num-processes P (2 or more): the processes that meet there"),
            (self.coordinator is not None and not _is_host_port(self.coordinator),
             f"--coordinator {self.coordinator!r}: expected HOST:PORT, e.g. localhost:12345"),
            (self.coordinator is not None and _is_host_port(self.coordinator) and
             not 0 < int(self.coordinator.rpartition(":")[2]) < 65536,
             f"--coordinator {self.coordinator!r}: the port must be in 1..65535"),
            (n % p != 0,
             f"--replicas {n} cannot be shared by --num-processes {p}: each process runs as "
             f"many replicas (give a multiple of {p})"),
            (self.is_distributed and self.backend == "interpret",
             "--backend interpret runs every replica in one process: not with --num-processes "
             "or --coordinator"),
            (self.is_distributed and self.check_interpret,
             "--check-interpret needs every replica's inputs in one process (the interpreter "
             "runs them all): not with --num-processes or --coordinator"),
        ]
        for refused, message in refusals:
            if refused:
                from hlogen.errors import HlogenError  # (imported when refused only)
                raise HlogenError(message)

    def join_arguments(self, elapsed: float) -> dict:
        """hg.distributed.initialize's arguments, `elapsed` seconds into the command: the
        wait for the other processes ends before --timeout does, so that its failure is
        the one reported (else it is the library's 60 s)."""
        wait = max(1, int(self.timeout - elapsed - 0.5)) if self.timeout else 60
        return {"coordinator": self.coordinator, "num_processes": self.num_processes,
                "process_id": self.process_id, "timeout_seconds": wait}


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit()


# -- in the child -----------------------------------------------------------------------------

def run(file: str, function_name: str | None, options: dict, default_inputs=None) -> None:
    """`hlogen run`: exit 2 for bad input (before the backend starts), 1 when a result
    differs from the interpreter's or the expected one. `default_inputs(comp)`: the
    arguments when no --input is given (`hlogen samples run`)."""
    import sys
    import numpy as np
    from hlogen.runtime.arrays import leaf_shapes
    from hlogen_cli import compare, replicas, sources
    o = RunOptions(**options)
    comp = sources.computation_from(file, function_name)
    local = replicas.local_replicas(o.replicas, o.num_processes, o.process_id)
    per_replica_args = _arguments(comp, o, local, default_inputs)
    expected = _expected(comp, o, local)
    outputs = compare.output_plan(o.output_specs, len(leaf_shapes(comp.result_shapes)))
    if o.is_distributed:
        _join(o.join_arguments(isolation.elapsed()))
    backends = [o.backend] + (["interpret"] if o.check_interpret else [])
    runs = [_run_on(comp, b, per_replica_args, local, o) for b in backends]
    got = runs[0]["results"]
    for r, results in zip(local, got):
        for i, array in enumerate(results):
            click.echo(f"{replicas.label(r, o.replicas, i)}: {compare.shape_of(array)}")
            click.echo(np.array2string(np.asarray(array), threshold=1000))
    for run_info in runs:
        _report(run_info, o)
    compare.save_outputs(outputs, replicas.stacked(got, o.replicas), _write,
                         local if o.replicas > 1 else None)
    failed = False
    if o.check_interpret:
        failed |= not _compared(got, runs[1]["results"], local, o,
                                f"{runs[0]['backend']} vs interpret: ", "interpret")
        if failed and o.explain:
            from hlogen.conformance import first_divergence
            isolation.status("explain")
            found = first_divergence(comp, per_replica_args[0], backend=o.backend or "cpu",
                                     max_ulp=3, atol=o.atol)
            click.echo(f"explain: {found or 'every intermediate value of @main agrees within 3 ULP; the difference comes from the results as a whole'}")
    if expected:
        failed |= not _compared(got, expected, local, o, "", "expected")
    if failed:
        sys.exit(1)


def _arguments(comp, o: RunOptions, local: list, default_inputs) -> list:
    """The leaf arrays of each local replica's arguments, from --input (replicas.py's
    forms), checked against the parameters."""
    from hlogen.errors import InputError
    from hlogen.runtime.arrays import flatten_arguments
    from hlogen_cli import compare, inputs, replicas
    given = default_inputs(comp) if default_inputs else \
        inputs.load_inputs(o.input_specs, comp.parameter_names)
    if o.replicas == 1:
        compare.check_count(comp, given)
    per_replica = replicas.split(given, comp.parameter_shapes, comp.parameter_names, o.replicas,
                                 local, "--input",
                                 f"{comp.name} takes {len(comp.parameter_shapes)} argument(s)")
    arrays = []
    for r, args in zip(local, per_replica):
        try:
            arrays.append(flatten_arguments(comp, args))
        except InputError as e:
            raise InputError(f"replica {r}: {e}" if o.replicas > 1 else str(e)) from None
    return arrays


def _expected(comp, o: RunOptions, local: list) -> list:
    """Each local replica's expected results (--expected-output), or []."""
    from hlogen.runtime.arrays import leaf_shapes
    from hlogen_cli import compare, inputs, replicas
    leaves = leaf_shapes(comp.result_shapes)
    names = [f"result_{i}" for i in range(len(leaves))]
    expected = inputs.load_inputs(o.expected_specs, names, option="--expected-output")
    if not expected:
        return []
    if o.replicas == 1:
        compare.check_expected_count(expected, leaves)
    return replicas.split(expected, leaves, names, o.replicas, local, "--expected-output",
                          f"{comp.name} has {len(leaves)} result(s)")


def _write(path, data: bytes) -> None:
    from hlogen.files import write_atomically
    write_atomically(path, data)


def _join(arguments: dict) -> None:
    """Joins jax's distributed runtime; not getting there is a failed run (exit 1)."""
    import hlogen as hg
    from hlogen.errors import ExecutionError, HlogenError
    isolation.status("join", **arguments)
    try:
        hg.distributed.initialize(**arguments)
    except HlogenError as e:
        raise ExecutionError(f"process {arguments['process_id']} of "
                             f"{arguments['num_processes']}: {e}") from None


def compiled(comp, backend: str | None, no_cache: bool, num_replicas: int = 1):
    """An executable for `backend` ("interpret" included), through the persistent
    executable cache unless `no_cache`; its `cache_outcome` and `compile_seconds` say
    what the cache did and how long it took."""
    import hlogen as hg
    isolation.status("compile", backend=backend)
    if backend == "interpret":
        return hg.compile(comp, backend="interpret", num_replicas=num_replicas)
    from hlogen.runtime import pjrt
    from hlogen.runtime.cache import ExecutableCache
    return pjrt.compile(comp, backend, None if no_cache else ExecutableCache(),
                        num_replicas=num_replicas)


def _run_on(comp, backend, per_replica_args: list, local: list, o: RunOptions) -> dict:
    """Compiles for `backend` and runs the local replicas --repeat times: the backend,
    what the cache did, the time of each call, and the last results (one list of leaf
    arrays per replica)."""
    import time
    import numpy as np
    exe = compiled(comp, backend, o.no_cache, o.replicas)
    if list(exe.local_replicas) != local:
        raise RuntimeError(f"this process runs replicas {exe.local_replicas}, the command "
                           f"line gave the inputs of {local}")
    if exe.num_replicas == 1:
        def call():
            return [exe(*per_replica_args[0])]
    else:
        def call():
            return exe.run_replicated(per_replica_args)
    times, told = [], 0.0
    for i in range(o.repeat):
        if time.monotonic() - told >= 0.1:  # at most ten times a second
            isolation.status("run", backend=exe.backend, done=i, total=o.repeat)
            told = time.monotonic()
        start = time.perf_counter()
        results = call()
        times.append(time.perf_counter() - start)
    several = len(comp.result_shapes) > 1
    return {"backend": exe.backend, "cache": exe.cache_outcome,
            "compile_seconds": exe.compile_seconds, "times": times,
            "results": [[np.asarray(a) for a in _leaves(r if several else (r,))] for r in results]}


def _leaves(results) -> list:
    out = []
    for r in results:
        out.extend(_leaves(r) if isinstance(r, tuple) else [r])
    return out


def _how(backend: str, cache_outcome: str) -> str:
    if backend == "interpret":
        return "prepared"
    return {"hit": "loaded from the cache", "miss": "compiled, stored in the cache",
            "off": "compiled"}[cache_outcome]


def _report(run_info: dict, o: RunOptions) -> None:
    import statistics
    if o.verbose:
        click.echo(f"{run_info['backend']}: {_how(run_info['backend'], run_info['cache'])} in "
                   f"{run_info['compile_seconds'] * 1e3:.1f} ms", err=True)
    if o.repeat > 1:
        t = run_info["times"]
        on = run_info["backend"] + (f" ({o.replicas} replicas)" if o.replicas > 1 else "")
        click.echo(f"{o.repeat} runs on {on}: min {min(t) * 1e3:.3f} ms, median "
                   f"{statistics.median(t) * 1e3:.3f} ms, max {max(t) * 1e3:.3f} ms", err=True)


def _compared(got: list, want: list, local: list, o: RunOptions, prefix: str, other: str) -> bool:
    """Prints a verdict per result of each replica; True when all are within tolerance."""
    from hlogen_cli import compare, replicas
    ok = True
    for r, g, w in zip(local, got, want):
        for i, v in enumerate(compare.compare_all(g, w, o.rtol, o.atol)):
            click.echo(f"{replicas.label(r, o.replicas, i)}: {prefix}{v.describe(other)}")
            ok &= v.ok
    return ok


def compile_module(file: str, function_name: str | None, backend: str | None, output: str | None,
                   hlo: bool, cost: bool, no_cache: bool, verbose: bool) -> None:
    """`hlogen compile`: XLA's optimized HLO, its cost analysis, its serialized executable."""
    import pathlib
    from hlogen_cli import sources
    comp = sources.computation_from(file, function_name)
    exe = compiled(comp, backend, no_cache)
    if hlo:
        click.echo(exe.optimized_hlo().rstrip("\n"))
    if cost:
        for name, value in sorted(exe.cost_analysis().items(), key=lambda kv: ("{" in kv[0], kv[0])):
            click.echo(f"{name}: {value:g}")
    if output:
        data = exe.serialize()
        _write(pathlib.Path(output), data)
        click.echo(f"{output}: serialized executable for {exe.backend} ({len(data)} bytes)", err=True)
    if verbose:
        click.echo(f"{exe.backend}: {_how(exe.backend, exe.cache_outcome)} in "
                   f"{exe.compile_seconds * 1e3:.1f} ms", err=True)


def run_sample(name: str, backend: str | None) -> None:
    """`hlogen samples run`: sample NAME on default inputs (printed first)."""
    from hlogen_cli import samples
    path, function_name, _ = samples.find(name)

    def default_inputs(comp):
        arrays = samples.default_inputs(comp)
        for n, a in zip(comp.parameter_names, arrays):
            click.echo(f"input {n}: {samples.literal(a)}")
        return arrays

    run(str(path), function_name, dataclasses.asdict(RunOptions(backend=backend)), default_inputs)
