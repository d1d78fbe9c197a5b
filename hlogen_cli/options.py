"""The options commands share, each defined once (as pip's cmdoptions), and what `hlogen
run` was asked (`RunOptions`), checked in the parent before the child starts: options
that do not go together are refused there (exit 2) at no cost."""
from __future__ import annotations

import dataclasses
import functools
import os

import click

from hlogen_cli import completion

# The forms of a module IN may take: hlogen.loading.FORMATS in words, here where the parent
# imports no hlogen (tests/test_recipes.py checks the copy); the help texts that list them
# (run, compile, opt) read them here: `{formats}` in a command's docstring.
MODULE_FORMATS = ("StableHLO text, bytecode or a portable artifact, XLA's HLO text or protos "
                  "as XLA dumps them, or a serialized jax Exported")


def formats_in_help(command):
    """The command function with MODULE_FORMATS where its docstring says `{formats}` (below
    @click.command, which reads the docstring)."""
    command.__doc__ = command.__doc__.replace("{formats}", MODULE_FORMATS)
    return command


class BackendName(click.ParamType):
    """A backend's name, as hlogen.backends declares them (PJRT plugins included). Checked
    where the command does its work (run's child): the parent of run starts without
    hlogen, and a plugin's name is known only once plugins are discovered."""

    name = "backend"

    def convert(self, value, param, ctx):
        if not isinstance(value, str) or not value.strip():
            self.fail(f"{value!r} is not a backend name", param, ctx)
        return value.strip()

    def shell_complete(self, ctx, param, incomplete):
        return completion.backend_names(ctx, param, incomplete)


# hlogen.runtime.plugins.GIVEN: it reads it as --plugin's; children inherit it (the
# command line's parent, which imports no hlogen, passes --plugin on this way)
PLUGINS_VARIABLE = "HLOGEN_PLUGINS_GIVEN"


def _add_plugins(ctx, param, values):
    if values:
        given = [os.environ.get(PLUGINS_VARIABLE, ""), *values]
        os.environ[PLUGINS_VARIABLE] = ",".join(filter(None, given))


plugin_option = click.option(
    "--plugin", multiple=True, metavar="PATH.so[:NAME]", expose_value=False, is_eager=True,
    callback=_add_plugins, shell_complete=completion.files,
    help="Load a PJRT C API library as backend NAME (default: from the file's name, "
         "libfoo_pjrt.so is foo_pjrt), as $HLOGEN_PLUGINS=PATH[:NAME],... does (--plugin "
         "wins over it); installed plugins are found without it, and one given a name of "
         "theirs replaces them. Repeatable.")


def backend_option(help_text: str = "A backend: cpu, gpu, interpret (the StableHLO reference "
                                    "interpreter) or a PJRT plugin (installed, or --plugin); "
                                    "`hlogen devices` lists them (default: jax's default "
                                    "device)."):
    """--backend NAME, and --plugin with it (a plugin is one more backend)."""
    def decorate(command):
        return click.option("--backend", type=BackendName(), default=None, metavar="NAME",
                            help=help_text)(plugin_option(command))
    return decorate


def function_option(help_text: str = "The @hg.function of a .py file (default: its only one), "
                                     "or the public function of a module (default: main)."):
    return click.option("--function", "function_name", metavar="NAME",
                        shell_complete=completion.function_names, help=help_text)


def output_option(help_text: str, metavar: str = "OUT", **kwargs):
    return click.option("-o", "--output", metavar=metavar, shell_complete=completion.files,
                        help=help_text, **kwargs)


# the forms a module is written in (emit, opt), with emit's file suffix for each
FORMATS = {"text": ".mlir", "bytecode": ".mlirbc", "portable": ".portable.mlirbc"}


def format_options(command):
    """--format and --target-version, given to the command as `fmt` and `target_version`
    (emit and opt take them; each refuses a version without --format portable)."""
    for option in reversed([
            click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text",
                         show_default=True,
                         help="StableHLO text, MLIR bytecode, or a versioned StableHLO "
                              "portable artifact."),
            click.option("--target-version", metavar="V",
                         help="StableHLO version of a portable artifact, e.g. 1.9.0 (default: "
                              "the current one).")]):
        command = option(command)
    return command


force_option = click.option("--force", is_flag=True, help="Overwrite files that exist.")
no_cache_option = click.option("--no-cache", is_flag=True,
                               help="Compile even when the executable cache has it.")
verbose_option = click.option("-v", "--verbose", is_flag=True,
                              help="Report compile time and what the executable cache did "
                                   "(stderr).")


