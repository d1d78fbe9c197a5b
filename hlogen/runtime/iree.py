"""Compiling and running computations with IREE (the extra hlogen[iree]): a second compiler,
independent of XLA (its own MLIR pipeline and LLVM code generation), on the CPU.

IREE ends the process on some modules and data (the shared notes' IREE_NOTES.md): its
compiler by SIGFPE or SIGSEGV, its runtime by SIGSEGV on an out-of-bounds scatter index.
So nothing of it runs in the caller's process:
- compiling runs the `iree-compile` executable (found as iree.compiler's own tools find it)
  under a time limit, with the flags of FLAGS (f64 is never demoted to f32) and the
  backend's own (`iree[--iree-opt-level=O2]`, checked against the flags iree-compile
  knows); iree.compiler.compile_str has no time limit, and its in-process API dies with
  the compiler;
- running happens in one worker process kept for the life of this one (a
  hlogen.native.Worker serving `serve` below), which loads each executable (a .vmfb) once;
- a signal in either is an ExecutionError naming it, and the next run starts a new worker.
The module IREE compiles is hlogen's prepared one (hlogen.runtime.execution.prepare):
checked against the declaration's refusals, rewritten, tuples flattened, and the element
types iree.runtime cannot pass (Backend.passable, readable) carried as bytes and
converted inside. Executables are cached in memory, and on disk when a cache is given
(hlogen.runtime.cache; the command line's), by the module, hlogen's code, the flags and
IREE's version.
"""
from __future__ import annotations

import collections
import difflib
import functools
import importlib.metadata
import json
import os
import pickle
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from hlogen import dynamism, native, sharding
from hlogen.backends import Backend
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, InputError, UnsupportedError
from hlogen.runtime.arrays import (check_signature, flatten_arguments, native as native_order,
                                   replica_lists, structure_results)
from hlogen.runtime.cache import ExecutableCache
from hlogen.runtime.execution import carriers, check_results, prepare

# What every compile gets: StableHLO in, the CPU's code out, f64 kept (IREE demotes it to
# f32 by default, iree-org/iree#15830: every f64 result would silently be an f32 one)
FLAGS = ("--iree-input-type=stablehlo", "--iree-hal-target-backends=llvm-cpu",
         "--iree-llvmcpu-target-cpu=host", "--iree-input-demote-f64-to-f32=false",
         "--mlir-print-op-on-diagnostic=false")
COMPILE_SECONDS = float(os.environ.get("HLOGEN_IREE_COMPILE_SECONDS", 300))
RUN_SECONDS = float(os.environ.get("HLOGEN_IREE_RUN_SECONDS", 600))
_KEPT = 64  # executables kept in memory (and loaded in the worker)
_memory: collections.OrderedDict = collections.OrderedDict()
_lock = threading.Lock()


@functools.cache
def tool() -> str | None:
    """The iree-compile executable of the installed iree-base-compiler, or None."""
    try:
        from iree.compiler.tools.binaries import find_tool  # optional dependency (hlogen[iree])
        return find_tool("iree-compile")
    except Exception:  # not installed, or its tools are missing
        return None


@functools.cache
def version() -> str:
    """IREE's compiler and runtime versions: what keys its executables."""
    return (f"iree-base-compiler {importlib.metadata.version('iree-base-compiler')}, "
            f"iree-base-runtime {importlib.metadata.version('iree-base-runtime')}")


def available(backend: Backend) -> bool:
    return tool() is not None


@functools.cache
def known_flags() -> frozenset:
    """The flags iree-compile knows (its hidden ones included)."""
    listed = subprocess.run([tool(), "--help-list-hidden"], capture_output=True, text=True,
                            timeout=60).stdout
    return frozenset(re.findall(r"^\s+(--[\w.-]+)", listed, re.M))


def check_flags(flags: tuple) -> None:
    """InputError naming a flag iree-compile does not know (and the nearest it does)."""
    for flag in flags:
        name = flag.split("=", 1)[0]
        if name not in known_flags():
            near = difflib.get_close_matches(name, sorted(known_flags()), 3)
            raise InputError(f"iree-compile has no flag {name}"
                             + (f" (did you mean {', '.join(near)}?)" if near else "")
                             + " (iree-compile --help-list-hidden lists them)")


def compile(computation: Computation, backend: Backend, disk_cache=None, num_replicas: int = 1,
            xla_options: tuple = (), num_partitions: int | None = None) -> "IreeExecutable":
    """IREE's executable of `computation` (hlogen.runtime's table row). XLA's options are
    refused: IREE's own flags go in the backend's name (iree[--iree-opt-level=O2]). A
    sharded module runs as its global program (hlogen.sharding), as on the interpreter;
    a shard_map one is refused (its body is per partition)."""
    if xla_options:
        raise UnsupportedError(f"{backend.words} takes no XLA options; its own compiler flags "
                               f"go in the backend's name: iree[--FLAG=VALUE,...]")
    if num_replicas != 1:
        raise UnsupportedError(f"num_replicas={num_replicas}: {backend.words} runs one replica "
                               f"(its CPU runtime implements no collectives)")
    if tool() is None:
        raise UnsupportedError(f"backend {backend.name!r} cannot be used: iree-compile is not "
                               f"found (install hlogen[iree])")
    check_flags(backend.flags)
    where = computation.source or computation.name
    partitioning = sharding.partitions_to_compile(computation.module, num_partitions, where)
    if partitioning is not None:
        computation = sharding.global_program(computation, backend.words)
    exe = IreeExecutable(computation, backend, disk_cache)
    exe.partitioning = partitioning
    return exe


