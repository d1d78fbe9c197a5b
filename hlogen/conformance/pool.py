"""Worker processes that may die: a pool that runs tasks with a time limit each.

Each worker slot is a thread that owns one worker process (hlogen.conformance.worker),
which imports what this installation holds whatever the current folder has (a clone
named hlogen/, a numpy.py): started with `python -c`, which puts that folder first on
sys.path, it takes it off before importing anything. A worker that dies (a native
abort: SIGABRT, SIGSEGV, ...) or passes the time limit is recorded against the task it
was running, with the signal and the last lines it wrote to stderr, and replaced by a
fresh one; the run goes on. The workers end with the run: killed when the caller is
interrupted (a signal, an exception), and by the kernel when the caller's process dies
(hlogen.native.end_with_parent).
"""
from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

from hlogen import backends, native

_START_SECONDS = 120  # importing jax and starting XLA, on a loaded machine
_WORKER = native.CHILD_PATH + ("from hlogen.conformance import worker\n"
                               "worker.main(int(sys.argv[1]))")  # the pool's process id


def _environment() -> dict:
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([package_parent, *filter(None, [env.get("PYTHONPATH")])])
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    # one XLA thread per worker: workers are the parallelism (-j)
    flags = env.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        env["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    return env


class Worker:
    def __init__(self):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(os.getpid())], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, env=_environment())
        self._buffer = b""
        try:
            ready = self._read_line(_START_SECONDS)
        except EOFError:  # it died while starting
            ready = None
        if ready is None or not ready.get("ready"):
            self.kill()
            raise RuntimeError(f"a conformance worker did not start: {self.stderr_tail(0)}")

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
            tail = self.stderr_tail(offset)
            return {**task, "status": "crash", "seconds": round(time.monotonic() - start, 6),
                    "message": f"the worker {how} while running it" + (f": {tail}" if tail else "")}
        if record is None:
            self.kill()
            tail = self.stderr_tail(offset)
            return {**task, "status": "timeout", "seconds": round(time.monotonic() - start, 6),
                    "message": f"did not finish in {timeout:g} s; the worker was killed"
                               + (f": {tail}" if tail else "")}
        return record

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


def run_tasks(tasks: list, jobs: int, timeout: float, on_result, batch: int = 1) -> None:
    """Runs `tasks` (dicts: file, module, backend) on `jobs` workers; `on_result(record)`
    is called for each, in completion order, from one thread at a time. PJRT tasks go
    `batch` at a time to one worker (compiled together); when a batch crashes or times
    out, its tasks are run again one by one, so that the record names the module."""
    todo: queue.Queue = queue.Queue()
    pending = [t for t in tasks if not backends.compiles(t["backend"])]
    pjrt = [t for t in tasks if backends.compiles(t["backend"])]
    for i in range(0, len(pjrt), max(batch, 1)):
        group = pjrt[i:i + max(batch, 1)]
        todo.put({"batch": group, "explain": any(t.get("explain") for t in group)}
                 if len(group) > 1 else group[0])
    for t in pending:
        todo.put(t)
    lock = threading.Lock()
    failures: list = []
    working: set = set()  # the live workers, which an interrupted caller kills
    stopped = threading.Event()

    def drain():
        while True:
            try:
                todo.get_nowait()
            except queue.Empty:
                break

    def slot():
        worker = None
        try:
            while not stopped.is_set():
                try:
                    task = todo.get_nowait()
                except queue.Empty:
                    return
                if worker is None or not worker.alive:
                    if worker is not None:
                        worker.close()
                        working.discard(worker)
                    worker = Worker()
                    working.add(worker)
                limit = timeout * (2 if "batch" in task else 1)
                answer = worker.run(task, limit)
                if "batch" in task and answer.get("status") in ("crash", "timeout"):
                    for t in task["batch"]:  # again, one by one: the record names the module
                        todo.put(t)
                    continue
                with lock:
                    if stopped.is_set():  # the caller has gone: nobody to tell
                        return
                    for record in answer.get("records", [answer]):
                        on_result(record)
        except BaseException as e:  # the pool cannot work: stop the others too
            failures.append(e)
            drain()
        finally:
            if worker is not None:
                worker.close()
                working.discard(worker)

    threads = [threading.Thread(target=slot, daemon=True)
               for _ in range(max(1, min(jobs, todo.qsize())))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:  # interrupted (a signal, Ctrl-C): no worker outlives the caller
        stopped.set()
        drain()
        for worker in list(working):
            worker.kill()
        raise
    if failures:
        raise failures[0]
