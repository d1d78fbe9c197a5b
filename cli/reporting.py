"""How a command's failure reaches the user: one paragraph and the contract's exit
status (0 success, 1 a run or check failed, 2 bad input), a traceback only under
`hlogen --debug`. The bottom of the command line's modules: the parent (main.py) and
the child of run/compile (isolation.py) both report through it."""
from __future__ import annotations

import functools
import os
import sys
import traceback

import click

DEBUG = {"on": bool(os.environ.get("HLOGEN_DEBUG"))}


def reports_errors(command):
    """Turns hlogen errors into a one-paragraph message and the contract's exit code;
    anything else is an internal error (exit 1), with its traceback under --debug only."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except click.exceptions.ClickException:
            raise
        except BrokenPipeError:  # the reader left (hlogen emit ... | head): nothing to say
            sys.stdout = open(os.devnull, "w")  # (so that the final flush does not fail too)
            sys.exit(1)
        except Exception as e:
            # here, not at the top: the parent's start-up (hlogen --help, run) needs no hlogen
            from hlogen.errors import ExecutionError, HlogenError
            if DEBUG["on"]:
                traceback.print_exc()
            if isinstance(e, HlogenError):
                click.echo(f"error: {e}", err=True)
                sys.exit(1 if isinstance(e, ExecutionError) else 2)
            detail = str(e).strip().splitlines()
            click.echo(f"internal error: {type(e).__name__}: {detail[-1] if detail else ''}"
                       + ("" if DEBUG["on"] else " (hlogen --debug ... shows the traceback)"),
                       err=True)
            sys.exit(1)
    return wrapper
