"""`hlogen bisect` (issue 27) on modules jax writes in the test: each rewrite of XLA's
algebraic simplifier inside a larger program is named by its pass (algsimp, or
constant_folding, never a pipeline) within 2*ceil(log2 P)+3 compiles per pass found,
and the command it prints as the fixed run agrees; a module with no divergence has
nothing to explain; one that stays with every HLO pass disabled is the conversion's or
code generation's."""
from __future__ import annotations

import json
import math
import shlex

import numpy as np
import pytest

from tests.test_cli_compare import REWRITES, W, X, XW, hlogen, layer, program, write_module

# the passes that, disabled alone, remove each rewrite's divergence
PASSES = {"log_exp": ["algsimp"], "round_trick": ["algsimp", "constant_folding"],
          "sqrt_square": ["algsimp"], "scale_unscale": ["algsimp"]}


@pytest.mark.parametrize("name", list(REWRITES))
def test_bisect_names_the_pass_of_each_rewrite(tmp_path, name):
    path = write_module(tmp_path / f"{name}.mlir", program([REWRITES[name]]), X, W)
    out = tmp_path / "verdict.json"
    found = hlogen("bisect", path, *XW, "--json", out)
    assert found.exit_code == 0, found.output
    verdict = json.loads(out.read_text())
    assert (verdict["stage"], verdict["passes"]) == ("hlo-pass", PASSES[name])
    passes = verdict["pass_count"]
    assert verdict["compiles"] <= len(PASSES[name]) * (2 * math.ceil(math.log2(passes)) + 3)
    assert verdict["fixed_options"] == {"xla_disable_hlo_passes": PASSES[name][0]}
    assert f"the divergence comes from HLO pass{'es' if len(PASSES[name]) > 1 else ''} " \
           f"{', '.join(PASSES[name])}" in found.output
    # the commands it prints: the diverging one differs, the fixed one agrees
    for which, status in (("diverging", 1), ("fixed", 0)):
        words = shlex.split(verdict["reproduce"][which])
        assert found.output.count(verdict["reproduce"][which]) == 1
        assert hlogen(*words[1:]).exit_code == status, which


def test_nothing_to_explain(tmp_path):
    path = write_module(tmp_path / "layer.mlir", layer, X, W)
    agree = hlogen("compare", path, *XW)
    assert agree.exit_code == 0, agree.output
    found = hlogen("bisect", path, *XW, "--json", tmp_path / "v.json")
    assert found.exit_code == 0, found.output
    assert "there is no divergence to explain" in found.output
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert (verdict["stage"], verdict["passes"], verdict["compiles"]) == ("none", [], 1)
    assert verdict["reproduce"] == {}


def test_a_divergence_no_hlo_pass_explains(tmp_path):
    """x + 0.0 is x after the StableHLO-to-HLO conversion, before any pass: -0.0 stays
    -0.0 on XLA, the interpreter adds (-0 + 0 = +0); only --bitwise sees it."""
    def add_zero(x, w):
        return layer(x, w), x + 0.0

    x = np.array([[-0.0, 1.0, -2.0, 0.5], [3.0, -0.0, 4.0, 1.0]], np.float32)
    path = write_module(tmp_path / "zero.mlir", add_zero, x, W)
    given = ["--input", "2x4xf32=[-0 1 -2 0.5][3 -0 4 1]", "--input", "4x4xf32=0.25"]
    assert hlogen("compare", path, *given).exit_code == 0  # -0 matches +0 by XLA's rule
    found = hlogen("bisect", path, *given, "--bitwise", "--json", tmp_path / "v.json")
    assert found.exit_code == 0, found.output
    assert "it stays with every HLO pass disabled: the StableHLO-to-HLO conversion or code " \
           "generation" in found.output
    verdict = json.loads((tmp_path / "v.json").read_text())
    assert verdict["stage"] == "conversion-or-codegen" and verdict["passes"] == []
    still = shlex.split(verdict["reproduce"]["every_pass_disabled"])
    assert "xla_disable_all_hlo_passes=true" in still
    shown = hlogen(*still[1:])
    assert shown.exit_code == 1 and "at [0, 0]: test cpu -0, reference interpret 0" in shown.output


def test_bisect_needs_an_xla_test_side(tmp_path):
    path = write_module(tmp_path / "layer.mlir", layer, X, W)
    refused = hlogen("bisect", path, "--test", "interpret", "--reference", "cpu")
    assert refused.exit_code == 2
    assert "the test side must be an XLA backend, not the interpreter" in refused.output

