"""The README, the front door: it opens with the two commands, stays short, and its
examples run as they are written, outputs included (the command line's in a folder
that holds what a fresh clone does): the quick starts and one per audience."""
from __future__ import annotations

import contextlib
import io
import re
import shlex

import numpy as np
from click.testing import CliRunner

from hlogen_cli.main import main
from tests import docs
from tests.test_cli_readme import fresh_clone, run_section, shell
from tests.test_plugin_readme import stablehlo_clone

README = docs.text("README.md")


def _block(heading: str, language: str) -> str:
    return docs.blocks("README.md", language, heading)[0]


def _printed(code: str, page: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, page, "exec"), {"__name__": "readme"})
    return out.getvalue()


def test_readme_opens_with_the_two_commands():
    head = README.splitlines()[:6]
    assert any(line.startswith("make demo") for line in head)
    assert any(line.startswith("make test") for line in head)


def test_readme_is_a_front_door():
    """At most about 300 lines; the rest lives in docs/, and every page is linked."""
    assert len(README.splitlines()) <= 300
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)\)", README))
    assert linked == {page for page in docs.pages() if page != "README.md"}


def test_python_quick_start():
    code = _block("Quick start (Python)", "python")
    assert len(code.strip().splitlines()) <= 16
    printed = _printed(code, "README.md")
    assert "stablehlo.broadcast_in_dim" in printed and "stablehlo.add" in printed
    expected = np.array2string(np.arange(6, dtype=np.float32).reshape(2, 3) + [10, 20, 30])
    assert printed.count(expected) == 2  # PJRT and the interpreter print the same


def quick_start_commands() -> list[tuple[str, str]]:
    """(command line, what it prints) of the command-line quick start, in order."""
    session = docs.console("README.md", "Quick start (command line)")
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


def test_the_backend_bug_hunter_s_quick_start(tmp_path, monkeypatch):
    assert len(run_section("README.md", "You hunt backend bugs", tmp_path, monkeypatch)) == 4


def test_the_ci_user_s_quick_start(tmp_path, monkeypatch):
    assert len(run_section("README.md", "You check conformance in CI", tmp_path, monkeypatch,
                           prepare=stablehlo_clone)) == 2
    assert "<testsuite " in (tmp_path / "clone" / "out" / "conformance.xml").read_text()


def test_the_plugin_author_s_quick_start(tmp_path, monkeypatch):
    assert len(run_section("README.md", "You write a PJRT plugin", tmp_path, monkeypatch)) == 1


def test_the_xla_client_porter_s_quick_start():
    heading = "You port code written for xla_client"
    (code,), (printed,) = (docs.blocks("README.md", language, heading)
                           for language in ("python", "text"))
    assert _printed(code, "README.md") == printed


def test_replicas_example():
    (code,) = docs.blocks("docs/replicas.md", "python", "From Python")
    exec(compile(code, "docs/replicas.md", "exec"), {})  # its assert checks the sums
