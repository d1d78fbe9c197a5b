"""hlogen: emit, optimize, compile, run and inspect StableHLO from the command line.

Exit codes: 0 success, 1 a run or check failed (a native abort while running
included: see isolation.py), 2 bad input (the message names the file, line and
column, or the argument). `hlogen --debug COMMAND` shows tracebacks; nothing else does.

Imports are lazy: `hlogen --help` and the commands that need no backend (emit, opt,
cache, samples show) never import jax; run and compile import it in their child.
"""
from __future__ import annotations

import functools
import os
import pathlib
import sys
import traceback

import click

FORMATS = {"text": ".mlir", "bytecode": ".mlirbc", "portable": ".portable.mlirbc"}
_DEBUG = {"on": bool(os.environ.get("HLOGEN_DEBUG"))}


def write_atomically(path, data: bytes) -> None:
    from hlogen.files import write_atomically as write  # hlogen loads lazily (hlogen --help)
    write(path, data)


def reports_errors(command):
    """Turns hlogen errors into a one-paragraph message and the contract's exit code;
    anything else is an internal error (exit 1), with its traceback under --debug only."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except click.exceptions.ClickException:
            raise
        except Exception as e:
            from hlogen.errors import ExecutionError, HlogenError
            if _DEBUG["on"]:
                traceback.print_exc()
            if isinstance(e, HlogenError):
                click.echo(f"error: {e}", err=True)
                sys.exit(1 if isinstance(e, ExecutionError) else 2)
            detail = str(e).strip().splitlines()
            click.echo(f"internal error: {type(e).__name__}: {detail[-1] if detail else ''}"
                       + ("" if _DEBUG["on"] else " (hlogen --debug ... shows the traceback)"),
                       err=True)
            sys.exit(1)
    return wrapper


class _Group(click.Group):
    """Commands in the order they are defined; `check` imported only when it runs (its
    module imports hlogen, which `hlogen --help` does not need)."""

    _LAZY = {"check": ("hlogen_cli.check", "check",
                       "Run StableHLO conformance files (PATHS: files or directories of .mlir)...")}

    def list_commands(self, ctx):
        return [*self.commands, *[n for n in self._LAZY if n not in self.commands]]

    def get_command(self, ctx, name):
        if name in self._LAZY and name not in self.commands:
            module, attribute, _ = self._LAZY[name]
            import importlib
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

    Exit status: 0 success, 1 a run or check failed, 2 bad input.
    Shell completion: eval "$(hlogen completion bash)" (or zsh, fish).
    """
    if debug:
        _DEBUG["on"] = True


# -- emit ---------------------------------------------------------------------------------

@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--function", "function_name", metavar="NAME",
              help="Emit only this @hg.function (default: every one in FILE).")
@click.option("-o", "--output", metavar="OUT",
              help="Output file (one function), directory (several), or - for standard output. "
                   "Default: NAME.mlir (or .mlirbc) per function in the current directory.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="StableHLO text, MLIR bytecode, or a versioned StableHLO portable artifact.")
@click.option("--target-version", metavar="V",
              help="StableHLO version of a portable artifact, e.g. 1.9.0 (default: the current one).")
@click.option("--pipeline", metavar="P",
              help="Pass pipeline to run first: legalize, canonicalize, default, xla-semantics, "
                   "a comma-separated list of those, or 'builtin.module(...)'.")
@click.option("--force", is_flag=True, help="Overwrite files that exist.")
@reports_errors
def emit(file, function_name, output, fmt, target_version, pipeline, force):
    """Turn each @hg.function of a Python FILE into a StableHLO artifact."""
    import hlogen as hg
    from hlogen.errors import HlogenError
    from hlogen_cli import sources
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    functions = sources.functions_in(file)
    if function_name is not None:
        functions = {function_name: sources.pick(functions, function_name, file)}
    if output == "-" and len(functions) > 1:
        raise HlogenError(f"-o - writes one function; {file} has {len(functions)}: choose with --function")
    paths = {name: _output_path(output, name, FORMATS[fmt], several=len(functions) > 1)
             for name in functions} if output != "-" else {}
    if not force:  # refused before anything is written
        for path in paths.values():
            if path.exists():
                raise HlogenError(f"{path} exists: hlogen emit does not overwrite files; "
                                  f"pass --force to allow it (or choose another -o)")
    for name, fn in functions.items():
        comp = hg.passes.run(fn.computation, pipeline) if pipeline else fn.computation
        data = _serialized(comp, fmt, target_version)
        if output == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            continue
        write_atomically(paths[name], data)
        click.echo(f"{paths[name]}: {comp.signature()}")


def _serialized(comp, fmt, target_version) -> bytes:
    if fmt == "text":
        return comp.as_text().encode()
    if fmt == "bytecode":
        return comp.to_bytecode()
    return comp.to_portable(target_version)


def _output_path(output, name, suffix, several) -> pathlib.Path:
    if output is None:
        return pathlib.Path(f"{name}{suffix}")
    out = pathlib.Path(output)
    if several or out.is_dir() or output.endswith(os.sep):
        return out / f"{name}{suffix}"
    return out


# -- opt ----------------------------------------------------------------------------------

@main.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--pipeline", metavar="P", default=None,
              help="Named pipelines, comma-separated: legalize, canonicalize, default, "
                   "xla-semantics (default: default).")
