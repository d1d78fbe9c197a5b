"""`hlogen check`: run StableHLO conformance files on PJRT and/or the interpreter."""
from __future__ import annotations

import sys

import click

from hlogen import backends, conformance
from hlogen.conformance import files as conformance_files, report
from hlogen.conformance.sample import stratified
from hlogen.errors import HlogenError
from hlogen.files import Output
from hlogen.progress import Progress
from hlogen.runtime import available, plugins, xla_options
from hlogen_cli import status
from hlogen_cli.options import backend_option, xla_flag_option
from hlogen_cli.progress import Line
from hlogen_cli.reporting import reports_errors
from hlogen_cli.compiling import checked_xla_flags, declaration

ALL = "all"


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@backend_option("A backend (`hlogen devices` lists them: interpret, cpu, gpu, PJRT plugins), "
                "or all: every one available here (the default).")
@xla_flag_option(whose="the compiles of PJRT backends")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, metavar="N",
              help="Worker processes (default: the number of cores).")
@click.option("--timeout", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              metavar="SECONDS",
              help="Seconds one module may run before its worker is killed.")
@click.option("--batch", type=click.IntRange(min=1), default=8, show_default=True, metavar="N",
              help="PJRT modules compiled together per executable (1: one by one); a batch "
                   "that fails is run again one by one.")
@click.option("--junit", "junit_path", metavar="OUT.xml", help="Write a JUnit XML report.")
@click.option("--json", "json_path", metavar="OUT.jsonl", help="Write one JSON record per module run.")
@click.option("--known", "known_paths", multiple=True, metavar="FILE",
              help="A known-deviation list to add to the built-in one (JSON; see "
                   "docs/conformance.md, Known deviations).")
@click.option("--no-default-known", is_flag=True, help="Leave out the built-in known-deviation list.")
@click.option("--explain", is_flag=True,
              help="For each module that fails on PJRT, name the first op whose PJRT and "
                   "interpreter values differ.")
@click.option("--sample", is_flag=True,
              help="Run a stratified sample: files chosen so that every op used in PATHS runs "
                   "at least once (what `make test` runs).")
@click.option("--quiet", "-q", is_flag=True, help="Print only the totals.")
@reports_errors
def command(paths, backend, xla_flags, jobs, timeout, batch, junit_path, json_path, known_paths,
            no_default_known, explain, sample, quiet):
    """Run StableHLO conformance files (PATHS: files or directories of .mlir) and judge
    the results by StableHLO's check rules. Exit status 1 when any module fails that is
    not a known deviation, 2 for bad arguments."""
    options = checked_xla_flags(xla_flags)
    if backend in (None, ALL):
        plugins.discover(isolate=True)  # each loaded in a child first: one that crashes is left out
        chosen = [b for b in backends.declared() if available(b)]
        for name, why in backends.UNAVAILABLE.items():  # plugins that failed to load
            click.echo(f"{name}: not available, not run: {why}", err=True)
    else:  # the name looked up once, here: the run takes the Backend
        chosen = [declaration(backend)]
        if not available(chosen[0]):
            raise HlogenError(f"--backend {backend}: it is not available here (hlogen devices "
                              f"lists the backends)")
    if options and not any(b.compiles for b in chosen):
        raise HlogenError(f"--xla-flag sets options of XLA's compiles: --backend {backend} "
                          f"compiles nothing")
    if sample:
        paths = stratified(paths)
    read = [*conformance_files.discover(paths), *known_paths]
    reports = [(Output(path, option, inputs=read), form) for path, option, form in
               ((junit_path, "--junit", report.junit), (json_path, "--json", report.json_lines))
               if path]
    progress = _Counted(quiet)
    result = conformance.run(paths, chosen, jobs=jobs, timeout=timeout, known_lists=known_paths,
                             use_default_known=not no_default_known, on_record=progress,
                             explain=explain, batch=batch, xla_options=options)
    progress.done()
    click.echo(report.summary(result, per_op=not quiet, max_listed=0 if quiet else 50))
    if options:
        click.echo(f"XLA options of the PJRT compiles: {xla_options.text(options)}")
    if explain:
        for r in result.records:
            if r.get("explain"):
                click.echo(f"{r['file']}#{r['module']} ({r['backend']}): {r['explain']}")
    for output, form in reports:
        output.write(form(result))
    sys.exit(status.FAILED if result.failed else status.SUCCESS)


class _Counted:
    """The conformance run's bar on a terminal, with how many modules fail so far."""

    def __init__(self, quiet: bool):
        self.line = Line(enabled=False) if quiet else Line()
        self.failed = 0

    def __call__(self, record, done, total):
        if record["status"] in ("fail", "error", "crash", "timeout"):
            self.failed += 1
        self.line.show(Progress("checking", f"({self.failed} failing)", done=done, total=total))

    def done(self):
        self.line.clear()
