"""README's "Finding why two backends disagree": its example runs as written, output included."""
from __future__ import annotations

import contextlib
import io
import pathlib
import re

from hlogen.runtime import pjrt

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECTION = (ROOT / "README.md").read_text().split("## Finding why two backends disagree", 1)[1] \
    .split("\n## ", 1)[0]


def test_the_worked_example_runs_as_written():
    code, printed = re.findall(r"```(?:python|text)\n(.*?)```", SECTION, re.S)[:2]
    pjrt.client("cpu")  # hlogen's backend first: tests after this one run replicas
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed
