"""`hlogen report`: the text a maintainer acts on, of a fuzz finding or a reduced module
(hlogen.differential.report): the op where the difference is born, who is wrong by exact
math, the XLA pass, and a reproducer that needs only jax and jaxlib."""
from __future__ import annotations

import json
import os

import click
import numpy as np

from hlogen.errors import InputError
from hlogen.files import Output
from hlogen_cli import inputs as input_values, sources
from hlogen_cli.commands.reduce import INPUTS_SUFFIX, inputs_path
from hlogen_cli.options import (force_option, input_options, output_option, refuse,
                                side_options, tolerance_options)
from hlogen_cli.reporting import reports_errors
from hlogen_cli.sides import sides_of

SUMMARY = "summary.json"  # (hlogen.fuzz.findings': read here without importing the fuzzer)


@click.command()
@click.argument("finding", metavar="FINDING", type=click.Path(exists=True))
@output_option("Write the report (Markdown) to OUT instead of standard output.",
               metavar="OUT.md")
@force_option
@side_options
@tolerance_options
@input_options("The module's inputs, one per parameter (or an .npz of all), where FINDING "
               "has no NAME.inputs.npz beside it.")
@click.option("--bisect/--no-bisect", default=True, show_default=True,
              help="Look for the XLA pass that makes the test side differ (hlogen bisect).")
@reports_errors
def command(finding, output, force, sides, tolerance, inputs, bisect):
    """Write the report of FINDING a maintainer acts on, in Markdown.

    FINDING: a fuzz finding (DIR/NAME.mlir, or its NAME.txt, in the folder of `hlogen
    fuzz -o DIR`, whose summary.json gives the sides, the rule and what differed), a fuzz
    folder (every finding in it), or a reduced module (`hlogen reduce -o OUT.mlir`, with
    OUT.inputs.npz beside it, or --input), run on --test and --reference.

    The report: a title naming the op where the difference is born and the side that is
    wrong by exact math; the verdict and why; each side's value, the exact value and each
    side's error in ULPs; the ops that only amplify it; the XLA pass that makes it
    (--bisect); the module; a reproducer that needs only jax and jaxlib (the module and
    its inputs inline) and prints the wrong value; the versions; words to search the
    trackers with. Exit status 0 (a report was written), 2 for bad input."""
    from hlogen.differential import report as reports  # (start-up: it imports hlogen)
    refuse(tolerance.refusals() + inputs.refusals())
    out = Output(output, "-o", force=force, inputs=[finding]) if output else None
    texts = []
    for comp, given, test, reference, rule, what in _findings(finding, sides, tolerance, inputs):
        bisected = _bisected(comp, given, test, reference, rule) \
            if bisect and what["kind"] == "divergence" else None
        texts.append(reports.report_of(comp, given, test, reference, rule, kind=what["kind"],
                                       message=what["message"], bisected=bisected).markdown())
    text = "\n---\n\n".join(texts)
    if out is not None:
        out.write(text.encode())
        click.echo(f"wrote {output}", err=True)
    else:
        click.echo(text, nl=False)


def _bisected(computation, inputs, test, reference, tolerance):
    """bisect's verdict, where the test side compiles (None where it cannot say)."""
    if not test.declared.compiles:
        return None
    from hlogen import differential  # (start-up: it imports jax)
    from hlogen.errors import HlogenError  # (start-up: it imports jax)
    try:
        return differential.bisect(computation, inputs, test, reference, **_keywords(tolerance))
    except HlogenError:
        return None


def _keywords(tolerance) -> dict:
    return {"abs": tolerance.abs, "rel": tolerance.rel, "ulp": tolerance.ulp,
            "bitwise": tolerance.bitwise}


def _findings(path: str, sides: dict, tolerance, inputs) -> list:
    """(computation, inputs, test, reference, tolerance, {"kind", "message"}) of each
    finding FINDING names."""
    from hlogen.differential import Side, Tolerance  # (start-up: it imports jax)
    if os.path.isdir(path):
        summary = _summary(path)
        if summary is None:
            raise InputError(f"{path}: a folder without {SUMMARY}: not the folder of a "
                             f"hlogen fuzz run; give a finding's .mlir")
        if not summary["findings"]:
            raise InputError(f"{path}: its {SUMMARY} lists no finding")
        # (the summary's paths are as the run named them: found in the folder whatever
        # the working folder)
        return [_of_fuzz(entry, summary, Side, Tolerance,
                         os.path.join(path, os.path.basename(entry["module"])))
                for entry in summary["findings"]]
    module = path
    for suffix in (".txt", ".report.md", INPUTS_SUFFIX):
        if path.endswith(suffix):
            module = path[:-len(suffix)] + ".mlir"
    summary = _summary(os.path.dirname(os.path.abspath(module)))
    if summary is not None and not (inputs.specs or inputs.zero or inputs.random):
        for entry in summary["findings"]:
            if os.path.abspath(entry["module"]) == os.path.abspath(module) or \
                    os.path.basename(entry["module"]) == os.path.basename(module):
                return [_of_fuzz(entry, summary, Side, Tolerance, module)]
    test, reference = sides_of(sides)
    source = sources.module_source(module, None)
    comp = input_values.refined(source.computation, inputs.specs)
    beside = inputs_path(module)
    if not (inputs.specs or inputs.zero or inputs.random) and os.path.exists(beside):
        inputs = type(inputs)(specs=(beside,))
    given = input_values.arguments(comp, inputs.random_by_default() if not (
        inputs.specs or inputs.zero) else inputs)
    input_values.check_count(comp, given)
    return [(comp, given, test, reference, Tolerance.chosen(**tolerance.keywords()),
             {"kind": "divergence", "message": None})]


def _summary(folder: str) -> dict | None:
    path = os.path.join(folder, SUMMARY)
    if not os.path.exists(path):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        data["findings"], data["test"], data["reference"]  # (what it must have)
        return data
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path}: not a summary of hlogen fuzz ({e})") from None


def _of_fuzz(entry: dict, summary: dict, Side, Tolerance, module: str | None = None) -> tuple:
    """A fuzz finding: its module and inputs, the run's sides and rule, what differed."""
    from hlogen import loading  # (start-up: it imports jax)
    module = module or entry["module"]
    if not os.path.exists(module):
        raise InputError(f"{module}: the finding's module (of {SUMMARY}) is not there")
    comp = loading.load(module)
    given = []
    if entry.get("inputs"):
        path = entry["inputs"] if os.path.exists(entry["inputs"]) else inputs_path(module)
        given = _npz(path, comp)
    sides = []
    for which in ("test", "reference"):
        side = summary[which]
        sides.append(Side.of(("hlo:" if side.get("through_hlo") else "") + side["backend"],
                             side.get("xla_options") or None))
    tolerance = Tolerance(**{k: summary["tolerance"][k] for k in ("abs", "rel", "ulp", "bitwise", "per_type")
                             if k in summary["tolerance"]})
    kind = "divergence" if entry["kind"] == "divergence" else entry["kind"]
    return (comp, given, sides[0], sides[1], tolerance,
            {"kind": kind, "message": entry.get("message")})


def _npz(path: str, comp) -> list:
    """The inputs of a finding's NAME.inputs.npz, by parameter name, in their types."""
    try:
        with np.load(path) as saved:
            arrays = [saved[name] for name in comp.parameter_names]
    except (OSError, KeyError, ValueError) as e:
        raise InputError(f"{path}: not the inputs of its module ({e})") from None
    return [a.view(s.dtype) if a.dtype.kind == "V" else a
            for a, s in zip(arrays, comp.parameter_shapes)]
