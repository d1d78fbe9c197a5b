"""Without the extra hlogen[iree], the iree backend is absent, and says why (where it is
installed too: IREE's packages hidden from a child process)."""
from __future__ import annotations

import subprocess
import sys

_HIDDEN = """
import sys
sys.modules["iree"] = None  # as if the extra were not installed
from click.testing import CliRunner
import hlogen as hg
from hlogen import backends
from hlogen_cli.main import main
print("declared:", "iree" in backends.BACKENDS)
try:
    hg.compile(hg.load("func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {\\n"
                       "return %a : tensor<2xf32>\\n}"), backend="iree")
except hg.UnsupportedError as e:
    print("compile:", e)
print(CliRunner().invoke(main, ["devices"]).output)
"""


def test_without_the_extra_iree_is_absent_with_why():
    done = subprocess.run([sys.executable, "-c", _HIDDEN], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    why = "iree.compiler is not installed: IREE is the extra hlogen[iree]"
    assert "declared: False" in done.stdout
    assert f"compile: backend 'iree' cannot be used: {why}" in done.stdout
    assert f"iree: not available: {why} (pip install 'hlogen[iree]', IREE 3.13)" in done.stdout
