"""Running a command's work in a child process, so that a native abort is an error.

What XLA or the reference interpreter cannot do and hlogen can know in advance is
refused before running (hlogen.preflight). What depends on the data (a sort
comparator that is not a strict weak order, memory exhausted while running) can
still end the process with a signal. So `hlogen run`, `compile`, `samples run`,
`compare`, `bisect` and `graph --optimized` do their work in a child, `python -c ...
isolation.child(CONFIG)`, and this process only watches it:

- it starts the child at once, before importing anything heavy; the child reads
  and checks the module and the inputs (exit 2 before any backend starts), then
  imports jax, compiles and runs; nothing is parsed or imported twice;
- the child imports what this installation holds, whatever the current folder has
  (a clone named hlogen/, a numpy.py): its sys.path does not start with that folder;
  it reads standard input when IN is `-`, and the pipes of process substitution
  (`--input @<(cat x.npy)`, /dev/fd/N) are passed on to it;
- it passes on what the child prints, in the order printed (the child's Python output
  and its status messages share one pipe, as frames; what native code prints goes to
  a file, of which the last line is quoted when the child dies);
- it shows the child's status (joining, compiling, running i of n) on a progress
  line when its standard error is a terminal;
- it reports the child's death as "XLA/the interpreter aborted (SIGABRT) while
  running FILE", exit status 1 (the child leaves no core file), and kills a child
  still working at the deadline (`hlogen run --timeout`), exit status 1 too;
- it kills the child when it is stopped itself (an exception, or Ctrl-C, SIGTERM,
  SIGHUP: reporting.stopped_by_signals), and the child ends with it even when it is
  killed outright (hlogen.native.end_with_parent); a command whose work has something
  to say when it is stopped (`last_words`: bisect's narrowing so far) gets the signal
  in its child, which says it and ends (with 128 + the signal's number), and is killed
  only after _LAST_WORDS_SECONDS;
- /dev/stdout, /dev/stderr and /dev/stdin in the arguments are this process's streams:
  the child gets them as /dev/fd/N (its own go elsewhere).

When its work is done, the child tells its exit status and leaves without tearing jax
down, except in jax's distributed runtime, whose shutdown is a barrier of every
process: there it exits normally, within a bounded time.
"""
from __future__ import annotations

import codecs
import importlib
import io
import json
import os
import re
import resource
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

import click

from hlogen_cli import reporting, status as exit_status  # (status: the child's report, below)
from hlogen_cli.progress import Line

_SHUTDOWN_SECONDS = 30  # how long a distributed child may take to leave jax's runtime
_LAST_WORDS_SECONDS = 5  # how long a stopped child may take to say what it has found
# The child's one pipe to the parent carries frames: a tag, the payload's length (4 bytes,
# big-endian), the payload.
_STDOUT, _STDERR, _STATUS, _DONE = b"o", b"e", b"s", b"d"
# The child: `python -m` and `-c` put the current folder ('') first on sys.path; it is
# taken off before anything is imported (python -P does that from 3.11 only). The same
# line as hlogen.native.CHILD_PATH: this parent process imports no hlogen (start-up).
_CHILD = ("import sys; sys.path[:] = [p for p in sys.path if p]; "
          "from hlogen_cli import isolation; isolation.child(sys.argv[1])")
_FD_PATH = re.compile(r"/(?:dev|proc/self)/fd/(\d+)")  # what process substitution passes
# /dev/stdout in an argument means this process's standard output, not the child's (which
# goes to the file of what native code prints): the child gets /dev/fd/N of a copy
_STANDARD_PATH = re.compile(r"/dev/std(in|out|err)\b")
_STANDARD_STREAMS = {"in": 0, "out": 1, "err": 2}


def in_child(work, arguments: dict, file: str, timeout: float | None = None,
             distributed: bool = False, last_words: bool = False) -> None:
    """Does `work` in a child (run_in_child) and exits with its status when it failed."""
    code = run_in_child(work, arguments, file, timeout, distributed, reporting.DEBUG["on"],
                        last_words)
    if code:
        sys.exit(code)


def run_in_child(work, arguments: dict, file: str, timeout: float | None = None,
                 distributed: bool = False, debug: bool = False,
                 last_words: bool = False) -> int:
    """Runs `work` (a function of a module of hlogen_cli.commands, beside the command it
    does the work of; called with `arguments`, under reports_errors) in a child and returns
    its exit status; its death, or its still working after `timeout` seconds, is an
    ExecutionError about `file`. With `last_words`, a signal that stops this process is
    passed on to the child, whose work sees it as reporting.Stopped (raised where it is),
    and what it says then is passed on for at most _LAST_WORDS_SECONDS before it is
    killed."""
    with _Watch(address(work), arguments, debug, distributed, last_words) as watch:
        try:
            return watch.wait(file, timeout, distributed)
        except reporting.Stopped as stopped:
            if last_words:
                watch.last_words(stopped.signum)
            raise


