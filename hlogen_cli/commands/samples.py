"""`hlogen samples`: the sample computations, listed, shown, run."""
from __future__ import annotations

import dataclasses

import click

from hlogen_cli import completion, isolation
from hlogen_cli.options import RunOptions, backend_option
from hlogen_cli.reporting import reports_errors


@click.group(invoke_without_command=True)
@click.pass_context
@reports_errors
def command(ctx):
    """The sample computations (samples/*.py): list them, show one, run one."""
    if ctx.invoked_subcommand is None:
        _list_samples()


@command.command(name="list")
@reports_errors
def samples_list():
    """List every sample function with its one-line description (as `hlogen samples`)."""
    _list_samples()


def _list_samples() -> None:
    # here, not at the top: start-up (`hlogen samples run` runs in a child)
    from hlogen_cli import samples as sample_files
    rows = sample_files.listing()
    width = max(len(name) for name, _ in rows)
    for name, doc in rows:
        click.echo(f"{name:{width}}  {doc}")


@command.command(name="show")
@click.argument("name", shell_complete=completion.sample_names)
@reports_errors
def samples_show(name):
    """Show sample NAME (FILE.FUNCTION, or FUNCTION when it is unique): its signature,
    its description and its StableHLO."""
    from hlogen_cli import samples as sample_files  # here, not at the top: start-up (as above)
    path, _, fn = sample_files.find(name)
    click.echo(f"// {path}: {fn.computation.signature()}")
    for line in (fn.__doc__ or "").strip().splitlines():
        click.echo(f"// {line.strip()}")
    click.echo(fn.computation.as_text().rstrip("\n"))


@command.command(name="run")
@click.argument("name", shell_complete=completion.sample_names)
@backend_option()
@reports_errors
def samples_run(name, backend):
    """Run sample NAME on default inputs (printed first)."""
    isolation.in_child(run_sample, {"name": name, "backend": backend}, name)


def run_sample(name: str, backend: str | None) -> None:
    """In the child: sample NAME run as `hlogen run` runs it, on default inputs (printed
    first)."""
    from hlogen_cli import running, samples  # here, not at the top: start-up (hlogen)
    path, function_name, _ = samples.find(name)

    def default_inputs(comp):
        arrays = samples.default_inputs(comp)
        for n, a in zip(comp.parameter_names, arrays):
            click.echo(f"input {n}: {samples.literal(a)}")
        return arrays

    running.run(str(path), function_name, dataclasses.asdict(RunOptions(backend=backend)),
                default_inputs)
