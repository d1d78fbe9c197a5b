"""samples/computations.py: each function emitted by `hlogen emit`, and the emitted .mlir
run by `hlogen run` on PJRT and on the interpreter, checked against numpy."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_samples_indexing import _literal

SAMPLE = str(pathlib.Path(__file__).resolve().parent.parent / "samples" / "computations.py")


def _softmax(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


CASES = {  # function: (inputs, expected results, exact)
    "softmax": ([np.array([[1, 2, 3, 4], [0, 0, 0, 10]], np.float32)],
                lambda x: [_softmax(x.astype(np.float64))], False),
    "argmax": ([np.array([3, -1, 8.5, 2, 8.5, 0], np.float32)],
               lambda x: [x.max(), np.argmax(x)], True),
    "max_pool": ([np.array([[1, 9, 2, 3], [4, 0, 8, 7], [5, 6, 1, 2], [3, 4, 0, 1]], np.float32)],
                 lambda x: [x.reshape(2, 2, 2, 2).max(axis=(1, 3))], True),
    "newton_sqrt": ([np.array([2, 9, 0.25], np.float32)], lambda x: [np.sqrt(x)], False),
}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    out = tmp_path_factory.mktemp("emitted")
    result = CliRunner().invoke(main, ["emit", SAMPLE, "-o", str(out)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
@pytest.mark.parametrize("function", CASES)
def test_emitted_sample_runs(function, backend, emitted, tmp_path):
    inputs, reference, exact = CASES[function]
    out = tmp_path / "out.npz"
    args = ["run", str(emitted / f"{function}.mlir"), "--backend", backend, "--output", str(out)]
    for array in inputs:
        args += ["--input", _literal(array)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with np.load(out) as data:
        got = [data[k] for k in sorted(data.files)]
    for g, e in zip(got, reference(*inputs)):
        if exact:
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=2e-6, atol=1e-7)
