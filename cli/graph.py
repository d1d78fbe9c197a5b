"""`hlogen graph` (a module drawn as DOT, SVG or one HTML page) and `hlogen view` (the
module in Google's Model Explorer, the optional extra `hlogen[view]`).

`graph` draws the module as written (hlogen.graph) in this process; `--optimized` draws
XLA's optimized HLO, which needs a compile: that work runs in a child process
(isolation.py), as `compile`'s does, so that an abort in XLA is an error, not a crash.
"""
from __future__ import annotations

import importlib.util
import os
import socket
import tempfile

import click

from hlogen import drawing
from hlogen import graph as graphs
from hlogen.errors import InputError, UnsupportedError
from hlogen.files import Output
from hlogen_cli import completion, isolation, sources
from hlogen_cli.reporting import DEBUG, reports_errors


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--function", "function_name", metavar="NAME",
              shell_complete=completion.function_names,
              help="The @hg.function of a .py FILE (default: its only one), or a public "
                   "function of a module (default: main, with every function it calls).")
@click.option("--optimized", is_flag=True,
              help="Draw XLA's optimized HLO for --backend (fusions as clusters) instead of "
                   "the module as written; .dot and .svg are XLA's own rendering.")
@click.option("--backend", type=click.Choice(["cpu", "gpu"]), default=None,
              help="With --optimized: the PJRT backend that compiles (default: jax's default).")
@click.option("-o", "--output", metavar="OUT.{dot,svg,html}", required=True,
              shell_complete=completion.files,
              help="The file to write; its suffix picks the form: .dot (Graphviz's text), "
                   ".svg (needs Graphviz's dot), .html (one page that opens offline).")
@reports_errors
def graph(file, function_name, optimized, backend, output):
    """Draw a module as a graph: DOT, SVG or one HTML page.

    IN is StableHLO in any form hg.load reads (- reads standard input), or a .py file
    of @hg.function definitions. One node per op with its shape and source line;
    regions (loop bodies, branches, reducers) as clusters."""
    drawing.check_output(output)
    checked = Output(output, "-o", inputs=[file])  # before any work
    if optimized:
        code = isolation.run_in_child("graph:draw_optimized",
                                      {"file": file, "function_name": function_name,
                                       "backend": backend, "output": output}, file,
                                      None, False, DEBUG["on"])
        if code:
            raise SystemExit(code)
        return
    comp = sources.computation_from(file, function_name)
    _write(graphs.of(comp), checked, comp.signature())


def draw_optimized(file: str, function_name: str | None, backend: str | None, output: str) -> None:
    """In the child: compile with XLA and draw its optimized HLO."""
    # here, not at the top: start-up (jax starts for --optimized only)
    from hlogen.runtime import inspection, pjrt
    comp = sources.computation_from(file, function_name)
    isolation.status("compile", backend=backend)
    exe = pjrt.compile(comp, backend)
    graph = inspection.optimized_graph(exe)
    dot = None if drawing.check_output(output) in drawing.HTML else inspection.xla_dot(exe)
    _write(graph, Output(output, "-o", inputs=[file]), f"{comp.signature()} on {exe.backend}",
           dot)


def _write(graph, output: Output, subtitle: str, dot: str | None = None) -> None:
    output.write(drawing.render(graph, str(output), subtitle, dot).encode())
    if dot is not None:
        click.echo(f"{output}: XLA's own rendering of {graph.title}")
        return
    click.echo(f"{output}: {graph.title}: {len(graph.nodes)} nodes, {len(graph.edges)} edges, "
               f"{len(graph.clusters)} clusters")


# -- view ---------------------------------------------------------------------------------------

VIEW_EXTRA = ("hlogen view needs Google's Model Explorer, an optional extra: pip install "
              "'hlogen[view]' (or pip install ai-edge-model-explorer)")


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--function", "function_name", metavar="NAME",
              shell_complete=completion.function_names,
              help="The @hg.function of a .py FILE (default: its only one).")
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True,
              help="The port Model Explorer serves on (localhost).")
@click.option("--no-browser", is_flag=True,
              help="Serve without opening a browser (print the address).")
@reports_errors
def view(file, function_name, port, no_browser):
    """Open a module in Model Explorer (the extra hlogen[view]).

    IN as for graph. Model Explorer is Google's graph viewer for StableHLO; it serves on
    localhost until interrupted (Ctrl-C)."""
    if importlib.util.find_spec("model_explorer") is None:
        raise UnsupportedError(VIEW_EXTRA)
    comp = sources.computation_from(file, function_name)
    _check_port_free(port)
    import model_explorer  # here, not at the top: an optional dependency (hlogen[view])
    with tempfile.TemporaryDirectory(prefix="hlogen-view-") as folder:
        # Model Explorer reads StableHLO text from a .mlir file (its name is the title)
        path = os.path.join(folder, f"{comp.name}.mlir")
        with open(path, "w") as f:
            f.write(comp.as_text(debug_info=True))
        click.echo(f"{file}: {comp.signature()}", err=True)
        config = model_explorer.config().add_model_from_path(path)
        # prints the page's address (with the model in it) and serves until Ctrl-C
        model_explorer.visualize_from_config(config, host="localhost", port=port,
                                             no_open_in_browser=no_browser)


def _check_port_free(port: int) -> None:
    """Model Explorer's server waits, without end, for a page on its port: a port that
    something else holds is refused first."""
    with socket.socket() as probe:
        try:
            probe.bind(("localhost", port))
        except OSError as e:
            raise InputError(f"--port {port}: cannot serve there ({e.strerror}); choose "
                             f"another port") from None
