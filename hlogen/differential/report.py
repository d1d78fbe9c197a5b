"""The report a maintainer acts on (`hlogen report`, and NAME.report.md beside every
reduced fuzz finding): what differs, where it is born, who is wrong by exact math, and a
reproducer that needs only jax and jaxlib.

`report_of(computation, inputs, test, reference, tolerance)` runs the module on both
sides (in a child process: a side may die), finds the op where the difference is born
and the arbiter's verdict there (hlogen.differential.origin, hlogen.differential.arbiter),
and, on request, the XLA pass that makes it (hlogen.differential.bisection). `Report`
renders it as Markdown (`markdown`): a title naming the op and the wrong side, the
verdict and its reason, each side's value, the exact value and each side's error in
ULPs, the reduced module, the reproducer (`reproducer`: the module and its inputs inline,
compiled by jaxlib's client and run by the StableHLO interpreter jaxlib ships; it prints
each side's value, the exact one, and exits 1 while the wrong value is still there),
the pass, the versions and a list of words to search the trackers with.
"""
from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import textwrap

import numpy as np
from jaxlib.mlir import ir

from hlogen import backends
from hlogen import types as T
from hlogen.differential import origin as origins
from hlogen.computation import Computation
from hlogen.differential.comparison import Side, compare
from hlogen.differential.isolated import Children
from hlogen.differential.near import Tolerance, compare_arrays, ulp_distance
from hlogen.errors import HlogenError
from hlogen.loading import load
from hlogen.runtime.execution import prepare

SHOWN = 8  # differing elements a report lists (the arbiter judges as many)
_WHO = {"cpu": "XLA:CPU", "gpu": "XLA:GPU", "interpret": "the StableHLO interpreter"}


@dataclasses.dataclass
class Element:
    """One differing element of the result the report is about."""

    index: tuple
    test: object
    reference: object
    exact: str | None = None
    ulps: dict = dataclasses.field(default_factory=dict)  # "test"/"reference" -> ULPs


