"""hlogen: emit, run and inspect StableHLO computations from the command line.

Exit codes: 0 success, 1 a run failed (a native abort while running included:
see isolation.py), 2 bad input (the message names the file, line and column, or
the argument).
"""
from __future__ import annotations

import functools
import os
import pathlib
import statistics
import sys
import tempfile

import click
import numpy as np

import hlogen as hg
from hlogen.errors import ExecutionError, HlogenError
from hlogen.runtime.arrays import flatten_arguments
from hlogen.runtime.execution import prepare
from hlogen_cli import inputs, isolation, sources

FORMATS = {"text": ".mlir", "bytecode": ".mlirbc", "portable": ".portable.mlirbc"}


def reports_errors(command):
    """Turns hlogen errors into a one-paragraph message and the contract's exit code."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ExecutionError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        except HlogenError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(hg.__version__, prog_name="hlogen")
def main():
    """hlogen: the XLA client library for the StableHLO era, on the command line.

    Build computations in Python files with @hg.function, emit them as StableHLO
    artifacts, and run them with jaxlib's PJRT client or the StableHLO reference
    interpreter.
    """


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
              help="Pass pipeline to run first: legalize, canonicalize, default, a comma-separated "
                   "list of those, or 'builtin.module(...)'.")
@reports_errors
def emit(file, function_name, output, fmt, target_version, pipeline):
    """Turn each @hg.function of a Python FILE into a StableHLO artifact."""
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    functions = sources.functions_in(file)
    if function_name is not None:
        functions = {function_name: sources.pick(functions, function_name, file)}
    if output == "-" and len(functions) > 1:
        raise HlogenError(f"-o - writes one function; {file} has {len(functions)}: choose with --function")
    for name, fn in functions.items():
        comp = hg.passes.run(fn.computation, pipeline) if pipeline else fn.computation
        if fmt == "text":
            data = comp.as_text().encode()
        elif fmt == "bytecode":
            data = comp.to_bytecode()
        else:
            data = comp.to_portable(target_version)
        if output == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            continue
        path = _output_path(output, name, FORMATS[fmt], several=len(functions) > 1)
        write_atomically(path, data)
        click.echo(f"{path}: {comp.signature()}")


def _output_path(output, name, suffix, several) -> pathlib.Path:
    if output is None:
        return pathlib.Path(f"{name}{suffix}")
    out = pathlib.Path(output)
    if several or out.is_dir():
        out.mkdir(parents=True, exist_ok=True)
        return out / f"{name}{suffix}"
    return out


def write_atomically(path: pathlib.Path, data: bytes) -> None:
    """Writes through a temporary file, so a failure never leaves a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--function", "function_name", metavar="NAME",
              help="The @hg.function of a .py FILE (default: its only one); MLIR files run @main.")
@click.option("--input", "input_specs", multiple=True, metavar="VALUE",
              help="One per parameter, in order: 2x3xf32=1,2,3,4,5,6 (one value fills the array), "
                   "f32=3.5 (a scalar), @x.npy, or x.npz (all its arrays, by parameter name or in order).")
@click.option("--backend", type=click.Choice(["cpu", "gpu", "interpret"]), default=None,
              help="PJRT backend, or the StableHLO reference interpreter (default: jax's default device).")
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True,
              help="Number of replicas.")
@click.option("--output", "output_file", metavar="OUT.npz",
              help="Also save the results to an .npz file (result_0, result_1, ...).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run N times and report the median time per run.")
@reports_errors
def run(file, function_name, input_specs, backend, replicas, output_file, repeat):
    """Compile and run a computation from FILE (.py or .mlir) and print its results."""
    comp = sources.computation_from(file, function_name)
    args = inputs.load_inputs(input_specs, comp.parameter_names)
    if replicas != 1:
        hg.compile(comp, backend=backend, num_replicas=replicas)  # says what is unsupported
    # In this process: what can be checked before running (exit 2 when it fails) ...
    arrays = flatten_arguments(comp, args)
    prepare(comp, for_interpreter=backend == "interpret")
    # ... then compiled and run in a child, where a native abort is exit 1, not a crash
    flat, times, backend_name = isolation.run(comp, arrays, backend, repeat, file)
    for i, array in enumerate(flat):
        click.echo(f"result[{i}]: {_shape_of(array)}")
        click.echo(np.array2string(np.asarray(array), threshold=1000))
    if repeat > 1:
        click.echo(f"{repeat} runs on {backend_name}: median {statistics.median(times) * 1e3:.3f} ms, "
                   f"min {min(times) * 1e3:.3f} ms", err=True)
    if output_file:
        path = pathlib.Path(output_file)
        with tempfile.NamedTemporaryFile(dir=path.parent or ".", suffix=".npz", delete=False) as f:
            np.savez(f, **{f"result_{i}": a for i, a in enumerate(flat)})
        os.replace(f.name, path)
        click.echo(f"saved {len(flat)} result(s) to {path}", err=True)


def _shape_of(array) -> str:
    return str(hg.Shape(hg.element_type(array.dtype), array.shape))


@main.command()
@reports_errors
def devices():
    """List the backends and devices hlogen can run on."""
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


from hlogen_cli.check import check; main.add_command(check)  # noqa: E402,E702


if __name__ == "__main__":
    main()
