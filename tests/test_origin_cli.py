"""compare's findings on the command line (issue 35): --json's `findings`, the report in
words, the exit status (1 only for a finding not allowed; --strict), run --check-interpret
giving XLA the module as written, and docs/findings.md's sessions."""
from __future__ import annotations

import json

import jax
import numpy as np
from jax import lax

from tests import docs
from tests.helpers import hlogen_in
from tests.test_cli_readme import run_session
from tests.test_origin import POWER

POWER_ARGS = ["--input", "3xi32=0,2,3", "--input", "3xi32=64,3,2", "--input", "3xf32=1,2,3"]


def test_compare_json_holds_the_finding_and_exits_1_for_a_wrong_side(tmp_path):
    (tmp_path / "power.mlir").write_text(POWER)
    done = hlogen_in(tmp_path, "compare", "power.mlir", *POWER_ARGS, "--json", "out.json")
    assert done.returncode == 1, done.stderr
    (finding,) = json.loads((tmp_path / "out.json").read_text())["findings"]
    assert {k: finding[k] for k in ("op", "line", "verdict", "ulps", "exact", "results",
                                    "allowed_class", "in_context")} == {
        "op": "stablehlo.power", "line": 2, "verdict": "test wrong",
        "ulps": {"test": 1, "reference": 0}, "exact": ["0"], "results": [0, 1],
        "allowed_class": None, "in_context": False}
    assert [(a["op"], a["line"], a["ulps_in"]) for a in finding["amplified_by"]] == [
        ("stablehlo.convert", 3, 1), ("stablehlo.atan2", 4, 1065353216),
        ("stablehlo.exponential", 5, 1061752795)]
    assert "finding 1: stablehlo.power at power.mlir:2:8 (results 0, 1 of main)" in done.stdout
    assert "verdict: test wrong" in done.stdout and "atan2 (line 4)" in done.stdout


def test_an_allowed_difference_exits_0_and_strict_counts_it(tmp_path):
    from tests.test_origin import _rsqrt_one_ulp_apart
    x, _ = _rsqrt_one_ulp_apart()
    (tmp_path / "rsqrt.mlir").write_text(docs.blocks("docs/findings.md", "mlir",
                                                     "Allowed: both sides within the op's accuracy")[0])
    args = ["compare", "rsqrt.mlir", "--input", f"1xf32={float(x)!r}", "--ulp", "0",
            "--json", "out.json"]
    done = hlogen_in(tmp_path, *args)
    assert done.returncode == 0, done.stdout + done.stderr
    (finding,) = json.loads((tmp_path / "out.json").read_text())["findings"]
    assert (finding["op"], finding["verdict"], finding["allowed_class"]) == (
        "stablehlo.rsqrt", "allowed", "within-accuracy")
    assert "no bug" in done.stdout
    assert hlogen_in(tmp_path, *args, "--strict").returncode == 1


def test_run_check_interpret_gives_xla_erf_as_written(tmp_path):
    x = np.array([1.3e-38, 0.5, 2.0], np.float32)
    (tmp_path / "erf.mlir").write_text(
        jax.jit(lambda v: lax.erf(v) * np.float32(1e38)).lower(x).as_text())
    args = ["erf.mlir", "--input", "3xf32=1.3e-38,0.5,2", "--atol", "1e-3", "--rtol", "1e-3"]
    done = hlogen_in(tmp_path, "run", *args, "--check-interpret")
    # hlogen's legalized polynomial gave XLA CPU 0 (a flushed intermediate), 1.4669 here
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1].startswith("[1.46689"), done.stdout
    assert hlogen_in(tmp_path, "compare", "erf.mlir", "--input", "3xf32=1.3e-38,0.5,2").returncode == 0


def test_the_page(tmp_path, monkeypatch):
    # the modules the page shows, written where its sessions read them
    for heading, name in (("A finding: XLA's integer power", "power.mlir"),
                          ("Allowed: both sides within the op's accuracy", "rsqrt.mlir")):
        (tmp_path / name).write_text(docs.blocks("docs/findings.md", "mlir", heading)[0])
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    assert len(run_session(docs.console("docs/findings.md", "A finding: XLA's integer power"))) == 2
    assert len(run_session(docs.console("docs/findings.md", "In one line: --explain"))) == 1
    assert len(run_session(docs.console("docs/findings.md",
                                        "Allowed: both sides within the op's accuracy"))) == 2


def test_run_check_interpret_says_when_xla_ran_hlogen_form(tmp_path):
    from tests.test_origin import RAGGED_DOT
    (tmp_path / "ragged.mlir").write_text(RAGGED_DOT)
    done = hlogen_in(tmp_path, "run", "ragged.mlir", "--input", "11x5xf32=1", "--input",
                     "3x5x7xf32=1", "--input", "3xi64=4,4,3", "--check-interpret")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "note: XLA cannot compile the module as written (UNIMPLEMENTED: HLO opcode " \
           "`ragged-dot`" in done.stderr
    assert "chlo.ragged_dot expanded into StableHLO ops (legalize)" in done.stderr
    assert "[5. 5. 5. 5. 5. 5. 5.]" in done.stdout