@dataclasses.dataclass
class Report:
    """What a report says (module docstring); `markdown()` renders it."""

    module: str                  # the reduced module, as written
    names: list                  # its parameters' names
    inputs: list                 # its inputs, arrays
    test: Side
    reference: Side
    kind: str = "divergence"     # "divergence", "error on SIDE", "crash of SIDE"
    op: str | None = None        # where the difference is born (or where the sides first differ)
    line: int | None = None
    verdict: str | None = None   # the arbiter's: "test wrong", "reference wrong", "allowed", ...
    reason: str | None = None
    allowed_class: str | None = None
    ulps: dict = dataclasses.field(default_factory=dict)
    amplified_by: list = dataclasses.field(default_factory=list)  # (op, line, ulps in, ulps out)
    result: int = 0              # the result that differs
    elements: list = dataclasses.field(default_factory=list)    # Element
    message: str | None = None   # an error's or a crash's, or what differed in words
    passes: list = dataclasses.field(default_factory=list)      # bisect's responsible passes
    stage: str | None = None     # bisect's stage, where bisected
    reference_module: str | None = None  # what the interpreter ran, where not `module`
    alone: str | None = None     # the origin op alone (its operands parameters), where it
    alone_inputs: list = dataclasses.field(default_factory=list)  # shows the difference alone
    alone_names: list = dataclasses.field(default_factory=list)
    versions: dict = dataclasses.field(default_factory=dict)

    # -- who is wrong -------------------------------------------------------------------

    @property
    def wrong(self) -> Side | None:
        """The side the verdict names wrong (None when it names none)."""
        return {"test wrong": self.test, "reference wrong": self.reference}.get(self.verdict)

    @property
    def element_type(self) -> str | None:
        if not self.elements:
            return None
        return str(T.element_type(np.asarray(self.elements[0].test).dtype))

    def title(self) -> str:
        """One line: the op, the wrong side (or that none is), what it gives."""
        op = self.op or "the module"
        typed = f" ({self.element_type})" if self.element_type else ""
        if self.kind != "divergence":
            return f"{_who(self.test if self.test.label in self.kind else self.reference)}: " \
                   f"{self.kind.split(' ')[0]} on {op}: {_first_line(self.message or '')}"
        wrong = self.wrong
        example = self._example()
        if wrong is not None:
            return f"{_who(wrong)} gives a wrong result for {op}{typed}{example}"
        if self.verdict == "allowed":
            return (f"Not a bug: {self.test.label} and {self.reference.label} differ at {op}{typed} "
                    f"as the spec allows ({self.allowed_class or 'within the accuracy'})")
        return f"{self.test.label} and {self.reference.label} differ at {op}{typed}" + \
            (f" ({self.verdict})" if self.verdict else "") + example

    def _example(self) -> str:
        """': SIDE gives V where the exact value is E' of the first element, when known."""
        wrong = self.wrong
        if wrong is None or not self.elements or self.elements[0].exact is None:
            return ""
        e = self.elements[0]
        got = e.test if wrong is self.test else e.reference
        return f": {_show(got)} at {list(e.index)}, exact {e.exact}"

    def keywords(self) -> list:
        """Words to search XLA's and StableHLO's trackers with before filing."""
        words = []
        if self.op:
            words += [self.op, self.op.split(".")[-1]]
        for side in (self.test, self.reference):
            words.append(_who(side))
        if self.element_type:
            words.append(self.element_type)
        if self.kind == "divergence":
            words += ["wrong result", "miscompare"]
            words.append({"test wrong": "miscompile", "reference wrong": "interpreter bug"}
                         .get(self.verdict, "numerical difference"))
            if self.allowed_class:
                words.append(self.allowed_class)
        else:
            words += [self.kind.split(" ")[0], *re.findall(r"SIG[A-Z]+", self.kind)]
        words += self.passes
        values = [str(_show(v)) for e in self.elements[:2] for v in (e.test, e.reference)]
        words += [v for v in values if v in ("nan", "-nan", "inf", "-inf", "-0.0")]
        return list(dict.fromkeys(w for w in words if w))

    # -- rendering ----------------------------------------------------------------------

    def markdown(self) -> str:
        lines = [f"# {self.title()}", ""]
        if self.kind == "divergence":
            verdict = self.verdict or "not judged (no arbiter)"
            lines.append(f"**Verdict:** {verdict}" + (f": {self.reason}" if self.reason else ""))
            lines.append("")
            where = f"`{self.op}`" + (f" (line {self.line} of the module)" if self.line else "") \
                if self.op else "not found"
            lines.append(f"**Where the difference is born:** {where}; test side "
                         f"{self.test.label}, reference side {self.reference.label}.")
            if self.amplified_by:
                lines.append("")
                lines.append("**Amplified by** (ULPs in -> out): " + ", ".join(
                    f"`{op}`" + (f" (line {line})" if line else "") + f" {i:g} -> {o:g}"
                    for op, line, i, o in self.amplified_by))
            if self.ulps:
                lines += ["", "**Error in ULPs of the result type:** " + ", ".join(
                    f"{side} {'?' if u is None else _show(u)}" for side, u in self.ulps.items())]
            lines += ["", f"Result {self.result}, the elements that differ:", "",
                      f"| element | {self.test.label} | {self.reference.label} | exact | "
                      f"ULPs {self.test.label} | ULPs {self.reference.label} |",
                      "| --- | --- | --- | --- | --- | --- |"]
            for e in self.elements:
                lines.append(f"| {list(e.index)} | {_show(e.test)} | {_show(e.reference)} | "
                             f"{e.exact if e.exact is not None else '?'} | "
                             f"{_show(e.ulps.get('test', '?'))} | "
                             f"{_show(e.ulps.get('reference', '?'))} |")
        else:
            lines += ["```", (self.message or "").strip(), "```"]
        lines += ["", "## The XLA pass", ""]
        if self.passes and self.stage == "hlo-pass":  # each alone
            lines.append("Disabling " + " or ".join(f"`{p}`" for p in self.passes)
                         + (" (each alone" if len(self.passes) > 1 else " (")
                         + f"{', ' if len(self.passes) > 1 else ''}"
                         f"`--xla_disable_hlo_passes={self.passes[0]}`) removes the "
                         f"difference (hlogen bisect).")
        elif self.passes:
            lines.append(f"Disabling {', '.join(f'`{p}`' for p in self.passes)} together "
                         f"(`--xla_disable_hlo_passes={','.join(self.passes)}`) removes the "
                         f"difference (hlogen bisect: {self.stage}).")
        elif self.stage is not None:
            lines.append(f"No single pass is responsible (hlogen bisect: {self.stage}).")
        else:
            lines.append("Not bisected.")
        lines += ["", "## The module", "", "```mlir", self.module.strip(), "```", "",
                  "## Reproducer (jax and jaxlib only)", ""]
        if self.alone:
            lines += [f"`{self.op}` alone, given the values its operands have in the module "
                      f"(the reference side's: both sides get the same), as "
                      f"`run_hlo_module --isolate_instructions` would run it:", ""]
        lines += [
                  "```python", self.reproducer().rstrip(), "```", "",
                  "## Versions", ""]
        lines += [f"- {name} {version}" for name, version in self.versions.items()]
        lines += ["", "## Search words", "", ", ".join(f"`{w}`" for w in self.keywords()), ""]
        return "\n".join(lines)

    def reproducer(self) -> str:
        """A Python program that needs only jax and jaxlib (module docstring)."""
        return reproducer(self)


