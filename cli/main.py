"""hlogen: emit, optimize, compile, run and inspect StableHLO from the command line.

Exit codes: 0 success, 1 a run or check failed (a native abort while running
included: see isolation.py), 2 bad input (the message names the file, line and
column, or the argument), 128 + N when signal N stopped it (130 Ctrl-C, 143 SIGTERM,
129 SIGHUP; reporting.py). `hlogen --debug COMMAND` shows tracebacks; nothing else does.

Imports are lazy: `hlogen --help` and the commands that need no backend (emit, opt,
cache, samples show) never import jax; run and compile import it in their child.
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import sys

import click

from hlogen_cli import completion, isolation
from hlogen_cli.options import RunOptions
from hlogen_cli.progress import Progress
from hlogen_cli.reporting import DEBUG, reports_errors, stopped_by_signals

FORMATS = {"text": ".mlir", "bytecode": ".mlirbc", "portable": ".portable.mlirbc"}


class _Group(click.Group):
    """Commands in the order they are defined; those of _LAZY (check, graph, view)
    imported only when they run (their modules import hlogen, which `hlogen --help`
    does not need)."""

    _LAZY = {"check": ("hlogen_cli.check", "check",
                       "Run StableHLO conformance files (PATHS: files or directories of .mlir)..."),
             "graph": ("hlogen_cli.graph", "graph",
                       "Draw a module as a graph: DOT, SVG or one HTML page."),
             "view": ("hlogen_cli.graph", "view",
                      "Open a module in Model Explorer (the extra hlogen[view]).")}

    def main(self, *args, **kwargs):
        with stopped_by_signals():  # a signal kills the children and exits 128 + its number
            return super().main(*args, **kwargs)

    def list_commands(self, ctx):
        return [*self.commands, *[n for n in self._LAZY if n not in self.commands]]

    def get_command(self, ctx, name):
        if name in self._LAZY and name not in self.commands:
            module, attribute, _ = self._LAZY[name]
            import importlib  # here, not at the top: start-up (only the _LAZY commands need it)
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter):
        rows = []
        for name in self.list_commands(ctx):
            if name in self._LAZY and name not in self.commands:
                rows.append((name, self._LAZY[name][2]))
            else:
                rows.append((name, self.commands[name].get_short_help_str(formatter.width - 20)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hlogen", prog_name="hlogen")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of errors.")
def main(debug):
    """hlogen: the XLA client library for the StableHLO era, on the command line.

    Build computations in Python files with @hg.function, emit them as StableHLO
    artifacts, run pass pipelines, compile them with XLA and run them with jaxlib's
    PJRT client or the StableHLO reference interpreter.

    Exit status: 0 success, 1 a run or check failed, 2 bad input, 130 after Ctrl-C
    (143 SIGTERM, 129 SIGHUP).
    Shell completion: eval "$(hlogen completion bash)" (or zsh, fish).
    """
    DEBUG["on"] = debug or bool(os.environ.get("HLOGEN_DEBUG"))  # per call (tests call main)


# -- emit ---------------------------------------------------------------------------------

@main.command()
@click.argument("files", metavar="FILE.py...", nargs=-1, required=True,
                type=click.Path(dir_okay=False))
@click.option("--function", "function_name", metavar="NAME",
              shell_complete=completion.function_names,
              help="Emit only this @hg.function (default: every one in FILE; one FILE only).")
@click.option("-o", "--output", metavar="OUT", shell_complete=completion.files,
              help="Output file (one function), a folder that exists (several: NAME.mlir in it), "
                   "or - for standard output. Default: NAME.mlir (or .mlirbc) per function in "
                   "the current folder.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="StableHLO text, MLIR bytecode, or a versioned StableHLO portable artifact.")
@click.option("--target-version", metavar="V",
              help="StableHLO version of a portable artifact, e.g. 1.9.0 (default: the current one).")
@click.option("--pipeline", metavar="P",
              help="Pass pipeline to run first: legalize, canonicalize, default, xla-semantics, "
                   "a comma-separated list of those, or 'builtin.module(...)'.")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@reports_errors
def emit(files, function_name, output, fmt, target_version, pipeline, force):
    """Turn each @hg.function of Python FILEs into a StableHLO artifact (a progress bar
    on a terminal when there are several)."""
    # here, not at the top: start-up (`hlogen --help` and run's parent need no hlogen)
    import hlogen as hg
    from hlogen.errors import HlogenError  # (start-up, as above)
    from hlogen_cli import sources  # (start-up, as above: it imports hlogen)
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    if function_name is not None and len(files) > 1:
        raise HlogenError(f"--function picks a function of one FILE; {len(files)} files given")
    progress = Progress()
    functions = []  # (file, name, function)
    # what the user's code prints while it is imported and traced goes to stderr when
    # stdout carries the module (-o -)
    with _stdout_to_stderr() if output == "-" else contextlib.nullcontext():
        for k, file in enumerate(files):
            progress.count("reading", k, len(files))
            found = sources.functions_in(file)
            if function_name is not None:
                found = {function_name: sources.pick(found, function_name, file)}
            functions += [(file, name, fn) for name, fn in found.items()]
        progress.clear()
        what = files[0] if len(files) == 1 else f"{len(files)} files"
        if output == "-" and len(functions) > 1:
            raise HlogenError(f"-o - writes one function; {what} define {len(functions)}: "
                              f"choose with --function")
        for _, _, fn in functions:  # the error of a function that cannot be traced,
            fn.computation  # raised before anything is written
    names = [name for _, name, _ in functions]
    paths = [] if output == "-" else _emit_paths(output, names, what, FORMATS[fmt], force, files)
    for path in dict.fromkeys(map(str, paths)):  # refused before anything is written
        sharing = [f"{file}:{name}" for (file, name, _), p in zip(functions, paths)
                   if str(p) == path]
        if len(sharing) > 1:
            raise HlogenError(f"{', '.join(sharing)} would all be written to {path}: emit them "
                              f"one file at a time, to different -o directories")
    for k, (file, name, fn) in enumerate(functions):
        progress.count("emitting", k, len(functions))
        comp = hg.passes.run(fn.computation, pipeline) if pipeline else fn.computation
        data = _serialized(comp, fmt, target_version)
        progress.clear()
        if output == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            continue
        paths[k].write(data)
        click.echo(f"{paths[k]}: {comp.signature()}")


@contextlib.contextmanager
def _stdout_to_stderr():
    """Standard output goes to standard error, Python's print and native writes to file
    descriptor 1 alike, until the block ends."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _emit_paths(output, names: list, what: str, suffix: str, force: bool, read) -> list:
    """Where emit writes each function (hlogen.files.Output): -o FILE for one;
    NAME.SUFFIX in the folder -o names (which must exist) for several, or in the current
    folder without -o; never over one of the files `read`."""
    from hlogen import files  # here, not at the top: start-up (it imports hlogen)
    if output is None:
        return [files.Output(f"{name}{suffix}", "-o", force, read) for name in names]
    if len(names) > 1 or output.endswith(os.sep) or os.path.isdir(output):
        why = (f"{what} define{'s' if ' files' not in what else ''} {len(names)} functions, "
               f"each written to a file of its own in the folder -o names (or choose one with "
               f"--function)" if len(names) > 1 else "a name ending in / is a folder")
        folder = files.folder(output, "-o", why)
        return [files.Output(folder / f"{name}{suffix}", "-o", force, read) for name in names]
    return [files.Output(output, "-o", force, read)]


