"""docs/disagree.md ("Finding why backends disagree"): its Python example runs as written,
output included."""
from __future__ import annotations

import contextlib
import io

from hlogen.runtime import pjrt
from tests import docs


def test_the_worked_example_runs_as_written():
    (code,), (printed,) = (docs.blocks("docs/disagree.md", language, "From Python")
                           for language in ("python", "text"))
    pjrt.client("cpu")  # hlogen's backend first: tests after this one run replicas
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/disagree.md", "exec"), {"__name__": "readme"})
    assert out.getvalue() == printed