# -- the reproducer -------------------------------------------------------------------------

_PROGRAM = '''\
"""{title}

Needs only jax and jaxlib ({versions}). Prints each side's value of the elements that
differ and the exact value; exits 1 while {wrong} still gives the value reported."""
import sys

import ml_dtypes  # (installed with jax: bfloat16 and the other narrow types)
import numpy as np
import jax
from jax.extend import backend as jax_backend
from jaxlib import xla_client

MODULE = r"""
{module}
"""
REFERENCE_MODULE = {reference_module}
INPUTS = [
{inputs}
]
RESULT = {result}
ELEMENTS = {elements}
EXACT = {exact}  # the exact values (hlogen's arbiter)
REPORTED = {reported}  # what the wrong side gave


def on_xla(platform, options=()):
    """MODULE compiled by XLA (jaxlib's client) and run on INPUTS."""
    client = jax_backend.get_backend(platform)
    device = client.local_devices()[0]
    compile_options = xla_client.CompileOptions()
    compile_options.env_option_overrides = list(options)
    executable = client.compile_and_load(MODULE.encode(), xla_client.DeviceList((device,)),
                                         compile_options)
    results = executable.execute_sharded([jax.device_put(x, device) for x in INPUTS])
    return [np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays()]


def on_interpreter():
    """MODULE (or what the interpreter needs of it) run by the StableHLO interpreter."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo
    with jax_mlir.make_ir_context():
        module = ir.Module.parse(REFERENCE_MODULE or MODULE)
        main = next(op for op in module.body.operations if op.sym_name.value == "main")
        types = main.type.inputs
        attrs = [ir.DenseElementsAttr.get(np.ascontiguousarray(x).view(np.uint8).reshape(-1)
                                          if x.dtype.itemsize else x, type=t)
                 if x.dtype.type.__module__ == "ml_dtypes" else ir.DenseElementsAttr.get(x, type=t)
                 for x, t in zip(INPUTS, types)]
        return [np.array(r) for r in stablehlo.eval_module(module, attrs)]


def show(v):
    v = np.asarray(v)
    return repr(v.item()) if v.dtype.type.__module__ != "ml_dtypes" else repr(float(v))


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind in "fc" or a.dtype.type.__module__ == "ml_dtypes":
        a, b = a.astype(np.complex128), b.astype(np.complex128)
        return bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    return bool(np.all(a == b))


sides = {{}}
{runs}
wrong = None
for k, index in enumerate(ELEMENTS):
    said = ", ".join(f"{{name}} {{show(values[RESULT][index])}}" for name, values in sides.items())
    print(f"result {{RESULT}} at {{list(index)}}: {{said}}, exact {{EXACT[k]}}")
{check}
sys.exit(1 if wrong else 0)
'''


