"""`hlogen graph`: a module drawn as DOT, SVG or one HTML page.

It draws the module as written (hlogen.graph) in this process; `--optimized` draws XLA's
optimized HLO, which needs a compile: that work (`draw_optimized`) runs in a child process
(hlogen_cli.isolation), as `compile`'s does, so that an abort in XLA is an error, not a crash.
"""
from __future__ import annotations

import click

from hlogen import drawing, sharding
from hlogen import graph as graphs
from hlogen.files import Output
from hlogen.runtime import xla_options
from hlogen_cli import compiling, isolation, sources
from hlogen_cli.options import (backend_option, function_option, output_option, refuse,
                                sharding_options, xla_flag_option)
from hlogen_cli.reporting import reports_errors


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@function_option("The @hg.function of a .py FILE (default: its only one), or a public "
                 "function of a module (default: main, with every function it calls).")
@click.option("--optimized", is_flag=True,
              help="Draw XLA's optimized HLO for --backend (fusions as clusters) instead of "
                   "the module as written; .dot and .svg are XLA's own rendering.")
@backend_option("With --optimized: the PJRT backend that compiles (cpu, gpu or a plugin; "
                "default: jax's default device).")
@xla_flag_option(whose="--optimized's compile")
@output_option("The file to write; its suffix picks the form: .dot (Graphviz's text), "
               ".svg (needs Graphviz's dot), .html (one page that opens offline).",
               metavar="OUT.{dot,svg,html}", required=True)
@sharding_options
@reports_errors
def command(file, function_name, optimized, backend, xla_flags, output, partitions, one_device):
    """Draw a module as a graph: DOT, SVG or one HTML page.

    IN is StableHLO in any form hg.load reads (- reads standard input), or a .py file
    of @hg.function definitions. One node per op with its shape and source line;
    regions (loop bodies, branches, reducers) as clusters."""
    drawing.check_output(output)
    checked = Output(output, "-o", inputs=[file])  # before any work
    refuse([(bool(xla_flags) and not optimized,
             "--xla-flag sets options of XLA's compile: it goes with --optimized"),
            (backend is not None and not optimized,
             f"--backend {backend} chooses where XLA compiles: it goes with --optimized (the "
             f"module as written is drawn without a backend)"),
            ((partitions is not None or one_device) and not optimized,
             "--partitions and --one-device say how XLA compiles a sharded module: they go "
             "with --optimized")])
    if optimized:
        isolation.in_child(draw_optimized,
                           {"file": file, "function_name": function_name, "backend": backend,
                            "output": output, "xla_flags": xla_flags,
                            "partitions": partitions, "one_device": one_device}, file)
        return
    comp = sources.computation_from(file, function_name)
    _write(graphs.of(comp), checked, comp.signature())


def draw_optimized(file: str, function_name: str | None, backend: str | None, output: str,
                   xla_flags: tuple = (), partitions: int | None = None,
                   one_device: bool = False) -> None:
    """In the child: compile with XLA (with --xla-flag's options) and draw its optimized HLO."""
    # here, not at the top: start-up (jax starts for --optimized only)
    from hlogen.runtime import inspection, pjrt
    options = compiling.checked_xla_flags(xla_flags)
    declared = compiling.compiling(backend)
    comp = sharding.as_asked(sources.computation_from(file, function_name), partitions,
                             one_device)
    isolation.status("compile", backend=backend)
    exe = pjrt.compile(comp, declared, xla_options=options)
    if exe.how_it_runs():
        click.echo(f"{exe.backend}: {exe.how_it_runs()}", err=True)
    graph = inspection.optimized_graph(exe)
    dot = None if drawing.check_output(output) in drawing.HTML else inspection.xla_dot(exe)
    on = exe.backend + (f" ({xla_options.text(options)})" if options else "")
    _write(graph, Output(output, "-o", inputs=[file]), f"{comp.signature()} on {on}", dot)


def _write(graph, output: Output, subtitle: str, dot: str | None = None) -> None:
    output.write(drawing.render(graph, str(output), subtitle, dot).encode())
    if dot is not None:
        click.echo(f"{output}: XLA's own rendering of {graph.title}")
        return
    click.echo(f"{output}: {graph.title}: {len(graph.nodes)} nodes, {len(graph.edges)} edges, "
               f"{len(graph.clusters)} clusters")
