"""`hlogen compile`: XLA's optimized HLO, cost and memory analyses, a compiled file; the
work (hlogen_cli.work.compile_module) runs in a child process, as run's does."""
from __future__ import annotations

import click

from hlogen_cli import isolation
from hlogen_cli.options import (backend_option, function_option, no_cache_option, output_option,
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
@no_cache_option
@verbose_option
@reports_errors
def command(file, function_name, backend, xla_flags, output, hlo, cost, memory, no_cache, verbose):
    """Compile IN with XLA: its optimized HLO, a compiled file, its cost analysis.

    IN: a module (.mlir text, bytecode or portable artifact, XLA's HLO text or protos, or
    a serialized jax Exported; - reads standard input) or a .py file of @hg.function
    definitions."""
    if not (output or cost or memory):
        hlo = True
    isolation.in_child("work:compile_module",
                       {"file": file, "function_name": function_name, "backend": backend,
                        "output": output, "hlo": hlo, "cost": cost, "no_cache": no_cache,
                        "verbose": verbose, "memory": memory, "xla_flags": xla_flags}, file)
