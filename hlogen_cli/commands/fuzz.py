"""`hlogen fuzz`: programs on two backends until they disagree; each cause of a difference
reduced and kept once (hg.fuzz.run, hlogen.fuzz). The backends run in a child process
that may die: a crash is a finding, never the end of the command."""
from __future__ import annotations

import sys

import click

import hlogen as hg
from hlogen.fuzz import DEFAULT_ELEMENT_TYPES, LARGE_RANGE_SHARE
from hlogen_cli import completion, status
from hlogen_cli.options import (SEED_OPTION, also_options, also_refusals, output_option, refuse,
                                side_options, tolerance_options)
from hlogen_cli.sides import sides_of, third_of
from hlogen_cli.progress import Line
from hlogen_cli.reporting import Stopped, reports_errors


@click.command()
@side_options
@click.option("--seconds", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, help="How long to run programs (a reduction under way when "
                                      "the time is up finishes, within --reduce-timeout).")
@click.option("--programs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Stop after N programs, if --seconds has not run out first.")
@SEED_OPTION
@click.option("--large-range", type=click.FloatRange(0, 1), is_flag=False, flag_value=1.0,
              default=LARGE_RANGE_SHARE, show_default=True, metavar="[SHARE]",
              help="The share of programs whose random floats span their type's whole "
                   "exponent range (run_hlo_module's --use_large_range; each program's seed "
                   "decides), where the others' are in [-0.1, 0.2): --large-range alone, "
                   "every program; --large-range 0, none.")
@output_option("The folder of the findings (made if missing, in a folder that exists): "
               "NAME.mlir, NAME.inputs.npz and NAME.txt per signature, summary.json and "
               "junit.xml.", metavar="DIR", required=True)
@click.option("--corpus", "corpus", multiple=True, metavar="PATH", shell_complete=completion.files,
              help="Files or folders of StableHLO (.mlir; StableHLO's test files are split on "
                   "`// -----` and their checks made results) to run as they are, then "
                   "mutated, between random programs; repeatable.")
@click.option("--ops", type=click.IntRange(min=1), default=20, show_default=True,
              help="Ops per random program.")
@click.option("--max-rank", type=click.IntRange(min=0), default=3, show_default=True)
@click.option("--max-dim", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--depth", type=click.IntRange(min=0), default=2, show_default=True,
              help="How deep regions (loop bodies, branches, calls) nest.")
@click.option("--element-types", default=",".join(DEFAULT_ELEMENT_TYPES), show_default=True,
              metavar="T,T,...", help="The element types of random programs.")
@tolerance_options
@click.option("--reduce-timeout", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, metavar="SECONDS", help="Bound each finding's reduction.")
@click.option("--run-timeout", type=click.FloatRange(min=0, min_open=True), default=30.0,
              show_default=True, metavar="SECONDS",
              help="Stop one program's compile and run on one side after this long.")
@also_options("A third side (as --test names it), run on a program whose sides differ where "
              "exact math cannot judge the op where the difference is born: the two sides that "
              "agree name the third wrong in the signature (\"cpu wrong (by majority with "
              "iree)\"), or \"all three apart\".")
@reports_errors
def command(sides, seconds, programs, seed, large_range, output, corpus, ops, max_rank,
            max_dim, depth, element_types, tolerance, reduce_timeout, run_timeout, also,
            also_flags):
    """Run random and mutated programs on two backends and keep a reduced reproducer of
    each cause of a difference.

    Random programs come from hlogen's op library (shape rules, attribute constraints,
    regions for reduce, sort, while, conditional, scatter, ...; --ops, --max-rank,
    --max-dim, --depth, --element-types), and, with --corpus, modules of your own or
    StableHLO's test files, as they are and mutated. Each runs on --test and --reference
    with random inputs (--seed, --large-range; the corpus files' own values for theirs).
    A divergence (--abs/--rel, --ulp, --bitwise), an error only one side reports, or a
    side's crash is reduced (as `hlogen reduce` does) and named by its signature, its
    cause once: the op where a divergence's sides first differ (or the side that flushes
    subnormals to zero), an error's side, class and message (numbers aside); a
    difference the spec allows (a sum in another order, the bits of a NaN) is none.
    DIR keeps one reproducer per signature, the command that shows it,
    summary.json and junit.xml. With --also, where exact math cannot judge the op where
    a divergence is born, a third side's majority names the wrong side. Exit status 1
    when a signature not already in DIR's summary was found, 0 otherwise; Ctrl-C,
    SIGTERM or SIGHUP write summary.json and junit.xml of what was found so far (a
    reduction under way as far as it got), then exit 130, 143 or 129."""
    refuse(tolerance.refusals() + also_refusals(also, also_flags))
    sides = {**sides, "also": also, "also_flags": also_flags}
    test, reference = sides_of(sides)
    third = third_of(sides)
    line = Line()
    try:
        run = hg.fuzz.run(test, reference, out=output, seconds=seconds, seed=seed or 0,
                      corpus=corpus, ops=ops, max_rank=max_rank, max_dim=max_dim, depth=depth,
                      element_types=[t for t in element_types.split(",") if t],
                      large_range=large_range, **tolerance.keywords(),
                      reduce_seconds=reduce_timeout, run_seconds=run_timeout,
                      programs=programs, progress=line.show,
                      also=third,
                      interrupted_by=(Stopped,))  # Ctrl-C, SIGTERM, SIGHUP: what was found is kept
    finally:
        line.clear()
    click.echo(run.text())
    if run.interrupted is not None:
        raise run.interrupted  # exit 128 + the signal's number (reporting)
    sys.exit(status.FAILED if run.new else status.SUCCESS)
