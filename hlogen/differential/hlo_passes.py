"""Which of XLA's HLO passes really ran on a module, read from XLA's own log.

With TF_CPP_MIN_LOG_LEVEL=0 and TF_CPP_VMODULE=hlo_pass_pipeline=2 set before jaxlib
loads (so in a child process), XLA logs "Running HLO pass pipeline on module M: P" when
a pipeline starts and "  HLO pass NAME" for each pass it runs; a pipeline nested in
another is run as one of its passes, so its name is logged as a pass just before its
own "Running" line. (XLA's per-pass dumps hold only the passes that changed the module.)
"""
from __future__ import annotations

import dataclasses
import json
import re

from hlogen import backends, native
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, InputError
from hlogen.runtime import xla_options as options_of

_PIPELINE = re.compile(r"hlo_pass_pipeline\.cc:\d+\] Running HLO pass pipeline on module "
                       r"(.*?): (.+?)\s*$", re.M)
_PASS = re.compile(r"hlo_pass_pipeline\.cc:\d+\]\s+HLO pass (.+?)\s*$", re.M)
# the child: compiles the module on stdin on argv[1] with the options of argv[2] (JSON)
_CHILD = """
import json, sys
import hlogen as hg
try:
    hg.compile(hg.load(sys.stdin.buffer.read()), backend=sys.argv[1],
               xla_options=[tuple(o) for o in json.loads(sys.argv[2])])
except hg.HlogenError as e:
    sys.stderr.write(f"\\nhlogen: {type(e).__name__}: {e}\\n")
    sys.exit(3)
"""
_LOGGING = {"TF_CPP_MIN_LOG_LEVEL": "0", "TF_CPP_VMODULE": "hlo_pass_pipeline=2"}


@dataclasses.dataclass
class PassLog:
    """The HLO passes that ran: each real pass once, in the order of its first run; each
    pipeline with the passes logged while it was the latest to start; every pass run."""

    passes: list
    pipelines: dict  # name -> passes, in order, each once
    runs: list       # (pipeline, pass) of every run, in order


def parse_log(text: str) -> PassLog:
    """The PassLog of XLA's log lines (other lines are ignored)."""
    events = sorted([(m.start(), "pipeline", m.group(2)) for m in _PIPELINE.finditer(text)] +
                    [(m.start(), "pass", m.group(1)) for m in _PASS.finditer(text)])
    pipeline_names = {name for _, kind, name in events if kind == "pipeline"}
    pipelines: dict = {}
    runs, current = [], None
    for _, kind, name in events:
        if kind == "pipeline":
            current = name
            pipelines.setdefault(name, [])
        elif name not in pipeline_names:  # a nested pipeline is logged as a pass too
            runs.append((current, name))
            if current is not None and name not in pipelines[current]:
                pipelines[current].append(name)
    return PassLog(list(dict.fromkeys(name for _, name in runs)), pipelines, runs)


def passes_that_ran(computation: Computation, backend: str = "cpu", xla_options=None,
                    seconds: float = 600) -> PassLog:
    """The HLO passes XLA runs on `computation` compiling it for `backend` with
    `xla_options` (compiled in a child process, whose log is read)."""
    if not backends.compiles(backend):
        raise InputError(f"{backends.get(backend).words} runs no HLO passes: name an XLA backend")
    options = [list(o) for o in options_of.check(xla_options, backends.get(backend).library)]
    child = native.run_child(_CHILD, computation.to_bytecode(), [backend, json.dumps(options)],
                             seconds, env=_LOGGING)
    if child is None:
        raise ExecutionError(f"{computation.name}: XLA did not compile it in {seconds:g} s")
    said = child.stderr.decode("utf-8", errors="replace")
    if child.returncode != 0:
        tail = said.strip().splitlines()[-1:] or ["(nothing)"]
        raise ExecutionError(f"{computation.name}: compiling it for {backend} failed "
                             f"(status {child.returncode}): {tail[0][-2000:]}")
    return parse_log(said)
