"""Compiling and running in a child process, so that a native abort is an error.

What XLA or the reference interpreter cannot do and hlogen can know in advance is
refused before running (hlogen.preflight). What depends on the data (a sort
comparator that is not a strict weak order, memory exhausted while running) can
still end the process with a signal: `hlogen run` and `hlogen compile` compile and
run in a child, and report a child's death as "the interpreter/XLA aborted (SIGABRT)
while running FILE" with exit status 1. The child leaves no core file.

The child is `python -m hlogen_cli.isolation [BACKEND...]`. It is started first
(`start`), so that it imports jax and starts the backends while the parent reads and
checks the module; then it serves requests: a folder holding the module as text (with
its locations), the argument arrays and request.json, whose path it reads from stdin;
it writes answer.json (and result arrays) there and a line on stdout. One child serves
several requests (a run, then --explain).
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

_DONE = "hlogen-isolation-done"


class Child:
    """A started child process; `ask` sends it one request."""

    def __init__(self, warm: list):
        self._stderr = tempfile.TemporaryFile()
        self._tmp = tempfile.TemporaryDirectory(prefix="hlogen-run-")
        self._requests = 0
        self._progress_fd = None
        pass_fds = ()
        if sys.stderr.isatty():  # a progress bar on the parent's terminal
            self._progress_fd = os.dup(2)
            pass_fds = (self._progress_fd,)
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "hlogen_cli.isolation", *[w for w in warm if w]],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env,
            pass_fds=pass_fds)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        # Every answer is in: the child is killed rather than left to tear jax down.
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self._progress_fd is not None:
            os.close(self._progress_fd)
            self._progress_fd = None
        self._stderr.close()
        self._tmp.cleanup()

    def folder(self, comp, arrays, file: str) -> pathlib.Path:
        """A folder with the module and the arguments, for requests about them."""
        folder = pathlib.Path(self._tmp.name) / f"m{self._requests}"
        folder.mkdir()
        (folder / "module.mlir").write_text(comp.as_text(debug_info=True))
        write_arrays(folder / "inputs", arrays)
        (folder / "file.txt").write_text(file)
        return folder

    def ask(self, folder: pathlib.Path, request: dict, who: str, file: str) -> dict:
        """Sends `request` about the module in `folder`; returns the answer. HlogenErrors
        of the child are raised again here; the child's death is an ExecutionError."""
        import hlogen as hg
        from hlogen.errors import ExecutionError, HlogenError
        self._requests += 1
        answer_path = folder / f"answer{self._requests}.json"
        request = dict(request, answer=str(answer_path), progress_fd=self._progress_fd)
        (folder / "request.json").write_text(json.dumps(request))
        try:
            self._proc.stdin.write(f"{folder}\n".encode())
            self._proc.stdin.flush()
        except OSError:
            pass  # the child is gone: its status says why
        while True:
            line = self._proc.stdout.readline()
            if not line or line.decode(errors="replace").strip() == _DONE:
                break
        if not answer_path.exists():
            returncode = self._proc.wait()
            self._stderr.seek(0)
            last = _last_line(self._stderr.read())
            if returncode < 0:
                name = signal.Signals(-returncode).name
                raise ExecutionError(f"{who} aborted ({name}) while running {file}"
                                     f"{': ' + last if last else ''}")
            raise ExecutionError(f"running {file} failed (exit status {returncode}): {last}")
        answer = json.loads(answer_path.read_text())
        if answer.get("error") == "internal":
            raise RuntimeError(answer["message"])
        if "error" in answer:
            raise getattr(hg, answer["error"], HlogenError)(answer["message"])
        return answer


def start(backends) -> Child:
    """Starts a child that warms up `backends` (PJRT platforms; "interpret" needs none)."""
    return Child([b for b in backends if b not in (None, "interpret")])


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def write_arrays(stem: pathlib.Path, arrays) -> None:
    """Arrays as raw bytes plus a manifest of hlogen element type names (npz cannot
    keep bf16, f8 or int4)."""
    import numpy as np
    import hlogen as hg
    manifest = []
    with open(f"{stem}.bin", "wb") as f:
        for a in arrays:
            a = np.asarray(a, order="C")  # (ascontiguousarray would make scalars 1-d)
            manifest.append({"type": hg.element_type(a.dtype).name, "shape": list(a.shape)})
            f.write(a.tobytes())
    pathlib.Path(f"{stem}.json").write_text(json.dumps(manifest))


