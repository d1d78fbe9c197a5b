"""`hlogen compile`: XLA's optimized HLO, cost and memory analyses, a compiled file; the
work (`compile_module`) runs in a child process, as run's does. This module imports no
hlogen at the top: the parent of the child starts at once."""
from __future__ import annotations

import re

import click

from hlogen_cli import isolation
from hlogen_cli.options import (backend_option, formats_in_help, function_option,
                                no_cache_option, output_option, sharding_options,
                                verbose_option, xla_flag_option)
from hlogen_cli.reporting import reports_errors


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@function_option()
@backend_option("A PJRT backend: cpu, gpu or an installed plugin (default: jax's default device).")
@xla_flag_option()
@output_option("Write a compiled file: the module and XLA's executable, which hlogen run "
               "OUT.hlx runs without compiling, with this jaxlib on this backend and kind "
               "of device (it refuses others).", metavar="OUT.hlx")
@click.option("--hlo", is_flag=True,
              help="Print XLA's optimized HLO (the default without -o, --cost or --memory).")
@click.option("--cost", is_flag=True, help="Print XLA's cost analysis: flops, bytes accessed, ...")
@click.option("--memory", is_flag=True,
              help="Print XLA's memory analysis: arguments, outputs, temporaries, generated code.")
@sharding_options
@no_cache_option
@verbose_option
@reports_errors
@formats_in_help
def command(file, function_name, backend, xla_flags, output, hlo, cost, memory, no_cache, verbose,
            partitions, one_device):
    """Compile IN with XLA: its optimized HLO, a compiled file, its cost analysis.

    IN: a module ({formats}, recognized by content; - reads standard input) or a .py file
    of @hg.function definitions."""
    if not (output or cost or memory):
        hlo = True
    isolation.in_child(compile_module,
                       {"file": file, "function_name": function_name, "backend": backend,
                        "output": output, "hlo": hlo, "cost": cost, "no_cache": no_cache,
                        "verbose": verbose, "memory": memory, "xla_flags": xla_flags,
                        "partitions": partitions, "one_device": one_device}, file)


def compile_module(file: str, function_name: str | None, backend: str | None, output: str | None,
                   hlo: bool, cost: bool, no_cache: bool, verbose: bool, memory: bool = False,
                   xla_flags: tuple = (), partitions: int | None = None,
                   one_device: bool = False) -> None:
    """In the child: XLA's optimized HLO, its cost analysis, a compiled file."""
    # here, not at the top: start-up (the parent imports no hlogen)
    from hlogen import errors, files, sharding
    from hlogen_cli import compiled as compiled_files, compiling, sources  # (start-up)
    xla = compiling.checked_xla_flags(xla_flags)
    compiling.compiling(backend)
    path = files.Output(output, "-o", inputs=[file]) if output else None
    source = sources.module_source(file, function_name)
    comp, from_file = source.computation, source.compiled
    if from_file is not None:
        raise errors.InputError(f"{from_file.where}: compiled already (hlogen run runs it; "
                         f"hlogen compile takes a module or a .py file)")
    comp = sharding.as_asked(comp, partitions, one_device)
    done = compiling.compiled(comp, backend, no_cache, xla_options=xla)
    exe = done.executable
    if exe.how_it_runs():
        click.echo(f"{exe.backend}: {exe.how_it_runs()}", err=True)
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
    compiling.options_in_force(exe)
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