def _serialized(comp, fmt, target_version) -> bytes:
    if fmt == "text":
        return comp.as_text().encode()
    if fmt == "bytecode":
        return comp.to_bytecode()
    return comp.to_portable(target_version)


# -- opt ----------------------------------------------------------------------------------

class _PipelinesHelp(click.Command):
    """A command whose help ends with what each named pipeline runs, read from
    hlogen.passes when the help is shown."""

    def format_epilog(self, ctx, formatter):
        from hlogen import passes  # here, not at the top: start-up (only this help reads it)
        rows = [(name, pipeline) for name, pipeline in passes.PIPELINES.items()]
        rows += [(name, "hlogen's rewrites to XLA's semantics (hlogen.rewrites), which every "
                        "backend applies after legalize") for name in passes.REWRITES]
        with formatter.section("Named pipelines"):
            formatter.write_dl(rows)


@main.command(cls=_PipelinesHelp)
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--pipeline", metavar="P", default=None,
              help="Named pipelines, comma-separated (default: default; each is listed below).")
@click.option("--mlir-pipeline", metavar="'builtin.module(...)'",
              help="A raw MLIR pass pipeline, run as it is.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="Output format.")
@click.option("--target-version", metavar="V", help="StableHLO version of a portable artifact.")
@click.option("-o", "--output", metavar="OUT", default="-", show_default=True,
              shell_complete=completion.files,
              help="Output file (in a folder that exists), or - for standard output.")
@click.option("--force", is_flag=True, help="Overwrite the output file if it exists.")
@click.option("--print-ir-after-all", is_flag=True,
              help="Print the module after each pass to standard error.")
@reports_errors
def opt(file, pipeline, mlir_pipeline, fmt, target_version, output, force, print_ir_after_all):
    """Run a pass pipeline on IN (StableHLO text, bytecode or a portable artifact, XLA's
    HLO text or protos, or a serialized jax Exported, recognized by content; - reads
    standard input) and write the result: `hlogen opt dump.txt -o dump.mlir` converts HLO."""
    # here, not at the top: start-up (`hlogen --help` and run's parent need no hlogen)
    from hlogen import passes
    from hlogen.errors import HlogenError  # (start-up, as above)
    from hlogen.files import Output  # (start-up, as above)
    from hlogen_cli import sources  # (start-up, as above: it imports hlogen)
    if pipeline and mlir_pipeline:
        raise HlogenError("--pipeline and --mlir-pipeline: give one of them")
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    if mlir_pipeline is not None and not mlir_pipeline.strip().startswith("builtin.module("):
        raise HlogenError(f"--mlir-pipeline {mlir_pipeline!r}: a raw pipeline starts with "
                          f"'builtin.module(' (named pipelines go to --pipeline)")
    chosen = mlir_pipeline or pipeline or "default"
    passes.steps(chosen)  # a bad name is refused before standard input is read
    path = Output(output, "-o", force, [file]) if output != "-" else None
    comp = sources.load_mlir(file)
    steps = passes.single_passes(chosen) if print_ir_after_all else [chosen]
    for name in steps:
        comp = passes.run(comp, name)
        if print_ir_after_all:
            click.echo(f"// -----// IR Dump After {name} //----- //\n{comp.as_text()}", err=True)
    data = _serialized(comp, fmt, target_version)
    if path is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        path.write(data)
        click.echo(f"{output}: {comp.signature()}", err=True)


# -- run ----------------------------------------------------------------------------------

_VALUE_HELP = ("2x3xf32=1,2,3,4,5,6, \"2x3xf32=[1 2 3][4 5 6]\", 2x3xf32=0 (a splat), f32=3.5 "
               "(a scalar), 2x3xf32=@raw.bin, @x.npy, or x.npz (all its arrays: keyed by "
               "parameter name, or arg0, arg1, ... for order). Files may be pipes (@<(...)). "
               "Arrays of ml_dtypes types (bf16, f4, f6, f8, int2, int4), which numpy saves "
               "as raw |V2 or |V1, are read as the element type of their parameter")



@main.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--function", "function_name", metavar="NAME",
              shell_complete=completion.function_names,
              help="The @hg.function of a .py file (default: its only one), or the public "
                   "function of a module (default: main).")
