"""docs/plugins.md ("Testing your PJRT plugin") runs as written, with xla-cpu-pjrt (installed by
`make test`), in a fresh clone beside a few of StableHLO's conformance files (the
page's clone of openxla/stablehlo)."""
from __future__ import annotations

import pathlib
import shutil

from tests.test_cli_readme import run_section

CONFORMANCE = pathlib.Path(__file__).resolve().parent.parent.parent / "shared" / "conformance" / "stablehlo"


def stablehlo_clone(clone: pathlib.Path) -> None:
    """The few of StableHLO's files the pages' sessions check, as a clone of
    openxla/stablehlo holds them."""
    testdata = clone / "stablehlo" / "testdata"
    testdata.mkdir(parents=True)
    for name in ("abs_float32_20_20", "cbrt_float32_20_20", "sin_float32_20_20",
                 "add_float32_20_20_float32_20_20"):
        shutil.copy(CONFORMANCE / "testdata" / f"{name}.mlir", testdata)
    interpret = clone / "stablehlo" / "tests" / "interpret"
    interpret.mkdir(parents=True)
    shutil.copy(CONFORMANCE / "tests" / "interpret" / "bitcast_convert.mlir", interpret)


def test_testing_your_pjrt_plugin(tmp_path, monkeypatch):
    assert len(run_section("docs/plugins.md", "From the command line", tmp_path, monkeypatch,
                           prepare=stablehlo_clone)) >= 5
