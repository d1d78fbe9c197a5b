"""Running computations in a child process that may die: XLA ends the process on some
options (disabling a pass it cannot do without, such as copy-insertion) and on some
modules (a CHECK of its own), which must not end the caller's; and a candidate of the
reducer or a fuzzed program may run too long.

`Children` keeps one child, a hlogen.native.Worker, and runs any computation on any
backend in it: a task names the module and the inputs (files written once each) and the
options; the child reads the module as the caller's Computation wrote it (bytecode),
compiles and runs it through hlogen.differential.comparison's `run_on` and writes the
results to a file. An error the backend reports comes back as the same
hg.HlogenError class; a child that dies or passes its time is `Died` (an
ExecutionError), and replaced for the next run. `IsolatedRunner` is one computation with
its inputs on one backend, run again and again with different options (bisection).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import sys
import tempfile

from jaxlib.mlir import ir

from hlogen import backends, errors, mlir, native
from hlogen.computation import Computation
from hlogen.differential.comparison import run_on
from hlogen.errors import ExecutionError, HlogenError

_SERVE = "from hlogen.differential import isolated; isolated.serve()"
# the errors a child reports, by class name (what it cannot name is an HlogenError)
_ERRORS = {cls.__name__: cls for cls in (errors.HlogenError, errors.InputError,
                                         errors.ShapeError, errors.UnsupportedError,
                                         errors.ExecutionError)}


class Died(ExecutionError):
    """The child ended while running (`how` "crash", with the `signal`'s name when one
    ended it) or passed its time (`how` "timeout")."""

    def __init__(self, message: str, how: str, signal: str | None = None):
        super().__init__(message)
        self.how, self.signal = how, signal


class Children:
    """Runs computations on backends in one child process at a time (see the module
    docstring); `seconds` bounds each run, unless a run gives its own."""

    def __init__(self, seconds: float = 600):
        self.seconds = seconds
        self._folder = tempfile.TemporaryDirectory(prefix="hlogen-isolated-")
        self._worker = None
        self._written: dict = {}  # kind -> (digest, path): the last module and inputs
        self.runs = 0

    def run(self, backend: str, computation: Computation, inputs, xla_options: tuple = (),
            seconds: float | None = None) -> list:
        """The result leaves of `computation` on `backend` with `inputs`; the error the
        backend reports, or Died."""
        if self._worker is None or not self._worker.alive:
            if self._worker is not None:
                self._worker.close()
            try:
                self._worker = native.Worker(_SERVE)
            except RuntimeError as e:  # it died or hung while starting
                raise ExecutionError(f"{computation.name}: {e}") from None
        self.runs += 1
        out = os.path.join(self._folder.name, f"results{self.runs}.pickle")
        task = {"module": self._write("module", computation.to_bytecode()),
                "source": computation.source,
                "inputs": self._write("inputs", pickle.dumps(list(inputs))),
                "backend": backend, "options": list(xla_options), "out": out}
        try:
            answer = self._worker.run(task, self.seconds if seconds is None else seconds)
        except BaseException:  # stopped mid-run (a signal): a busy worker is not waited for
            self._worker.kill()
            raise
        if "status" in answer:  # the worker crashed or ran out of time
            raise Died(f"{computation.name} on {backends.get(backend).words} ({backend}): "
                       f"{answer['message']}", answer["status"], answer.get("signal"))
        if "error" in answer:
            raise _ERRORS.get(answer.get("class"), HlogenError)(answer["error"])
        with open(out, "rb") as f:
            results = pickle.load(f)
        os.unlink(out)
        return results

    def _write(self, kind: str, data: bytes) -> str:
        """A file holding `data`, named by its digest (the child keeps what it read by
        path); the previous file of this kind is removed."""
        digest = hashlib.sha256(data).hexdigest()[:32]
        last = self._written.get(kind)
        if last is not None and last[0] == digest:
            return last[1]
        path = os.path.join(self._folder.name, f"{kind}-{digest}")
        with open(path, "wb") as f:
            f.write(data)
        if last is not None:
            os.unlink(last[1])
        self._written[kind] = (digest, path)
        return path

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._folder.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class IsolatedRunner:
    """Runs `computation` with `inputs` on `backend` in a child process: `run(xla_options)`
    gives the result leaves, or raises ExecutionError when XLA refuses the options, fails,
    ends the process or passes `seconds`."""

    def __init__(self, backend: str, computation: Computation, inputs, seconds: float = 600):
        self.backend, self.computation, self.inputs = backend, computation, list(inputs)
        self._children = Children(seconds)

    @property
    def runs(self) -> int:
        return self._children.runs

    def run(self, xla_options: tuple = ()) -> list:
        return self._children.run(self.backend, self.computation, self.inputs, xla_options)

    def close(self) -> None:
        self._children.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def serve() -> None:
    """The child: answers each task line with {"ok": true} or {"error": message, "class":
    the hg.HlogenError's class name}. It keeps the last module it read."""
    answers = native.answer_channel()
    answers.write(json.dumps({"ready": True}) + "\n")
    kept: tuple = (None, None)  # (path, module)
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        try:
            if kept[0] != task["module"]:  # bytecode a Computation wrote: parsed as it is
                with open(task["module"], "rb") as f:
                    module = ir.Module.parse(f.read(), context=mlir.context())
                kept = (task["module"], Computation(module, task["source"]))
            with open(task["inputs"], "rb") as f:
                inputs = pickle.load(f)
            results = run_on(task["backend"], kept[1], inputs, [tuple(o) for o in task["options"]])
            with open(task["out"], "wb") as f:
                pickle.dump(results, f)
            answer = {"ok": True}
        except HlogenError as e:
            answer = {"error": str(e), "class": type(e).__name__}
        answers.write(json.dumps(answer) + "\n")
