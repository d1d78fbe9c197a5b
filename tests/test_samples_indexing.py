"""samples/indexing.py: each function run by `hlogen run` on PJRT and on the interpreter,
checked against numpy."""
from __future__ import annotations

import pathlib

import numpy as np
import pytest
from click.testing import CliRunner

from hlogen_cli.main import main

SAMPLE = str(pathlib.Path(__file__).resolve().parent.parent / "samples" / "indexing.py")
TABLE = np.array([[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]], np.float32)
VALUES = np.array([0.5, 1.5, 1.7, 3.2, -1, 7.9, 8, 3.3], np.float32)
SCORES = np.array([[1, 9, 3, 9, 0], [-1, -2, -3, -4, -5]], np.float32)


def _literal(array):
    et = {"float32": "f32", "int32": "s32"}[str(array.dtype)]
    dims = "x".join(map(str, array.shape))
    return f"{dims}x{et}=" + ",".join(str(v) for v in array.reshape(-1).tolist())


def run_sample(function, backend, *inputs, tmp_path):
    out = tmp_path / f"{function}-{backend}.npz"
    args = ["run", SAMPLE, "--function", function, "--backend", backend, "--output", str(out)]
    for array in inputs:
        args += ["--input", _literal(array)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with np.load(out) as data:
        return [data[k] for k in sorted(data.files)]


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_embedding_lookup(backend, tmp_path):
    ids = np.array([3, 0, 0, 2, 9], np.int32)
    (rows,) = run_sample("embedding_lookup", backend, TABLE, ids, tmp_path=tmp_path)
    np.testing.assert_array_equal(rows, TABLE[np.clip(ids, 0, 3)])


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_histogram(backend, tmp_path):
    (counts,) = run_sample("histogram", backend, VALUES, tmp_path=tmp_path)
    np.testing.assert_array_equal(counts, np.histogram(VALUES, bins=4, range=(0, 4))[0])


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_top_3(backend, tmp_path):
    values, indices = run_sample("top_3", backend, SCORES, tmp_path=tmp_path)
    order = np.argsort(-SCORES, axis=1, kind="stable")[:, :3]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(SCORES, order, axis=1))
