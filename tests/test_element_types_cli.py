"""The narrow element types on the command line, through the installed `hlogen`: `.npy`
files of them (numpy saves ml_dtypes types as raw `|V1`) in and out, literals by XLA's
and MLIR's names, and the refusal of what a backend cannot run (exit 2, before native
code). References: ml_dtypes (doubling is exact for the values chosen)."""
from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
from tests.helpers import WRONG_TYPES
from tests.helpers import hlogen_in as hlogen


# values whose doubles each type holds exactly
VALUES = {
    "f8e4m3": [1.5, -3.25, 100.0, 0.125], "f8e3m4": [1.5, -3.25, 7.0, 0.125],
    "f8e4m3fnuz": [1.5, -3.25, 100.0, 0.125], "f8e5m2fnuz": [1.5, -3.0, 96.0, 0.125],
    "f8e4m3b11fnuz": [1.5, -3.25, 14.0, 0.125], "f8e8m0fnu": [1.0, 0.5, 64.0, 2.0 ** -20],
    "f4e2m1fn": [1.5, -1.0, 3.0, 0.5], "f6e2m3fn": [1.5, -3.25, 0.5, 0.125],
    "f6e3m2fn": [1.5, -3.0, 12.0, 0.125], "s2": [0, -1, -2, 1], "u2": [0, 1, 1, 0],
}


def _backend(et):
    """A backend that runs `et` (None: neither does)."""
    return next((b for b in ("cpu", "interpret") if et.name not in WRONG_TYPES[b]), None)


@pytest.mark.parametrize("name", list(VALUES))
def test_npy_of_each_type_in_and_out(tmp_path, name):
    et = hg.ELEMENT_TYPES[name]
    x = np.array(VALUES[name], et.dtype)
    (tmp_path / "double.py").write_text(
        f"import hlogen as hg\n\n\n@hg.function\ndef double(x: hg.{name}[4]):\n    return x + x\n")
    np.save(tmp_path / "x.npy", x)
    assert np.load(tmp_path / "x.npy").dtype.str == "|V1"
    backend = _backend(et)
    if backend is None:  # f6: refused with the types table's reason, no native code run
        run = hlogen(tmp_path, "run", "double.py", "--input", "@x.npy")
        assert run.returncode == 2 and "XLA CPU has no f6 types" in run.stderr, run.stderr
        return
    want = (x.astype(np.int64) * 2).astype(et.dtype) if et.is_integer else \
        (x.astype(np.float32) * 2).astype(et.dtype)
    run = hlogen(tmp_path, "run", "double.py", "--input", "@x.npy", "--backend", backend,
                 "--output", "@y.npy")
    assert run.returncode == 0, run.stderr
    got = np.load(tmp_path / "y.npy").view(et.dtype)
    assert got.tobytes() == want.tobytes(), (got, want)
    checked = hlogen(tmp_path, "run", "double.py", "--input", "@x.npy", "--backend", backend,
                     "--expected-output", "@y.npy")
    assert checked.returncode == 0 and "result[0]: all" in checked.stdout, checked


@pytest.mark.parametrize("spec,name,values", [
    ("4xf8E4M3FNUZ=1,0.5,-2,3", "f8e4m3fnuz", [1, 0.5, -2, 3]),
    ("4xf8e3m4=1,0.5,-2,3", "f8e3m4", [1, 0.5, -2, 3]),
    ("4xi2=1,0,-1,-2", "s2", [1, 0, -1, -2]),
    ("4xu2=3,0,1,2", "u2", [3, 0, 1, 2]),
])
def test_literals_by_either_name(tmp_path, spec, name, values):
    et = hg.ELEMENT_TYPES[name]
    (tmp_path / "same.py").write_text(
        f"import hlogen as hg\n\n\n@hg.function\ndef same(x: hg.{name}[4]):\n    return x\n")
    run = hlogen(tmp_path, "run", "same.py", "--input", spec, "--output", "@y.npy")
    assert run.returncode == 0, run.stderr
    got = np.load(tmp_path / "y.npy").view(et.dtype)
    assert got.tobytes() == np.array(values, et.dtype).tobytes()


@pytest.mark.parametrize("spec,says", [
    ("4xi2=1,0,-1,2", "not representable as s2"),
    ("4xf8E8M0FNU=1,0,2,4", "not representable as f8e8m0fnu"),  # no zero (not "out of range")
    ("4xf8E4M3FNUZ=1,2,3,300", "out of range of f8e4m3fnuz"),
])
def test_literals_a_type_cannot_hold_are_refused(tmp_path, spec, says):
    name = hg.element_type(spec.split("=")[0].split("x")[1]).name
    (tmp_path / "same.py").write_text(
        f"import hlogen as hg\n\n\n@hg.function\ndef same(x: hg.{name}[4]):\n    return x\n")
    run = hlogen(tmp_path, "run", "same.py", "--input", spec)
    assert run.returncode == 2 and says in run.stderr, run.stderr


def test_e8m0_results_travel_as_raw_bytes(tmp_path):
    """f8e8m0fnu's NaN (0xFF) comes back as its byte."""
    (tmp_path / "m.mlir").write_text(
        "func.func @main(%x: tensor<2xf8E8M0FNU>) -> tensor<2xf8E8M0FNU> {\n"
        "  return %x : tensor<2xf8E8M0FNU>\n}\n")
    np.save(tmp_path / "x.npy", np.array([np.nan, 4.0], ml_dtypes.float8_e8m0fnu))
    run = hlogen(tmp_path, "run", "m.mlir", "--input", "@x.npy", "--output", "@y.npy")
    assert run.returncode == 0, run.stderr
    assert np.load(tmp_path / "y.npy").view(np.uint8).tolist() == [0xFF, 0x81]
