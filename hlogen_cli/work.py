"""The work of `hlogen run`, `hlogen compile` and `hlogen samples run`, done in the
child process that isolation.py watches: read and check the module and the inputs
(exit 2 before any backend starts), join the distributed runtime, compile (through
the executable cache, or from a compiled file), run, print, compare, save. The backend
a command names is found here (`declaration`, `compiling`), for check, compare, bisect
and graph --optimized too.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import statistics
import sys
import time

import click
import numpy as np

import hlogen as hg
from hlogen import files, runtime
from hlogen import types as T
from hlogen import backends as declared_backends
from hlogen.backends import INTERPRET, compiles
from hlogen.differential import Tolerance, compare_arrays, leaf_names
from hlogen.types import shape_text
from hlogen.runtime import plugins
from hlogen.errors import ExecutionError, HlogenError, InputError, UnsupportedError
from hlogen.runtime import xla_options as options_of
from hlogen.runtime.arrays import flatten_arguments
from hlogen.runtime.cache import ExecutableCache
from hlogen_cli import compiled as compiled_files, inputs, isolation, outputs, replicas, status, \
    samples, sources
from hlogen_cli.options import RunOptions


def declaration(name: str, option: str = "--backend"):
    """The backend declared as `name`; a plugin's name finds the plugins, each probed in
    a child process first (one that ends the process is refused, naming the signal). An
    unknown name is exit 2, naming `option` and the backends there are."""
    if name not in declared_backends.BACKENDS:
        plugins.discover(isolate=True)
    try:
        return declared_backends.get(name)
    except InputError:
        raise InputError(f"{option} {name}: the backend must be one of "
                         f"{', '.join(declared_backends.names())} (hlogen devices lists them)") \
            from None


def compiling(name: str | None):
    """The PJRT backend that `compile` and `graph --optimized` compile for (None: jax's
    default device); one that compiles nothing (the interpreter) is exit 2."""
    if name is None:
        return None
    declared = declaration(name)
    if not declared.compiles:
        raise InputError(f"--backend {name}: {declared.words} compiles nothing; XLA compiles "
                         f"for a PJRT backend: cpu, gpu or a plugin (hlogen devices lists them)")
    return declared


def checked_xla_flags(values, option: str = "--xla-flag") -> tuple:
    """XLA's options given as `option NAME=VALUE` (repeatable), checked by
    hlogen.runtime.xla_options: a bad one is exit 2, naming it as given (an unknown name
    with the closest known ones)."""
    for value in values:
        try:
            options_of.check([value])
        except InputError as e:
            raise InputError(f"{option} {value}: {e}") from None
    try:
        return options_of.check(values)
    except InputError as e:  # a name given twice
        raise InputError(f"{option}: {e}") from None


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
    with _profile().trace(o.profile) if o.profile else contextlib.nullcontext() as traced:
        runs = [_run_on(comp, backends[0], per_replica_args, local, o, from_file, xla)]
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
            from hlogen.differential.localize import first_divergence
            isolation.status("explain")
            # each op judged by its own values (3 ULP of them, and --rtol): --atol, which
            # does not scale with them, would pass over a flushed subnormal
            backend = declaration(runs[0]["backend"])
            found = first_divergence(comp, per_replica_args[0],
                                     backend=backend.with_options(dict(xla)) if xla else backend,
                                     max_ulp=3, rtol=o.rtol)
            click.echo(f"explain: {found or _AGREES}")
    if expected:
        failed |= not _compared(got, expected, local, o, named, "", "got", "expected")
    if not_compared is not None:
        raise UnsupportedError(f"--check-interpret compared nothing: {not_compared}")
    if failed:
        sys.exit(status.FAILED)


def compile_options(asked: tuple, no_hlo_passes: bool = False, from_file=None) -> tuple:
    """The XLA options of a compile: --xla-flag's (`asked`, checked), with every HLO pass
    disabled for --no-hlo-passes; a compiled file's own, which --xla-flag may only repeat."""
    if no_hlo_passes:
        asked = options_of.merged(asked, options_of.NO_HLO_PASSES)
    if from_file is None:
        return asked
    if asked and asked != from_file.xla_options:
        raise InputError(f"{from_file.where}: compiled with XLA options "
                         f"{options_of.text(from_file.xla_options) or '(none)'}; this run asks "
                         f"for {options_of.text(asked)}: compile it again with them (hlogen "
                         f"compile --xla-flag ...), or run the module it came from")
    return from_file.xla_options


