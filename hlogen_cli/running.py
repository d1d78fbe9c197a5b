"""The work of `hlogen run` (and `hlogen samples run`, a run on default inputs), done in
the child process that isolation.py watches (hlogen_cli.commands.run starts it): read and
check the module and the inputs (exit 2 before any backend starts), join the distributed
runtime, compile (hlogen_cli.compiling), run, print, compare, save.
"""
from __future__ import annotations

import contextlib
import statistics
import sys
import time

import click
import numpy as np

import hlogen as hg
from hlogen import files
from hlogen import types as T
from hlogen.backends import INTERPRET, compiles
from hlogen.differential import Tolerance, compare_arrays, leaf_names
from hlogen.types import shape_text
from hlogen.errors import ExecutionError, HlogenError, InputError, UnsupportedError
from hlogen.runtime.arrays import flatten_arguments
from hlogen.runtime.execution import as_written
from hlogen_cli import inputs, isolation, outputs, replicas, status, sources
from hlogen_cli.compiling import (checked_xla_flags, compile_options, compiled, declaration,
                                  options_in_force)
from hlogen_cli.options import RunOptions


def run(file: str, function_name: str | None, options: dict, default_inputs=None) -> None:
    """`hlogen run`: exit 2 for bad input (before the backend starts), 1 when a result
    differs from the interpreter's or the expected one. `default_inputs(comp)`: the
    arguments when no --input is given (`hlogen samples run`)."""
    o = RunOptions(**options)
    if o.backend is not None:
        declaration(o.backend)  # an unknown name: exit 2, with the names there are
    asked = checked_xla_flags(o.xla_flags)
    read = [file, *inputs.files_named([*o.inputs.specs, *o.expected_specs])]
    plan = outputs.output_plan(o.output_specs, read)
    save = files.Output(o.inputs.save, "--save-inputs", inputs=read) if o.inputs.save else None
    if o.profile:
        files.folder(o.profile, "--profile", "the profile goes into a folder", made=True)
    source = sources.module_source(file, function_name)
    comp, from_file = source.computation, source.compiled
    if from_file is None:
        comp = inputs.refined(comp, o.inputs.specs, o.replicas)
    xla = compile_options(asked, o.no_hlo_passes, from_file)
    outputs.check_output_count(plan, len(T.leaf_shapes(comp.result_shapes)))
    local = replicas.local_replicas(o.replicas, o.num_processes, o.process_id)
    per_replica_args = _arguments(comp, o, local, default_inputs, source.recorded, save)
    expected = _expected(comp, o, local)
    if o.is_distributed:
        _join(o.join_arguments(isolation.elapsed()))
    backends = [o.backend or (from_file and from_file.backend)] + \
        ([INTERPRET.name] if o.check_interpret else [])
    if o.profile and backends[0] and not declaration(backends[0]).compiles:
        raise InputError("--profile traces XLA's compile and runs; the interpreter has no trace")
    # --profile DIR: jax's trace of the compile and the runs (the interpreter's left out)
    # checked against the interpreter, XLA gets the module as written (as jax gives it);
    # hlogen's rewrites are the interpreter's
    pjrt = as_written(comp) if o.check_interpret and from_file is None and \
        (backends[0] is None or compiles(backends[0])) else comp
    with _profile().trace(o.profile) if o.profile else contextlib.nullcontext() as traced:
        runs = [_run_on(pjrt, backends[0], per_replica_args, local, o, from_file, xla)]
    if getattr(runs[0]["executable"], "fallback", None):
        click.echo(f"note: {runs[0]['executable'].fallback}", err=True)
    not_compared = None  # why --check-interpret compared nothing: said after PJRT's results
    try:
        runs += [_run_on(comp, b, per_replica_args, local, o, from_file) for b in backends[1:]]
    except UnsupportedError as e:  # a module the interpreter cannot run (the preflight says)
        not_compared = e
    got = runs[0]["results"]
    for r, results in zip(local, got):
        for i, array in enumerate(results):
            click.echo(f"{replicas.label(r, o.replicas, i)}: {shape_text(array)}")
            click.echo(np.array2string(np.asarray(array), threshold=1000))
    for run_info in runs:
        _report(run_info, o)
    if o.profile:
        click.echo(_profile().report(traced, runs[0]["executable"]), err=True)
    outputs.save_outputs(plan, replicas.stacked(got, o.replicas),
                         local if o.replicas > 1 else None)
    failed = False
    named = [dict(zip(leaf_names(comp), args)) for args in per_replica_args]
    if o.check_interpret and not_compared is None:
        failed |= not _compared(got, runs[1]["results"], local, o, named,
                                f"{runs[0]['backend']} vs {INTERPRET.name}: ",
                                runs[0]["backend"], INTERPRET.name)
        if failed and o.explain:
            # it imports jax: here, not at the top, for the child's start-up (see compiled)
            from hlogen.differential import Side, Tolerance  # (start-up: it imports jax)
            from hlogen.differential.origin import find_origin  # (start-up)
            isolation.status("explain")
            backend = declaration(runs[0]["backend"])
            found = find_origin(comp, per_replica_args[0],
                                Side.of(backend.plain_name, dict(xla) if xla else None),
                                INTERPRET.name, Tolerance(o.atol, o.rtol))
            click.echo(f"explain: {found.text() if found else _AGREES}")
    if expected:
        failed |= not _compared(got, expected, local, o, named, "", "got", "expected")
    if not_compared is not None:
        raise UnsupportedError(f"--check-interpret compared nothing: {not_compared}")
    if failed:
        sys.exit(status.FAILED)