def read_arrays(stem: pathlib.Path) -> list:
    import numpy as np
    import hlogen as hg
    manifest = json.loads(pathlib.Path(f"{stem}.json").read_text())
    data = pathlib.Path(f"{stem}.bin").read_bytes()
    arrays, offset = [], 0
    for entry in manifest:
        dtype = hg.element_type(entry["type"]).dtype
        count = int(np.prod(entry["shape"], dtype=np.int64))
        arrays.append(np.frombuffer(data, dtype, count, offset).reshape(entry["shape"]).copy())
        offset += count * dtype.itemsize
    return arrays


def leaves(results) -> list:
    out = []
    for r in results:
        out.extend(leaves(r) if isinstance(r, tuple) else [r])
    return out


# -- the child ------------------------------------------------------------------------------

def _compile(comp, backend, cache_dir):
    import hlogen as hg
    if backend == "interpret":
        exe = hg.compile(comp, backend="interpret")
        exe.cache_outcome, exe.compile_seconds = "off", 0.0
        return exe
    from hlogen.runtime import pjrt
    from hlogen.runtime.cache import ExecutableCache
    return pjrt.compile(comp, backend, ExecutableCache(cache_dir) if cache_dir else None)


def _progress(fd, done, total, label):
    if fd is None or total < 2:
        return
    width = 30
    filled = width * done // total
    line = f"\r{label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}"
    os.write(fd, (line if done < total else "\r" + " " * len(line) + "\r").encode())


def _serve(folder: pathlib.Path) -> dict:
    import numpy as np
    import hlogen as hg
    request = json.loads((folder / "request.json").read_text())
    comp = hg.load(folder / "module.mlir")
    comp.source = (folder / "file.txt").read_text()  # messages name the user's file
    arrays = read_arrays(folder / "inputs")
    action = request["action"]
    if action == "run":
        runs = []
        for k, backend in enumerate(request["backends"]):
            exe = _compile(comp, backend, request.get("cache"))
            times, total = [], request["repeat"]
            for i in range(total):
                start = time.perf_counter()
                results = exe(*arrays)
                times.append(time.perf_counter() - start)
                _progress(request.get("progress_fd"), i + 1, total, f"running on {exe.backend}")
            flat = leaves(results if len(comp.result_shapes) > 1 else (results,))
            write_arrays(folder / f"outputs{k}", [np.asarray(a) for a in flat])
            runs.append({"backend": exe.backend, "times": times, "cache": exe.cache_outcome,
                         "compile_seconds": exe.compile_seconds})
        return {"runs": runs}
    if action == "explain":
        from hlogen.conformance import first_divergence
        found = first_divergence(comp, arrays, backend=request["backend"] or "cpu",
                                 max_ulp=request["max_ulp"], atol=request["atol"])
        return {"explain": str(found) if found else None}
    if action == "compile":
        exe = _compile(comp, request["backend"], request.get("cache"))
        answer = {"backend": exe.backend, "cache": exe.cache_outcome,
                  "compile_seconds": exe.compile_seconds}
        if request.get("hlo"):
            (folder / "optimized.hlo").write_text(exe.optimized_hlo())
        if request.get("cost"):
            answer["cost"] = exe.cost_analysis()
        if request.get("serialize"):
            (folder / "executable.bin").write_bytes(exe.serialize())
        return answer
    raise ValueError(f"unknown request {action!r}")


def _child(warm: list) -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a native abort leaves no core file
    import traceback
    import hlogen  # noqa: F401 - imported while the parent reads the module
    from hlogen.errors import HlogenError
    if warm:
        try:
            from hlogen.runtime import pjrt
            for backend in warm:
                pjrt.client(backend)
        except HlogenError:
            pass  # said again, where it matters, when the request comes
    for line in sys.stdin:
        folder = pathlib.Path(line.strip())
        request = json.loads((folder / "request.json").read_text())
        try:
            answer = _serve(folder)
        except HlogenError as e:
            answer = {"error": type(e).__name__, "message": str(e)}
        except Exception:
            answer = {"error": "internal", "message": traceback.format_exc()}
        pathlib.Path(request["answer"]).write_text(json.dumps(answer))
        sys.stdout.write(_DONE + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    _child(sys.argv[1:])
