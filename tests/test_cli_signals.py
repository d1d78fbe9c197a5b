"""Processes that end together (issue 24): a signal to `hlogen run` or `hlogen check`
(SIGTERM, SIGHUP, SIGINT: sent to hlogen alone, as `kill PID` does, not to its process
group, as a terminal's Ctrl-C does) ends it with 128 + the signal's number, as shells
expect, and no process it started outlives it: its run's child, its conformance workers.
SIGKILL, which hlogen cannot see, ends them too (the kernel's parent-death signal). The
installed `hlogen`, in a session of its own, so that /proc tells which processes are its.
"""
from __future__ import annotations

import contextlib
import os
import pathlib
import select
import signal
import stat
import subprocess
import sys
import time

import pytest

HLOGEN = str(pathlib.Path(sys.executable).with_name("hlogen"))
# a loop of 2**31 - 1 trips: the interpreter takes hours
LOOP = """    %zero = stablehlo.constant dense<0> : tensor<i32>
    %r:2 = stablehlo.while(%i = %zero, %m = %n) : tensor<i32>, tensor<i32>
    cond {
      %c = stablehlo.compare LT, %i, %m : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %one = stablehlo.constant dense<1> : tensor<i32>
      %j = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %j, %m : tensor<i32>, tensor<i32>
    }
"""
MODULE = f"""func.func @main(%n: tensor<i32>) -> tensor<i32> {{
{LOOP}    return %r#0 : tensor<i32>
}}
"""
CONFORMANCE = f"""// RUN: stablehlo-translate --interpret %s
module @jit_main {{
  func.func public @main() -> tensor<i32> {{
    %n = stablehlo.constant dense<2147483647> : tensor<i32>
{LOOP}    stablehlo.custom_call @check.expect_eq(%r#0, %n) {{has_side_effect = true}} : (tensor<i32>, tensor<i32>) -> ()
    return %r#0 : tensor<i32>
  }}
}}
"""
COMMANDS = {
    "run": ["run", "loop.mlir", "--backend", "interpret", "--input", "i32=2147483647"],
    "check": ["check", "loops", "--backend", "interpret", "-j", "2"],
}


def processes() -> dict:
    """pid -> (state, session id) of every process (/proc/PID/stat)."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone
        found[int(entry)] = (fields[0], int(fields[3]))
    return found


def living(session: int, but: int) -> list[int]:
    """The processes of `session` that live (not zombies, which only wait to be reaped),
    `but` left out."""
    return [pid for pid, (state, sid) in processes().items()
            if sid == session and pid != but and state not in "ZX"]


def workers_at_work(pid: int) -> bool:
    """Whether both conformance workers of hlogen `pid` run a module (each says so first
    on its standard error, a file /proc shows)."""
    said = []
    for child in living(pid, pid):
        try:  # a file only: reading a pipe (a child's captured stderr) would wait forever
            if stat.S_ISREG(os.stat(f"/proc/{child}/fd/2").st_mode):
                said.append(pathlib.Path(f"/proc/{child}/fd/2").read_bytes())
        except OSError:
            continue
    return len(said) == 2 and all(b"--- task" in s for s in said)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    folder = tmp_path_factory.mktemp("signals")
    (folder / "loop.mlir").write_text(MODULE)
    (folder / "loops").mkdir()
    for k in range(3):
        (folder / "loops" / f"loop{k}.mlir").write_text(CONFORMANCE)
    return folder


class Started:
    """hlogen `command`, once its children are at work: run's child in the loop (its
    parent says "running on the interpreter" on a terminal, which the test gives it as
    standard error), check's workers each running a module."""

    def __init__(self, home, command: str, made: list):
        self._terminal, their_end = os.openpty()
        self.proc = subprocess.Popen([HLOGEN, *COMMANDS[command]], cwd=home,
                                     start_new_session=True, stdout=subprocess.PIPE,
                                     stderr=their_end,
                                     env=dict(os.environ, HLOGEN_CACHE_DIR=str(home / "cache")))
        made.append(self)
        os.close(their_end)
        self.said = b""
        deadline = time.monotonic() + 120  # a guard against a hang, not a measurement
        while not (b"running on the interpreter" in self.said if command == "run" else
                   workers_at_work(self.proc.pid)):
            assert self.proc.poll() is None, self.ended()
            assert time.monotonic() < deadline, "hlogen's children did not start"
            self._read(0.05)

    def _read(self, seconds: float) -> None:
        ready, _, _ = select.select([self._terminal], [], [], seconds)
        try:
            self.said += os.read(self._terminal, 1 << 16) if ready else b""
        except OSError:  # the other end is closed
            time.sleep(seconds)

    def ended(self) -> tuple[list[int], str]:
        """The processes of hlogen's session left once it has ended (a moment given to
        the kernel's parent-death signal, which is sent as the parent dies, not before),
        and what it said."""
        out, _ = self.proc.communicate(timeout=60)
        for _ in range(40):
            left = living(self.proc.pid, self.proc.pid)
            if not left:
                break
            self._read(0.05)
        for pid in left:  # the test's own clean-up
            os.kill(pid, signal.SIGKILL)
        os.close(self._terminal)
        return left, (out + self.said).decode(errors="replace")


@pytest.fixture
def start(home):
    """Starts hlogen commands (Started); whatever of theirs a failing test leaves is
    killed after it."""
    made = []
    yield lambda command: Started(home, command, made)
    for hlogen in made:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(hlogen.proc.pid, signal.SIGKILL)  # its session's group: its children
        hlogen.proc.wait()


@pytest.mark.parametrize("command,signum", [("run", signal.SIGTERM), ("run", signal.SIGHUP),
                                            ("run", signal.SIGINT), ("check", signal.SIGTERM),
                                            ("check", signal.SIGHUP)])
def test_a_signal_ends_hlogen_and_every_process_it_started(start, command, signum):
    hlogen = start(command)
    os.kill(hlogen.proc.pid, signum)
    left, said = hlogen.ended()
    assert left == [] and hlogen.proc.returncode == 128 + signum, said
    assert "Traceback" not in said and "error" not in said


def test_sigkill_of_hlogen_ends_its_child_too(start):
    """The one signal hlogen cannot handle: the child ends by the kernel's parent-death
    signal (PR_SET_PDEATHSIG)."""
    hlogen = start("run")
    os.kill(hlogen.proc.pid, signal.SIGKILL)
    assert hlogen.ended()[0] == [] and hlogen.proc.returncode == -signal.SIGKILL
