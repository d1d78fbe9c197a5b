"""`hlogen emit`: StableHLO artifacts from the @hg.function definitions of Python files."""
from __future__ import annotations

import contextlib
import os
import sys

import click

import hlogen as hg
from hlogen import files
from hlogen.errors import HlogenError
from hlogen_cli import sources
from hlogen_cli.options import FORMATS, force_option, format_options, function_option, output_option
from hlogen_cli.progress import Line
from hlogen_cli.reporting import reports_errors

def serialized(comp, fmt: str, target_version) -> bytes:
    """`comp` in `fmt` (FORMATS; `target_version`: a portable artifact's StableHLO version)."""
    if fmt == "text":
        return comp.as_text().encode()
    if fmt == "bytecode":
        return comp.to_bytecode()
    return comp.to_portable(target_version)


@click.command()
@click.argument("files_in", metavar="FILE.py...", nargs=-1, required=True,
                type=click.Path(dir_okay=False))
@function_option("Emit only this @hg.function (default: every one in FILE; one FILE only).")
@output_option("Output file (one function), a folder that exists (several: NAME.mlir in it), "
               "or - for standard output. Default: NAME.mlir (or .mlirbc) per function in "
               "the current folder.")
@format_options
@click.option("--pipeline", metavar="P",
              help="Pass pipeline to run first: legalize, canonicalize, default, xla-semantics, "
                   "a comma-separated list of those, or 'builtin.module(...)'.")
@force_option
@reports_errors
def command(files_in, function_name, output, fmt, target_version, pipeline, force):
    """Turn each @hg.function of Python FILEs into a StableHLO artifact (a progress bar
    on a terminal when there are several)."""
    if target_version and fmt != "portable":
        raise HlogenError("--target-version applies to --format portable only")
    if function_name is not None and len(files_in) > 1:
        raise HlogenError(f"--function picks a function of one FILE; {len(files_in)} files given")
    progress = Line()
    functions = []  # (file, name, function)
    # what the user's code prints while it is imported and traced goes to stderr when
    # stdout carries the module (-o -, -o /dev/stdout), and so does what emit says
    on_stdout = output == "-" or _is_standard_output(output)
    with _stdout_to_stderr() if on_stdout else contextlib.nullcontext():
        for k, file in enumerate(files_in):
            progress.count("reading", k, len(files_in))
            found = sources.functions_in(file)
            if function_name is not None:
                found = {function_name: sources.pick(found, function_name, file)}
            functions += [(file, name, fn) for name, fn in found.items()]
        progress.clear()
        what = files_in[0] if len(files_in) == 1 else f"{len(files_in)} files"
        if output == "-" and len(functions) > 1:
            raise HlogenError(f"-o - writes one function; {what} define"
                              f"{'s' * (len(files_in) == 1)} {len(functions)}: "
                              f"{'give one FILE and ' if len(files_in) > 1 else ''}choose "
                              f"with --function")
        for _, _, fn in functions:  # the error of a function that cannot be traced,
            fn.computation  # raised before anything is written
    names = [name for _, name, _ in functions]
    paths = [] if output == "-" else _emit_paths(output, names, what, FORMATS[fmt], force,
                                                  files_in)
    for path in dict.fromkeys(map(str, paths)):  # refused before anything is written
        sharing = [f"{file}:{name}" for (file, name, _), p in zip(functions, paths)
                   if str(p) == path]
        if len(sharing) > 1:
            raise HlogenError(f"{', '.join(sharing)} would all be written to {path}: emit them "
                              f"one file at a time, to different -o directories")
    for k, (file, name, fn) in enumerate(functions):
        progress.count("emitting", k, len(functions))
        comp = hg.passes.run(fn.computation, pipeline) if pipeline else fn.computation
        data = serialized(comp, fmt, target_version)
        progress.clear()
        if output == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            continue
        paths[k].write(data)
        click.echo(f"{paths[k]}: {comp.signature()}", err=on_stdout)


@contextlib.contextmanager
def _stdout_to_stderr():
    """Standard output goes to standard error, Python's print and native writes to file
    descriptor 1 alike, until the block ends."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _is_standard_output(output) -> bool:
    """Whether -o names the file that standard output is (/dev/stdout, /dev/fd/1)."""
    try:
        return output is not None and os.path.samestat(os.stat(output), os.fstat(1))
    except OSError:  # not there (yet), or no standard output
        return False


def _emit_paths(output, names: list, what: str, suffix: str, force: bool, read) -> list:
    """Where emit writes each function (hlogen.files.Output): -o FILE for one;
    NAME.SUFFIX in the folder -o names (which must exist) for several, or in the current
    folder without -o; never over one of the files `read`."""
    if output is None:
        return [files.Output(f"{name}{suffix}", "-o", force, read) for name in names]
    if len(names) > 1 or output.endswith(os.sep) or os.path.isdir(output):
        why = (f"{what} define{'s' if ' files' not in what else ''} {len(names)} functions, "
               f"each written to a file of its own in the folder -o names (or choose one with "
               f"--function)" if len(names) > 1 else "a name ending in / is a folder")
        folder = files.folder(output, "-o", why)
        return [files.Output(folder / f"{name}{suffix}", "-o", force, read) for name in names]
    return [files.Output(output, "-o", force, read)]
