"""`hlogen bisect`: which stage of the test side's compiler makes it disagree with the
reference (hlogen.differential.bisection: the HLO passes that ran, bisected by disabling
sets of them); the work (`bisect_passes`) runs in a child process, as compare's does,
and each compile of the test side in a child of its own (XLA ends the process without
some passes)."""
from __future__ import annotations

import dataclasses

import click

from hlogen_cli import isolation
from hlogen_cli.commands.compare import comparison_arguments
from hlogen_cli.options import refuse
from hlogen_cli.reporting import Stopped, reports_errors


@click.command()
@comparison_arguments
@click.option("--json", "json_path", metavar="OUT.json",
              help='Write the verdict as JSON: {"stage": ..., "passes": [...], "compiles": N, '
                   '"fixed_options": {...}, "reproduce": {...}, ...}.')
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=600.0,
              show_default=True, metavar="SECONDS",
              help="How long one compile and run of the test side may take.")
@reports_errors
def command(file, function_name, sides, inputs, tolerance, json_path, timeout):
    """Find the compiler stage that makes the test side differ from the reference.

    It reads the HLO passes XLA really runs on IN for the test side, then disables sets
    of them (xla_disable_hlo_passes) until the divergence goes: at most 2*ceil(log2 P)+3
    compiles for P passes when one pass explains it. It names real passes before
    pipelines, says when the divergence stays with every HLO pass disabled (the
    StableHLO-to-HLO conversion, or code generation) or when there is nothing to
    explain, and prints the commands that reproduce the fixed and the diverging run.
    Ctrl-C, SIGTERM or SIGHUP print what it had narrowed so far before it exits.
    Inputs and rule as `hlogen compare` takes them."""
    inputs = inputs.random_by_default()
    refuse(inputs.refusals() + tolerance.refusals())
    isolation.in_child(bisect_passes,
                       {"file": file, "function_name": function_name, "sides": sides,
                        "inputs": dataclasses.asdict(inputs), "tolerance": tolerance.keywords(),
                        "json_path": json_path, "seconds": timeout}, file, last_words=True)


def bisect_passes(file, function_name, sides, inputs, tolerance, json_path, seconds):
    """In the child: the verdict and the commands that reproduce it."""
    # here, not at the top: start-up (the parent imports no hlogen)
    from hlogen import differential
    from hlogen.differential.reproduce import command_line  # (start-up: it imports hlogen)
    from hlogen_cli import sides as setups  # (start-up: it imports hlogen)
    setup = setups.setup(file, function_name, inputs, sides, json_path)
    for line in setups.how_sides_run(setup):
        click.echo(line, err=True)
    arguments = setup.arguments if setup.arguments is not None else differential.random_inputs(
        setup.computation, seed=setup.seed, large_range=setup.choice.large_range)
    setup.save_arguments(arguments)
    reference = setup.reference
    # the reference side runs here; every compile of the test side in a child of its own
    isolation.status("run", backend=reference.backend, side="reference", label=reference.label)
    # Ctrl-C, SIGTERM, SIGHUP (passed on by the parent): what was narrowed is said
    verdict = differential.bisect(setup.computation, arguments, setup.test, reference,
                                  seconds=seconds, **tolerance, interrupted_by=(Stopped,))
    click.echo(verdict.text())
    reproduce = {}
    if verdict.stage != "none" and (verdict.stage != "stopped" or verdict.fixed_options):
        def line(options):
            return command_line("compare", file, test=setup.test, reference=setup.reference,
                                test_options=options, function=function_name,
                                inputs=setups.input_words(setup),
                                tolerance=differential.Tolerance.chosen(**tolerance))
        reproduce["diverging"] = line(setup.test.xla_options)
        if verdict.fixed_options:
            reproduce["fixed"] = line(verdict.fixed_options)
        elif verdict.stage == "conversion-or-codegen":
            reproduce["every_pass_disabled"] = line(differential.options_disabling(
                {differential.EVERY_PASS}, setup.test.xla_options))
    for name, text in reproduce.items():
        click.echo(f"{name.replace('_', ' ')}: {text}")
    setup.write_json(dict(verdict.to_json(), reproduce=reproduce))
    if verdict.interrupted is not None:
        raise verdict.interrupted  # exit 128 + the signal's number (reporting)
