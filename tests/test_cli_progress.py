"""Progress on long work and `hlogen run --timeout`: a spinner (compiles, runs) or a bar
(--repeat, emit of several files) on standard error when it is a terminal (a pty
here), nothing when it is not; a run still going at --timeout is stopped, exit 1."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import pty
import re
import select
import subprocess
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_cli import ALWAYS_TRUE_SORT

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
_spec = importlib.util.spec_from_file_location("benchmarks_cli", ROOT / "benchmarks" / "cli.py")
benchmarks_cli = importlib.util.module_from_spec(_spec)
_path = list(sys.path)
_spec.loader.exec_module(benchmarks_cli)  # its 2000-op chain compiles in about a second
sys.path[:] = _path  # (it puts benchmarks/ on the path for its own imports)


@pytest.fixture
def sort_forever(tmp_path):
    """An always-true comparator: XLA CPU sorts 2000 values with it for more than 10 minutes."""
    (tmp_path / "sort.mlir").write_text(ALWAYS_TRUE_SORT)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random(2000).astype(np.float32))
    return [str(tmp_path / "sort.mlir"), "--input", f"@{tmp_path / 'x.npy'}", "--backend", "cpu"]


def on_a_terminal(*args, seconds=60) -> tuple[int, str, str]:
    """Runs hlogen with its standard error on a pty: (exit status, stdout, what the
    terminal got)."""
    master, slave = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "hlogen_cli.main", *args], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the other side is closed: hlogen has ended
                    break
                if not data:
                    break
                seen += data
            elif process.poll() is not None:
                break
        else:
            process.kill()
            pytest.fail(f"hlogen {' '.join(args)} did not end in {seconds} s")
    finally:
        os.close(master)
    out = process.stdout.read().decode()
    process.wait()
    return process.returncode, out, seen.decode(errors="replace")


def test_a_run_past_its_timeout_is_stopped_exit_1(sort_forever):
    start = time.monotonic()
    result = CliRunner().invoke(main, ["run", *sort_forever, "--timeout", "2"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    # (on a loaded machine the 2 s may end while XLA still compiles: the message says which)
    assert result.output in (f"error: {sort_forever[0]}: not done after --timeout 2 s ({doing}): "
                             f"stopped\n" for doing in ("running on cpu", "compiling for cpu"))
    assert time.monotonic() - start < 60  # (a guard: the sort alone takes minutes)


def test_a_long_run_shows_a_spinner_on_a_terminal(sort_forever):
    # --timeout counts from the start (jax's import and the compile too, slow on a loaded
    # machine): 8 s leaves the run itself more than a second to show its clock going on
    code, out, terminal = on_a_terminal("run", *sort_forever, "--timeout", "8")
    assert code == 1 and out == ""
    assert re.search(r"\r[|/\\-] running on cpu [1-9]\d*\.\d s", terminal), terminal  # time goes on
    assert terminal.rstrip().endswith("(running on cpu): stopped")
    assert "\r" + " " * 10 in terminal  # the line is erased before the message


def test_a_long_compile_shows_a_spinner_on_a_terminal(tmp_path):
    (tmp_path / "chain.mlir").write_text(benchmarks_cli.chain_module())
    code, out, terminal = on_a_terminal("compile", str(tmp_path / "chain.mlir"), "--cost", "--no-cache")
    assert code == 0, terminal
    assert "flops: " in out
    assert re.search(r"\r[|/\\-] compiling \d+\.\d s", terminal), terminal  # any frame


def test_repeat_and_emit_draw_a_bar_on_a_terminal(tmp_path):
    code, _, terminal = on_a_terminal("run", str(SAMPLES / "allreduce.py"), "--input", "8xf32=1",
                                      "--repeat", "3000")
    assert code == 0, terminal
    assert "\rrunning on cpu [" in terminal and "/3000 " in terminal
    code, out, terminal = on_a_terminal("emit", str(SAMPLES / "elementwise.py"),
                                        str(SAMPLES / "allreduce.py"), "-o", f"{tmp_path}/")
    assert code == 0, terminal
    assert "\remitting [" in terminal and "/10 " in terminal
    assert out.count(f"{tmp_path}/") == 10


def test_quiet_when_standard_error_is_not_a_terminal(tmp_path, sort_forever):
    run = subprocess.run([sys.executable, "-m", "hlogen_cli.main", "run", *sort_forever, "--timeout", "1.5"],
                         capture_output=True, text=True)
    assert run.returncode == 1 and run.stderr.startswith("error: ")  # nothing drawn before
    repeat = subprocess.run([sys.executable, "-m", "hlogen_cli.main", "run", str(SAMPLES / "allreduce.py"),
                             "--input", "8xf32=1", "--repeat", "3000"], capture_output=True, text=True)
    assert repeat.returncode == 0 and repeat.stderr.startswith("3000 runs on cpu: min ")
    emitted = CliRunner().invoke(main, ["emit", str(SAMPLES / "elementwise.py"), str(SAMPLES / "allreduce.py"),
                                        "-o", f"{tmp_path}/"])
    assert emitted.exit_code == 0 and "\r" not in emitted.output