def address(work) -> str:
    """Where the child finds `work`: "module:function". The one way to name a child's work
    is the function itself, defined at the top of its command's module (the child imports
    that module: whatever it imports at the top, the parent has imported already)."""
    if not work.__module__.startswith("hlogen_cli.commands.") or "." in work.__qualname__:
        raise ValueError(f"{work.__module__}.{work.__qualname__}: a child's work is a "
                         f"function at the top of a module of hlogen_cli.commands")
    return f"{work.__module__}:{work.__qualname__}"


class _Watch:
    def __init__(self, work: str, arguments: dict, debug: bool, distributed: bool,
                 last_words: bool = False):
        self.progress = Line()
        self.status = {"phase": "start"}  # the child's last status
        self.code = None  # the exit status the child reported
        self._stderr = tempfile.TemporaryFile()  # what native code prints
        self._pipe, child_end = os.pipe()
        config = {"work": work, "arguments": arguments, "debug": debug,
                  "distributed": distributed, "pipe": child_end, "parent": os.getpid(),
                  "last_words": last_words}
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        text = json.dumps(config)
        copies = {n: os.dup(_STANDARD_STREAMS[n]) for n in set(_STANDARD_PATH.findall(text))}
        text = _STANDARD_PATH.sub(lambda m: f"/dev/fd/{copies[m.group(1)]}", text)
        reads_stdin = arguments.get("file") == "-"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, text],
                stdin=None if reads_stdin else subprocess.DEVNULL, stdout=self._stderr,
                stderr=self._stderr, env=env, pass_fds=[child_end, *_open_fds_named(text)])
        finally:
            for fd in [child_end, *copies.values()]:
                os.close(fd)
        self._received = b""
        self._decoders = {tag: codecs.getincrementaldecoder("utf-8")("replace")
                          for tag in (_STDOUT, _STDERR)}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.progress.clear()
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        os.close(self._pipe)
        self._stderr.close()

    def wait(self, file: str, timeout: float | None, distributed: bool) -> int:
        """Passes on what the child says until it has ended (or, done, has left jax's
        distributed runtime, for at most _SHUTDOWN_SECONDS); returns its exit status."""
        deadline = time.monotonic() + timeout if timeout else None
        leaving = None  # when a distributed child that is done must have left
        while True:
            if self.code is not None:
                if not distributed:
                    return self.code  # it is leaving at once (and killed if not)
                leaving = leaving or time.monotonic() + _SHUTDOWN_SECONDS
            limit = leaving or deadline
            wait = 0.1 if self.progress.enabled else None
            if limit is not None:
                left = limit - time.monotonic()
                if left <= 0:
                    if leaving:
                        return self.code  # it waits for a process that is gone: killed
                    self._proc.kill()
                    raise _failed(f"{file}: not done after --timeout {timeout:g} s "
                                  f"({_describe(self.status)}): stopped")
                wait = left if wait is None else min(wait, left)
            ready, _, _ = select.select([self._pipe], [], [], wait)
            if ready:
                data = os.read(self._pipe, 65536)
                if not data:
                    break  # the child has ended
                self._take(data)
            self.progress.tick()
        self.progress.clear()
        if self.code is not None:
            return self.code
        raise _failed(self._death(file, self._proc.wait()))

    def last_words(self, signum: int) -> None:
        """Sends the child `signum` and passes on what it says until it ends, for at most
        _LAST_WORDS_SECONDS (then __exit__ kills it)."""
        self.progress.clear()
        self._proc.send_signal(signum)  # (nothing, when it has ended: its frames are read)
        deadline = time.monotonic() + _LAST_WORDS_SECONDS
        while self.code is None and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._pipe], [], [], left)
            data = os.read(self._pipe, 65536) if ready else b""
            if not data:
                return
            self._take(data)

    def _take(self, data: bytes) -> None:
        """Acts on each whole frame received so far."""
        self._received += data
        at = 0
        while len(self._received) - at >= 5:
            size = int.from_bytes(self._received[at + 1:at + 5], "big")
            if len(self._received) - at < 5 + size:
                break
            self._frame(self._received[at:at + 1], self._received[at + 5:at + 5 + size])
            at += 5 + size
        self._received = self._received[at:]

    def _frame(self, tag: bytes, payload: bytes) -> None:
        if tag in self._decoders:
            self.progress.clear()
            stream = sys.stdout if tag == _STDOUT else sys.stderr
            stream.write(self._decoders[tag].decode(payload))
            stream.flush()
        elif tag == _DONE:
            self.code = int(payload)
        elif tag == _STATUS:
            self.status = json.loads(payload)
            if self.status.get("total", 1) > 1:
                self.progress.count(_describe(self.status), self.status["done"],
                                    self.status["total"])
            else:
                self.progress.phase(_describe(self.status))

    def _death(self, file: str, returncode: int) -> str:
        self._stderr.seek(0)
        last = _last_line(self._stderr.read())
        how = (f"aborted ({signal.Signals(-returncode).name})" if returncode < 0
               else f"failed (exit status {returncode})")
        last = f": {last}" if last else ""
        status = self.status
        if status["phase"] == "join":
            return (f"{file}: process {status['process_id']} of {status['num_processes']}: "
                    f"the other processes did not all come to {status['coordinator']} within "
                    f"{status['timeout_seconds']} s (jax's distributed runtime {how}){last}")
        who = {"start": "hlogen", "explain": "XLA or the interpreter"}.get(
            status["phase"], status.get("words") or (
                "the interpreter" if status.get("backend") == "interpret" else "XLA"))
        doing = {"compile": "compiling", "run": "running", "explain": "explaining a difference in"}
        # compare's sides: which one it was
        side = f" on the {status['side']} side ({status['label']})" if "side" in status else ""
        return f"{who} {how} while {doing.get(status['phase'], 'reading')} {file}{side}{last}"


