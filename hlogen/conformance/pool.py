"""Worker processes that may die: a pool that runs tasks with a time limit each.

Each worker slot is a thread that owns one worker process (a hlogen.native.Worker
running hlogen.conformance.worker), which imports what this installation holds whatever
the current folder has (a clone named hlogen/, a numpy.py): started with `python -c`,
which puts that folder first on sys.path, it takes it off before importing anything. A
worker that dies (a native abort: SIGABRT, SIGSEGV, ...) or passes the time limit is
recorded against the task it was running, with the signal and the last lines it wrote
to stderr, and replaced by a fresh one; the run goes on. The workers end with the run: killed when the caller is
interrupted (a signal, an exception), and by the kernel when the caller's process dies
(hlogen.native.end_with_parent).
"""
from __future__ import annotations

import os
import queue
import threading

from hlogen import backends, native

_WORKER = "from hlogen.conformance import worker; worker.main()"


def _environment() -> dict:
    env = {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3")}
    # one XLA thread per worker: workers are the parallelism (-j)
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        env["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false").strip()
    return env


def run_tasks(tasks: list, jobs: int, timeout: float, on_result, batch: int = 1) -> None:
    """Runs `tasks` (dicts: file, module, backend) on `jobs` workers; `on_result(record)`
    is called for each, in completion order, from one thread at a time. PJRT tasks go
    `batch` at a time to one worker (compiled together); when a batch crashes or times
    out, its tasks are run again one by one, so that the record names the module."""
    todo: queue.Queue = queue.Queue()
    compiled = {name: backends.compiles(name) for name in {t["backend"] for t in tasks}}  # once
    pending = [t for t in tasks if not compiled[t["backend"]]]
    pjrt = [t for t in tasks if compiled[t["backend"]]]
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
                    worker = native.Worker(_WORKER, _environment())
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