class IreeExecutable:
    """An IREE executable (hlogen.runtime.executable.Executable): numpy arrays in, numpy
    arrays out, run in the worker process."""

    num_replicas = 1
    local_replicas = [0]
    devices: list = []  # it runs in a worker process, on the host
    partitioning = None  # hlogen.sharding's facts of a sharded module (run as its global program)

    def how_it_runs(self) -> str:
        if self.partitioning is None:
            return ""
        return (f"the global program of a module sharded {self.partitioning.num_partitions} "
                f"ways, unpartitioned (its sharding annotations dropped)")

    def __init__(self, computation: Computation, backend: Backend, disk_cache=None):
        check_signature(computation)
        self.computation = computation
        self.declaration = backend
        self.backend = backend.name
        self.flags = (*FLAGS, *backend.flags)
        self.key = (computation.fingerprint, backend.name, version(), self.flags)
        self.cache_outcome = "off" if disk_cache is None else "miss"
        start = time.perf_counter()
        with _lock:
            found = _memory.get(self.key)
            if found is not None:
                _memory.move_to_end(self.key)
        if found is None:
            found = self._load_or_compile(disk_cache)
            with _lock:
                _memory[self.key] = found
                while len(_memory) > _KEPT:
                    _memory.popitem(last=False)
        elif disk_cache is not None:
            self.cache_outcome = "hit"
        self._prepared, self.vmfb = found
        self.compile_seconds = time.perf_counter() - start

    def _load_or_compile(self, disk_cache):
        key = None
        if disk_cache is not None and not dynamism.present(self.computation.module, cached=True):
            # keyed by the module before hlogen's pipeline, hlogen's code and IREE's flags
            # and version: a hit skips the pipeline (the checks were made when it was stored)
            disk_cache = _in_iree_folder(disk_cache)
            key = disk_cache.key(self.computation.fingerprint, " ".join(self.flags), version(),
                                 self.backend, "llvm-cpu host")
            payload = disk_cache.load(key, version())
            if payload is not None:
                self.cache_outcome = "hit"
                return carriers(self.computation, self.declaration), payload
        prepared = prepare(self.computation, self.declaration)
        vmfb = compile_text(prepared.computation.as_text(), self.flags, self.computation.name)
        if key is not None:
            disk_cache.store(key, vmfb, jaxlib=version(), backend=self.backend,
                             module=self.computation.name)
        return prepared, vmfb

    def refusal(self, what: str) -> str | None:
        return (f"{self.declaration.words} is not XLA: it gives no {what} (hlogen gives XLA's "
                f"for the PJRT backends)")

    def __repr__(self) -> str:
        return f"<Executable {self.computation.signature()} on {self.backend}>"

    def __call__(self, *args):
        flat = [native_order(np.asarray(a)) for a in flatten_arguments(self.computation, args)]
        worker = _worker()
        with worker.lock:  # one task at a time on its pipe
            raw = worker.run(self, self._prepared.write_arguments(flat))
        results = self._prepared.read_results(raw)
        check_results(self.computation, self.backend, results, self._prepared.cut)
        return structure_results(self.computation.result_shapes, results)

    def run_replicated(self, per_replica_args) -> list:
        return [self(*args) for args in replica_lists(self, per_replica_args)]


def _in_iree_folder(cache) -> ExecutableCache:
    """The disk cache `cache`'s IREE entries: a folder beside XLA's executables (whose
    listing and validity go by jaxlib's version)."""
    if cache.folder.name == "iree":
        return cache
    found = ExecutableCache(cache.directory)
    found.folder = cache.directory / "iree"
    return found


def _first_errors(said: str, lines: int = 3) -> str:
    found = [line.strip() for line in said.splitlines() if "error" in line]
    return " | ".join(found[:lines] or [line.strip() for line in said.splitlines()][-lines:])