_AGREES = ("every intermediate value of @main agrees within 3 ULP (or --rtol); the "
           "difference comes from the results as a whole")


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


class _Cache(ExecutableCache):
    """The executable cache, telling whether what it was given to store was stored (a
    cache folder that cannot be written is skipped: the run does not depend on it), and
    keeping what it loaded: serializing an executable that XLA deserialized loses its
    compiled kernels (this jaxlib's CPU client), so a compiled file takes these bytes."""

    stored = None
    loaded = None

    def load(self, key, jaxlib_version):
        self.loaded = super().load(key, jaxlib_version)
        return self.loaded

    def store(self, key, payload, **info) -> bool:
        self.stored = super().store(key, payload, **info)
        return self.stored


@dataclasses.dataclass
class Compiled:
    executable: object  # a PJRT Executable or the interpreter's
    how: str  # what was done, in words: "compiled, stored in the cache", ...
    jaxlib_version: str = ""
    options: str = ""  # the compile options, as the executable cache keys them
    cached: bytes | None = None  # the serialized executable the cache held

    def serialized(self) -> bytes:
        return self.cached if self.cached is not None else self.executable.serialize()


def compiled(comp, backend: str | None, no_cache: bool, num_replicas: int = 1,
             from_file=None, xla_options: tuple = ()) -> Compiled:
    """An executable for `backend` (the interpreter included), compiled with `xla_options`
    (checked): loaded from `from_file` (a compiled file), else through the persistent
    executable cache unless `no_cache` (the options are part of its key)."""
    isolation.status("compile", backend=backend)
    declared = None if backend is None else declaration(backend)
    if declared is not None and not declared.compiles:  # no disk cache, no XLA options
        return Compiled(hg.compile(comp, backend=declared, num_replicas=num_replicas),
                        "prepared")
    # jax loads here, not at the top: the child's start-up (0.5 s of jax) waits until the
    # module and the inputs are checked, so that bad input is refused at once (start-up)
    from hlogen.runtime import _jaxlib
    cache = from_file.as_cache() if from_file else None if no_cache else _Cache()
    try:  # (the options are checked: the compiler's entry, not hg.compile, which checks them)
        exe = runtime.compiler(declared).compile(comp, declared, cache,
                                                 num_replicas=num_replicas,
                                                 xla_options=xla_options)
    except (ExecutionError, UnsupportedError) as e:
        if not dict(xla_options).get("xla_disable_all_hlo_passes"):
            raise
        raise type(e)(f"{e}\n(with every HLO pass disabled, XLA compiles a module only as its "
                      f"passes would have left it, such as an *after_optimizations* dump: "
                      f"run it without --no-hlo-passes)") from None
    how = {"off": "compiled", "hit": "loaded from the cache",
           "miss": "compiled, stored in the cache"}[exe.cache_outcome]
    if from_file is not None:
        how = f"loaded from {from_file.where}" if exe.cache_outcome == "hit" else \
            f"compiled (this XLA could not load the executable of {from_file.where})"
    elif exe.cache_outcome == "miss" and not cache.stored:
        how = f"compiled; not stored: the cache folder {cache.folder} cannot be written"
    return Compiled(exe, how, _jaxlib.jaxlib_version(), exe.options_key,
                    cache.loaded if isinstance(cache, _Cache) and exe.cache_outcome == "hit" else None)


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


