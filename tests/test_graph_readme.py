"""The README's "Seeing inside" examples run as written, outputs included, in a fresh
clone's folder (`...` as in tests/test_cli_readme.py: any text, or a line of it for any
lines)."""
from __future__ import annotations

import re
import shlex

from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_cli_readme import ROOT, _pattern, fresh_clone, shell

SECTION = "## Seeing inside: graphs, profiles, memory\n"


def test_every_command_of_the_seeing_inside_section(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(fresh_clone(tmp_path))  # no out/: the session makes its folders
    section = (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    session = re.search(r"```console\n(.*?)```", section, re.S).group(1)
    commands = re.split(r"^\$ ", session, flags=re.M)[1:]
    assert len(commands) == 6
    for command in commands:
        line, _, expected = command.partition("\n")
        if not line.startswith("hlogen "):
            output, code = shell(line)
        else:
            result = CliRunner().invoke(main, shlex.split(line)[1:], catch_exceptions=False)
            output, code = result.output, result.exit_code
        assert code == 0, f"$ {line}\n{output}"
        assert _pattern(expected).fullmatch(output), f"$ {line}\n{output}"
    # the pictures are of these pages (their files are there)
    for picture in re.findall(r"\]\((docs/[\w.]+\.png)\)", section):
        assert (ROOT / picture).stat().st_size < 100_000
