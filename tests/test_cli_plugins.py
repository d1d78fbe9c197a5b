"""The command line on PJRT plugins, as a vendor meets it: `--plugin PATH[:NAME]` on any
command with --backend (and `hlogen devices`), a plugin that crashes named with the signal
without taking the command down, run/compile/check/graph on xla-cpu-pjrt (installed by
`make test`), and compiled files that another backend refuses."""
from __future__ import annotations

import os
import pathlib
import subprocess

import numpy as np
import pytest

from tests.test_plugin_crashes import SOURCES, WRAPPER, _gcc, built, wrappers  # noqa: F401 - pytest's fixtures, by name

HLOGEN = pathlib.Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "hlogen"
SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
CONFORMANCE = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo"


def hlogen(folder, *args, plugins=None):
    """The installed hlogen in `folder`; `plugins`: its $HLOGEN_PLUGINS (none by default)."""
    program = HLOGEN if HLOGEN.exists() else pathlib.Path(__import__("sys").executable).parent / "hlogen"
    env = {**os.environ, "HLOGEN_CACHE_DIR": str(folder / "cache")}
    env.pop("HLOGEN_PLUGINS", None)
    if plugins:
        env["HLOGEN_PLUGINS"] = plugins
    return subprocess.run([str(program), *map(str, args)], cwd=folder, capture_output=True,
                          text=True, env=env, timeout=300)


