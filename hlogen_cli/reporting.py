"""How a command's failure reaches the user: one paragraph and the contract's exit
status (0 success, 1 a run or check failed, 2 bad input), a traceback only under
`hlogen --debug`; and how a signal ends a command (`stopped_by_signals`). The bottom of
the command line's modules: the parent (main.py) and the child that does a command's
work (isolation.py) both report through it."""
from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import threading
import traceback

import click

from hlogen_cli import status

DEBUG = {"on": bool(os.environ.get("HLOGEN_DEBUG"))}
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Stopped(BaseException):
    """A signal of ENDING_SIGNALS arrived. Raised in the main thread (not an Exception:
    nothing handles it on the way) so that every `with` and `finally` on the way out
    runs: the child processes hlogen started are killed there."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(signum, frame):
    for s in ENDING_SIGNALS:  # a second one must not cut the clean-up short
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


@contextlib.contextmanager
def stopped_by_signals():
    """Ctrl-C (SIGINT), SIGTERM and SIGHUP end the command as shells expect, with exit
    status 128 + the signal's number (130, 143, 129), after the clean-up of Stopped."""
    if threading.current_thread() is not threading.main_thread():
        yield  # (signal handlers belong to the main thread: a caller of main in a thread)
        return
    before = {s: signal.signal(s, _stop) for s in ENDING_SIGNALS}
    try:
        yield
    except Stopped as e:
        sys.exit(status.SIGNALLED + e.signum)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


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
            sys.exit(status.FAILED)
        except Exception as e:
            # here, not at the top: the parent's start-up (hlogen --help, run) needs no hlogen
            from hlogen.errors import ExecutionError, HlogenError
            if DEBUG["on"]:
                traceback.print_exc()
            if isinstance(e, HlogenError):
                click.echo(f"error: {e}", err=True)
                sys.exit(status.FAILED if isinstance(e, ExecutionError) else status.BAD_INPUT)
            detail = str(e).strip().splitlines()
            click.echo(f"internal error: {type(e).__name__}: {detail[-1] if detail else ''}"
                       + ("" if DEBUG["on"] else " (hlogen --debug ... shows the traceback)"),
                       err=True)
            sys.exit(status.FAILED)
    return wrapper