_AGREES = ("no op of @main differs by itself, given the interpreter's values of its operands; "
           "the difference comes from the results as a whole")


def _profile():
    """hlogen.runtime.profile, when --profile asks for it (jax loads with the backend
    otherwise: the "compile" status covers it)."""
    from hlogen.runtime import profile  # here, not at the top: start-up (it imports jax)
    return profile


def _arguments(comp, o: RunOptions, local: list, default_inputs, recorded=None,
               save=None) -> list:
    """The leaf arrays of each local replica's arguments, from the input options
    (replicas.py's forms for --input) or the arguments IN recorded, checked against the
    parameters; saved to `save` (--save-inputs)."""
    given = default_inputs(comp) if default_inputs else inputs.arguments(comp, o.inputs, recorded)
    if given is recorded and recorded is not None:
        click.echo(f"inputs: the {len(given)} argument(s) {comp.source} recorded", err=True)
    if o.replicas == 1:
        inputs.check_count(comp, given)
    per_replica = replicas.split(given, comp.parameter_shapes, comp.parameter_names, o.replicas,
                                 local, "--input",
                                 f"{comp.name} takes {len(comp.parameter_shapes)} argument(s)")
    arrays = []
    for r, args in zip(local, per_replica):
        try:
            arrays.append(flatten_arguments(comp, args))
        except InputError as e:
            raise InputError(f"replica {r}: {e}" if o.replicas > 1 else str(e)) from None
    if save is not None:  # (one replica: RunOptions.check)
        inputs.save_arguments(save, comp, given)
    return arrays


def _expected(comp, o: RunOptions, local: list) -> list:
    """Each local replica's expected results (--expected-output), or []."""
    leaves = T.leaf_shapes(comp.result_shapes)
    names = [f"result_{i}" for i in range(len(leaves))]
    expected = inputs.load_inputs(o.expected_specs, names, leaves, option="--expected-output")
    if not expected:
        return []
    if o.replicas == 1:
        inputs.check_expected_count(expected, leaves)
    return replicas.split(expected, leaves, names, o.replicas, local, "--expected-output",
                          f"{comp.name} has {len(leaves)} result(s)")


def _join(arguments: dict) -> None:
    """Joins jax's distributed runtime; not getting there is a failed run (exit 1)."""
    isolation.status("join", **arguments)
    try:
        hg.distributed.initialize(**arguments)
    except HlogenError as e:
        raise ExecutionError(f"process {arguments['process_id']} of "
                             f"{arguments['num_processes']}: {e}") from None



def _run_on(comp, backend, per_replica_args: list, local: list, o: RunOptions,
            from_file=None, xla_options: tuple = ()) -> dict:
    """Compiles for `backend` with `xla_options` (or loads `from_file`'s executable) and
    runs the local replicas --repeat times: the backend, what was done to compile, the
    time of each call, and the last results (one list of leaf arrays per replica)."""
    done = compiled(comp, backend, o.no_cache, o.replicas,
                    None if backend and not compiles(backend) else from_file, xla_options)
    exe = done.executable
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
    return {"backend": exe.backend, "how": done.how, "executable": exe,
            "compile_seconds": exe.compile_seconds, "times": times,
            "results": [[np.asarray(a) for a in T.flatten(comp.result_shapes, r if several else (r,))]
                        for r in results]}


def _report(run_info: dict, o: RunOptions) -> None:
    if compiles(run_info["backend"]):
        options_in_force(run_info["executable"])
    if o.verbose:
        click.echo(f"{run_info['backend']}: {run_info['how']} in "
                   f"{run_info['compile_seconds'] * 1e3:.1f} ms", err=True)
    if o.repeat > 1:
        t = run_info["times"]
        on = run_info["backend"] + (f" ({o.replicas} replicas)" if o.replicas > 1 else "")
        click.echo(f"{o.repeat} runs on {on}: min {min(t) * 1e3:.3f} ms, median "
                   f"{statistics.median(t) * 1e3:.3f} ms, max {max(t) * 1e3:.3f} ms", err=True)


def _compared(got: list, want: list, local: list, o: RunOptions, named: list, prefix: str,
              actual: str, expected: str) -> bool:
    """Prints a report per result of each replica (by XLA's rule with --atol and --rtol,
    the inputs shown where results differ); True when every one agrees."""
    tolerance = Tolerance(abs=o.atol, rel=o.rtol)
    ok = True
    for r, g, w, args in zip(local, got, want, named):
        for i, (a, e) in enumerate(zip(g, w)):
            report = compare_arrays(a, e, tolerance, inputs=args, shown=3)
            click.echo(report.text(actual, expected,
                                   head=f"{replicas.label(r, o.replicas, i)}: {prefix}"))
            ok &= report.ok
    return ok


