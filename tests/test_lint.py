"""The linter: ruff, as pyproject.toml's [tool.ruff] configures it (pycodestyle's errors and
warnings, pyflakes, no `# noqa` that silences nothing), over every folder of Python the
project holds; and every `# noqa` says why, after its codes."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = ["hlogen", "hlogen_cli", "tests", "benchmarks", "samples"]
# a noqa directive, its codes, and the words after them (" - why", "  # why", " (why)")
NOQA = re.compile(r"#\s*noqa\b(?::\s*[A-Z]+\d+(?:\s*,\s*[A-Z]+\d+)*)?(?P<why>.*)$")


def _ruff() -> str:
    found = pathlib.Path(sys.executable).parent / "ruff"  # the test extra installs it
    if found.exists():
        return str(found)
    on_path = shutil.which("ruff")
    if on_path is None:
        pytest.fail("ruff is not installed: pip install -e '.[test]'")
    return on_path


def test_ruff_passes():
    done = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise",
                           *FOLDERS], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, f"ruff check {' '.join(FOLDERS)}:\n{done.stdout}{done.stderr}"


def test_every_noqa_says_why():
    silent = []
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py*")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                m = NOQA.search(line)
                if m and not re.search(r"[a-z]{2}", m.group("why")):
                    silent.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not silent, "a # noqa says why after its codes (# noqa: E402 - why):\n" + \
        "\n".join(silent)
