"""The README's "Seeing inside" examples run as written, outputs included (`...` as in
tests/test_cli_readme.py: any text, or a line of it for any lines)."""
from __future__ import annotations

import re
import shlex

from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_cli_readme import ROOT, _pattern

SECTION = "## Seeing inside: graphs, profiles, memory\n"


def test_every_command_of_the_seeing_inside_section(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(ROOT)
    (ROOT / "out" / "graph").mkdir(parents=True, exist_ok=True)
    section = (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    session = re.search(r"```console\n(.*?)```", section, re.S).group(1)
    commands = re.split(r"^\$ ", session, flags=re.M)[1:]
    assert len(commands) == 5
    for command in commands:
        line, _, expected = command.partition("\n")
        args = shlex.split(line)
        assert args[0] == "hlogen"
        result = CliRunner().invoke(main, args[1:], catch_exceptions=False)
        assert result.exit_code == 0, f"$ {line}\n{result.output}"
        assert _pattern(expected).fullmatch(result.output), f"$ {line}\n{result.output}"
    # the pictures are of these pages (their files are there)
    for picture in re.findall(r"\]\((docs/[\w.]+\.png)\)", section):
        assert (ROOT / picture).stat().st_size < 100_000
