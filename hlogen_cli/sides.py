"""What `hlogen compare` and `hlogen bisect` do in their child before their work: read IN,
check the files they write, make the arguments as the input options say (random ones
by default, as run_hlo_module does), and each side with its XLA options; and the
command line that repeats a comparison (bisect prints it)."""
from __future__ import annotations

import dataclasses
import json
import shlex

from hlogen import backends, differential
from hlogen.computation import Computation
from hlogen.errors import InputError
from hlogen.files import Output
from hlogen.runtime import xla_options as options_of
from hlogen_cli import inputs as input_values, sources
from hlogen_cli.options import InputChoice
from hlogen_cli.compiling import checked_xla_flags, declaration


@dataclasses.dataclass
class Setup:
    computation: Computation
    arguments: list | None  # None: random ones, drawn from `seed` on
    choice: InputChoice
    test: differential.Side
    reference: differential.Side
    save: Output | None  # --save-inputs
    json: Output | None  # --json

    @property
    def seed(self) -> int:
        return self.choice.seed or 0

    def save_arguments(self, arguments: list) -> None:
        if self.save is not None:
            input_values.save_arguments(self.save, self.computation, arguments)

    def write_json(self, record: dict) -> None:
        if self.json is not None:
            self.json.write((json.dumps(record, indent=1) + "\n").encode())


def setup(file: str, function_name: str | None, inputs: dict, sides: dict,
          json_path: str | None) -> Setup:
    """Everything checked before anything compiles: bad input is exit 2 at once."""
    choice = InputChoice(**inputs)
    read = [file, *input_values.files_named(choice.specs)]
    save = Output(choice.save, "--save-inputs", inputs=read) if choice.save else None
    record = Output(json_path, "--json", inputs=read) if json_path else None
    test, reference = sides_of(sides)
    source = sources.module_source(file, function_name)
    comp = input_values.refined(source.computation, choice.specs)
    given = None
    if choice.specs or choice.zero or (source.recorded is not None and not choice.random):
        given = input_values.arguments(comp, choice, source.recorded)
        input_values.check_count(comp, given)
    return Setup(comp, given, choice, test, reference, save, record)


def sides_of(sides: dict) -> tuple:
    """The test and reference Sides of side_options' `sides`, each with its XLA options
    (--xla-flag for each that compiles, then its own --test-flag or --reference-flag)."""
    both = checked_xla_flags(sides["xla_flags"])
    made = {}
    for which in ("test", "reference"):
        own = checked_xla_flags(sides[f"{which}_flags"], f"--{which}-flag")
        # plugins probed first; an unknown name: exit 2, naming --test or --reference
        declaration(sides[which].removeprefix(differential.HLO_ROUTE), f"--{which}")
        side = differential.Side.of(sides[which])
        if not backends.compiles(side.backend):
            if own:
                raise InputError(f"--{which}-flag: the {which} side, {side.backend}, compiles "
                                 f"nothing")
            made[which] = side
            continue
        made[which] = differential.Side.of(side, options_of.merged(both, own))
    if both and not any(backends.compiles(s.backend) for s in made.values()):
        raise InputError("--xla-flag sets options of XLA's compiles: neither side compiles")
    return made["test"], made["reference"]


def command_line(name: str, file: str, setup_: Setup, tolerance: dict, test_options: tuple,
                 function_name: str | None = None) -> str:
    """The `hlogen NAME` command that runs the same comparison, with `test_options` as the
    test side's XLA options (the reference side's as they were given)."""
    words = ["hlogen", name, file]
    if function_name:
        words += ["--function", function_name]
    words += ["--test", _route(setup_.test), "--reference", _route(setup_.reference)]
    words += [w for o in test_options for w in ("--test-flag", _option(o))]
    words += [w for o in setup_.reference.xla_options for w in ("--reference-flag", _option(o))]
    choice = setup_.choice
    if choice.save:
        words += ["--input", choice.save]
    elif choice.specs:
        words += [w for spec in choice.specs for w in ("--input", spec)]
    elif choice.zero:
        words.append("--zero-inputs")
    elif setup_.arguments is None:
        words += ["--random-inputs", "--seed", str(setup_.seed)] + \
            ["--large-range"] * choice.large_range
    if tolerance["bitwise"]:
        words.append("--bitwise")
    elif tolerance["ulp"] is not None:
        words += ["--ulp", str(tolerance["ulp"])]
    elif (tolerance["abs"], tolerance["rel"]) != (1e-3, 1e-3):
        words += ["--abs", f"{tolerance['abs']:g}", "--rel", f"{tolerance['rel']:g}"]
    return " ".join(shlex.quote(w) for w in words)


def _route(side: differential.Side) -> str:
    return (differential.HLO_ROUTE if side.through_hlo else "") + side.backend


def _option(option: tuple) -> str:
    return options_of.text((option,))