def _open_fds_named(text: str) -> list[int]:
    """The open file descriptors that /dev/fd/N paths in `text` name (the child gets
    them under the same numbers)."""
    found = []
    for n in sorted({int(m) for m in _FD_PATH.findall(text)}):
        try:
            os.fstat(n)
            found.append(n)
        except OSError:
            pass  # not open: the child says the file is not there
    return found


def _failed(message: str) -> Exception:
    # here, not at the top: the parent's start-up needs no hlogen (only a failure does)
    from hlogen.errors import ExecutionError
    return ExecutionError(message)


def _describe(status: dict) -> str:
    """A status line of the child, in words."""
    phase, backend = status["phase"], status.get("backend")
    if phase == "join":
        return (f"process {status['process_id']} of {status['num_processes']} waiting at "
                f"{status['coordinator']} for the other processes")
    if phase == "compile":
        return {"interpret": "preparing for the interpreter", None: "compiling"}.get(
            backend, f"compiling for {backend}")
    if phase == "run" and "side" in status:
        return f"running the {status['side']} side, {status['label']}"
    if phase == "run":
        return "running on the interpreter" if backend == "interpret" else f"running on {backend}"
    if phase == "explain":
        return "explaining the difference"
    return "reading"


def _last_line(stderr: bytes) -> str:
    """The child's last words: its last line of standard error, leaving out the stack
    trace that follows a fatal error of XLA (lines '@ 0x...')."""
    lines = [line.strip() for line in stderr.decode(errors="replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith(("@ ", "*** "))]
    return lines[-1][:300] if lines else ""


# -- the child ------------------------------------------------------------------------------

_pipe = None  # the child's pipe to the parent; None outside a child
_lock = threading.Lock()  # threads of the work (jax's, logging's) print too
_started = time.monotonic()


def elapsed() -> float:
    """Seconds since this process started (about as long as since the parent started
    the child)."""
    return time.monotonic() - _started


def _send(tag: bytes, payload: bytes) -> None:
    data = tag + len(payload).to_bytes(4, "big") + payload
    with _lock:
        while data:
            data = data[os.write(_pipe, data):]


def status(phase: str, **info) -> None:
    """Tells the watching parent what the work is doing (nothing outside a child):
    phase "join", "compile", "run" or "explain" (with backend; done and total when
    counted; side and label: which side of a comparison). A PJRT plugin's name comes with
    the words that name it, for the message that says it ended the process."""
    if _pipe is None:
        return
    if info.get("backend") is not None:
        from hlogen import backends  # here, not at the top: start-up (the parent imports no hlogen)
        declared = backends.get(info["backend"])
        if declared.identity:  # a plugin: third-party native code
            info["words"] = declared.words
    _send(_STATUS, json.dumps(dict(info, phase=phase)).encode())


class _Frames(io.RawIOBase):
    """Bytes sent to the parent as frames of one tag, as they are written."""

    def __init__(self, tag: bytes):
        self._tag = tag

    def writable(self):
        return True

    def write(self, data) -> int:
        if data:
            _send(self._tag, bytes(data))
        return len(data)


def _stream(tag: bytes) -> io.TextIOWrapper:
    """The child's sys.stdout or sys.stderr: a text stream whose every write reaches
    the parent at once."""
    return io.TextIOWrapper(_Frames(tag), encoding="utf-8", errors="replace",
                            write_through=True)


def child(argument: str) -> None:
    """The child's whole life: `argument` is the JSON config the parent made."""
    global _pipe
    config = json.loads(argument)
    # here, not at the top: the parent's start-up imports no hlogen (the child's work does)
    from hlogen import native
    native.end_with_parent(config["parent"])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a native abort leaves no core file
    _pipe = config["pipe"]
    sys.stdout, sys.stderr = _stream(_STDOUT), _stream(_STDERR)
    reporting.DEBUG["on"] = config["debug"]
    module, _, function = config["work"].partition(":")
    work = reporting.reports_errors(getattr(importlib.import_module(module), function))
    try:
        if config["last_words"]:  # the parent passes on a signal: Stopped, where the work is
            with reporting.stopped_by_signals():
                work(**config["arguments"])
        else:
            work(**config["arguments"])
        code = exit_status.SUCCESS
    except SystemExit as e:
        code = exit_status.SUCCESS if e.code is None else e.code if isinstance(e.code, int) \
            else exit_status.FAILED
    except click.ClickException as e:
        e.show()
        code = e.exit_code
    _send(_DONE, str(code).encode())
    if config["distributed"]:
        sys.exit(code)  # jax's shutdown: a barrier of every process
    os._exit(code)  # everything is said: no teardown of jax
