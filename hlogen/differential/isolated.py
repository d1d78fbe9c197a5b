"""Running a computation in a child process that may die, with XLA options that change
from run to run: XLA ends the process on some options (disabling a pass it cannot do
without, such as copy-insertion), which must not end the caller's.

The child is a hlogen.native.Worker; a task names the module and inputs (files written
once) and the options; the child compiles and runs through hlogen.differential.compare's
`run_on` and writes the results to a file. A child that dies is replaced for the next run.
"""
from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile

from hlogen import backends, loading, native
from hlogen.computation import Computation
from hlogen.differential.compare import run_on
from hlogen.errors import ExecutionError, HlogenError

_SERVE = "from hlogen.differential import isolated; isolated.serve()"


class IsolatedRunner:
    """Runs `computation` with `inputs` on `backend` in a child process: `run(xla_options)`
    gives the result leaves, or raises ExecutionError when XLA refuses the options, fails,
    ends the process or passes `seconds`."""

    def __init__(self, backend: str, computation: Computation, inputs, seconds: float = 600):
        self.backend, self.seconds = backend, seconds
        self.name = computation.name
        self._folder = tempfile.TemporaryDirectory(prefix="hlogen-isolated-")
        self._module = os.path.join(self._folder.name, "module.mlirbc")
        self._inputs = os.path.join(self._folder.name, "inputs.pickle")
        with open(self._module, "wb") as f:
            f.write(computation.to_bytecode())
        with open(self._inputs, "wb") as f:
            pickle.dump(list(inputs), f)
        self._worker = None
        self.runs = 0

    def run(self, xla_options: tuple = ()) -> list:
        if self._worker is None or not self._worker.alive:
            if self._worker is not None:
                self._worker.close()
            try:
                self._worker = native.Worker(_SERVE)
            except RuntimeError as e:  # it died or hung while starting
                raise ExecutionError(f"{self.name}: {e}") from None
        self.runs += 1
        out = os.path.join(self._folder.name, f"results{self.runs}.pickle")
        answer = self._worker.run({"module": self._module, "inputs": self._inputs,
                                   "backend": self.backend, "options": list(xla_options),
                                   "out": out}, self.seconds)
        if "status" in answer:  # the worker crashed or ran out of time
            raise ExecutionError(f"{self.name} on {backends.get(self.backend).words} "
                                 f"({self.backend}): {answer['message']}")
        if "error" in answer:
            raise ExecutionError(answer["error"])
        with open(out, "rb") as f:
            results = pickle.load(f)
        os.unlink(out)
        return results

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
        self._folder.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def serve() -> None:
    """The child: answers each task line with {"ok": true} or {"error": message}."""
    answers = native.answer_channel()
    answers.write(json.dumps({"ready": True}) + "\n")
    modules: dict = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        try:
            module = modules.get(task["module"]) or loading.load(task["module"])
            modules[task["module"]] = module
            with open(task["inputs"], "rb") as f:
                inputs = pickle.load(f)
            results = run_on(task["backend"], module, inputs, [tuple(o) for o in task["options"]])
            with open(task["out"], "wb") as f:
                pickle.dump(results, f)
            answer = {"ok": True}
        except HlogenError as e:
            answer = {"error": str(e)}
        answers.write(json.dumps(answer) + "\n")