def _options_in_force(exe) -> None:
    """Says (stderr) the XLA options a PJRT executable was compiled with, and XLA_FLAGS,
    where there are any."""
    said = [f"XLA options {options_of.text(exe.xla_options)}"] if exe.xla_options else []
    if os.environ.get("XLA_FLAGS"):
        said.append(f"XLA_FLAGS={os.environ['XLA_FLAGS']}")
    if said:
        click.echo(f"{exe.backend}: {'; '.join(said)}", err=True)


def _report(run_info: dict, o: RunOptions) -> None:
    if compiles(run_info["backend"]):
        _options_in_force(run_info["executable"])
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


def compile_module(file: str, function_name: str | None, backend: str | None, output: str | None,
                   hlo: bool, cost: bool, no_cache: bool, verbose: bool, memory: bool = False,
                   xla_flags: tuple = ()) -> None:
    """`hlogen compile`: XLA's optimized HLO, its cost analysis, a compiled file."""
    xla = checked_xla_flags(xla_flags)
    compiling(backend)
    path = files.Output(output, "-o", inputs=[file]) if output else None
    source = sources.module_source(file, function_name)
    comp, from_file = source.computation, source.compiled
    if from_file is not None:
        raise InputError(f"{from_file.where}: compiled already (hlogen run runs it; "
                         f"hlogen compile takes a module or a .py file)")
    done = compiled(comp, backend, no_cache, xla_options=xla)
    exe = done.executable
    if hlo:
        click.echo(exe.optimized_hlo().rstrip("\n"))
    if cost:
        for name, value in sorted((_cost_name(k), v) for k, v in exe.cost_analysis().items()):
            # XLA reports a figure it does not estimate as a negative number
            click.echo(f"{name}: {value:g}" if value >= 0 else
                       f"{name}: not estimated by XLA on {exe.backend} ({value:g})")
    if memory:
        from hlogen.runtime import inspection  # here, not at the top: start-up (jax)
        for name, size in inspection.memory_analysis(exe).items():
            click.echo(f"{name}: {inspection.byte_size(size)}")
    if path:
        data = compiled_files.pack(comp, exe, done.serialized(), done.jaxlib_version,
                                   done.options)
        path.write(data)
        click.echo(f"{output}: compiled for {exe.backend} ({exe.device.device_kind}), "
                   f"{len(data)} bytes: hlogen run {output} runs it", err=True)
    _options_in_force(exe)
    if verbose:
        click.echo(f"{exe.backend}: {done.how} in {exe.compile_seconds * 1e3:.1f} ms", err=True)


# XLA's cost analysis names a per-operand or per-output figure by appending the operand
# number (or "out") and the shape index: "bytes accessed0{}", "bytes accessedout{1}". The
# module's figure is the sum over its instructions of each one's: "bytes accessed0{}" is
# what the first operand of every instruction accounts for, not the module's parameter 0.
_PER_VALUE_COST = re.compile(r"(.*?)(\d+|out)\{([\d,]*)\}")


def _cost_name(key: str) -> str:
    """XLA's cost key as a person reads it: "bytes accessed by operand 0 of each
    instruction, summed"."""
    m = _PER_VALUE_COST.fullmatch(key)
    base = (m.group(1) if m else key).replace("_", " ").strip()
    if not m:
        return base
    who = "the output" if m.group(2) == "out" else f"operand {m.group(2)}"
    part = f" (element {{{m.group(3)}}})" if m.group(3) else ""
    by = "by" if base == "bytes accessed" else "of"
    return f"{base} {by} {who}{part} of each instruction, summed"


def run_sample(name: str, backend: str | None) -> None:
    """`hlogen samples run`: sample NAME on default inputs (printed first)."""
    path, function_name, _ = samples.find(name)

    def default_inputs(comp):
        arrays = samples.default_inputs(comp)
        for n, a in zip(comp.parameter_names, arrays):
            click.echo(f"input {n}: {samples.literal(a)}")
        return arrays

    run(str(path), function_name, dataclasses.asdict(RunOptions(backend=backend)), default_inputs)
