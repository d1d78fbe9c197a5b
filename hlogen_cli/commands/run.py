"""`hlogen run`: compile and run a computation, in a child process (hlogen_cli.isolation:
a native abort is an error, not a crash), whose work is `run_module` (hlogen_cli.running).
This module imports no hlogen at the top: the parent of the child starts at once."""
from __future__ import annotations

import dataclasses

import click

from hlogen_cli import completion, isolation
from hlogen_cli.options import (RunOptions, backend_option, formats_in_help, function_option,
                                input_options, no_cache_option, sharding_options,
                                verbose_option, xla_flag_option)
from hlogen_cli.reporting import reports_errors

VALUE_HELP = ("2x3xf32=1,2,3,4,5,6, \"2x3xf32=[1 2 3][4 5 6]\", 2x3xf32=0 (a splat), f32=3.5 "
              "(a scalar), 2x3xf32=@raw.bin, @x.npy, or x.npz (all its arrays: keyed by "
              "parameter name, or arg0, arg1, ... for order). Files may be pipes (@<(...)). "
              "Arrays of ml_dtypes types (bf16, f4, f6, f8, int2, int4), which numpy saves "
              "as raw |V2 or |V1, are read as the element type of their parameter")


@click.command()
@click.argument("file", metavar="IN", type=click.Path(dir_okay=False, allow_dash=True))
@function_option()
@input_options("One per parameter, in order: " + VALUE_HELP + ". With --replicas N: one "
               "per parameter, the same on every replica or with a leading dimension of N "
               "(replica r gets [r]); or one per parameter per replica (replica 0's, then "
               "replica 1's, ...); across processes, also one per parameter per replica of "
               "this process. Without any input option, an HloSnapshot (XLA's "
               "xla_dump_hlo_snapshots) runs with the arguments it recorded.")
@backend_option()
@xla_flag_option()
@click.option("--no-hlo-passes", is_flag=True,
              help="Run the module as it is, without XLA's HLO passes (xla_disable_all_hlo_passes, "
                   "as run_hlo_module's --run_test_hlo_passes=false): for *after_optimizations* "
                   "HLO dumps that XLA can execute as they are.")
@click.option("--check-interpret", is_flag=True,
              help="Also run the reference interpreter on the same inputs and compare each result "
                   "(of each replica) by XLA's rule with --atol/--rtol (exit 1 if one differs).")
@click.option("--explain", is_flag=True,
              help="With --check-interpret: when a result differs, name the first op whose PJRT "
                   "and interpreter values differ.")
@click.option("--expected-output", "expected_specs", multiple=True, metavar="VALUE",
              help="One per result, in the forms of --input (per replica as --input is); exit 1 "
                   "when a result differs by --atol/--rtol.")
@click.option("--rtol", type=click.FloatRange(min=0), default=1e-5, show_default=True, metavar="R",
              help="The relative error bound of comparisons, by XLA's rule: an element differs "
                   "only when it exceeds both --atol and --rtol (floats; integers compare "
                   "exactly; two NaNs match).")
@click.option("--atol", type=click.FloatRange(min=0), default=1e-6, show_default=True, metavar="A",
              help="The absolute error bound of comparisons (XLA's rule, with --rtol).")
@click.option("--replicas", type=click.IntRange(min=1), default=None, metavar="N",
              help="Run N replicas, one per device (on the CPU, hlogen starts enough devices); "
                   "default 1, or one per process. Results are printed per replica and saved "
                   "with a leading replica dimension.")
@click.option("--num-processes", type=click.IntRange(min=1), default=1, show_default=True,
              metavar="P",
              help="Share the replicas among P processes (one hlogen run each, with the same "
                   "options but --process-id), over jax's distributed runtime: each passes the "
                   "inputs of its N/P replicas and prints and saves their results.")
@click.option("--process-id", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="I",
              help="This process's index, 0..P-1 (process p runs replicas p*N/P ..).")
@click.option("--coordinator", metavar="HOST:PORT",
              help="Where process 0 serves the distributed runtime (the same for every process).")
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="Stop and fail (exit 1) when compiling and running take longer; also how "
                   "long to wait for the other processes (default: no limit; 60 s for them).")
@click.option("--output", "output_specs", multiple=True, metavar="OUT",
              shell_complete=completion.files,
              help="out.npz (every result: result_0, result_1, ...), or one @out.npy per result "
                   "in order (- skips a result), in folders that exist. With --replicas, each "
                   "has a leading replica dimension (this process's replicas, in order). numpy "
                   "saves bf16, f4, f6, f8, int2 and int4 results as raw bytes: read them "
                   "with ml_dtypes, np.load(f).view(ml_dtypes.bfloat16) (.npz: "
                   "np.load(f)['result_0'].view(...)).")
@click.option("--repeat", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
              help="Run N times and report min/median/max time per call (stderr).")
@sharding_options
@no_cache_option
@verbose_option
@click.option("--profile", metavar="DIR", type=click.Path(file_okay=False),
              help="Trace the compile and the runs with jax's profiler into DIR (made if "
                   "missing, in a folder that exists: a Perfetto trace and TensorBoard's "
                   "XPlane) and print the top ops or fusions by time, with their share "
                   "(stderr).")
@reports_errors
@formats_in_help
def command(file, function_name, **options):
    """Compile and run a computation and print its results.

    IN: a module ({formats}, recognized by content; - reads standard input), a compiled
    file (hlogen compile -o: run without compiling), or a .py file of @hg.function
    definitions."""
    if options["replicas"] is None:
        options["replicas"] = options["num_processes"]
    run_options = RunOptions(**options)
    run_options.check()
    isolation.in_child(run_module, {"file": file, "function_name": function_name,
                                    "options": dataclasses.asdict(run_options)},
                       file, run_options.timeout, run_options.is_distributed)


def run_module(file: str, function_name: str | None, options: dict) -> None:
    """In the child: hlogen_cli.running.run, the whole run."""
    from hlogen_cli import running  # here, not at the top: start-up (it imports hlogen)
    running.run(file, function_name, options)