def reproducer(report: Report) -> str:
    """The jax-only program of `report` (module docstring)."""
    runs = []
    for label, side in (("test", report.test), ("reference", report.reference)):
        name = f"{side.label} ({label})"
        if side.declared.compiles:
            runs.append(f"sides[{name!r}] = on_xla({side.backend!r}, "
                        f"{[tuple(o) for o in side.xla_options]!r})")
        else:
            runs.append("try:\n"
                        f"    sides[{name!r}] = on_interpreter()\n"
                        "except Exception as e:  # (a module it cannot run as written)\n"
                        f"    print('the interpreter fails:', e)")
    wrong = report.wrong
    if wrong is not None and report.elements:
        label = "test" if wrong is report.test else "reference"
        name = f"{wrong.label} ({label})"
        check = (f"    got = sides[{name!r}][RESULT][index]\n"
                 f"    if same(got, REPORTED[k]):\n"
                 f"        wrong = True\n"
                 f"        print(f\"  {wrong.label} is wrong: {{show(got)}}, exact {{EXACT[k]}}\")")
    else:
        check = ("    values = [v[RESULT][index] for v in sides.values()]\n"
                 "    wrong = wrong or not all(same(values[0], v) for v in values)")
    reported = [_literal_scalar((e.test if wrong is report.test else e.reference))
                for e in report.elements] if wrong is not None else []
    return _PROGRAM.format(
        title=report.title().replace('"""', "'''"),
        versions=", ".join(f"{k} {v}" for k, v in report.versions.items()
                           if k in ("jax", "jaxlib")),
        wrong=wrong.label if wrong is not None else "a side",
        module=(report.alone or report.module).strip(),
        reference_module=f'r"""\n{report.reference_module.strip()}\n"""'
        if report.reference_module else "None",
        inputs="\n".join(f"    {_literal(np.asarray(x))},  # {name}" for name, x in (
            zip(report.alone_names, report.alone_inputs) if report.alone else
            zip(report.names, report.inputs))),
        result=report.result,
        elements=repr([tuple(int(i) for i in e.index) for e in report.elements]),
        exact=repr([e.exact for e in report.elements]),
        reported="[" + ", ".join(reported) + "]",
        runs="\n".join(runs), check=check)


def _dtype_words(dtype: np.dtype) -> str:
    if dtype.type.__module__ == "ml_dtypes":
        return f"ml_dtypes.{dtype.name}"
    return f"np.{dtype.name}" if dtype != np.bool_ else "np.bool_"


def _literal(x: np.ndarray) -> str:
    """`x` as a numpy literal, bit for bit: its values where they say the bits (integers,
    predicates, floats without NaN), its bits otherwise."""
    dtype = x.dtype
    if dtype.kind in "fc" or dtype.type.__module__ == "ml_dtypes":
        floats = x.astype(np.complex128) if dtype.kind == "c" else x.astype(np.float64)
        if dtype.kind != "c" and not np.isnan(floats).any() and \
                np.array_equal(floats.astype(dtype).view(f"u{dtype.itemsize}"),
                               x.view(f"u{dtype.itemsize}")):
            values = np.array2string(floats, separator=", ", threshold=1 << 30,
                                     floatmode="unique", max_line_width=1 << 30)
            values = values.replace("inf", "np.inf")
            return f"np.array({values}, dtype={_dtype_words(dtype)})"
        flat = np.ascontiguousarray(x).reshape(-1)
        bits = flat.view(np.uint8) if dtype.kind == "c" else flat.view(f"u{dtype.itemsize}")
        return (f"np.array({bits.tolist()!r}, dtype=np.{bits.dtype.name}).view("
                f"{_dtype_words(dtype)}).reshape({tuple(x.shape)!r})")
    return f"np.array({x.tolist()!r}, dtype={_dtype_words(dtype)})"


def _literal_scalar(v) -> str:
    return _literal(np.asarray(v))


# -- building it ----------------------------------------------------------------------------

