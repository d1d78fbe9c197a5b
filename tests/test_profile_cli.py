"""`hlogen run --profile DIR` and `hlogen compile --memory`, through the command line."""
from __future__ import annotations

import gzip
import json
import re

import pytest
from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_profile import RUNS, TRIPS, loop_and_reduce


def hlogen(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def module_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("module") / "profiled.mlir"
    path.write_text(loop_and_reduce().as_text())
    return path


def test_run_profile_writes_a_trace_and_prints_the_top_ops(tmp_path, module_file):
    out = tmp_path / "prof"
    result = hlogen("run", str(module_file), "--input", "64x64xf32=0.01", "--repeat", str(RUNS),
                    "--profile", str(out))
    assert result.exit_code == 0, result.output
    (trace,) = out.glob("plugins/profile/*/perfetto_trace.json.gz")
    with gzip.open(trace) as f:
        ops = {e["args"]["hlo_op"] for e in json.load(f)["traceEvents"]
               if "hlo_op" in e.get("args", {})}
    assert f"profile: {trace} " in result.output
    lines = result.output.splitlines()
    start = lines.index(next(ln for ln in lines if ln.split()[:2] == ["op", "kind"]))
    rows = [ln.split() for ln in lines[start + 1:] if re.search(r"\d%$", ln)]
    # every op of the table ran in the trace; the loop's body ran TRIPS times per run
    assert rows and {r[0] for r in rows} <= ops
    assert any(r[1] == "while" and int(r[2]) == RUNS for r in rows)
    assert any(r[1] == "fusion" and int(r[3]) == TRIPS * RUNS for r in rows)
    assert abs(sum(float(r[-1].rstrip("%")) for r in rows) - 100) < 0.5


def test_run_profile_of_the_interpreter_is_refused(tmp_path, module_file):
    result = hlogen("run", str(module_file), "--input", "64x64xf32=0.01", "--backend",
                    "interpret", "--profile", str(tmp_path / "prof"))
    assert result.exit_code == 2 and "interpreter has no trace" in result.output


def test_compile_memory_prints_xlas_memory_analysis(module_file):
    result = hlogen("compile", str(module_file), "--memory")
    assert result.exit_code == 0, result.output
    found = dict(re.findall(r"^([a-z ()]+): (\d+) B", result.output, re.M))
    assert found["arguments"] == str(64 * 64 * 4) and found["outputs"] == str(64 * 4)
    assert {"temporaries", "generated code", "peak"} <= set(found)
    assert "HloModule" not in result.output  # --memory alone prints no HLO
