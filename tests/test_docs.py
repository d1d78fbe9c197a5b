"""The documentation site (docs/, mkdocs.yml): it builds with `mkdocs build --strict`
(broken links and anchors, pages left out of the navigation fail it); every console
session of README.md and docs/*.md is run by a test; and the sessions of pages that
no other test file owns run here (emitting, conformance in CI).

mkdocs is in the test extra, so `make test` always builds the site (a second or so):
a page that breaks the site fails the suite, not only `make docs`."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import os
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
    # not --quiet: it hides the warnings that --strict counts (a broken anchor passed)
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
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


# -- the sessions of the features documented with issue 33 (reduce, compare, plugins,
# --no-hlo-passes, xla_client, dynamic dimensions) ------------------------------------------

def _files_cat_shows(page: str, heading: str):
    """A `prepare` for run_section: writes each file that a `$ cat FILE` of the session
    shows, as it shows it (the page holds the file once, and the test reads it there)."""
    def prepare(clone: pathlib.Path) -> None:
        for command in re.split(r"^\$ ", docs.console(page, heading), flags=re.M)[1:]:
            line, _, shown = command.partition("\n")
            if line.startswith("cat "):
                (clone / line.split()[1]).write_text(shown)
    return prepare


def _printed(code: str, filename: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, filename, "exec"), {"__name__": "docs"})
    return out.getvalue()


def test_what_reduce_refuses(tmp_path, monkeypatch):
    assert len(run_section("docs/reduce.md", "When reduce says no", tmp_path, monkeypatch)) == 5
    assert not (tmp_path / "clone" / "out" / "reduce" / "small.mlir").exists()


def test_compare_of_nan_on_both_sides(tmp_path, monkeypatch):
    assert len(run_section("docs/disagree.md", "Every element NaN on both sides", tmp_path,
                           monkeypatch, prepare=_files_cat_shows(
                               "docs/disagree.md", "Every element NaN on both sides"))) == 2


def test_a_result_of_another_shape_is_refused(tmp_path, monkeypatch):
    assert len(run_section("docs/plugins.md", "A result of another shape", tmp_path, monkeypatch,
                           prepare=_files_cat_shows(
                               "docs/plugins.md", "A result of another shape"))) == 3


def test_layouts_under_no_hlo_passes(tmp_path, monkeypatch):
    bin_dir = str(pathlib.Path(sys.executable).parent)  # the session's python is this venv's
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert len(run_section("docs/running.md", "Layouts under --no-hlo-passes", tmp_path,
                           monkeypatch)) == 2


def test_result_accuracy_example():
    page, heading = "docs/xla-client.md", "Result accuracy"
    (code,), (expected,) = (docs.blocks(page, language, heading) for language in ("python", "text"))
    assert _printed(code, "/path/to/script.py") == expected  # the page's name for the script


def test_dynamic_dimensions_in_python():
    (code,), (expected,) = (docs.blocks("docs/dynamic.md", language, "In Python")[:1]
                            for language in ("python", "text"))
    assert _printed(code, "docs/dynamic.md") == expected


def test_dynamic_dimensions_in_stablehlo(tmp_path, monkeypatch):
    assert len(run_section("docs/dynamic.md", "The example in StableHLO", tmp_path, monkeypatch,
                           prepare=_files_cat_shows(
                               "docs/dynamic.md", "The example in StableHLO"))) == 4


def test_a_dynamic_module_that_ends_xla_is_reduced(tmp_path, monkeypatch):
    assert len(run_section("docs/dynamic.md", "A module that ends XLA CPU", tmp_path, monkeypatch,
                           prepare=_files_cat_shows(
                               "docs/dynamic.md", "A module that ends XLA CPU"))) == 3
    reduced = (tmp_path / "clone" / "small.mlir").read_text()
    assert "stablehlo.reduce_window" in reduced and "#stablehlo.bounds" in reduced


def test_unbounded_dynamic_dimensions(tmp_path, monkeypatch):
    assert len(run_section("docs/dynamic.md", "Unbounded dynamic dimensions", tmp_path,
                           monkeypatch, prepare=_files_cat_shows(
                               "docs/dynamic.md", "Unbounded dynamic dimensions"))) == 3