def versions(*sides: Side) -> dict:
    """jax's, jaxlib's, hlogen's, and each plugin's, by their packages."""
    found = {}
    for package in ("jax", "jaxlib", "hlogen"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "unknown"
    for side in sides:
        identity = getattr(side.declared, "identity", None) or {}
        if identity.get("version") or side.backend not in _WHO:
            found[f"plugin {side.backend}"] = identity.get("version") or "unknown"
    return found


def report_of(computation: Computation, inputs, test, reference, tolerance: Tolerance,
              *, kind: str = "divergence", message: str | None = None, bisected=None,
              seconds: float = 120) -> Report:
    """The Report of `computation` with `inputs` (one per parameter) on `test` and
    `reference` (Sides or backend names) by `tolerance`: for a divergence, each side's
    values of the first result that differs, and the origin and verdict where
    hlogen.differential.origin finds them; for an error or a crash (`kind`), its
    `message`. `bisected`: a bisection Verdict, when one was made."""
    test, reference = Side.of(test), Side.of(reference)
    module = computation.as_text()
    names = list(computation.parameter_names)
    inputs = [np.asarray(x) for x in inputs]
    report = Report(module, names, inputs, test, reference, kind=kind, message=message,
                    versions=versions(test, reference))
    if bisected is not None:
        report.stage = bisected.stage
        report.passes = list(bisected.passes) if bisected.stage in ("hlo-pass", "hlo-passes") \
            else []
    if kind != "divergence":
        return report
    results = {}
    with Children(seconds) as children:

        def run(side, side_module, args):
            results[side] = children.run(side.backend, side_module, args, side.xla_options,
                                         seconds)
            return results[side]

        try:
            comparison = compare(computation, inputs, test=test, reference=reference,
                                 tolerance=tolerance, runner=run)
        except HlogenError as e:
            report.kind, report.message = "error", str(e)
            return report
    report.message = comparison.text()
    got, want = results.get(test, []), results.get(reference, [])
    first = next((i for i, r in enumerate(comparison.results) if not r.ok), None)
    if first is not None and first < min(len(got), len(want)):
        report.result = first
        a, b = np.asarray(got[first]), np.asarray(want[first])
        if a.shape == b.shape:
            mask = compare_arrays(a, b, tolerance, mask=True).mask
            differing = [] if mask is None else [tuple(int(i) for i in at)
                                                 for at in np.argwhere(mask)]
            for index in differing[:SHOWN]:  # (a 0-d result's one index is ())
                report.elements.append(Element(index, a[index], b[index]))
    _judge(report, computation, inputs, test, reference, tolerance)
    if report.op is None:  # no origin found: the op that makes the result
        report.op = _result_op(computation, report.result)
    _reference_module(report, computation)
    return report


def _reference_module(report: Report, computation: Computation) -> None:
    """What the interpreter runs of the reproducer's module, where hlogen rewrites it
    for the interpreter (a CHLO op it lacks, decomposed)."""
    if report.reference.declared.compiles:
        return
    shown = computation if report.alone is None else load(report.alone)
    text = shown.as_text()
    try:
        prepared = prepare(shown, _backend(report.reference)).computation.as_text()
    except HlogenError:
        prepared = text
    # (the replica and partition counts prepare states are no change of the module)
    plain = re.sub(r"^module attributes \{mhlo\.num_partitions = 1 : i32, "
                   r"mhlo\.num_replicas = 1 : i32\} \{", "module {", prepared)
    report.reference_module = None if plain == text else prepared


def _result_op(computation: Computation, result: int) -> str | None:
    """The op of main that makes result `result` (None for a parameter returned)."""
    block = computation.main.regions[0].blocks[0]
    returned = list(list(block.operations)[-1].operands)
    if result < len(returned) and hasattr(returned[result].owner, "name"):
        return returned[result].owner.name
    return None


def _judge(report: Report, computation, inputs, test, reference, tolerance) -> None:
    """The origin and the arbiter's verdict, where hlogen.differential.origin finds one.
    Where the op alone, given the reference's values of its operands, shows the
    difference, the reproducer is of the op alone on those values (what a maintainer
    wants); where it shows only in its module (a rewrite across ops), of the module, the
    exact values given where the op makes the result that differs."""
    try:
        found = origins.find_origin(computation, inputs, test, reference, tolerance)
    except (HlogenError, ir.MLIRError):  # (an op origin cannot run alone: not judged)
        return
    if found is None:
        return
    report.op, report.line = found.op, _line_in(report.module, found.position)
    report.amplified_by = [(a.op, a.line, a.ulps_in, a.ulps_out) for a in found.amplified_by]
    judgement = found.judgement
    if judgement is None:
        return
    report.verdict = getattr(judgement.verdict, "value", judgement.verdict)
    report.reason, report.allowed_class = judgement.reason, judgement.allowed_class
    report.ulps = dict(judgement.ulps)
    if not found.in_context:
        report.alone = found.alone.as_text()
        report.alone_inputs = [np.asarray(x) for x in found.operands]
        report.alone_names = list(found.alone.parameter_names)
        report.result = found.result
    elif _returned_as(computation, found) is not None:
        report.result = _returned_as(computation, found)
    else:
        return  # (the comparison's elements stand, without exact values)
    a, b = np.asarray(found.test), np.asarray(found.reference)
    report.elements = []
    for k, index in enumerate(judgement.elements[:SHOWN]):
        index = tuple(int(i) for i in np.atleast_1d(index))[:a.ndim]
        exact = judgement.exact[k] if k < len(judgement.exact) else None
        element = Element(index, a[index], b[index], exact)
        if exact is not None:
            element.ulps = _ulps_of(a[index], b[index], exact)
        report.elements.append(element)


def _line_in(text: str, position: int) -> int | None:
    """The line of the report's module text (1-based) where main's top-level op
    `position` starts: the lines one level inside main's body."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines)
                  if re.match(r"\s*func\.func (public |private )?@main\(", line)), None)
    if start is None:
        return None
    indent = len(lines[start]) - len(lines[start].lstrip()) + 2
    count = -1
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip()) == indent:
            count += 1
            if count == position:
                return i + 1
    return None


def _returned_as(computation: Computation, found) -> int | None:
    """Which result of main is the origin op's result as it is (None: none is)."""
    block = computation.main.regions[0].blocks[0]
    ops = list(block.operations)
    if found.position >= len(ops) - 1:
        return None
    value = ops[found.position].results[found.result]
    returned = list(ops[-1].operands)
    return next((i for i, r in enumerate(returned) if r == value), None)


def _ulps_of(test, reference, exact: str) -> dict:
    """Each side's distance in ULPs of its type from `exact` rounded to the type."""
    dtype = np.asarray(test).dtype
    try:
        if dtype.kind in "biu":
            target = np.asarray(int(exact), dtype)
        elif dtype.kind == "c":
            target = np.asarray(complex(exact.replace(" ", "")), dtype)
        else:
            target = np.asarray(float(exact), dtype)
    except (ValueError, OverflowError):
        return {}
    return {"test": _distance(test, target), "reference": _distance(reference, target)}


def _distance(v, target):
    v, target = np.asarray(v), np.asarray(target)
    if v.dtype.kind in "biu":
        return abs(int(v) - int(target))
    if v.dtype.kind == "c":
        return None
    return int(ulp_distance(v.reshape(1), target.reshape(1))[0])


def _backend(side: Side):
    return backends.get(side.backend)


def _who(side: Side) -> str:
    return _WHO.get(side.backend, side.backend) + (" (through HLO)" if side.through_hlo else "")


def _show(v) -> str:
    if isinstance(v, (str, int)) and not isinstance(v, bool):
        return str(v)
    a = np.asarray(v)
    if a.dtype.kind in "biu":
        return str(a.item())
    if a.dtype.kind == "c":
        return str(complex(a.item()))
    if a.dtype.kind == "f" or a.dtype.type.__module__ == "ml_dtypes":
        x = float(a)
        if np.isnan(x):
            return "nan"
        return repr(x) if x == x else "nan"
    return str(v)


def _first_line(message: str) -> str:
    lines = [line for line in message.strip().splitlines() if line.strip()]
    return textwrap.shorten(lines[0], 160) if lines else ""