def xla_flag_option(flag: str = "--xla-flag", dest: str = "xla_flags", whose: str = "the compile"):
    """XLA's options (hlogen.runtime.xla_options checks them where the work is done: an
    unknown name is exit 2 with the closest known ones)."""
    return click.option(flag, dest, multiple=True, metavar="NAME=VALUE",
                        help=f"An XLA option for {whose} (repeatable): any field of XLA's "
                             f"DebugOptions by name, e.g. xla_disable_hlo_passes=algsimp or "
                             f"xla_cpu_enable_fast_math=true. It overrides XLA_FLAGS for that "
                             f"field; XLA_FLAGS still sets the others.")


def also_options(help: str):
    """--also BACKEND (a third side, as --test names it) and --also-flag (its own XLA
    options), given to the command as `also` and `also_flags` (compare's, fuzz's);
    `also_refusals` checks them."""
    def decorate(command):
        command = xla_flag_option("--also-flag", "also_flags",
                                  "the third side only (over --xla-flag)")(command)
        return click.option("--also", metavar="BACKEND", shell_complete=completion.backend_names,
                            help=help)(command)
    return decorate


def also_refusals(also, also_flags) -> list:
    return [(bool(also_flags) and not also, "--also-flag sets options of the third side: "
             "name it with --also")]


def refuse(refusals) -> None:
    """Raises the first message of (refused, message) pairs that is refused (HlogenError:
    exit 2)."""
    for refused, message in refusals:
        if refused:
            # here, not at the top: start-up (run's parent does without hlogen)
            from hlogen.errors import HlogenError
            raise HlogenError(message)


@dataclasses.dataclass
class InputChoice:
    """Where a run's arguments come from (input_options): --input values, random ones,
    zeros, or (none of them) what the module's file recorded, if anything."""

    specs: tuple = ()
    random: bool = False
    seed: int | None = None  # of --random-inputs (0 when not given)
    large_range: bool = False
    zero: bool = False
    save: str | None = None  # an .npz that --input FILE.npz replays

    def random_by_default(self) -> "InputChoice":
        """This choice where random inputs are the default (compare, bisect): --seed or
        --large-range alone choose them."""
        chosen = self.specs or self.zero or self.random
        wants = self.seed is not None or self.large_range
        return dataclasses.replace(self, random=True) if wants and not chosen else self

    def refusals(self) -> list:
        return [
            (self.random and self.zero, "choose one of --random-inputs and --zero-inputs"),
            (bool(self.specs) and (self.random or self.zero),
             "--input gives the arguments: not with --random-inputs or --zero-inputs"),
            ((self.seed is not None or self.large_range) and (bool(self.specs) or self.zero),
             f"--seed and --large-range choose random inputs: not with "
             f"{'--input' if self.specs else '--zero-inputs'}"),
            ((self.seed is not None or self.large_range) and not self.random,
             "--seed and --large-range choose random inputs: give --random-inputs too"),
            (self.save is not None and not self.save.endswith(".npz"),
             f"--save-inputs {self.save!r}: the inputs are saved as an .npz (FILE.npz), "
             f"which --input FILE.npz replays"),
        ]


INPUT_HELP = "One per parameter, in order (or an .npz of all of them)"
SEED_OPTION = click.option("--seed", type=click.IntRange(min=0), default=None, metavar="N",
                           help="The seed of random inputs (default 0): the same seed, the "
                                "same bits.")
LARGE_RANGE_OPTION = click.option(
    "--large-range", is_flag=True,
    help="Random floats over their type's whole exponent range (rarely ±0, ±1, ±inf; never "
         "NaN), as run_hlo_module's --use_large_range, instead of [-0.1, 0.2).")


def input_options(input_help: str = INPUT_HELP):
    """--input, --random-inputs [--seed N] [--large-range], --zero-inputs and --save-inputs,
    given to the command as one InputChoice, `inputs` (run, compare, bisect take them)."""
    options = [
        click.option("--input", "input_specs", multiple=True, metavar="VALUE", help=input_help),
        click.option("--random-inputs", is_flag=True,
                     help="Make every argument as XLA's run_hlo_module does: floats uniform in "
                          "[-0.1, 0.2), integers over their type, with the values indices, "
                          "init values and sort keys need (in bounds, identities, distinct)."),
        SEED_OPTION,
        LARGE_RANGE_OPTION,
        click.option("--zero-inputs", is_flag=True,
                     help="Every argument zeros (the init values of reductions: their identity)."),
        click.option("--save-inputs", metavar="FILE.npz", shell_complete=completion.files,
                     help="Save the arguments (by parameter name, bit for bit) to FILE.npz, "
                          "which --input FILE.npz replays."),
    ]

    def decorate(command):
        @functools.wraps(command)
        def with_inputs(*args, input_specs, random_inputs, seed, large_range, zero_inputs,
                        save_inputs, **kwargs):
            return command(*args, inputs=InputChoice(input_specs, random_inputs, seed, large_range,
                                                     zero_inputs, save_inputs), **kwargs)
        for option in reversed(options):
            with_inputs = option(with_inputs)
        return with_inputs
    return decorate


