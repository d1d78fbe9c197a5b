"""Where the time goes: jax's profiler around compiling and running, read back per op.

    with profile.trace("out/prof") as found:
        exe = hg.compile(comp)
        exe(x)
    print(profile.table(found.ops(exe)))

The trace is jax's (`jax.profiler.trace`): a Perfetto trace (`perfetto_trace.json.gz`,
opened by ui.perfetto.dev) and an XPlane (`*.xplane.pb`, opened by TensorBoard's profile
plugin) under DIRECTORY/plugins/profile/RUN/. XLA CPU's runtime records one event per
thunk it runs, named after its HLO instruction (`args.hlo_op`, `args.hlo_module`):
`ops` adds them up per instruction, each op's own time (a while loop's time without the
ops of its body, which are counted themselves), so that the shares add up to 100%.
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import os
import pathlib
import re

from hlogen.errors import ExecutionError, InputError
from hlogen.runtime import _jaxlib, inspection

TRACE_NAME = "perfetto_trace.json.gz"


@dataclasses.dataclass
class OpTime:
    name: str        # the HLO instruction: "broadcast_add_fusion", "while.1"
    kind: str        # its opcode, "fusion Loop" for a loop fusion
    calls: int
    seconds: float   # its own time: nested ops' time left out
    share: float     # of all the ops' time, 0..1


class Trace:
    """A trace written by `trace`: `.file` (the Perfetto trace), `.directory`."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        self.file: pathlib.Path | None = None

    def ops(self, exe) -> list[OpTime]:
        """The ops of `exe` (a PJRT executable) that ran while tracing, longest first."""
        return op_times(self.file, exe)


@contextlib.contextmanager
def trace(directory):
    """Traces the block with jax's profiler into `directory` (made if missing)."""
    path = pathlib.Path(directory)
    if path.exists() and not path.is_dir():
        raise InputError(f"{directory}: the profile goes into a folder; this is a file")
    before = set(path.glob(f"plugins/profile/*/{TRACE_NAME}"))
    found = Trace(path)
    with _jaxlib.profiler_trace(str(path)):
        yield found
    written = sorted(set(path.glob(f"plugins/profile/*/{TRACE_NAME}")) - before,
                     key=os.path.getmtime)
    if not written:
        raise ExecutionError(f"jax's profiler wrote no {TRACE_NAME} under {directory}")
    found.file = written[-1]


def events(file) -> list[dict]:
    """The complete events ("ph": "X") of a Perfetto/Chrome JSON trace (gzipped or not)."""
    opener = gzip.open if str(file).endswith(".gz") else open
    try:
        with opener(file, "rt") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise InputError(f"{file}: not a JSON trace: {e}") from None
    found = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in found if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]


def op_times(file, exe) -> list[OpTime]:
    """Each HLO instruction of `exe`'s module that ran in the trace `file`: calls, own
    time and share, longest first."""
    modules = {m.name for m in exe.hlo_modules()}
    kinds = inspection.instruction_kinds(exe)
    ran = sorted((e for e in events(file) if e.get("args", {}).get("hlo_module") in modules
                  and "hlo_op" in e.get("args", {})),
                 key=lambda e: (e.get("pid"), e.get("tid"), e["ts"], -e["dur"]))
    own: dict = {}
    calls: dict = {}
    open_ops: list = []  # (end, name) of the ops the current one runs inside, per thread
    thread = None
    for e in ran:
        name, start, length = e["args"]["hlo_op"], float(e["ts"]), float(e["dur"])
        if (e.get("pid"), e.get("tid")) != thread:
            thread, open_ops = (e.get("pid"), e.get("tid")), []
        while open_ops and open_ops[-1][0] <= start:
            open_ops.pop()
        if open_ops:  # inside another op (a loop's body): not that op's own time
            own[open_ops[-1][1]] -= length
        own[name] = own.get(name, 0.0) + length
        calls[name] = calls.get(name, 0) + 1
        open_ops.append((start + length, name))
    total = sum(own.values()) or 1.0
    rows = [OpTime(n, kinds.get(n) or re.sub(r"\.\d+$", "", n), calls[n], max(t, 0.0) / 1e6,
                   max(t, 0.0) / total) for n, t in own.items()]
    return sorted(rows, key=lambda r: -r.seconds)


def table(rows: list[OpTime], top: int = 10) -> str:
    """The `top` ops as a table a person reads."""
    shown = rows[:top]
    lines = [f"{'op':<28} {'kind':<16} {'calls':>6} {'time':>11} {'share':>7}"]
    lines += [f"{r.name[:28]:<28} {r.kind[:16]:<16} {r.calls:>6} {_duration(r.seconds):>11} "
              f"{r.share * 100:>6.1f}%" for r in shown]
    if len(rows) > top:
        rest = rows[top:]
        lines.append(f"{f'({len(rest)} more)':<28} {'':<16} {sum(r.calls for r in rest):>6} "
                     f"{_duration(sum(r.seconds for r in rest)):>11} "
                     f"{sum(r.share for r in rest) * 100:>6.1f}%")
    return "\n".join(lines)


def report(traced: Trace, exe, top: int = 10) -> str:
    """What `hlogen run --profile` prints: where the trace is, and the top ops."""
    rows = traced.ops(exe)
    total = sum(r.seconds for r in rows)
    return (f"profile: {traced.file} (Perfetto: ui.perfetto.dev; TensorBoard: tensorboard "
            f"--logdir {traced.directory})\n"
            f"{exe.computation.name} on {exe.backend}: {len(rows)} ops ran for "
            f"{_duration(total)} in all (each op's own time):\n{table(rows, top)}")


def _duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"
