"""The examples of docs/inspecting.md ("Seeing inside") run as written, outputs included, in a fresh
clone's folder (`...` as in tests/test_cli_readme.py: any text, or a line of it for any
lines)."""
from __future__ import annotations

import re

from tests import docs
from tests.test_cli_readme import ROOT, fresh_clone, run_session


def test_every_command_of_the_seeing_inside_section(tmp_path, monkeypatch):
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(fresh_clone(tmp_path))  # no out/: the session makes its folders
    session = docs.console("docs/inspecting.md", "Seeing inside: graphs, profiles, memory")
    assert len(run_session(session)) == 6
    # the pictures are of these pages (their files are there, beside the page)
    pictures = re.findall(r"\]\(([\w.]+\.png)\)", docs.text("docs/inspecting.md"))
    assert len(pictures) == 2
    for picture in pictures:
        assert (ROOT / "docs" / picture).stat().st_size < 100_000
