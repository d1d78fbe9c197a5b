"""samples/mlp.py and samples/conv2d.py run by `hlogen run` from .npz inputs on PJRT and
the interpreter, checked against numpy."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from click.testing import CliRunner

from hlogen_cli.main import main

SAMPLES = pathlib.Path(__file__).resolve().parent.parent / "samples"
RNG = np.random.default_rng(11)


def run_sample(name, backend, inputs: dict, tmp_path):
    np.savez(tmp_path / "in.npz", **inputs)
    out = tmp_path / "out.npz"
    result = CliRunner().invoke(main, ["run", str(SAMPLES / f"{name}.py"), "--backend", backend,
                                       "--input", str(tmp_path / "in.npz"), "--output", str(out)],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with np.load(out) as data:
        return data[data.files[0]]


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_mlp(backend, tmp_path):
    p = {"x": (4, 3), "w1": (3, 8), "b1": (8,), "w2": (8, 2), "b2": (2,)}
    inputs = {k: RNG.standard_normal(s).astype(np.float32) for k, s in p.items()}
    got = run_sample("mlp", backend, inputs, tmp_path)
    i = {k: v.astype(np.float64) for k, v in inputs.items()}
    expected = np.tanh(i["x"] @ i["w1"] + i["b1"]) @ i["w2"] + i["b2"]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_conv2d(backend, tmp_path):
    inputs = {"image": RNG.standard_normal((1, 5, 5, 2)).astype(np.float32),
              "kernel": RNG.standard_normal((3, 3, 2, 4)).astype(np.float32),
              "bias": RNG.standard_normal(4).astype(np.float32)}
    got = run_sample("conv2d", backend, inputs, tmp_path)
    padded = np.pad(inputs["image"].astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
    expected = np.zeros((1, 5, 5, 4))
    for y in range(5):
        for x in range(5):
            expected[0, y, x] = np.einsum("hwc,hwco->o", padded[0, y:y + 3, x:x + 3],
                                          inputs["kernel"])
    expected = np.maximum(expected + inputs["bias"], 0)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