@pytest.fixture(scope="module")
def division(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin_cli")
    done = hlogen(folder, "emit", SAMPLES / "elementwise.py", "--function", "integer_division",
                  "-o", "division.mlir")
    assert done.returncode == 0, done.stderr
    return folder


INPUTS = ["--input", "4xs32=7,-7,-2147483648,5", "--input", "4xs32=2,0,-1,0"]


def test_run_and_compile_on_the_installed_plugin(division):
    done = hlogen(division, "run", "division.mlir", "--backend", "xla_cpu_pjrt", *INPUTS,
                  "--output", "plugin.npz")
    assert done.returncode == 0, done.stderr
    with np.load(division / "plugin.npz") as saved:  # XLA's integer division, as on cpu
        np.testing.assert_array_equal(saved["result_0"], [3, -1, -2147483648, -1])
        np.testing.assert_array_equal(saved["result_1"], [1, -7, 0, 5])
    hlo = hlogen(division, "compile", "division.mlir", "--backend", "xla_cpu_pjrt", "--hlo")
    assert hlo.returncode == 0 and "HloModule" in hlo.stdout, hlo.stderr
    graph = hlogen(division, "graph", "division.mlir", "--optimized", "--backend",
                   "xla_cpu_pjrt", "-o", "plugin.dot")
    assert graph.returncode == 0 and (division / "plugin.dot").read_text().startswith("digraph")


def test_a_compiled_file_runs_on_its_plugin_only(division):
    done = hlogen(division, "compile", "division.mlir", "--backend", "xla_cpu_pjrt",
                  "-o", "division.hlx")
    assert done.returncode == 0, done.stderr
    again = hlogen(division, "run", "division.hlx", *INPUTS, "-v")
    assert again.returncode == 0 and "loaded from division.hlx" in again.stderr, again.stderr
    other = hlogen(division, "run", "division.hlx", "--backend", "cpu", *INPUTS)
    assert other.returncode == 2 and "compiled for backend 'xla_cpu_pjrt'" in other.stderr


def test_a_plugin_given_by_path_that_aborts_is_named_with_its_signal(division, built):  # noqa: F811 - the fixture imported above
    listing = hlogen(division, "devices", "--plugin", f"{built['aborts']}:dies")
    assert listing.returncode == 0, listing.stderr
    assert "dies: not available: PJRT plugin dies" in listing.stdout
    assert "SIGABRT" in listing.stdout and "xla_cpu_pjrt: PJRT plugin" in listing.stdout
    run = hlogen(division, "run", "division.mlir", "--plugin", f"{built['aborts']}:dies",
                 "--backend", "dies", *INPUTS)
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "backend 'dies' cannot be used" in run.stderr and "SIGABRT" in run.stderr


def test_a_plugin_that_segfaults_running_fails_the_run_not_hlogen(division, wrappers):  # noqa: F811 - the fixture imported above
    run = hlogen(division, "run", "division.mlir", "--plugin",
                 f"{wrappers['execute_segfaults']}:segfaults", "--backend", "segfaults", *INPUTS)
    assert run.returncode in (1, 2) and "Traceback" not in run.stderr, run.stderr
    assert "segfaults" in run.stderr and "SIGSEGV" in run.stderr


def test_check_on_the_plugin_says_what_jaxlibs_cpu_does(division):
    files = [CONFORMANCE / "testdata" / "abs_float32_20_20.mlir",
             CONFORMANCE / "tests" / "interpret" / "bitcast_convert.mlir"]
    done = hlogen(division, "check", *files, "--backend", "xla_cpu_pjrt", "-j", "1",
                  "--json", "plugin.jsonl")
    # the plugin's compiler ends the process on a bitcast_convert to or from pred, where
    # jaxlib's cpu refuses it (a known deviation there): the crashes are the plugin's own
    assert done.returncode == 1, done.stdout + done.stderr
    assert "xla_cpu_pjrt.so (version 0.0.1" in done.stdout
    assert "2 crash" in done.stdout and "CRASH    xla_cpu_pjrt" in done.stdout, done.stdout
    records = [__import__("json").loads(line)
               for line in (division / "plugin.jsonl").read_text().splitlines()]
    known = [r for r in records if r["status"] == "known"]
    assert known and all(r["known"].startswith("as on jaxlib's cpu: ") for r in known)
    crashes = [r for r in records if r["status"] == "crash"]
    assert len(crashes) == 2 and all("jaxlib's cpu gives" in r["message"] and
                                     "a known deviation there" in r["message"] for r in crashes)


def _listed(stdout: str, name: str) -> str:
    lines = [line for line in stdout.splitlines() if line.startswith(f"{name}: ")]
    assert len(lines) == 1, stdout
    return lines[0]


INSTALLED = "not the installed "


def test_a_plugin_named_as_an_installed_one_replaces_it_and_says_so(division, wrappers):  # noqa: F811 - the fixture imported above
    own = wrappers["own_build"]  # its file is xla_cpu_pjrt.so: the installed plugin's name
    listing = hlogen(division, "devices", "--plugin", own)
    assert listing.returncode == 0, listing.stderr
    line = _listed(listing.stdout, "xla_cpu_pjrt")
    assert own in line and line.endswith(f"found as --plugin, {INSTALLED}{wrappers['real']}")
    assert listing.stderr.count(f"xla_cpu_pjrt: using {own} given by --plugin, {INSTALLED}"
                                f"{wrappers['real']}") == 1, listing.stderr
    listing = hlogen(division, "devices", plugins=f"{own}:xla_cpu_pjrt")
    assert _listed(listing.stdout, "xla_cpu_pjrt").endswith(
        f"found as $HLOGEN_PLUGINS, {INSTALLED}{wrappers['real']}")
    assert f"using {own} given by $HLOGEN_PLUGINS" in listing.stderr
    # the library named runs: one that segfaults fails the run (the installed one would not)
    run = hlogen(division, "run", "division.mlir", "--plugin",
                 f"{wrappers['execute_segfaults']}:xla_cpu_pjrt", "--backend", "xla_cpu_pjrt",
                 *INPUTS)
    assert run.returncode in (1, 2) and "SIGSEGV" in run.stderr, run.stdout + run.stderr
    assert run.stderr.count("xla_cpu_pjrt: using ") == 1, run.stderr


def test_plugin_over_the_environment_and_two_libraries_under_one_name(division, wrappers):  # noqa: F811 - the fixture imported above
    own, other = wrappers["own_build"], wrappers["execute_segfaults"]
    listing = hlogen(division, "devices", "--plugin", f"{own}:mine", plugins=f"{other}:mine")
    assert _listed(listing.stdout, "mine").endswith(
        f"found as --plugin, not {other} given by $HLOGEN_PLUGINS"), listing.stdout
    assert f"mine: using {own} given by --plugin, not {other} given by $HLOGEN_PLUGINS" \
        in listing.stderr
    same = hlogen(division, "devices", "--plugin", f"{own}:mine", "--plugin", f"{own}:mine")
    assert same.returncode == 0 and "found as --plugin\n" in same.stdout + "\n", same.stderr
    for where in (dict(), dict(plugins=f"{own}:mine,{other}:mine")):
        args = [] if where else ["--plugin", f"{own}:mine", "--plugin", f"{other}:mine"]
        for command in (["devices"], ["run", "division.mlir", "--backend", "mine", *INPUTS]):
            done = hlogen(division, *command, *args, **where)
            assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
            assert f"names two libraries as plugin mine: {own} and {other}; give one of them " \
                   f"a name of its own (PATH:OTHERNAME)" in done.stderr
