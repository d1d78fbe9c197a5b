"""`hlogen completion`: the shell completion script."""
from __future__ import annotations

import click
from click.shell_completion import get_completion_class


@click.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
@click.pass_context
def command(ctx, shell):
    """Print the shell completion script: eval "$(hlogen completion bash)"."""
    cls = get_completion_class(shell)
    click.echo(cls(ctx.find_root().command, {}, "hlogen", "_HLOGEN_COMPLETE").source())
