"""What `hlogen compare` and `hlogen bisect` do in their child before their work: read IN,
check the files they write, make the arguments as the input options say (random ones
by default, as run_hlo_module does), and each side with its XLA options; and the input
options of the command line that repeats a comparison (bisect prints it, rendered by
hlogen.differential.reproduce)."""
from __future__ import annotations

import dataclasses
import json

from hlogen import differential, sharding
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
    third: differential.Side | None = None  # compare --also

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
    comp = sharding.as_asked(source.computation, sides.get("partitions"))
    comp = input_values.refined(comp, choice.specs)
    given = None
    if choice.specs or choice.zero or (source.recorded is not None and not choice.random):
        given = input_values.arguments(comp, choice, source.recorded)
        input_values.check_count(comp, given)
    return Setup(comp, given, choice, test, reference, save, record, third_of(sides))


def sides_of(sides: dict) -> tuple:
    """The test and reference Sides of side_options' `sides`, each with its XLA options
    (--xla-flag for each that compiles, then its own --test-flag or --reference-flag)."""
    made = {which: _side(sides, which) for which in ("test", "reference")}
    if sides["xla_flags"] and not any(s.declared.compiles for s in made.values()):
        raise InputError("--xla-flag sets options of XLA's compiles: neither side compiles")
    return made["test"], made["reference"]


def third_of(sides: dict) -> differential.Side | None:
    """compare's third side (--also, with --xla-flag and its own --also-flag), or None."""
    return _side(sides, "also") if sides.get("also") else None


def _side(sides: dict, which: str) -> differential.Side:
    """The Side `which` ("test", "reference", "also") of side_options' `sides`."""
    both = checked_xla_flags(sides["xla_flags"])
    own = checked_xla_flags(sides.get(f"{which}_flags", ()), f"--{which}-flag")
    # the name looked up once, here (plugins probed first; an unknown name: exit 2,
    # naming --test, --reference or --also): the Side holds the Backend
    name, through_hlo, one_device = differential.parse_route(sides[which])
    declared = declaration(name, f"--{which}")
    side = differential.Side(declared, through_hlo, one_device)
    if not declared.compiles:
        if own:
            raise InputError(f"--{which}-flag: the {which} side, {side.backend}, "
                             + (f"is not XLA (its own flags: {side.backend}[--FLAG=VALUE])"
                                if declared.takes_flags else "compiles nothing"))
        return side
    return differential.Side.of(side, options_of.merged(both, own))


def input_words(setup_: Setup) -> list:
    """The input options that give a command the same arguments (the saved file, the
    specs, zeros, or the seed of the random ones)."""
    choice = setup_.choice
    if choice.save:
        return ["--input", choice.save]
    if choice.specs:
        return [w for spec in choice.specs for w in ("--input", spec)]
    if choice.zero:
        return ["--zero-inputs"]
    if setup_.arguments is None:
        return ["--random-inputs", "--seed", str(setup_.seed)] + \
            ["--large-range"] * choice.large_range
    return []


def how_sides_run(setup_: Setup) -> list[str]:
    """One line per side for a sharded module, saying how that side runs it: partitioned
    on XLA, or its global program (one device, the interpreter); [] for other modules."""
    found = sharding.of_module(setup_.computation.module)
    if found is None:
        return []
    lines = []
    for which, side in (("test", setup_.test), ("reference", setup_.reference)):
        if side.declared.compiles and not side.one_device:
            how = f"sharded: {found.words(side.declared.platform or 'cpu')}"
        else:
            how = f"the global program, unpartitioned{' on one device' * side.one_device}"
        lines.append(f"{which} {side.label}: {how}")
    return lines
