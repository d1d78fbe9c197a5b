"""`hlogen opt`: a pass pipeline on a module of any form hlogen reads."""
from __future__ import annotations

import sys

import click

from hlogen import passes
from hlogen.errors import HlogenError
from hlogen.files import Output
from hlogen_cli import sources
from hlogen_cli.commands.emit import serialized
from hlogen_cli.options import force_option, format_options, formats_in_help, output_option
from hlogen_cli.reporting import reports_errors


class _PipelinesHelp(click.Command):
    """A command whose help ends with what each named pipeline runs (hlogen.passes)."""

    def format_epilog(self, ctx, formatter):
        rows = [(name, pipeline) for name, pipeline in passes.PIPELINES.items()]
        rows += [(name, "hlogen's rewrites to XLA's semantics (hlogen.rewrites), which every "
                        "backend applies after legalize") for name in passes.REWRITES]
        with formatter.section("Named pipelines"):
            formatter.write_dl(rows)


@click.command(cls=_PipelinesHelp)
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--pipeline", metavar="P", default=None,
              help="Named pipelines, comma-separated (default: default; each is listed below).")
@click.option("--mlir-pipeline", metavar="'builtin.module(...)'",
              help="A raw MLIR pass pipeline, run as it is.")
@format_options
@output_option("Output file (in a folder that exists), or - for standard output.", default="-",
               show_default=True)
@force_option
@click.option("--print-ir-after-all", is_flag=True,
              help="Print the module after each pass to standard error.")
@reports_errors
@formats_in_help
def command(file, pipeline, mlir_pipeline, fmt, target_version, output, force, print_ir_after_all):
    """Run a pass pipeline on IN ({formats}, recognized by content; - reads standard
    input) and write the result: `hlogen opt dump.txt -o dump.mlir` converts HLO."""
    if pipeline and mlir_pipeline:
        raise HlogenError("--pipeline and --mlir-pipeline: give one of them")
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    if mlir_pipeline is not None and not mlir_pipeline.strip().startswith("builtin.module("):
        raise HlogenError(f"--mlir-pipeline {mlir_pipeline!r}: a raw pipeline starts with "
                          f"'builtin.module(' (named pipelines go to --pipeline)")
    chosen = mlir_pipeline or pipeline or "default"
    passes.steps(chosen)  # a bad name is refused before standard input is read
    path = Output(output, "-o", force, [file]) if output != "-" else None
    comp = sources.load_mlir(file)
    steps = passes.single_passes(chosen) if print_ir_after_all else [chosen]
    for name in steps:
        comp = passes.run(comp, name)
        if print_ir_after_all:
            click.echo(f"// -----// IR Dump After {name} //----- //\n{comp.as_text()}", err=True)
    data = serialized(comp, fmt, target_version)
    if path is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        path.write(data)
        click.echo(f"{output}: {comp.signature()}", err=True)
