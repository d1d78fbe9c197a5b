"""hlogen: emit, optimize, compile, run and inspect StableHLO from the command line.

One table of commands (`COMMANDS`), as pip's: each command is a module of
hlogen_cli.commands, imported only when it runs or its help is asked for, so that
`hlogen --help` and run's parent start at once (neither imports hlogen, nor jax); the
options commands share are defined once (hlogen_cli.options), the exit statuses named
once (hlogen_cli.status), and one place turns errors into them (hlogen_cli.reporting).

Exit codes: 0 success, 1 a run or check failed (a native abort while running
included: see isolation.py), 2 bad input (the message names the file, line and
column, or the argument), 128 + N when signal N stopped it (130 Ctrl-C, 143 SIGTERM,
129 SIGHUP). `hlogen --debug COMMAND` shows tracebacks; nothing else does.
"""
from __future__ import annotations

import importlib
import os

import click

from hlogen_cli.reporting import DEBUG, stopped_by_signals

# name -> (module of hlogen_cli.commands, its one-line summary: the start of its help)
COMMANDS = {
    "emit": ("emit", "Turn each @hg.function of Python FILEs into a StableHLO artifact"),
    "opt": ("opt", "Run a pass pipeline on IN"),
    "run": ("run", "Compile and run a computation and print its results."),
    "compile": ("compile", "Compile IN with XLA: its optimized HLO, a compiled file, its cost "
                           "analysis."),
    "check": ("check", "Run StableHLO conformance files"),
    "compare": ("compare", "Run IN on two backends (or three) and compare the results by XLA's rule."),
    "bisect": ("bisect", "Find the compiler stage that makes the test side differ from the "
                         "reference."),
    "graph": ("graph", "Draw a module as a graph: DOT, SVG or one HTML page."),
    "view": ("view", "Open a module in Model Explorer (the extra hlogen[view])."),
    "cache": ("cache", "The executable cache of run and compile"),
    "devices": ("devices", "List the backends and devices hlogen can run on"),
    "reduce": ("reduce", "Shrink IN while it stays interesting, and write the smallest module "
                         "found."),
    "report": ("report", "Write the report of FINDING a maintainer acts on, in Markdown."),
    "fuzz": ("fuzz", "Run random and mutated programs on two backends and keep a reduced "
                     "reproducer of each cause of a difference."),
    "samples": ("samples", "The sample computations (samples/*.py): list them, show one, run one."),
    "completion": ("completion", "Print the shell completion script"),
}


class _Group(click.Group):
    """The commands of COMMANDS, in its order, each imported when first asked for."""

    def main(self, *args, **kwargs):
        with stopped_by_signals():  # a signal kills the children and exits 128 + its number
            return super().main(*args, **kwargs)

    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        if name not in COMMANDS:
            return None
        if name not in self.commands:
            module = importlib.import_module(f"hlogen_cli.commands.{COMMANDS[name][0]}")
            self.add_command(module.command, name)
        return self.commands[name]

    def format_commands(self, ctx, formatter):
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, summary) in COMMANDS.items()])


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hlogen", prog_name="hlogen")
@click.option("--debug", is_flag=True, help="Show Python tracebacks of errors.")
def main(debug):
    """hlogen: the XLA client library for the StableHLO era, on the command line.

    Build computations in Python files with @hg.function, emit them as StableHLO
    artifacts, run pass pipelines, compile them with XLA and run them with jaxlib's
    PJRT client, a PJRT plugin or the StableHLO reference interpreter.

    Exit status: 0 success, 1 a run or check failed, 2 bad input, 130 after Ctrl-C
    (143 SIGTERM, 129 SIGHUP).
    Shell completion: eval "$(hlogen completion bash)" (or zsh, fish).
    """
    DEBUG["on"] = debug or bool(os.environ.get("HLOGEN_DEBUG"))  # per call (tests call main)


if __name__ == "__main__":
    main(prog_name="hlogen")
