"""jaxlib's readers of modules made elsewhere (XLA's HLO parser and HLO-to-StableHLO
converter, jax.export's deserializer) and its StableHLO-to-HLO converter, as a registry
the runtime fills; the child processes that native code which may end the process runs
in: one-shot (`run_child`) or serving tasks one after another (`Worker`); and how every
child process hlogen starts ends with its parent (`end_with_parent`).

They live in hlogen.runtime._jaxlib, the one module of private jax imports, which starts
jax: hlogen.runtime registers them here (importing jax only when one is first called),
and the loading layer calls them by name, below the runtime.
"""
from __future__ import annotations

import ctypes
import functools
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# name -> what it does (hlogen.runtime._jaxlib defines each)
NAMES = {
    "hlo_text_to_proto": "HLO text -> serialized HloModuleProto (XLA's HLO parser)",
    "hlo_proto_to_text": "serialized HloModuleProto -> HLO text",
    "hlo_to_stablehlo": "serialized HloModuleProto -> StableHLO bytecode (XLA's converter)",
    "exported_parts": "jax.export's serialized Exported -> a dict of its parts",
    "stablehlo_to_hlo": "StableHLO bytecode -> serialized HloModuleProto (what XLA compiles)",
}
_registered: dict = {}


def register(name: str, function) -> None:
    if name not in NAMES:
        raise ValueError(f"no native reader named {name!r}; known: {', '.join(NAMES)}")
    _registered[name] = function


def call(name: str, *args):
    """Calls reader `name`; its exceptions are the caller's to turn into hlogen errors."""
    function = _registered.get(name)
    if function is None:  # only when hlogen.runtime was never imported
        raise RuntimeError(f"{NAMES[name]}: not registered (import hlogen, not hlogen.loading alone)")
    return function(*args)


# what XLA says when it ends the process
FATAL = re.compile(r"(Check failed: [^\n]*|LLVM ERROR: [^\n]*)")

# what a child of hlogen runs first: `-c` puts the current folder ('') first on sys.path,
# where a clone named hlogen/ or a numpy.py would be imported instead (python -P does
# this from 3.11 only). (The command line's parent imports no hlogen: hlogen_cli/isolation.py
# writes the same line.)
CHILD_PATH = "import sys\nsys.path[:] = [p for p in sys.path if p]\n"
# and, for native code that may abort: no core file; ending with its parent (whose
# process id comes first in its arguments)
_PRELUDE = CHILD_PATH + """import resource
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
from hlogen import native
native.end_with_parent(int(sys.argv.pop(1)))
"""
_PR_SET_PDEATHSIG = 1  # prctl's option, <linux/prctl.h>


def end_with_parent(parent: int) -> None:
    """Called first in each child process hlogen starts: the kernel kills it (SIGKILL)
    when `parent`, its parent's process id, ends, however it ends (Linux's
    PR_SET_PDEATHSIG; elsewhere this does nothing). The parent's own clean-up, which kills
    its children on the way out of an exception or a signal, is the first line of
    defence; this one covers a parent killed by SIGKILL or by a native crash. A parent
    that ended before the call ends the child at once."""
    prctl = _prctl()
    if prctl is None:  # not Linux
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def ending_with_parent(command: list) -> list:
    """`command` (a program and its arguments: a user's script) as a command line that
    runs it with end_with_parent's parent-death signal: through util-linux's `setpriv
    --pdeathsig KILL` where there is one (3 ms), else through a Python that sets it and
    execs the program (25 ms). Not subprocess's preexec_fn: a fork of a process that runs
    jax's threads may hang, and jax warns of it."""
    if _prctl() is None:  # not Linux
        return list(command)
    setpriv = shutil.which("setpriv")
    if setpriv is not None and _setpriv_kills(setpriv):
        return [setpriv, "--pdeathsig", "KILL", "--", *command]
    return [sys.executable, "-I", "-S", "-c", _EXEC_ENDING_WITH_PARENT, str(os.getpid()),
            *command]


_EXEC_ENDING_WITH_PARENT = f"""import ctypes, os, sys
ctypes.CDLL(None).prctl({_PR_SET_PDEATHSIG}, {int(signal.SIGKILL)})
if os.getppid() != int(sys.argv[1]):
    os._exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


@functools.cache
def _setpriv_kills(setpriv: str) -> bool:
    """Whether `setpriv` knows --pdeathsig (util-linux 2.33 and later)."""
    try:
        return subprocess.run([setpriv, "--pdeathsig", "KILL", "--", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@functools.cache
def _prctl():
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


# what every child of hlogen is given besides this process's environment: each gives
# variables as a child starts (the PJRT plugins loaded here by path, which a child loads too)
_passed: list = []


def pass_to_children(variables) -> None:
    """Every child hlogen starts from now on gets the environment variables that
    `variables()` (a dict) gives as it starts, over this process's."""
    if variables not in _passed:
        _passed.append(variables)


