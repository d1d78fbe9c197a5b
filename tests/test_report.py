"""`hlogen report` (hlogen.differential.report): the report of a finding a maintainer acts
on, and its reproducer, run here in a Python process where hlogen cannot be imported
(no site-packages' .pth files, so not hlogen's editable install: only jax, jaxlib, numpy,
ml_dtypes from the packages folder), where it must print the wrong value."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig

import numpy as np
from click.testing import CliRunner

import hlogen as hg
from hlogen.differential.near import Tolerance
from hlogen.differential.report import report_of
from hlogen_cli.main import main

# XLA's integer power reads 6 bits of the exponent: 0**64 = 1 in every integer type
POWER = """func.func @main(%x: tensor<4xi32>, %y: tensor<4xi32>) -> tensor<4xi32> {
  %r = stablehlo.power %x, %y : tensor<4xi32>
  return %r : tensor<4xi32>
}
"""
X, Y = np.array([0, 0, 2, 3], np.int32), np.array([64, 128, 3, 2], np.int32)


def hlogen(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def without_hlogen(program: str, folder) -> subprocess.CompletedProcess:
    """`program` run by this Python with only the packages folder on its path, its .pth
    files unread (-S): hlogen's editable install is not there."""
    path = folder / "reproducer.py"
    path.write_text(program)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HLOGEN"))}
    env["PYTHONPATH"] = sysconfig.get_paths()["purelib"]
    return subprocess.run([sys.executable, "-S", str(path)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=300)


def block(text: str, language: str) -> str:
    """The first ```language block of Markdown `text`."""
    found = re.search(rf"```{language}\n(.*?)\n```", text, re.S)
    assert found, text
    return found.group(1)


def test_the_reproducer_runs_without_hlogen_and_prints_the_wrong_value(tmp_path):
    # the process it runs in cannot import hlogen
    check = without_hlogen("import importlib.util, jax, jaxlib\n"
                           "print(importlib.util.find_spec('hlogen'))\n", tmp_path)
    assert check.returncode == 0 and check.stdout.strip() == "None", check.stderr
    (tmp_path / "power.mlir").write_text(POWER)
    ran = hlogen("report", tmp_path / "power.mlir", "--input", "4xs32=0,0,2,3",
                 "--input", "4xs32=64,128,3,2", "--no-bisect")
    assert ran.exit_code == 0, ran.output
    text = ran.stdout
    # the op where it is born, the wrong side by exact math, its value and the exact one
    assert text.splitlines()[0] == \
        "# XLA:CPU gives a wrong result for stablehlo.power (s32): 1 at [0], exact 0", text
    assert "**Verdict:** test wrong" in text
    assert "| [0] | 1 | 0 | 0 | 1 | 0 |" in text and "| [1] | 1 | 0 | 0 | 1 | 0 |" in text
    assert block(text, "mlir").count("stablehlo.power") == 1
    program = block(text, "python")
    assert "hlogen" not in program.replace("hlogen report", "").replace("hlogen's", "")
    # the inputs inline, as numpy literals
    assert "np.array([0, 0, 2, 3], dtype=np.int32)" in program
    done = without_hlogen(program, tmp_path)
    # XLA CPU's 1 where the interpreter (and exact math) give 0, at both elements
    assert "result 0 at [0]: cpu (test) 1, interpret (reference) 0" in done.stdout, \
        done.stdout + done.stderr
    assert "result 0 at [1]: cpu (test) 1, interpret (reference) 0" in done.stdout
    assert "  cpu is wrong: 1, exact 0" in done.stdout
    assert done.returncode == 1, done.stdout + done.stderr


def test_the_report_names_versions_words_and_the_pass(tmp_path):
    report = report_of(hg.load(POWER), [X, Y], "cpu", "interpret", Tolerance())
    text = report.markdown()
    assert report.op == "stablehlo.power" and [e.index for e in report.elements] == [(0,), (1,)]
    assert report.verdict == "test wrong" and [e.exact for e in report.elements] == ["0", "0"]
    assert report.ulps == {"test": 1, "reference": 0}
    assert [(int(e.test), int(e.reference)) for e in report.elements] == [(1, 0), (1, 0)]
    versions = text.split("## Versions")[1].split("##")[0]
    assert "- jax 0.10.2" in versions and "- jaxlib 0.10.2" in versions and "- hlogen " in versions
    words = text.split("## Search words")[1]
    assert "`stablehlo.power`" in words and "`XLA:CPU`" in words and "`s32`" in words
    assert "Not bisected." in text


def test_floats_inline_bit_for_bit(tmp_path):
    """The inputs the reproducer holds are the inputs' bits: floats by their shortest
    repr, NaNs (any payload) and narrow types by their bits."""
    from hlogen.differential.report import _literal
    import ml_dtypes
    arrays = [np.array([0.1, -0.0, np.inf, 1e-45], np.float32),
              np.array([1, np.nan], np.float32).view(np.uint32) | np.uint32(3),
              np.array([1.5, -2.0, 3e-39], ml_dtypes.bfloat16),
              np.array([[True, False]]), np.array([1 + 2j], np.complex64),
              np.array(3.5e-303 + 1.4e-315j), np.array(np.nan, np.float32)]
    arrays[1] = arrays[1].view(np.float32)
    program = "import numpy as np, ml_dtypes\nimport sys\n" + "\n".join(
        f"a{k} = {_literal(a)}\nsys.stdout.write(a{k}.tobytes().hex() + '|' + str(a{k}.dtype) "
        f"+ '|' + str(a{k}.shape) + '\\n')" for k, a in enumerate(arrays))
    done = without_hlogen(program, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{a.tobytes().hex()}|{a.dtype}|{a.shape}"
                                        for a in arrays]


def test_a_scalar_result():
    """A 0-d result: its one element is at []."""
    module = hg.load(POWER.replace("tensor<4xi32>", "tensor<i32>"))
    report = report_of(module, [np.int32(0), np.int32(64)], "cpu", "interpret", Tolerance())
    assert [(e.index, int(e.test), e.exact) for e in report.elements] == [((), 1, "0")]
    assert "| [] | 1 | 0 | 0 | 1 | 0 |" in report.markdown()


def test_a_fuzz_folder_moved_elsewhere(tmp_path):
    """A fuzz folder's findings, read from its summary.json, wherever the folder is now
    (the summary names the files as the run did)."""
    folder = tmp_path / "found"
    folder.mkdir()
    (folder / "power.mlir").write_text(POWER)
    np.savez(folder / "power.inputs.npz", arg0=X, arg1=Y)
    summary = {"test": {"backend": "cpu", "through_hlo": False, "xla_options": {}},
               "reference": {"backend": "interpret", "through_hlo": False, "xla_options": {}},
               "tolerance": {"abs": 1e-3, "rel": 1e-3, "ulp": None, "bitwise": False},
               "findings": [{"module": "run/found/power.mlir",
                             "inputs": "run/found/power.inputs.npz", "kind": "divergence",
                             "message": "they differ"}]}
    (folder / "summary.json").write_text(__import__("json").dumps(summary))
    ran = hlogen("report", folder, "--no-bisect")
    assert ran.exit_code == 0, ran.output
    assert ran.stdout.startswith("# XLA:CPU gives a wrong result for stablehlo.power (s32)")
    (folder / "summary.json").write_text("{}")
    ran = hlogen("report", folder)
    assert ran.exit_code == 2 and "not a summary of hlogen fuzz" in ran.stderr