@click.option("--input", "input_specs", multiple=True, metavar="VALUE",
              help="One per parameter, in order: " + _VALUE_HELP + ". With --replicas N: one "
                   "per parameter, the same on every replica or with a leading dimension of N "
                   "(replica r gets [r]); or one per parameter per replica (replica 0's, then "
                   "replica 1's, ...); across processes, also one per parameter per replica of "
                   "this process.")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "interpret"]), default=None,
              help="PJRT backend, or the StableHLO reference interpreter (default: jax's default device).")
@click.option("--check-interpret", is_flag=True,
              help="Also run the reference interpreter on the same inputs and compare each result "
                   "(of each replica) within --rtol/--atol (exit 1 if one differs).")
@click.option("--explain", is_flag=True,
              help="With --check-interpret: when a result differs, name the first op whose PJRT "
                   "and interpreter values differ.")
@click.option("--expected-output", "expected_specs", multiple=True, metavar="VALUE",
              help="One per result, in the forms of --input (per replica as --input is); exit 1 "
                   "when a result differs beyond --rtol/--atol.")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-5, show_default=True,
              help="Relative tolerance of comparisons (floats; integers compare exactly).")
@click.option("--atol", type=click.FloatRange(min=0), default=1e-6, show_default=True,
              help="Absolute tolerance of comparisons.")
@click.option("--replicas", type=click.IntRange(min=1), default=None,
              help="Run N replicas, one per device (on the CPU, hlogen starts enough devices); "
                   "default 1, or one per process. Results are printed per replica and saved "
                   "with a leading replica dimension.")
@click.option("--num-processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Share the replicas among P processes (one hlogen run each, with the same "
                   "options but --process-id), over jax's distributed runtime: each passes the "
                   "inputs of its N/P replicas and prints and saves their results.")
@click.option("--process-id", type=click.IntRange(min=0), default=0, show_default=True,
              help="This process's index, 0..P-1 (process p runs replicas p*N/P ..).")