@click.option("--mlir-pipeline", metavar="'builtin.module(...)'",
              help="A raw MLIR pass pipeline, run as it is.")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text", show_default=True,
              help="Output format.")
@click.option("--target-version", metavar="V", help="StableHLO version of a portable artifact.")
@click.option("-o", "--output", metavar="OUT", default="-", show_default=True,
              help="Output file, or - for standard output.")
@click.option("--print-ir-after-all", is_flag=True,
              help="Print the module after each pass to standard error.")
@reports_errors
def opt(file, pipeline, mlir_pipeline, fmt, target_version, output, print_ir_after_all):
    """Run a pass pipeline on IN (StableHLO text, bytecode or a portable artifact; - reads
    standard input) and write the result."""
    from hlogen import passes
    from hlogen.errors import HlogenError
    from hlogen_cli import sources
    if pipeline and mlir_pipeline:
        raise HlogenError("--pipeline and --mlir-pipeline: give one of them")
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    if mlir_pipeline is not None and not mlir_pipeline.strip().startswith("builtin.module("):
        raise HlogenError(f"--mlir-pipeline {mlir_pipeline!r}: a raw pipeline starts with "
                          f"'builtin.module(' (named pipelines go to --pipeline)")
    chosen = mlir_pipeline or pipeline or "default"
    passes.steps(chosen)  # a bad name is refused before standard input is read
    comp = sources.load_mlir(file)
    steps = sources.single_passes(chosen) if print_ir_after_all else [chosen]
    for name in steps:
        comp = passes.run(comp, name)
        if print_ir_after_all:
            click.echo(f"// -----// IR Dump After {name} //----- //\n{comp.as_text()}", err=True)
    data = _serialized(comp, fmt, target_version)
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        write_atomically(pathlib.Path(output), data)
        click.echo(f"{output}: {comp.signature()}", err=True)


# -- run ----------------------------------------------------------------------------------

_VALUE_HELP = ("2x3xf32=1,2,3,4,5,6, \"2x3xf32=[1 2 3][4 5 6]\", 2x3xf32=0 (a splat), f32=3.5 "
               "(a scalar), 2x3xf32=@raw.bin, @x.npy, or x.npz (all its arrays, by name or in order)")


@main.command()
@click.argument("file", metavar="IN.mlir|FILE.py", type=click.Path(dir_okay=False))
@click.option("--function", "function_name", metavar="NAME",
              help="The @hg.function of a .py FILE (default: its only one); MLIR files run @main.")
@click.option("--input", "input_specs", multiple=True, metavar="VALUE",
              help="One per parameter, in order: " + _VALUE_HELP + ".")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "interpret"]), default=None,
              help="PJRT backend, or the StableHLO reference interpreter (default: jax's default device).")
@click.option("--check-interpret", is_flag=True,
              help="Also run the reference interpreter on the same inputs and compare each result "
                   "within --rtol/--atol (exit 1 if one differs).")
