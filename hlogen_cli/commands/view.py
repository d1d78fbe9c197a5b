"""`hlogen view`: the module in Google's Model Explorer (the optional extra hlogen[view])."""
from __future__ import annotations

import importlib.util
import os
import socket
import tempfile

import click

from hlogen.errors import InputError, UnsupportedError
from hlogen_cli import sources
from hlogen_cli.options import function_option
from hlogen_cli.reporting import reports_errors

VIEW_EXTRA = ("hlogen view needs Google's Model Explorer, an optional extra: pip install "
              "'hlogen[view]' (or pip install ai-edge-model-explorer)")


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@function_option()
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True,
              metavar="P",
              help="The port Model Explorer serves on (localhost).")
@click.option("--no-browser", is_flag=True,
              help="Serve without opening a browser (print the address).")
@reports_errors
def command(file, function_name, port, no_browser):
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
