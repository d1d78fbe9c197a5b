"""The README's quick starts are run as they are written, outputs included."""
from __future__ import annotations

import contextlib
import io
import os
import pathlib
import re
import shlex

import numpy as np
from click.testing import CliRunner

from hlogen_cli.main import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def _block(heading: str, language: str) -> str:
    section = README.split(heading, 1)[1]
    return re.search(rf"```{language}\n(.*?)```", section, re.S).group(1)


def test_readme_opens_with_the_two_commands():
    head = README.splitlines()[:6]
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)


def test_python_quick_start():
    code = _block("## Quick start (Python)", "python")
    assert len(code.strip().splitlines()) <= 16
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    printed = out.getvalue()
    assert "stablehlo.broadcast_in_dim" in printed and "stablehlo.add" in printed
    expected = np.array2string(np.arange(6, dtype=np.float32).reshape(2, 3) + [10, 20, 30])
    assert printed.count(expected) == 2  # PJRT and the interpreter print the same


def test_command_line_quick_start():
    session = _block("## Quick start (command line)", "console")
    commands = re.split(r"^\$ ", session, flags=re.M)[1:]
    previous = os.getcwd()
    os.chdir(ROOT)
    try:
        for command in commands:
            line, _, expected = command.partition("\n")
            args = shlex.split(line)
            assert args[0] == "hlogen"
            result = CliRunner().invoke(main, args[1:], catch_exceptions=False)
            assert result.exit_code == 0, result.output
            assert result.output == expected, f"$ {line}\n{result.output}"
    finally:
        os.chdir(previous)


def test_replicas_example():
    code = _block("### Replicas and collectives", "python")
    exec(compile(code, "README.md", "exec"), {})  # its assert checks the sums
