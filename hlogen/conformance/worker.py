"""A worker process: `python -m hlogen.conformance.worker` reads tasks, one JSON object
per line on stdin ({"file", "module", "backend"}), and answers each with one JSON line
(hlogen.conformance.runner.run_one's record). It first answers {"ready": true}.

The protocol has the process's original stdout to itself: file descriptor 1 is pointed
at stderr, so that whatever native code prints cannot corrupt an answer.
"""
from __future__ import annotations

import json
import os
import resource
import sys


def main() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a native abort leaves no core file
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from hlogen.conformance import runner
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        if not line.strip():
            continue
        task = json.loads(line)
        print(f"--- task {task['file']}#{task['module']} {task['backend']}", file=sys.stderr,
              flush=True)
        try:
            record = runner.run_one(task["file"], task["module"], task["backend"],
                                    explain=task.get("explain", False))
        except Exception as e:  # a bug of the runner: reported for this module, not fatal
            record = {**task, "status": "error", "message": f"runner error: {type(e).__name__}: {e}"}
        answers.write(json.dumps(record, default=str) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    main()
