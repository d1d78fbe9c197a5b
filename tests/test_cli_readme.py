"""The README's command-line examples ("## Command line") run as written, outputs
included; `...` in an expected line stands for any text, a line of `...` for any lines."""
from __future__ import annotations

import pathlib
import re
import shlex

from click.testing import CliRunner

from hlogen_cli.main import main

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _session() -> str:
    section = (ROOT / "README.md").read_text().split("## Command line\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```console\n(.*?)```", section, re.S).group(1)


def _pattern(expected: str) -> re.Pattern:
    parts = []
    for line in expected.splitlines():
        if line == "...":
            parts.append(r"(?:.*\n)*?")
        else:
            parts.append(".*".join(map(re.escape, line.split("..."))) + r"\n")
    return re.compile("".join(parts))


def test_every_command_of_the_command_line_section(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    commands = re.split(r"^\$ ", _session(), flags=re.M)[1:]
    assert len(commands) >= 8
    for command in commands:
        line, _, expected = command.partition("\n")
        args = shlex.split(line)
        assert args[0] == "hlogen"
        result = CliRunner().invoke(main, args[1:], catch_exceptions=False)
        assert result.exit_code == 0, f"$ {line}\n{result.output}"
        assert _pattern(expected).fullmatch(result.output), f"$ {line}\n{result.output}"
