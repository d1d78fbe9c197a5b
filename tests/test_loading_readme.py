"""docs/running.md ("Running what you bring"): its worked examples (a jax module with
linear algebra, a serialized Exported, an XLA dump) run as they are written, outputs
included."""
from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import subprocess
import sys

from tests import docs

PAGE = "docs/running.md"


def _blocks(language: str) -> list[str]:
    return docs.blocks(PAGE, language, "Examples")


def _run_python(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, PAGE, "exec"), {"__name__": "readme"})
    return out.getvalue()


def test_the_jax_and_exported_examples_print_what_the_page_says(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the Exported example writes affine.exported here
    python, printed = _blocks("python")[:2], _blocks("text")[:2]
    assert len(python) == len(printed) == 2  # (zip would pass over missing blocks)
    for code, expected in zip(python, printed):
        assert _run_python(code) == expected


def test_the_xla_dump_session_runs_as_written(tmp_path):
    script, session = _blocks("python")[2], docs.console("docs/running.md", "An XLA dump")
    (tmp_path / "top2.py").write_text(script)
    bin_dir = str(pathlib.Path(sys.executable).parent)  # python and hlogen of this venv
    env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ["PATH"])
    env.pop("XLA_FLAGS", None)
    commands = re.split(r"^\$ ", session, flags=re.M)[1:]
    assert commands  # (an empty session would pass)
    for command in commands:
        line, _, expected = command.partition("\n")
        run = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=300)
        assert run.returncode in (0, 2), run.stderr
        assert run.stdout + run.stderr == expected, f"$ {line}\n{run.stdout}{run.stderr}"
        if line.startswith("XLA_FLAGS"):
            assert (tmp_path / "dump" / "module_0000.jit_top2.before_optimizations.txt").exists()
