"""`hlogen reduce` and `hlogen bisect` as a user meets them when a search is stopped or
cannot start (issue 33): a signal (SIGTERM, SIGINT, SIGHUP) or --timeout ends a user's
interestingness script and everything it started (its process group), the kernel ends
the script when hlogen is killed outright; a stopped reduce writes the smallest module
found so far, said to be partial, and a stopped bisect prints what it had narrowed,
before exiting 128 + the signal's number; -o to a device or standard output has no
place beside it for the inputs; a module that is not interesting is said to be what it
was seen to be; inputs larger than this machine's memory are refused, however they are
made. The installed `hlogen`, in a session of its own, as tests/test_cli_signals.py runs
it; /proc tells which processes live."""
from __future__ import annotations

import contextlib
import json
import os
import pathlib
import signal
import subprocess
import time

import pytest

import hlogen as hg
from hlogen.differential import random_inputs, search, shrink, zero_inputs
from hlogen.differential.inputs import random_inputs_apart
from tests.test_cli_signals import HLOGEN, living, processes

MODULE = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tanh %x : tensor<4xf32>
  %1 = stablehlo.add %0, %x : tensor<4xf32>
  %2 = stablehlo.multiply %1, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""
# log(exp(x)): XLA CPU's algsimp makes it x, the interpreter gives inf at x = 100
LOG_EXP = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %x : tensor<4xf32>
  %1 = stablehlo.log %0 : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""
# 2**40 f32 elements: 4 TiB, more than any machine these tests run on
HUGE = """func.func @main(%x: tensor<1099511627776xf32>) -> tensor<1099511627776xf32> {
  %0 = stablehlo.tanh %x : tensor<1099511627776xf32>
  return %0 : tensor<1099511627776xf32>
}
"""
HUGE_SAID = "parameter 0 'arg0': f32[1099511627776] needs 4398046511104 bytes"


def script(folder: pathlib.Path) -> pathlib.Path:
    """A script that is quick and says yes on the module (tanh and multiply), and, on a
    candidate without multiply, writes its process id and that of a child it starts to
    `pids`, and waits for the child (a sleep of 300 s): what a script that runs a hanging
    backend does."""
    path = folder / "hangs.sh"
    path.write_text(f"""#!/bin/sh
grep -q stablehlo.tanh "$1" || exit 1
grep -q stablehlo.multiply "$1" && exit 0
echo $$ >> {folder / 'pids'}
sleep 300 &
echo $! >> {folder / 'pids'}
wait
""")
    path.chmod(0o755)
    return path


def alive(pid: int) -> bool:
    state = processes().get(pid)
    return state is not None and state[0] not in "ZX"


class Reducing:
    """`hlogen reduce --script` (hangs.sh) of MODULE, once the script hangs on a
    candidate: its process ids read from `pids`."""

    def __init__(self, folder: pathlib.Path, *extra):
        (folder / "m.mlir").write_text(MODULE)
        self.folder, self.out = folder, folder / "out.mlir"
        self.proc = subprocess.Popen(
            [HLOGEN, "reduce", folder / "m.mlir", "-o", self.out, "--script", script(folder),
             *extra], cwd=folder, start_new_session=True, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120  # a guard against a hang, not a measurement
        self.pids: list[int] = []
        while len(self.pids) < 2:
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the script never hung"
            time.sleep(0.05)
            with contextlib.suppress(FileNotFoundError, ValueError):
                self.pids = [int(line) for line in (folder / "pids").read_text().split()]

    def ended(self, seconds: float = 60) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=seconds)
        return self.proc.returncode, out.decode(), err.decode()

    def left(self) -> list[int]:
        """The script's processes that live (a moment given to the kernel's parent-death
        signal), killed here."""
        for _ in range(40):
            if not any(alive(p) for p in self.pids):
                break
            time.sleep(0.05)
        found = [p for p in self.pids if alive(p)]
        with contextlib.suppress(ProcessLookupError):  # the script's group: both
            os.killpg(self.pids[0], signal.SIGKILL)
        return found