@click.option("--coordinator", metavar="HOST:PORT",
              help="Where process 0 serves the distributed runtime (the same for every process).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Stop and fail (exit 1) when compiling and running take longer; also how "
                   "long to wait for the other processes (default: no limit; 60 s for them).")
@click.option("--output", "output_specs", multiple=True, metavar="OUT",
              shell_complete=completion.files,
              help="out.npz (every result: result_0, result_1, ...), or one @out.npy per result "
                   "in order (- skips a result), in folders that exist. With --replicas, each "
                   "has a leading replica dimension (this process's replicas, in order). numpy "
                   "saves bf16, f4, f6, f8, int2 and int4 results as raw bytes: read them "
                   "with ml_dtypes, np.load(f).view(ml_dtypes.bfloat16) (.npz: "
                   "np.load(f)['result_0'].view(...)).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run N times and report min/median/max time per call (stderr).")
@click.option("--no-cache", is_flag=True, help="Compile even when the executable cache has it.")
@click.option("-v", "--verbose", is_flag=True,
              help="Report compile time and what the executable cache did (stderr).")
@click.option("--profile", metavar="DIR", type=click.Path(file_okay=False),
              help="Trace the compile and the runs with jax's profiler into DIR (made if "
                   "missing, in a folder that exists: a Perfetto trace and TensorBoard's "
                   "XPlane) and print the top ops or fusions by time, with their share "
                   "(stderr).")
@reports_errors
def run(file, function_name, **options):
    """Compile and run a computation and print its results.

    IN: a module (.mlir text, bytecode or portable artifact, XLA's HLO text or protos as
    XLA dumps them, or a serialized jax Exported, recognized by content; - reads standard
    input), a compiled file (hlogen compile -o: run without compiling), or a .py file of
    @hg.function definitions."""
    if options["replicas"] is None:
        options["replicas"] = options["num_processes"]
    run_options = RunOptions(**options)
    run_options.check()
    _in_child("run:run", {"file": file, "function_name": function_name,
                          "options": dataclasses.asdict(run_options)},
              file, run_options.timeout, run_options.is_distributed)


def _in_child(work: str, arguments: dict, file: str, timeout=None, distributed=False) -> None:
    """Does `work` (hlogen_cli.run) in a child process (isolation.py) and exits with
    its status."""
    code = isolation.run_in_child(work, arguments, file, timeout, distributed, DEBUG["on"])
    if code:
        sys.exit(code)


# -- compile ------------------------------------------------------------------------------

@main.command(name="compile")
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--function", "function_name", metavar="NAME",
              shell_complete=completion.function_names,
              help="The @hg.function of a .py file (default: its only one), or the public "
                   "function of a module (default: main).")
@click.option("--backend", type=click.Choice(["cpu", "gpu"]), default=None,
              help="PJRT backend (default: jax's default device).")
@click.option("-o", "--output", metavar="OUT.hlx", shell_complete=completion.files,
              help="Write a compiled file: the module and XLA's executable, which hlogen run "
                   "OUT.hlx runs without compiling, with this jaxlib on this backend and kind "
                   "of device (it refuses others).")
@click.option("--hlo", is_flag=True, help="Print XLA's optimized HLO (the default without -o or --cost).")
@click.option("--cost", is_flag=True, help="Print XLA's cost analysis: flops, bytes accessed, ...")
@click.option("--memory", is_flag=True,
              help="Print XLA's memory analysis: arguments, outputs, temporaries, generated code.")
@click.option("--no-cache", is_flag=True, help="Compile even when the executable cache has it.")
@click.option("-v", "--verbose", is_flag=True, help="Report compile time and what the cache did.")
@reports_errors
def compile_command(file, function_name, backend, output, hlo, cost, memory, no_cache, verbose):
    """Compile IN with XLA: its optimized HLO, a compiled file, its cost analysis.

    IN: a module (.mlir text, bytecode or portable artifact, XLA's HLO text or protos, or
    a serialized jax Exported; - reads standard input) or a .py file of @hg.function
    definitions."""
    if not (output or cost or memory):
        hlo = True
    _in_child("run:compile_module", {"file": file, "function_name": function_name,
                                     "backend": backend, "output": output, "hlo": hlo,
                                     "cost": cost, "no_cache": no_cache, "verbose": verbose,
                                     "memory": memory}, file)


# -- cache --------------------------------------------------------------------------------

@main.group()
def cache():
    """The executable cache of run and compile ($HLOGEN_CACHE_DIR, default ~/.cache/hlogen)."""


def _jaxlib_version() -> str:
    import importlib.metadata  # here, not at the top: start-up (cache commands only)
    return importlib.metadata.version("jaxlib")