def side_options(command):
    """--test and --reference (any backend; hlo:NAME takes the route through HLO), each
    with its own XLA options (--test-flag, --reference-flag; --xla-flag for every side that
    compiles), given to the command as `sides`, a dict (compare and bisect take them); and
    --plugin, as with --backend."""
    @click.option("--test", default="cpu", show_default=True, metavar="BACKEND",
                  shell_complete=completion.backend_names,
                  help="The side under test: a backend (`hlogen devices` lists them), or "
                       "hlo:BACKEND to go through an HLO module first (as hlo-translate then "
                       "run_hlo_module do), or BACKEND:one-device for a sharded module's "
                       "global program on one device (cpu vs cpu:one-device: the partitioner "
                       "under test).")
    @click.option("--reference", default="interpret", show_default=True, metavar="BACKEND",
                  shell_complete=completion.backend_names,
                  help="The side it is compared with (as --test names it).")
    @plugin_option
    @xla_flag_option(whose="each side that compiles")
    @xla_flag_option("--test-flag", "test_flags", "the test side only (over --xla-flag)")
    @xla_flag_option("--reference-flag", "reference_flags",
                     "the reference side only (over --xla-flag)")
    @partitions_option
    @functools.wraps(command)
    def with_sides(*args, test, reference, xla_flags, test_flags, reference_flags, partitions,
                   **kwargs):
        return command(*args, sides={"test": test, "reference": reference, "xla_flags": xla_flags,
                                     "test_flags": test_flags, "reference_flags": reference_flags,
                                     "partitions": partitions}, **kwargs)
    return with_sides


PARTITIONS_HELP = ("The partition count of a sharded module (jax's mesh, mhlo.num_partitions, "
                   "mhlo.sharding): checked against what the module says, or given where its "
                   "shardings have none. A sharded module runs partitioned without it, one cpu "
                   "device per partition (hlogen starts them), global arrays in and out.")

partitions_option = click.option("--partitions", type=click.IntRange(min=1), default=None,
                                 metavar="N", help=PARTITIONS_HELP)


def sharding_options(command):
    """--partitions N and --one-device (a sharded module's global program, on one device),
    given to the command as they are."""
    return partitions_option(click.option(
        "--one-device", is_flag=True,
        help="Run a sharded module's global program (its sharding annotations dropped) on "
             "one device, unpartitioned, as XLA would without a mesh.")(command))


@dataclasses.dataclass
class ToleranceChoice:
    """The comparison rule given (tolerance_options): XLA's Near with --abs and --rel, or
    --ulp N, or --bitwise."""

    abs: float | None = None
    rel: float | None = None
    ulp: int | None = None
    bitwise: bool = False

    def refusals(self) -> list:
        bounds = self.abs is not None or self.rel is not None
        return [(self.ulp is not None and self.bitwise, "choose one of --ulp and --bitwise"),
                ((self.ulp is not None or self.bitwise) and bounds,
                 f"--abs and --rel are the bounds of XLA's rule: not with "
                 f"{'--bitwise' if self.bitwise else '--ulp'}")]

    def keywords(self) -> dict:
        """The keywords of hlogen.differential's compare and bisect."""
        return {"abs": self.abs, "rel": self.rel, "ulp": self.ulp, "bitwise": self.bitwise}


def tolerance_options(command):
    """--abs/--rel (XLA's rule), --ulp N or --bitwise, given to the command as one
    ToleranceChoice, `tolerance` (compare and bisect take them)."""
    @click.option("--abs", "abs_bound", type=click.FloatRange(min=0), default=None, metavar="A",
                  help="XLA's rule: an element differs only when its absolute error exceeds "
                       "this AND its relative error exceeds --rel (default 1e-3 each; with "
                       "neither given, values of a float type within 2 ULPs always match: one "
                       "bf16 ULP is more than 1e-3).")
    @click.option("--rel", "rel_bound", type=click.FloatRange(min=0), default=None, metavar="R",
                  help="The relative error bound of XLA's rule (default 1e-3).")
    @click.option("--ulp", type=click.IntRange(min=0), default=None, metavar="N",
                  help="Instead: floats at most N units in the last place apart.")
    @click.option("--bitwise", is_flag=True, help="Instead: every element's bits equal.")
    @functools.wraps(command)
    def with_tolerance(*args, abs_bound, rel_bound, ulp, bitwise, **kwargs):
        return command(*args, tolerance=ToleranceChoice(abs_bound, rel_bound, ulp, bitwise),
                       **kwargs)
    return with_tolerance


