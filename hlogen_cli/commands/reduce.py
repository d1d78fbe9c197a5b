"""`hlogen reduce`: the smallest module found that stays interesting (hg.reduce_module). The
backends run in a child process that may die (hlogen.differential.isolated): a crash
or a hang of a candidate is the candidate's, never the command's."""
from __future__ import annotations

import click

import hlogen as hg
from hlogen import sharding
from hlogen.errors import InputError
from hlogen.files import Output
from hlogen_cli import inputs as input_values, sources
from hlogen_cli.commands.run import VALUE_HELP
from hlogen_cli.options import (force_option, function_option, input_options, output_option,
                                refuse, side_options, tolerance_options)
from hlogen_cli.sides import sides_of
from hlogen_cli.progress import Line
from hlogen_cli.reporting import Stopped, reports_errors

INPUTS_SUFFIX = ".inputs.npz"


def inputs_path(output: str) -> str:
    """Where the inputs of OUT.mlir go: OUT.inputs.npz."""
    return (output[:-len(".mlir")] if output.endswith(".mlir") else output) + INPUTS_SUFFIX


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@function_option()
@output_option("The reduced module (StableHLO text); its inputs, when it has parameters and "
               "the interest runs it, go to OUT.inputs.npz beside it.", metavar="OUT.mlir",
               required=True)
@force_option
@side_options
@tolerance_options
@input_options("One per parameter, in order: " + VALUE_HELP + ". Default: random inputs.")
@click.option("--error", metavar="REGEX",
              help="Interesting: compiling or running on --test fails with an error whose "
                   "message matches REGEX (Python's re.search).")
@click.option("--crash", is_flag=True,
              help="Interesting: --test's process ends by a signal (with --error, one whose "
                   "message, with XLA's last words, matches REGEX).")
@click.option("--script", metavar="S", type=click.Path(dir_okay=False),
              help="Interesting: the executable S, called with the candidate's file (in a new "
                   "folder, its working folder), exits with status 0 (C-Reduce's convention; "
                   "mlir-reduce reads it the other way round).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Bound the whole search, its runs included: the best module found so far "
                   "is written (default: no limit).")
@click.option("--run-timeout", type=click.FloatRange(min=0, min_open=True), default=120.0,
              show_default=True, metavar="SECONDS",
              help="Stop one candidate's compile and run, or --script's run (its process "
                   "group), after this long (not interesting).")
@reports_errors
def command(file, function_name, output, force, sides, tolerance, inputs, error, crash, script,
            timeout, run_timeout):
    """Shrink IN while it stays interesting, and write the smallest module found.

    Interesting is, by the options given: the divergence `hlogen compare` reports between
    --test and --reference, with their XLA options (--test-flag, --reference-flag), the rule
    (--abs/--rel, --ulp, --bitwise) and the inputs (--input, or random ones from --seed),
    its first difference of the same class (NaN or infinity, subnormal, integer, predicate,
    value); or an error of --test whose message matches --error; or --test's death by a
    signal (--crash); or a script (--script S: exit status 0 means still interesting, as
    C-Reduce reads it). It trims results, removes ops (a removed value becomes an operand,
    a new parameter, or zeros; a new parameter gets random inputs from the same seed),
    inlines calls, unrolls loops that run once, takes constant branches, folds and
    simplifies constants and attributes, halves dimensions and drops unused parameters,
    until nothing more goes; every candidate verifies. The same IN, options and --seed give
    the same module. It writes OUT.mlir, OUT.inputs.npz when inputs matter, and prints the
    command that shows what is interesting about it (standard output); progress goes to
    standard error. Ctrl-C, SIGTERM or SIGHUP write the smallest module found so far the
    same way, said to be partial, before exiting 130, 143 or 129. OUT must be a file (a
    --script interest may write to a device or standard output). IN: a module in any form
    hg.load reads (- reads standard input) or a .py file of @hg.function definitions."""
    inputs = inputs.random_by_default()
    refuse([*tolerance.refusals(), *inputs.refusals(),
            (script is not None and (error is not None or crash),
             "--script is the interest itself: not with --error or --crash"),
            (inputs.save is not None,
             f"--save-inputs: reduce writes the inputs of what it finds to "
             f"{inputs_path(output)}")])
    read = [file, *input_values.files_named(inputs.specs), *([script] if script else [])]
    module_out = Output(output, "-o", force=force, inputs=read)
    # the inputs go beside a file, and the command printed reads both back: a device, a
    # FIFO or standard output keeps nothing to read (a script's interest needs no inputs)
    if not module_out.regular and script is None:
        raise InputError(f"-o {output}: not a regular file; reduce writes the reduced "
                         f"module's inputs to OUT.inputs.npz beside it and prints the command "
                         f"that reads both back: give a file name, such as -o small.mlir "
                         f"(a --script interest, which needs no inputs, may write there)")
    npz_out = Output(inputs_path(output), "-o", force=force, inputs=read) \
        if module_out.regular else None
    test, reference = sides_of(sides)
    source = sources.module_source(file, function_name)
    comp = source.computation
    if source.compiled is not None:
        raise InputError(f"{source.compiled.where}: a compiled file; hlogen reduce takes a "
                         f"module or a .py file")
    comp = input_values.refined(sharding.as_asked(comp, sides.get("partitions")), inputs.specs)
    given = None if inputs.random or not (inputs.specs or inputs.zero) else \
        input_values.arguments(comp, inputs)
    line = Line()


    try:
        reduction = hg.reduce_module(
            comp, test=test, reference=reference, inputs=given, seed=inputs.seed or 0,
            large_range=inputs.large_range, **tolerance.keywords(), error=error, crash=crash,
            script=script, timeout=timeout, progress=line.show, run_seconds=run_timeout,
            interrupted_by=(Stopped,))  # Ctrl-C, SIGTERM, SIGHUP: the best so far is kept
    finally:
        line.clear()
    # (a second signal is ignored from here: reporting.Stopped)
    module_out.write(reduction.computation.as_text().encode())
    written = [output]
    if reduction.inputs:
        npz_out.write(reduction.npz())
        written.append(str(npz_out))
    search = reduction.search
    stopped = " (stopped at --timeout: the best module found so far)" if search.timed_out else \
        f" (stopped by {search.interrupted}: partial, the smallest interesting module found " \
        f"so far)" if search.interrupted is not None else ""
    click.echo(f"{file}: {search.original_op_count} ops -> {search.op_count} in "
               f"{search.seconds:.1f} s, {search.tried} candidates ({search.accepted} "
               f"accepted){stopped}; wrote {' and '.join(written)}", err=True)
    if module_out.regular:  # (else nothing can read it back by its name)
        click.echo(reduction.command(output, str(npz_out)) or
                   f"# {reduction.interest.describe()}")
    if search.interrupted is not None:
        raise search.interrupted  # exit 128 + the signal's number (reporting)