@click.option("--explain", is_flag=True,
              help="With --check-interpret: when a result differs, name the first op whose PJRT "
                   "and interpreter values differ.")
@click.option("--expected-output", "expected_specs", multiple=True, metavar="VALUE",
              help="One per result, in the forms of --input; exit 1 when a result differs "
                   "beyond --rtol/--atol.")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-5, show_default=True,
              help="Relative tolerance of comparisons (floats; integers compare exactly).")
@click.option("--atol", type=click.FloatRange(min=0), default=1e-6, show_default=True,
              help="Absolute tolerance of comparisons.")
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True,
              help="Number of replicas.")
@click.option("--num-processes", type=click.IntRange(min=1), default=1, show_default=True,
              help="Processes of a multi-process run.")
@click.option("--process-id", type=click.IntRange(min=0), default=0, show_default=True,
              help="This process's index in a multi-process run.")
@click.option("--coordinator", metavar="HOST:PORT", help="Coordinator of a multi-process run.")
@click.option("--output", "output_specs", multiple=True, metavar="OUT",
              help="out.npz (every result: result_0, result_1, ...), or one @out.npy per result "
                   "in order (- skips a result).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run N times and report min/median/max time per call (stderr).")
@click.option("--no-cache", is_flag=True, help="Compile even when the executable cache has it.")
@click.option("-v", "--verbose", is_flag=True,
              help="Report compile time and what the executable cache did (stderr).")
@reports_errors
def run(file, function_name, input_specs, backend, check_interpret, explain, expected_specs, rtol,
        atol, replicas, num_processes, process_id, coordinator, output_specs, repeat, no_cache,
        verbose):
    """Compile and run a computation from IN (.mlir in any format, or a .py file of
    @hg.function definitions) and print its results."""
    from hlogen.errors import HlogenError, UnsupportedError
    if explain and not check_interpret:
        raise HlogenError("--explain needs --check-interpret (it explains a difference "
                          "between PJRT and the interpreter)")
    if check_interpret and backend == "interpret":
        raise HlogenError("--check-interpret compares a PJRT backend with the interpreter: "
                          "choose --backend cpu or gpu (or none)")
    if replicas != 1:
        raise UnsupportedError(f"--replicas {replicas}: hlogen runs one replica so far")
    if num_processes != 1 or process_id != 0 or coordinator:
        raise UnsupportedError("--num-processes/--process-id/--coordinator: hlogen runs in one "
                               "process so far")
    _run_and_report(file, function_name, input_specs, None, backend, check_interpret, explain,
                    expected_specs, rtol, atol, output_specs, repeat, no_cache, verbose)