@dataclasses.dataclass
class RunOptions:
    inputs: InputChoice = dataclasses.field(default_factory=InputChoice)
    backend: str | None = None
    xla_flags: tuple = ()  # NAME=VALUE
    no_hlo_passes: bool = False
    check_interpret: bool = False
    explain: bool = False
    expected_specs: tuple = ()
    rtol: float = 1e-5
    atol: float = 1e-6
    replicas: int = 1
    num_processes: int = 1
    process_id: int = 0
    coordinator: str | None = None
    timeout: float | None = None
    output_specs: tuple = ()
    repeat: int = 1
    no_cache: bool = False
    verbose: bool = False
    profile: str | None = None  # a folder: jax's trace of the compile and the runs
    partitions: int | None = None  # a sharded module's partition count (asserted, or given)
    one_device: bool = False  # a sharded module's global program, on one device

    def __post_init__(self):
        if isinstance(self.inputs, dict):  # (as the child gets it)
            self.inputs = InputChoice(**self.inputs)

    @property
    def is_distributed(self) -> bool:
        return self.num_processes > 1 or self.coordinator is not None

    def check(self) -> None:
        """Refuses options that do not go together (HlogenError: exit 2), naming them."""
        n, p = self.replicas, self.num_processes
        interpreter = self.backend == "interpret"
        refuse(self.inputs.refusals() + [
            (self.explain and not self.check_interpret,
             "--explain needs --check-interpret (it explains a difference between PJRT and "
             "the interpreter)"),
            (self.check_interpret and interpreter,
             "--check-interpret compares a PJRT backend with the interpreter: choose --backend "
             "cpu or gpu (or none)"),
            (self.explain and n > 1, f"--explain follows one replica: not with --replicas {n}"),
            (p > 1 and self.coordinator is None,
             f"--num-processes {p} needs --coordinator HOST:PORT (where process 0 serves jax's "
             f"distributed runtime; every process gives the same)"),
            (self.process_id >= p,
             f"--process-id {self.process_id} is out of range: --num-processes {p} numbers "
             f"the processes 0..{p - 1}"),
            (p == 1 and self.coordinator is not None,
             "--coordinator needs --num-processes P (2 or more): the processes that meet there"),
            (self.coordinator is not None and not _is_host_port(self.coordinator),
             f"--coordinator {self.coordinator!r}: expected HOST:PORT, e.g. localhost:12345"),
            (self.coordinator is not None and _is_host_port(self.coordinator) and
             not 0 < int(self.coordinator.rpartition(":")[2]) < 65536,
             f"--coordinator {self.coordinator!r}: the port must be in 1..65535"),
            (n % p != 0,
             f"--replicas {n} cannot be shared by --num-processes {p}: each process runs as "
             f"many replicas (give a multiple of {p})"),
            (self.is_distributed and interpreter,
             "--backend interpret runs every replica in one process: not with --num-processes "
             "or --coordinator"),
            (self.is_distributed and self.check_interpret,
             "--check-interpret needs every replica's inputs in one process (the interpreter "
             "runs them all): not with --num-processes or --coordinator"),
            (interpreter and (self.xla_flags or self.no_hlo_passes),
             "--xla-flag and --no-hlo-passes are options of XLA's compile: the interpreter "
             "compiles nothing (choose --backend cpu or gpu)"),
            (self.inputs.save is not None and n > 1,
             f"--save-inputs saves one set of arguments: not with --replicas {n}"),
        ])

    def join_arguments(self, elapsed: float) -> dict:
        """hg.distributed.initialize's arguments, `elapsed` seconds into the command: the
        wait for the other processes ends before --timeout does, so that its failure is
        the one reported (else it is the library's 60 s)."""
        wait = max(1, int(self.timeout - elapsed - 0.5)) if self.timeout else 60
        return {"coordinator": self.coordinator, "num_processes": self.num_processes,
                "process_id": self.process_id, "timeout_seconds": wait}


def _is_host_port(text: str) -> bool:
    host, _, port = text.rpartition(":")
    return bool(host) and port.isdigit()
