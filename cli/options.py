"""The options commands share, each defined once (as pip's cmdoptions), and what `hlogen
run` was asked (`RunOptions`), checked in the parent before the child starts: options
that do not go together are refused there (exit 2) at no cost."""
from __future__ import annotations

import dataclasses

import click

from hlogen_cli import completion


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


def backend_option(help_text: str = "A backend: cpu, gpu, interpret (the StableHLO reference "
                                    "interpreter) or an installed PJRT plugin; `hlogen devices` "
                                    "lists them (default: jax's default device)."):
    return click.option("--backend", type=BackendName(), default=None, metavar="NAME",
                        help=help_text)


def function_option(help_text: str = "The @hg.function of a .py file (default: its only one), "
                                     "or the public function of a module (default: main)."):
    return click.option("--function", "function_name", metavar="NAME",
                        shell_complete=completion.function_names, help=help_text)


def output_option(help_text: str, metavar: str = "OUT", **kwargs):
    return click.option("-o", "--output", metavar=metavar, shell_complete=completion.files,
                        help=help_text, **kwargs)


force_option = click.option("--force", is_flag=True, help="Overwrite files that exist.")
no_cache_option = click.option("--no-cache", is_flag=True,
                               help="Compile even when the executable cache has it.")


@dataclasses.dataclass
class RunOptions:
    input_specs: tuple = ()
    backend: str | None = None
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

    @property
    def is_distributed(self) -> bool:
        return self.num_processes > 1 or self.coordinator is not None

    def check(self) -> None:
        """Refuses options that do not go together (HlogenError: exit 2), naming them."""
        n, p = self.replicas, self.num_processes
        refusals = [
            (self.explain and not self.check_interpret,
             "--explain needs --check-interpret (it explains a difference between PJRT and "
             "the interpreter)"),
            (self.check_interpret and self.backend == "interpret",
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
            (self.is_distributed and self.backend == "interpret",
             "--backend interpret runs every replica in one process: not with --num-processes "
             "or --coordinator"),
            (self.is_distributed and self.check_interpret,
             "--check-interpret needs every replica's inputs in one process (the interpreter "
             "runs them all): not with --num-processes or --coordinator"),
        ]
        for refused, message in refusals:
            if refused:
                # here, not at the top: run's parent start-up does without hlogen
                from hlogen.errors import HlogenError
                raise HlogenError(message)

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


# -- reduce and fuzz: the two sides of a comparison, its rule, random inputs ----------------
# (hlogen compare takes the same; the lead folds duplicates of run's input options)

def sides_options(command):
    """--test, --reference and the XLA options of each (hlogen.differential's Sides)."""
    for option in reversed([
        click.option("--test", default="cpu", show_default=True, metavar="NAME",
                     type=BackendName(), help="The backend under test: cpu, gpu, interpret, a "
                     "PJRT plugin, or hlo:NAME (the module goes through XLA's HLO first, as "
                     "hlo-translate then run_hlo_module do)."),
        click.option("--reference", default="interpret", show_default=True, metavar="NAME",
                     type=BackendName(), help="The backend it is compared with (the same names)."),
        click.option("--test-flag", "test_flags", multiple=True, metavar="NAME=VALUE",
                     help="An XLA option (a DebugOptions field, e.g. xla_disable_hlo_passes="
                          "algsimp) of the test side's compile; repeatable."),
        click.option("--reference-flag", "reference_flags", multiple=True, metavar="NAME=VALUE",
                     help="An XLA option of the reference side's compile; repeatable."),
    ]):
        command = option(command)
    return command


def tolerance_options(command):
    """The comparison rule: XLA's Near (--abs, --rel), --ulp N or --bitwise."""
    for option in reversed([
        click.option("--abs", "abs_error", type=click.FloatRange(min=0), default=1e-3,
                     show_default=True, help="XLA's Near: an element differs only when its "
                     "absolute error exceeds this..."),
        click.option("--rel", "rel_error", type=click.FloatRange(min=0), default=1e-3,
                     show_default=True, help="...and its relative error exceeds this (NaN "
                     "matches NaN, -0 matches +0, infinities exactly, integers exactly)."),
        click.option("--ulp", type=click.IntRange(min=0), default=None, metavar="N",
                     help="Instead: floats at most N units in the last place apart."),
        click.option("--bitwise", is_flag=True, help="Instead: every element's bits equal."),
    ]):
        command = option(command)
    return command


def random_input_options(command):
    """--seed and --large-range: random inputs as XLA's run_hlo_module makes them."""
    for option in reversed([
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="The seed of random inputs (and of the search)."),
        click.option("--large-range", is_flag=True,
                     help="Random floats over the type's whole exponent range (run_hlo_module's "
                          "--use_large_range) instead of [-0.1, 0.2)."),
    ]):
        command = option(command)
    return command