def _run_and_report(file, function_name, input_specs, default_inputs, backend, check_interpret,
                    explain, expected_specs, rtol, atol, output_specs, repeat, no_cache, verbose):
    """`hlogen run`'s work (also `hlogen samples run`'s): checks in this process (exit 2),
    compile and run in the child (isolation.py), then compare and report."""
    from hlogen_cli import isolation
    backends = [backend] + (["interpret"] if check_interpret else [])
    with isolation.start(backends) as child:  # imports jax while this process reads FILE
        import statistics
        import numpy as np
        from hlogen.runtime.arrays import flatten_arguments, leaf_shapes
        from hlogen.runtime.cache import default_directory
        from hlogen_cli import compare, inputs, sources
        comp = sources.computation_from(file, function_name)
        args = default_inputs(comp) if default_inputs else \
            inputs.load_inputs(input_specs, comp.parameter_names)
        compare.check_count(comp, args)
        arrays = flatten_arguments(comp, args)
        result_leaves = leaf_shapes(comp.result_shapes)
        expected = inputs.load_inputs(expected_specs, [f"result_{i}" for i in range(len(result_leaves))],
                                      option="--expected-output")
        compare.check_expected_count(expected, result_leaves)
        outputs = compare.output_plan(output_specs, len(result_leaves))
        # The backends' own checks (hlogen.preflight, exit 2 too) run in the child, which
        # raises their HlogenErrors here: the module is legalized once, not twice.
        folder = child.folder(comp, arrays, file)
        cache = None if no_cache else str(default_directory())
        runs = []
        for k, b in enumerate(backends):
            who = "the interpreter" if b == "interpret" else "XLA"
            answer = child.ask(folder, {"action": "run", "backends": [b], "repeat": repeat,
                                        "cache": cache}, who, file)
            run_info = answer["runs"][0]
            run_info["results"] = isolation.read_arrays(folder / "outputs0")
            runs.append(run_info)
        flat = runs[0]["results"]
        for i, array in enumerate(flat):
            click.echo(f"result[{i}]: {compare.shape_of(array)}")
            click.echo(np.array2string(np.asarray(array), threshold=1000))
        for r in runs:
            if verbose:
                how = {"hit": "loaded from the cache", "miss": "compiled, stored in the cache",
                       "off": "compiled"}[r["cache"]] if r["backend"] != "interpret" else "prepared"
                click.echo(f"{r['backend']}: {how} in {r['compile_seconds'] * 1e3:.1f} ms", err=True)
            if repeat > 1:
                t = r["times"]
                click.echo(f"{repeat} runs on {r['backend']}: min {min(t) * 1e3:.3f} ms, median "
                           f"{statistics.median(t) * 1e3:.3f} ms, max {max(t) * 1e3:.3f} ms", err=True)
        compare.save_outputs(outputs, flat, write_atomically)
        failed = False
        if check_interpret:
            verdicts = compare.compare_all(flat, runs[1]["results"], rtol, atol)
            for i, v in enumerate(verdicts):
                click.echo(f"result[{i}]: {runs[0]['backend']} vs interpret: {v.describe('interpret')}")
            if not all(v.ok for v in verdicts):
                failed = True
                if explain:
                    answer = child.ask(folder, {"action": "explain", "backend": backend,
                                                "max_ulp": 3, "atol": atol}, "XLA", file)
                    click.echo(f"explain: {answer['explain'] or 'every intermediate value of @main agrees within 3 ULP; the difference comes from the results as a whole'}")
        if expected:
            verdicts = compare.compare_all(flat, expected, rtol, atol)
            for i, v in enumerate(verdicts):
                click.echo(f"result[{i}]: {v.describe('expected')}")
            failed |= not all(v.ok for v in verdicts)
    if failed:
        sys.exit(1)


# -- compile ------------------------------------------------------------------------------

@main.command(name="compile")
@click.argument("file", metavar="IN.mlir|FILE.py", type=click.Path(dir_okay=False))
@click.option("--function", "function_name", metavar="NAME",
              help="The @hg.function of a .py FILE (default: its only one).")
@click.option("--backend", type=click.Choice(["cpu", "gpu"]), default=None,
              help="PJRT backend (default: jax's default device).")
@click.option("-o", "--output", metavar="OUT",
              help="Write XLA's serialized executable (for this jaxlib and device kind).")
@click.option("--hlo", is_flag=True, help="Print XLA's optimized HLO (the default without -o or --cost).")
@click.option("--cost", is_flag=True, help="Print XLA's cost analysis: flops, bytes accessed, ...")
@click.option("--no-cache", is_flag=True, help="Compile even when the executable cache has it.")
@click.option("-v", "--verbose", is_flag=True, help="Report compile time and what the cache did.")
@reports_errors
def compile_command(file, function_name, backend, output, hlo, cost, no_cache, verbose):
    """Compile IN with XLA: its optimized HLO, its serialized executable, its cost analysis."""
    from hlogen_cli import isolation
    if not (output or cost):
        hlo = True
    with isolation.start([backend]) as child:
        from hlogen.runtime.cache import default_directory
        from hlogen_cli import sources
        comp = sources.computation_from(file, function_name)
        folder = child.folder(comp, [], file)
        answer = child.ask(folder, {"action": "compile", "backend": backend, "hlo": hlo,
                                    "cost": cost, "serialize": bool(output),
                                    "cache": None if no_cache else str(default_directory())},
                           "XLA", file)
        if hlo:
            click.echo((folder / "optimized.hlo").read_text().rstrip("\n"))
        if cost:
            for name, value in sorted(answer["cost"].items(), key=lambda kv: ("{" in kv[0], kv[0])):
                click.echo(f"{name}: {value:g}")
        if output:
            data = (folder / "executable.bin").read_bytes()
            write_atomically(pathlib.Path(output), data)
            click.echo(f"{output}: serialized executable for {answer['backend']} "
                       f"({len(data)} bytes)", err=True)
        if verbose:
            how = {"hit": "loaded from the cache", "miss": "compiled, stored in the cache",
                   "off": "compiled"}[answer["cache"]]
            click.echo(f"{answer['backend']}: {how} in {answer['compile_seconds'] * 1e3:.1f} ms",
                       err=True)