def child_environment(extra: dict | None = None) -> dict:
    """The environment of a child of hlogen: this one, with this hlogen importable first,
    what `pass_to_children` gives, and `extra` on top."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    for variables in _passed:
        env.update(variables())
    return dict(env, **(extra or {}))


def run_child(code: str, data: bytes, args: list, seconds: float, env: dict | None = None):
    """Runs Python `code` in a child process with `data` on its standard input (hlogen
    importable as here, no core file written, `env` added to the environment), for
    native code that may end the process on bad input: the completed process (stdout
    and stderr as bytes), or None when it ran out of time. (A child process, not a fork:
    forking a process that runs XLA threads can hang.)"""
    try:
        return subprocess.run([sys.executable, "-c", _PRELUDE + code, str(os.getpid()), *args],
                              input=data, env=child_environment(env), capture_output=True,
                              timeout=seconds)
    except subprocess.TimeoutExpired:
        return None


def answer_channel():
    """In a worker process: a line-buffered writer on the process's original standard
    output, which then points at standard error, so that whatever native code prints
    cannot corrupt an answer."""
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return answers


class Worker:
    """A child process that runs Python `code` serving tasks: one JSON object per line on
    its standard input, one JSON line answered for each (after a first {"ready": true};
    `answer_channel` gives the child its writer). A worker that dies (a native abort:
    SIGABRT, SIGSEGV, ...) or passes a task's time limit answers a crash or timeout
    record, with the signal and the last lines it wrote to stderr; it is then dead
    (`alive`), and its owner starts another."""

    def __init__(self, code: str, env: dict | None = None, start_seconds: float = 120):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PRELUDE + code, str(os.getpid())], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, env=child_environment(env))
        self._buffer = b""
        try:
            ready = self._read_line(start_seconds)  # importing jax, on a loaded machine
        except EOFError:  # it died while starting
            ready = None
        if ready is None or not ready.get("ready"):
            self.kill()
            raise RuntimeError(f"a worker process did not start: {self.stderr_tail(0)}")

    def _read_line(self, timeout: float):
        """The next JSON line, or None on timeout; raises EOFError when the worker died."""
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise EOFError
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, task: dict, timeout: float) -> dict:
        """The worker's record for `task`; crash and timeout records when it dies or hangs
        (the worker is then dead: check `alive`)."""
        offset = self.stderr.seek(0, os.SEEK_END)
        start = time.monotonic()
        try:
            self.process.stdin.write((json.dumps(task) + "\n").encode())
            self.process.stdin.flush()
            record = self._read_line(timeout)
        except (EOFError, BrokenPipeError):
            code = self.process.wait()
            how = (f"was killed by {signal.Signals(-code).name}" if code < 0
                   else f"exited with status {code}")
            said = self._fatal(offset) or self.stderr_tail(offset)
            return {**task, "status": "crash", "seconds": round(time.monotonic() - start, 6),
                    "signal": signal.Signals(-code).name if code < 0 else None,
                    "message": f"the worker {how} while running it" + (f": {said}" if said else "")}
        if record is None:
            self.kill()
            tail = self.stderr_tail(offset)
            return {**task, "status": "timeout", "seconds": round(time.monotonic() - start, 6),
                    "message": f"did not finish in {timeout:g} s; the worker was killed"
                               + (f": {tail}" if tail else "")}
        return record

    def _fatal(self, offset: int) -> str | None:
        """What XLA said when it ended the process, in what it wrote since `offset`."""
        self.stderr.seek(offset)
        found = FATAL.search(self.stderr.read().decode(errors="replace"))
        return found.group(1) if found else None

    def stderr_tail(self, offset: int, lines: int = 5) -> str:
        self.stderr.seek(offset)
        text = self.stderr.read()[-8192:].decode(errors="replace")
        kept = [line.strip() for line in text.splitlines()
                if line.strip() and not line.startswith("--- task ")]
        return " | ".join(kept[-lines:])[:1000]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.close()
                self.process.wait(timeout=10)
            except (subprocess.TimeoutExpired, BrokenPipeError, OSError):
                self.kill()
        self.stderr.close()