@pytest.fixture
def reducing(tmp_path):
    made = []

    def start(*extra):
        made.append(Reducing(tmp_path, *extra))
        return made[-1]
    yield start
    for r in made:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(r.proc.pid, signal.SIGKILL)
        r.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # the script's group: what is left
            os.killpg(r.pids[0], signal.SIGKILL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_ends_the_script_and_its_children_and_keeps_the_best_so_far(reducing, signum):
    run = reducing()
    os.kill(run.proc.pid, signum)
    code, out, err = run.ended()
    assert run.left() == [] and code == 128 + signum, err
    name = signal.Signals(signum).name
    assert f"(stopped by {name}: partial, the smallest interesting module found so far)" \
        in err and "Traceback" not in err, err
    assert out == f"{run.folder / 'hangs.sh'} {run.out}\n"
    # what it wrote is interesting: the script says yes at once
    assert subprocess.run([run.folder / "hangs.sh", run.out], timeout=60).returncode == 0
    assert living(run.proc.pid, run.proc.pid) == []


def test_the_kernel_ends_the_script_when_hlogen_is_killed(reducing):
    run = reducing()
    os.kill(run.proc.pid, signal.SIGKILL)
    run.ended()
    for _ in range(40):
        if not alive(run.pids[0]):
            break
        time.sleep(0.05)
    assert not alive(run.pids[0])  # (its own children are its to end: not hlogen's)


def test_timeout_kills_the_running_script(reducing):
    """The search's --timeout bounds a script's run: stopped, the best module written;
    the script would sleep 300 s, and its own limit (--run-timeout) is 120 s."""
    run = reducing("--timeout", "2")
    code, out, err = run.ended(seconds=50)  # (a guard: a script waited for takes 120 s)
    assert code == 0 and "(stopped at --timeout: the best module found so far)" in err, err
    assert run.left() == []
    assert hg.load(run.out).as_text() == hg.load(MODULE).as_text()


@pytest.mark.parametrize("device", ["/dev/null", "/dev/stdout"])
def test_reduce_refuses_an_output_with_no_place_for_its_inputs(tmp_path, device):
    (tmp_path / "le.mlir").write_text(LOG_EXP)
    side = pathlib.Path(device + ".inputs.npz")
    existed = side.exists()
    try:
        done = subprocess.run([HLOGEN, "reduce", tmp_path / "le.mlir", "-o", device,
                               "--input", "4xf32=100"], capture_output=True, timeout=120)
        assert side.exists() == existed
    finally:
        if side.exists() and not existed:
            side.unlink()
    said = done.stderr.decode()
    assert done.returncode == 2 and f"-o {device}: not a regular file" in said, said
    assert "OUT.inputs.npz" in said and done.stdout == b""


def test_reduce_with_a_script_writes_to_a_device_and_prints_no_command(tmp_path):
    (tmp_path / "m.mlir").write_text(MODULE)
    done = subprocess.run([HLOGEN, "reduce", tmp_path / "m.mlir", "-o", "/dev/stdout",
                           "--script", script(tmp_path), "--timeout", "1"],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # standard output is the module, and nothing else: no command could read it back
    assert hg.load(done.stdout.decode()).as_text() == hg.load(MODULE).as_text()
    assert not pathlib.Path("/dev/stdout.inputs.npz").exists()


# -- a module that is not interesting: what was seen, then what the interest wants ----------

CUSTOM_CALL = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.custom_call @no_such_target(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


@pytest.mark.parametrize("module,extra,seen,wanted", [
    (MODULE, [], "cpu and interpret agree on it (XLA's Near, abs 0.001 and rel 0.001)",
     "them to differ"),
    (MODULE, ["--error", "zzz"], "cpu runs it without an error",
     "cpu to report an error matching 'zzz'"),
    (CUSTOM_CALL, ["--error", "zzz"], "cpu reports an error not matching 'zzz': ",
     "cpu to report an error matching 'zzz'"),
    (MODULE, ["--crash"], "cpu runs it without an error", "cpu's process to end by a signal"),
    (CUSTOM_CALL, ["--crash"], "cpu reports an error, its process does not end by a signal",
     "cpu's process to end by a signal"),
    (MODULE, ["--script", "exit3.sh"], "the script exit3.sh exits with status 3 on it",
     "the script to exit with status 0"),
])
def test_not_interesting_says_what_was_seen(tmp_path, module, extra, seen, wanted):
    (tmp_path / "m.mlir").write_text(module)
    (tmp_path / "exit3.sh").write_text("#!/bin/sh\nexit 3\n")
    (tmp_path / "exit3.sh").chmod(0o755)
    done = subprocess.run([HLOGEN, "reduce", "m.mlir", "-o", "out.mlir", *extra], cwd=tmp_path,
                          capture_output=True, timeout=120)
    said = done.stderr.decode()
    assert done.returncode == 2 and said.startswith(
        f"error: m.mlir: not interesting to begin with: {seen}"), said
    assert f"; the interest wants {wanted}: nothing to reduce\n" in said, said
    assert " differ (" not in said  # the wanted condition is not said as the fact


# -- inputs larger than memory --------------------------------------------------------------

@pytest.mark.parametrize("args,kind", [
    (["run", "huge.mlir", "--zero-inputs"], "zero"),
    (["compare", "huge.mlir"], "random"),
    (["reduce", "huge.mlir", "-o", "out.mlir"], "random"),
    (["reduce", "huge.mlir", "-o", "out.mlir", "--random-inputs"], "random"),
    (["reduce", "huge.mlir", "-o", "out.mlir", "--zero-inputs"], "zero"),
])
def test_inputs_larger_than_memory_are_refused_however_made(tmp_path, args, kind):
    (tmp_path / "huge.mlir").write_text(HUGE)
    done = subprocess.run([HLOGEN, *args], cwd=tmp_path, capture_output=True, timeout=120)
    said = done.stderr.decode()
    assert done.returncode == 2 and f"error: huge.mlir: {HUGE_SAID}" in said, said
    assert f"no {kind} inputs are made for it" in said and "MemoryError" not in said


def test_the_api_refuses_inputs_larger_than_memory_before_making_any():
    """Zeros, random values, a new parameter's of the reducer, and constrained values (an
    index of dynamic_slice): none is made, the small parameter's neither."""
    comp = hg.load("""func.func @main(%small: tensor<4xf32>, %huge: tensor<1099511627776xi32>)
        -> tensor<1xf32> {
      %i = stablehlo.slice %huge [0:1] : (tensor<1099511627776xi32>) -> tensor<1xi32>
      %j = stablehlo.reshape %i : (tensor<1xi32>) -> tensor<i32>
      %r = stablehlo.dynamic_slice %small, %j, sizes = [1]
        : (tensor<4xf32>, tensor<i32>) -> tensor<1xf32>
      return %r : tensor<1xf32>
    }""")
    for make in (lambda: random_inputs(comp), lambda: zero_inputs(comp),
                 lambda: random_inputs_apart(comp, {1: 5})):
        with pytest.raises(hg.InputError, match=r"parameter 1 'arg1': s32\[1099511627776\] "
                                                r"needs 4398046511104 bytes \(4096.0 GiB\), "
                                                r"more than this machine's memory"):
            make()


# -- stopped searches, through the API -------------------------------------------------------

def test_an_interrupted_reduction_returns_the_best_so_far():
    comp = hg.load(MODULE)
    judged = []

    def tanh_stays(candidate):  # stopped (as by Ctrl-C) at the fourth candidate
        judged.append(candidate)
        if len(judged) == 5:
            raise KeyboardInterrupt
        return "stablehlo.tanh" in candidate.as_text()

    found = shrink(comp, tanh_stays, interrupted_by=(KeyboardInterrupt,))
    assert isinstance(found.interrupted, KeyboardInterrupt) and found.tried == 4
    assert "stablehlo.tanh" in found.computation.as_text()
    assert found.op_count < 3  # (candidates accepted before it)

    def stops(candidate):
        if candidate is not comp:
            raise KeyboardInterrupt
        return True
    with pytest.raises(KeyboardInterrupt):  # not asked for: it ends the search, as before
        shrink(comp, stops)


def test_an_interrupted_bisection_says_what_it_narrowed():
    passes = [f"p{i}" for i in range(64)]
    calls = []

    def diverges(disabled):  # p9 explains it; stopped at the fourth compile
        calls.append(disabled)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return "p9" not in disabled

    found = search(passes, diverges, interrupted_by=(KeyboardInterrupt,))
    # nothing disabled: it stays; all disabled: it goes; the first half: it goes
    assert found.stage == "stopped" and found.compiles == 3
    assert sorted(found.passes) == sorted(passes[:32]) and isinstance(found.interrupted,
                                                                      KeyboardInterrupt)
    assert found.text().splitlines()[1] == \
        "narrowed so far: disabling 32 of the 64 HLO passes (named below) removes the divergence"


def test_a_signal_to_bisect_prints_what_it_narrowed(tmp_path):
    (tmp_path / "le.mlir").write_text(LOG_EXP)
    proc = subprocess.Popen([HLOGEN, "bisect", "le.mlir", "--input", "4xf32=100", "--json",
                             "v.json"], cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120  # a guard against a hang, not a measurement
        while not any(b"isolated.serve" in _cmdline(p)  # its compiles' worker is at work
                      for p in living(proc.pid, proc.pid)):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "bisect's compiles never started"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 143, err
    said = out.decode()
    assert said.startswith("cpu against interpret: stopped by SIGTERM after "), said
    assert "narrowed so far: " in said and "Traceback" not in err.decode()
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["stage"] == "stopped" and verdict["stopped_by"] == "SIGTERM"
    for _ in range(40):
        if not living(proc.pid, proc.pid):
            break
        time.sleep(0.05)
    assert living(proc.pid, proc.pid) == []


def _cmdline(pid: int) -> bytes:
    try:
        return pathlib.Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""