# -- cache --------------------------------------------------------------------------------

@main.group()
def cache():
    """The executable cache of run and compile ($HLOGEN_CACHE_DIR, default ~/.cache/hlogen)."""


def _jaxlib_version() -> str:
    import importlib.metadata
    return importlib.metadata.version("jaxlib")


@cache.command()
@reports_errors
def info():
    """Where the cache is, and how many entries it holds (valid, stale, corrupt)."""
    from hlogen.runtime.cache import ExecutableCache
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
    from hlogen.runtime.cache import ExecutableCache
    store = ExecutableCache()
    removed = store.clear(only_invalid=invalid_only, jaxlib_version=_jaxlib_version())
    click.echo(f"removed {removed} entr{'y' if removed == 1 else 'ies'} from {store.directory}")


# -- devices, samples, completion ---------------------------------------------------------

@main.command()
@reports_errors
def devices():
    """List the backends and devices hlogen can run on."""
    from hlogen.errors import HlogenError
    from hlogen.runtime import pjrt
    for platform in ("cpu", "gpu"):
        try:
            client = pjrt.client(platform)
        except HlogenError:
            click.echo(f"{platform}: not available")
            continue
        for d in client.local_devices():
            click.echo(f"{platform}: {d.device_kind} (id {d.id}, {client.platform} {client.platform_version})")
    click.echo("interpret: the StableHLO reference interpreter (every op, exact, slow)")


@main.group(invoke_without_command=True)
@click.pass_context
@reports_errors
def samples(ctx):
    """The sample computations (samples/*.py): list them, show one, run one."""
    if ctx.invoked_subcommand is None:
        from hlogen_cli import samples as sample_files
        for name, doc in sample_files.listing():
            click.echo(f"{name:32} {doc}")


@samples.command(name="show")
@click.argument("name")
@reports_errors
def samples_show(name):
    """Show sample NAME (FILE.FUNCTION, or FUNCTION when it is unique): its signature,
    its description and its StableHLO."""
    from hlogen_cli import samples as sample_files
    path, _, fn = sample_files.find(name)
    click.echo(f"// {path}: {fn.computation.signature()}")
    for line in (fn.__doc__ or "").strip().splitlines():
        click.echo(f"// {line.strip()}")
    click.echo(fn.computation.as_text().rstrip("\n"))


@samples.command(name="run")
@click.argument("name")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "interpret"]), default=None,
              help="PJRT backend, or the StableHLO reference interpreter.")
@reports_errors
def samples_run(name, backend):
    """Run sample NAME on default inputs (printed first)."""
    from hlogen_cli import samples as sample_files
    path, function_name, fn = sample_files.find(name)

    def default_inputs(comp):
        arrays = sample_files.default_inputs(comp)
        for n, a in zip(comp.parameter_names, arrays):
            click.echo(f"input {n}: {sample_files.literal(a)}")
        return arrays

    _run_and_report(str(path), function_name, (), default_inputs, backend, False, False, (),
                    1e-5, 1e-6, (), 1, False, False)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell):
    """Print the shell completion script: eval "$(hlogen completion bash)"."""
    from click.shell_completion import get_completion_class
    cls = get_completion_class(shell)
    click.echo(cls(main, {}, "hlogen", "_HLOGEN_COMPLETE").source())


if __name__ == "__main__":
    main(prog_name="hlogen")
