"""The README's quick starts are run as they are written, outputs included (the command
line's in a folder that holds what a fresh clone does)."""
from __future__ import annotations

import contextlib
import io
import pathlib
import re
import shlex

import numpy as np
from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_cli_readme import fresh_clone, shell

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


def quick_start_commands() -> list[tuple[str, str]]:
    """(command line, what it prints) of the command-line quick start, in order."""
    session = _block("## Quick start (command line)", "console")
    return [command.partition("\n")[::2] for command in re.split(r"^\$ ", session, flags=re.M)[1:]]


def test_command_line_quick_start(tmp_path, monkeypatch):
    monkeypatch.chdir(fresh_clone(tmp_path))  # as written, in a fresh clone: no out/
    commands = quick_start_commands()
    assert len(commands) == 4
    for line, expected in commands:
        if line.startswith("hlogen "):
            result = CliRunner().invoke(main, shlex.split(line)[1:], catch_exceptions=False)
            output, code = result.output, result.exit_code
        else:
            output, code = shell(line)
        assert code == 0, output
        assert output == expected, f"$ {line}\n{output}"


def test_replicas_example():
    code = _block("### Replicas and collectives", "python")
    exec(compile(code, "README.md", "exec"), {})  # its assert checks the sums
