"""Running a computation in a child process, so that a native abort is an error.

What XLA or the reference interpreter cannot do and hlogen can know in advance is
refused before running (hlogen.preflight). What depends on the data (a sort
comparator that is not a strict weak order, memory exhausted while running) can
still end the process with a signal: `hlogen run` compiles and runs in a child, and
reports a child's death as "the interpreter/XLA aborted (SIGABRT) while running
FILE" with exit status 1. The child leaves no core file.

The child is `python -m hlogen_cli.isolation DIR`: DIR holds the module as text
(with its locations), the argument arrays, and the request; the child writes the
result arrays and timings there, or the hlogen error it raised.
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

import numpy as np

import hlogen as hg
from hlogen.errors import ExecutionError, HlogenError


def run(comp: hg.Computation, arrays: list, backend, repeat: int, file: str):
    """Runs `comp` on `arrays` `repeat` times in a child; returns (leaf results, seconds per
    run, backend name). HlogenErrors of the child are raised again here."""
    with tempfile.TemporaryDirectory(prefix="hlogen-run-") as tmp:
        folder = pathlib.Path(tmp)
        (folder / "module.mlir").write_text(comp.as_text(debug_info=True))
        _write_arrays(folder / "inputs", arrays)
        (folder / "request.json").write_text(json.dumps({"backend": backend, "repeat": repeat,
                                                         "file": file}))
        child = subprocess.run([sys.executable, "-m", "hlogen_cli.isolation", str(folder)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if child.returncode < 0:
            name = signal.Signals(-child.returncode).name
            who = "the interpreter" if backend == "interpret" else "XLA"
            last = _last_line(child.stderr)
            raise ExecutionError(f"{who} aborted ({name}) while running {file}"
                                 f"{': ' + last if last else ''}")
        answer_path = folder / "answer.json"
        if not answer_path.exists():
            raise ExecutionError(f"running {file} failed (exit status {child.returncode}): "
                                 f"{_last_line(child.stderr)}")
        answer = json.loads(answer_path.read_text())
        if "error" in answer:
            raise getattr(hg, answer["error"], HlogenError)(answer["message"])
        return _read_arrays(folder / "outputs"), answer["times"], answer["backend"]


def _last_line(stderr: bytes) -> str:
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def _write_arrays(stem: pathlib.Path, arrays) -> None:
    """Arrays as raw bytes plus a manifest of hlogen element type names (npz cannot
    keep bf16, f8 or int4)."""
    manifest = []
    with open(f"{stem}.bin", "wb") as f:
        for a in arrays:
            a = np.asarray(a, order="C")  # (ascontiguousarray would make scalars 1-d)
            manifest.append({"type": hg.element_type(a.dtype).name, "shape": list(a.shape)})
            f.write(a.tobytes())
    pathlib.Path(f"{stem}.json").write_text(json.dumps(manifest))


def _read_arrays(stem: pathlib.Path) -> list:
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


def _child(folder: pathlib.Path) -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a native abort leaves no core file
    request = json.loads((folder / "request.json").read_text())
    try:
        comp = hg.load(folder / "module.mlir")
        comp.source = request["file"]  # messages name the user's file, not the copy
        exe = hg.compile(comp, backend=request["backend"])
        arrays = _read_arrays(folder / "inputs")
        times = []
        for _ in range(request["repeat"]):
            start = time.perf_counter()
            results = exe(*arrays)
            times.append(time.perf_counter() - start)
        flat = leaves(results if len(comp.result_shapes) > 1 else (results,))
        _write_arrays(folder / "outputs", [np.asarray(a) for a in flat])
        answer = {"times": times, "backend": exe.backend}
    except HlogenError as e:
        answer = {"error": type(e).__name__, "message": str(e)}
    (folder / "answer.json").write_text(json.dumps(answer))


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    _child(pathlib.Path(sys.argv[1]))
