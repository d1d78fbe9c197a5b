"""`hlogen check` through the command line, as CI runs it, over a folder that holds every
kind of file StableHLO's own folders have: interpreter tests, RUN-DISABLED ones, quantized
ones, run_parallel ones and round-trip-only ones (`*_dynamic.mlir`, which only serialize).

A run over such a folder once ended with exit 2 and no report: the summary looked the
round trips' records up as a backend. Through the API the run was clean, so this test runs
the installed `hlogen` as a subprocess and reads the files it writes."""
from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

DATA = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo"
HLOGEN = str(pathlib.Path(sys.executable).with_name("hlogen"))

pytestmark = pytest.mark.skipif(not DATA.is_dir(), reason="the StableHLO conformance data is absent")

# One or two files of each kind, from the folders as StableHLO ships them.
KINDS = {
    "interpreter": ["testdata/add_float32_20_20_float32_20_20.mlir",
                    "testdata/sort_uint8_5_7.mlir", "tests/interpret/compare.mlir"],
    "disabled": ["testdata/triangular_solve_float16_4_4_float16_4_1.mlir"],
    "quantized": ["testdata/quantized/negate_qi8.mlir"],
    "run_parallel": ["tests/interpret/all_gather.mlir", "tests/interpret/collective_permute.mlir"],
    # `*_dynamic.mlir`: RUN lines that serialize and read back only
    "dynamic": ["testdata/dynamic/add_transpose_dynamic.mlir",
                "testdata/dynamic/argmax_0_dynamic.mlir"],
}
# More of that form, made here: one refined from its inputs, one that no inputs make static.
SERIALIZE_ONLY = (
    "// RUN: stablehlo-translate --serialize --target=current %s | stablehlo-translate "
    "--deserialize | stablehlo-opt > %t.0\n"
    "// RUN: stablehlo-opt --stablehlo-legalize-to-vhlo --vhlo-to-version=target=current "
    "-emit-bytecode %s | stablehlo-opt --vhlo-legalize-to-stablehlo > %t.1\n"
    "// RUN: diff %t.0 %t.1\n\n")
DYNAMIC_MODULE = """module @jit_abs {
  func.func public @main(%arg0: tensor<i64>, %arg1: tensor<?x20x20xf32>) -> tensor<?x20x20xf32> {
    %0 = stablehlo.abs %arg1 : tensor<?x20x20xf32>
    return %0 : tensor<?x20x20xf32>
  }
}
"""
# one whose shape is a vector's value: no refinement from the inputs makes it static
UNREFINABLE = """module @jit_iota {
  func.func public @main(%arg0: tensor<2xi32>) -> tensor<?x?xi32> {
    %0 = stablehlo.dynamic_iota %arg0, dim = 0 : (tensor<2xi32>) -> tensor<?x?xi32>
    return %0 : tensor<?x?xi32>
  }
}
"""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("conformance")
    for kind, paths in KINDS.items():
        (root / kind).mkdir()
        for path in paths:
            assert (DATA / path).is_file(), path  # the sample must hold each kind
            shutil.copy(DATA / path, root / kind / pathlib.Path(path).name)
    (root / "roundtrip").mkdir()
    (root / "roundtrip" / "abs_shape_dynamic.mlir").write_text(SERIALIZE_ONLY + DYNAMIC_MODULE)
    (root / "roundtrip" / "iota_dynamic.mlir").write_text(SERIALIZE_ONLY + UNREFINABLE)
    return root


@pytest.mark.parametrize("backend", ["interpret", "cpu"])
def test_check_writes_its_reports_over_every_kind_of_file(folder, tmp_path, backend):
    junit, jsonl = tmp_path / "report.xml", tmp_path / "report.jsonl"
    done = subprocess.run([HLOGEN, "check", str(folder), "--backend", backend, "-j", "2",
                           "--junit", str(junit), "--json", str(jsonl)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"  {backend}: " in done.stdout and "  roundtrip: 4 pass" in done.stdout, done.stdout
    suites = {s.get("name"): s for s in ET.parse(junit).getroot().findall("testsuite")}
    assert set(suites) == {f"conformance.{backend}", "conformance.roundtrip"}, set(suites)
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    by_kind: dict = {}
    for r in records:
        by_kind.setdefault(pathlib.Path(r["file"]).parent.name, []).append(r)
    assert set(by_kind) == {*KINDS, "roundtrip"}
    # each serializes and reads back (no backend); refined once inputs are chosen, the first
    # runs on the backend, the second is said to be round-tripped only
    trips = {(pathlib.Path(r["file"]).name, r["backend"]): r for r in by_kind["roundtrip"]}
    assert set(trips) == {(name, b) for name in ("abs_shape_dynamic.mlir", "iota_dynamic.mlir")
                          for b in ("roundtrip", backend)}, set(trips)
    assert trips["abs_shape_dynamic.mlir", "roundtrip"]["status"] == "pass"
    assert trips["iota_dynamic.mlir", "roundtrip"]["status"] == "pass"
    assert trips["abs_shape_dynamic.mlir", backend]["status"] == "ran"
    skipped = trips["iota_dynamic.mlir", backend]
    assert skipped["status"] == "skipped" and skipped["message"].startswith("round-tripped only: ")
    assert sorted((r["backend"], r["status"]) for r in by_kind["dynamic"]) == \
        [(backend, "ran")] * 2 + [("roundtrip", "pass")] * 2
    assert all(r["status"] == "disabled" for r in by_kind["disabled"])
    for kind in ("interpreter", "quantized"):
        assert any(r["status"] == "pass" for r in by_kind[kind]), by_kind[kind]
    # every record of the run is in the JUnit, one test case each
    cases = sum(int(s.get("tests")) for s in suites.values())
    assert cases == len(records)
    assert not [r for r in records if r["status"] in ("fail", "error", "crash", "timeout")]