def compile_text(text: str, flags: tuple, name: str) -> bytes:
    """IREE's executable (a .vmfb) of the StableHLO module `text`, compiled by iree-compile
    in a child process under COMPILE_SECONDS: ExecutionError where it fails, ends by a
    signal or runs out of time."""
    with tempfile.TemporaryDirectory(prefix="hlogen-iree-") as folder:
        source, out = os.path.join(folder, "module.mlir"), os.path.join(folder, "module.vmfb")
        with open(source, "w") as f:
            f.write(text)
        command = native.ending_with_parent([tool(), *flags, source, "-o", out])
        try:
            done = subprocess.run(command, capture_output=True, text=True,
                                  timeout=COMPILE_SECONDS)
        except subprocess.TimeoutExpired:
            raise ExecutionError(f"{name}: iree-compile did not finish in {COMPILE_SECONDS:g} s "
                                 f"(HLOGEN_IREE_COMPILE_SECONDS sets the limit)") from None
        if done.returncode < 0:
            raise ExecutionError(f"{name}: iree-compile ended by "
                                 f"{signal.Signals(-done.returncode).name} compiling it (an "
                                 f"IREE bug; hlogen's process is unharmed)")
        if done.returncode != 0:
            raise ExecutionError(f"{name}: IREE cannot compile it: "
                                 f"{_first_errors(done.stderr)}")
        with open(out, "rb") as f:
            return f.read()


# -- the worker process ----------------------------------------------------------------------

_SERVE = "from hlogen.runtime import iree; iree.serve()"


class _Worker:
    """The worker process of this one (started on the first run, again after it died),
    and the folder of the files it reads."""

    def __init__(self):
        self._worker = None
        self._folder = tempfile.TemporaryDirectory(prefix="hlogen-iree-runs-")
        self._runs = 0
        self._written: dict = {}  # vmfb key -> path
        self.lock = threading.Lock()

    def run(self, exe: IreeExecutable, arrays: list) -> list:
        if self._worker is None or not self._worker.alive:
            if self._worker is not None:
                self._worker.close()
                self._written.clear()  # (the files stay: a new worker loads them again)
            try:
                self._worker = native.Worker(_SERVE)
            except RuntimeError as e:
                raise ExecutionError(f"{exe.computation.name}: {e}") from None
        self._runs += 1
        vmfb = self._written.get(exe.key)
        if vmfb is None:
            vmfb = self._written[exe.key] = os.path.join(self._folder.name,
                                                         f"module{len(self._written)}.vmfb")
            with open(vmfb, "wb") as f:
                f.write(exe.vmfb)
        inputs = os.path.join(self._folder.name, f"inputs{self._runs}.pickle")
        out = os.path.join(self._folder.name, f"results{self._runs}.pickle")
        with open(inputs, "wb") as f:
            pickle.dump(arrays, f)
        try:
            answer = self._worker.run({"vmfb": vmfb, "inputs": inputs, "out": out}, RUN_SECONDS)
        except BaseException:  # stopped mid-run: a busy worker is not waited for
            self._worker.kill()
            raise
        finally:
            os.unlink(inputs)
        name = f"{exe.computation.name} on {exe.declaration.words} ({exe.backend})"
        if answer.get("status") == "crash":
            how = f"by {answer['signal']}" if answer.get("signal") else "unexpectedly"
            raise ExecutionError(f"{name}: IREE's runtime ended its worker process {how} while "
                                 f"running it (an IREE bug, e.g. a scatter index out of bounds; "
                                 f"hlogen's process is unharmed)")
        if answer.get("status") == "timeout":
            raise ExecutionError(f"{name}: did not finish in {RUN_SECONDS:g} s "
                                 f"(HLOGEN_IREE_RUN_SECONDS sets the limit); the worker was killed")
        if "error" in answer:
            raise ExecutionError(f"{name} failed: {answer['error']}")
        with open(out, "rb") as f:
            results = pickle.load(f)
        os.unlink(out)
        return results


_the_worker: _Worker | None = None


def _worker() -> _Worker:
    global _the_worker
    with _lock:
        if _the_worker is None:
            _the_worker = _Worker()
        return _the_worker


def serve() -> None:
    """The worker: loads each .vmfb once (by path) into a context on IREE's local-task
    driver, runs its `main` on the pickled inputs and pickles the results."""
    import iree.runtime as rt  # optional dependency (hlogen[iree]), in the worker only
    answers = native.answer_channel()
    config = rt.Config("local-task")
    loaded: collections.OrderedDict = collections.OrderedDict()  # path -> main
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        try:
            main = loaded.get(task["vmfb"])
            if main is None:
                context = rt.SystemContext(config=config)
                with open(task["vmfb"], "rb") as f:
                    module = rt.VmModule.copy_buffer(context.instance, f.read())
                context.add_vm_module(module)  # (named as the MLIR module was)
                main = loaded[task["vmfb"]] = context.modules[module.name]["main"]
                while len(loaded) > _KEPT:
                    loaded.popitem(last=False)
            with open(task["inputs"], "rb") as f:
                inputs = pickle.load(f)
            raw = main(*inputs)
            raw = raw if isinstance(raw, (tuple, list)) else () if raw is None else (raw,)
            results = [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in raw]
            with open(task["out"], "wb") as f:
                pickle.dump(results, f)
            answer = {"ok": True}
        except Exception as e:  # IREE's runtime reports what it refuses as exceptions
            answer = {"error": str(e).strip().splitlines()[0] if str(e).strip() else repr(e)}
        answers.write(json.dumps(answer) + "\n")
