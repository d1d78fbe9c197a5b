"""A backend as one value: a side of a comparison is the declared Backend under its XLA
options (Backend.with_options) and a route; a name is looked up once, at the edge, and the
Backend is what is passed on (hlogen check's run takes Backends)."""
from __future__ import annotations

import pytest

import hlogen as hg
from hlogen import backends, conformance
from hlogen.differential import Side
from tests.test_conformance import write_testdata


def test_a_side_is_a_backend_with_options_and_a_route():
    side = Side.of("hlo:cpu", ["xla_cpu_enable_fast_math=true"])
    assert side.declared is backends.CPU.with_options({"xla_cpu_enable_fast_math": True})
    assert (side.backend, side.xla_options, side.through_hlo) == \
        ("cpu", (("xla_cpu_enable_fast_math", True),), True)
    more = Side.of(side, ["xla_disable_hlo_passes=algsimp"])
    assert more.declared is backends.CPU.with_options(
        {"xla_cpu_enable_fast_math": True, "xla_disable_hlo_passes": "algsimp"})
    assert more.through_hlo and more.backend == "cpu"
    assert Side.of(backends.INTERPRET).declared is backends.INTERPRET
    assert Side.of("cpu") == Side(backends.CPU) and len({Side.of("cpu"), Side(backends.CPU)}) == 1
    with pytest.raises(hg.UnsupportedError, match="the reference interpreter takes no XLA options"):
        Side.of("interpret", ["xla_cpu_enable_fast_math=true"])


def test_a_conformance_run_takes_backends(tmp_path):
    write_testdata(tmp_path / "neg.mlir", "%2 = stablehlo.negate %0 : tensor<4xf32>",
                   "[1.0, 2.0, 3.0, 4.0]", "[-1.0, -2.0, -3.0, -4.0]")
    run = conformance.run([str(tmp_path)], [backends.INTERPRET], jobs=1, use_default_known=False)
    assert run.backends == ["interpret"]
    assert [(r["backend"], r["status"]) for r in run.records] == [("interpret", "pass")]
