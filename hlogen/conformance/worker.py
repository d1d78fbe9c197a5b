"""A worker process (`main`, started by hlogen.conformance.pool) reads tasks, one JSON object
per line on stdin ({"file", "module", "backend", "xla_options"}, or {"batch": [those]} for PJRT
modules compiled together), and answers each with one JSON line (a record of
hlogen.conformance.runner, or {"records": [...]}). It first answers {"ready": true}.

The protocol has the process's original stdout to itself: file descriptor 1 is pointed
at stderr, so that whatever native code prints cannot corrupt an answer.
"""
from __future__ import annotations

import json
import sys

from hlogen import native


def main() -> None:
    """The worker's life (hlogen.native.Worker's prelude has made it end with the pool's
    process and leave no core file)."""
    answers = native.answer_channel()
    from hlogen.conformance import runner  # start-up: after fd 1 points at stderr (native code prints)
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        items = task["batch"] if "batch" in task else [task]
        print(f"--- task {items[0]['file']}#{items[0]['module']} {items[0]['backend']}"
              f"{f' and {len(items) - 1} more' if len(items) > 1 else ''}", file=sys.stderr, flush=True)
        try:
            if "batch" in task:
                answer = {"records": runner.run_batch(items, explain=task.get("explain", False))}
            else:
                answer = runner.run_one(task["file"], task["module"], task["backend"],
                                        explain=task.get("explain", False),
                                        refined=task.get("refined", False),
                                        xla_options=task.get("xla_options", ()))
        except Exception as e:  # a bug of the runner: reported for these modules, not fatal
            message = f"runner error: {type(e).__name__}: {e}"
            answer = {"records": [{**t, "status": "error", "message": message} for t in items]}
        answers.write(json.dumps(answer, default=str) + "\n")