@cache.command()
@reports_errors
def info():
    """Where the cache is, and how many entries it holds (valid, stale, corrupt)."""
    from hlogen.runtime.cache import ExecutableCache  # here, not at the top: start-up
    store = ExecutableCache()
    entries = store.entries(_jaxlib_version())
    click.echo(f"directory: {store.directory}")
    click.echo(f"entries: {len(entries)} ({sum(e.size for e in entries)} bytes)")
    for status in ("valid", "stale", "corrupt"):
        count = sum(e.status == status for e in entries)
        click.echo(f"  {status}: {count}")


@cache.command()
@click.option("--invalid-only", is_flag=True, help="Remove only stale and corrupt entries.")
@reports_errors
def clear(invalid_only):
    """Remove the cached executables."""
    from hlogen.runtime.cache import ExecutableCache  # here, not at the top: start-up
    store = ExecutableCache()
    removed = store.clear(only_invalid=invalid_only, jaxlib_version=_jaxlib_version())
    click.echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {store.directory}")


# -- devices, samples, completion ---------------------------------------------------------

@main.command()
@reports_errors
def devices():
    """List the backends and devices hlogen can run on."""
    # here, not at the top: start-up (`hlogen --help` and run's parent need no jax)
    from hlogen.errors import HlogenError
    from hlogen.runtime import pjrt  # (start-up, as above)
    for platform in ("cpu", "gpu"):
        try:
            client = pjrt.client(platform)
        except HlogenError:
            click.echo(f"{platform}: not available")
            continue
        found = client.local_devices()
        if platform == "cpu":  # XLA CPU's devices are not cores: say so, and what there is
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
                else os.cpu_count()
            click.echo(f"cpu: {len(found)} virtual devices (ids {found[0].id}-{found[-1].id}, "
                       f"{client.platform} {client.platform_version}) that share this "
                       f"machine's {cores} core{'s' * (cores != 1)}: XLA CPU runs one replica "
                       f"per device (HLOGEN_CPU_DEVICES sets how many it starts; run "
                       f"--replicas N starts at least N)")
            continue
        for d in found:
            click.echo(f"{platform}: {d.device_kind} (id {d.id}, {client.platform} {client.platform_version})")
    click.echo("interpret: the StableHLO reference interpreter (slow; every op XLA CPU runs "
               "but rng_uniform/rng_normal, infeed, outfeed, send/recv and custom calls "
               "other than LAPACK potrf/trsm/getrf)")


@main.group(invoke_without_command=True)
@click.pass_context
@reports_errors
def samples(ctx):
    """The sample computations (samples/*.py): list them, show one, run one."""
    if ctx.invoked_subcommand is None:
        _list_samples()


@samples.command(name="list")
@reports_errors
def samples_list():
    """List every sample function with its one-line description (as `hlogen samples`)."""
    _list_samples()


def _list_samples() -> None:
    # here, not at the top: start-up (`hlogen --help` and run's parent need no hlogen)
    from hlogen_cli import samples as sample_files
    rows = sample_files.listing()
    width = max(len(name) for name, _ in rows)
    for name, doc in rows:
        click.echo(f"{name:{width}}  {doc}")


@samples.command(name="show")
@click.argument("name", shell_complete=completion.sample_names)
@reports_errors
def samples_show(name):
    """Show sample NAME (FILE.FUNCTION, or FUNCTION when it is unique): its signature,
    its description and its StableHLO."""
    # here, not at the top: start-up (`hlogen --help` and run's parent need no hlogen)
    from hlogen_cli import samples as sample_files
    path, _, fn = sample_files.find(name)
    click.echo(f"// {path}: {fn.computation.signature()}")
    for line in (fn.__doc__ or "").strip().splitlines():
        click.echo(f"// {line.strip()}")
    click.echo(fn.computation.as_text().rstrip("\n"))


@samples.command(name="run")
@click.argument("name", shell_complete=completion.sample_names)
@click.option("--backend", type=click.Choice(["cpu", "gpu", "interpret"]), default=None,
              help="PJRT backend, or the StableHLO reference interpreter.")
@reports_errors
def samples_run(name, backend):
    """Run sample NAME on default inputs (printed first)."""
    _in_child("run:run_sample", {"name": name, "backend": backend}, name)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell):
    """Print the shell completion script: eval "$(hlogen completion bash)"."""
    from click.shell_completion import get_completion_class  # here: start-up (rarely used)
    cls = get_completion_class(shell)
    click.echo(cls(main, {}, "hlogen", "_HLOGEN_COMPLETE").source())


if __name__ == "__main__":
    main(prog_name="hlogen")
