"""The documentation site (docs/, mkdocs.yml): it builds with `mkdocs build --strict`
(broken links and anchors, pages left out of the navigation fail it); every console
session of README.md and docs/*.md is run by a test; and the sessions of pages that
no other test file owns run here (emitting, conformance in CI).

mkdocs is in the test extra, so `make test` always builds the site (a second or so):
a page that breaks the site fails the suite, not only `make docs`."""
from __future__ import annotations

import importlib.util
import pathlib
import re
import subprocess
import sys

from tests import docs
from tests.test_cli_readme import run_section
from tests.test_plugin_readme import stablehlo_clone

# a test that runs a session names it, page and heading as string literals:
# docs.console(<page>, <heading>), run_section(<page>, <heading>, ...), or
# `page, heading = <page>, <heading>` before it reads the session
_NAMED = re.compile(r"""(?:docs\.console|run_section)\(\s*(?:page=)?"([^"]+)",\s*"([^"]+)\"""")
_PAGE_AND_HEADING = re.compile(r'page, heading = "([^"]+)", "([^"]+)"')


def test_the_site_builds_strictly(tmp_path):
    assert importlib.util.find_spec("mkdocs"), "no mkdocs here: pip install -e '.[test]'"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                            "--config-file", str(docs.ROOT / "mkdocs.yml"),
                            "--site-dir", str(tmp_path / "site")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    for page in docs.pages()[1:]:  # every page became HTML (README.md is not part of it)
        name = pathlib.Path(page).relative_to("docs").with_suffix("")
        html = tmp_path / "site" / ("index.html" if name.name == "index" else f"{name}/index.html")
        assert html.exists(), page


def _sessions_named_by_tests() -> set[tuple[str, str]]:
    named = set()
    for test in (docs.ROOT / "tests").glob("*.py"):
        source = test.read_text()
        named |= set(_NAMED.findall(source)) | set(_PAGE_AND_HEADING.findall(source))
    return named


def test_every_console_session_is_run_by_a_test():
    sessions = {(page, block.heading) for page in docs.pages()
                for block in docs.all_blocks(page) if block.language == "console"}
    assert len(sessions) >= 14
    named = _sessions_named_by_tests()
    not_run = sorted(sessions - named)
    assert not not_run, f"console sessions no test runs (page, heading): {not_run}"
    for page, heading in named & sessions:  # one session under each heading a test names
        docs.console(page, heading)


def test_the_reader_sees_what_a_page_holds():
    """Headings inside a fenced block are code; a section ends at its next sibling."""
    page = "docs/differential-library.md"
    (code,) = docs.blocks(page, "python", "An example")
    assert "# XLA CPU rewrites log(exp(x)) to x" in code  # a comment, not a heading
    assert "## Tests and findings" not in docs.section(page, "An example")
    assert len(docs.blocks(page, "python")) == 1


def test_emitting_from_the_command_line(tmp_path, monkeypatch):
    assert len(run_section("docs/emitting.md", "From the command line", tmp_path,
                           monkeypatch)) == 4


def test_conformance_in_ci(tmp_path, monkeypatch):
    assert len(run_section("docs/conformance.md", "In CI", tmp_path, monkeypatch,
                           prepare=stablehlo_clone)) == 3
    out = tmp_path / "clone" / "out"
    assert 'tests="8"' in (out / "conformance.xml").read_text()
    assert len((out / "conformance.jsonl").read_text().splitlines()) == 8
