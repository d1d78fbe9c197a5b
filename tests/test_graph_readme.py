"""The README's "Seeing inside" examples run as written, outputs included, in a fresh
clone's folder (`...` as in tests/test_cli_readme.py: any text, or a line of it for any
lines)."""
from __future__ import annotations

import re

from tests.test_cli_readme import ROOT, console_session, fresh_clone, run_session

SECTION = "## Seeing inside: graphs, profiles, memory\n"


def test_every_command_of_the_seeing_inside_section(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(fresh_clone(tmp_path))  # no out/: the session makes its folders
    assert len(run_session(console_session(SECTION.rstrip("\n")))) == 6
    section = (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    # the pictures are of these pages (their files are there)
    for picture in re.findall(r"\]\((docs/[\w.]+\.png)\)", section):
        assert (ROOT / picture).stat().st_size < 100_000
