"""`hlogen compare`: one module on a test and a reference side (run_hlo_module's
--platform and --reference_platform), result by result, by XLA's rule; the work
(`compare_sides`) runs in a child process (hlogen_cli.isolation), so that a native abort
of either side is an error that names the side, not a crash."""
from __future__ import annotations

import dataclasses
import sys

import click

from hlogen_cli import isolation, status
from hlogen_cli.options import (also_options, also_refusals, function_option, input_options,
                                refuse, side_options, tolerance_options)
from hlogen_cli.reporting import reports_errors

INPUT_HELP = ("One per parameter, in order, in the forms of `hlogen run --input` (an .npz of "
              "all of them too). Without any input option: random inputs (--random-inputs, "
              "seed 0), or the arguments an HloSnapshot recorded.")


def comparison_arguments(command):
    """IN, --function, the sides, the inputs and the rule: what compare and bisect take."""
    for decorate in reversed([click.argument("file", metavar="IN",
                                             type=click.Path(dir_okay=False, allow_dash=True)),
                              function_option(), side_options, input_options(INPUT_HELP),
                              tolerance_options]):
        command = decorate(command)
    return command


@click.command()
@comparison_arguments
@click.option("--iterations", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="N",
              help="Compare N times, with new random inputs each time (seed, seed + 1, ...), "
                   "stopping at the first that differs.")
@click.option("--shown", type=click.IntRange(min=0), default=5, show_default=True, metavar="K",
              help="How many differing elements each result's report lists.")
@click.option("--json", "json_path", metavar="OUT.json",
              help="Write the whole comparison as JSON (sides, rule, each iteration's reports; "
                   "NaN and infinities as strings) for triage scripts.")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Stop and fail (exit 1) when it takes longer.")
@click.option("--strict", is_flag=True,
              help="Count the differences the spec allows (a finding whose verdict is "
                   "'allowed') as differences too: exit 1 for them. --bitwise implies it "
                   "(every bit counts).")
@also_options("A third side (as --test names it), compared with both: each result's verdict "
              "names the odd one out (the side the two others agree against), or says that all "
              "three differ; where exact math cannot judge a finding, the majority names the "
              "wrong side.")
@reports_errors
def command(file, function_name, sides, inputs, tolerance, iterations, shown, json_path,
            timeout, strict, also, also_flags):
    """Run IN on two backends (or three) and compare the results by XLA's rule.

    Each result is compared element by element as XLA's run_hlo_module does
    (literal_comparison::Near): an element differs only when its absolute error exceeds
    --abs AND its relative error exceeds --rel; two NaNs match, -0 matches +0, an
    infinity matches only itself, integers exactly. Where results differ, each difference
    is followed to the op where it is born (given the reference's values of its operands,
    the test side's op alone differs) and judged by exact math: its findings. With --also,
    a third side is compared with both, and each result gets a verdict: the odd one out
    (test, reference or third), all three agree, all three differ, or undecided (one
    agrees with both others, which differ); a finding exact math cannot judge
    (undetermined) is judged by that majority, one it judged keeps its verdict (the third
    side's contradiction said). Exit 1 when a finding is not allowed by the spec (or with
    --strict or --bitwise, any difference), whoever judged it, or when the third side is
    the odd one out; 0 when not. The test side gets the module as written (as jax gives it to
    XLA); hlogen's rewrites are the interpreter's. IN: any module hlogen run reads (an
    HloSnapshot runs with its arguments)."""
    inputs = inputs.random_by_default()
    refuse(also_refusals(also, also_flags))
    sides = {**sides, "also": also, "also_flags": also_flags}
    refuse(inputs.refusals() + tolerance.refusals() + [
        (iterations > 1 and bool(inputs.specs or inputs.zero),
         f"--iterations {iterations} draws new random inputs each time: not with --input or "
         f"--zero-inputs")])
    isolation.in_child(compare_sides,
                       {"file": file, "function_name": function_name, "sides": sides,
                        "inputs": dataclasses.asdict(inputs), "tolerance": tolerance.keywords(),
                        "iterations": iterations, "shown": shown, "json_path": json_path,
                        "strict": strict or tolerance.bitwise},
                       file, timeout)


def compare_sides(file, function_name, sides, inputs, tolerance, iterations, shown, json_path,
                  strict=False):
    """In the child: both sides, compared, each difference's finding; exit 1 when one
    counts (Comparison.failed)."""
    # here, not at the top: start-up (the parent imports no hlogen)
    from hlogen import differential
    from hlogen.differential import origin  # (start-up, as the line above)
    from hlogen.differential.isolated import Children  # (start-up, as the line above)
    from hlogen_cli import sides as setups  # (start-up: it imports hlogen)
    setup = setups.setup(file, function_name, inputs, sides, json_path)
    for line in setups.how_sides_run(setup):
        click.echo(line, err=True)

    def watch(which, side):
        isolation.status("run", backend=side.backend, side=which, label=side.label)

    found = differential.compare(setup.computation, setup.arguments, setup.test,
                                 setup.reference, iterations=iterations, seed=setup.seed,
                                 large_range=setup.choice.large_range, shown=shown,
                                 watch=watch, also=setup.third, **tolerance)
    last = found.iterations[-1]
    arguments = setup.arguments if last.seed is None else differential.random_inputs(
        setup.computation, seed=last.seed, large_range=setup.choice.large_range)
    if not found.ok:
        isolation.status("explain")
    # where each difference is born, who is wrong (none where they agree: []); its runs in
    # a child process, so that XLA ending on the probed module loses only the finding
    children = Children()
    try:
        found = origin.with_findings(
            found, setup.computation, arguments, strict=strict,
            runner=lambda side, module, args: children.run(side.backend, module, args,
                                                           side.xla_options))
    finally:
        children.close()
    click.echo(found.text())
    setup.save_arguments(arguments)
    setup.write_json(found.to_json())
    if found.failed:
        sys.exit(status.FAILED)
