"""Arrays from files on the command line (issue 18, items 3 and 4), through the
installed `hlogen` as a user runs it:

- `.npy`/`.npz` arrays of ml_dtypes types, which numpy saves as raw `|V2`/`|V1`, go to
  parameters (and results, for --expected-output) of that width; --output writes
  results that numpy with ml_dtypes reads back with `.view(type)`;
- an `.npz` keyed by parameter names is matched by name, also in a module read back from
  bytecode; other keys are an error naming both sides; arg0, arg1, ... mean order.

References: numpy with ml_dtypes (doubling is exact in every float type; int4 values are
chosen so that it does not wrap)."""
from __future__ import annotations


import ml_dtypes
import numpy as np
import pytest
from tests.helpers import hlogen_in as hlogen


FUNCTIONS = '''import hlogen as hg


@hg.function
def affine(x: hg.f32[3], scale: hg.f32[3], shift: hg.f32[3]):
    return x * scale + shift
'''
# the element types numpy stores as raw bytes, with values whose doubles they hold exactly
RAW_TYPES = {
    "bf16": (ml_dtypes.bfloat16, [1.5, -3.25, 100.0, 0.0078125]),
    "f8e4m3fn": (ml_dtypes.float8_e4m3fn, [1.5, -3.25, 100.0, 0.125]),
    "f8e5m2": (ml_dtypes.float8_e5m2, [1.5, -3.0, 96.0, 0.125]),
    "s4": (ml_dtypes.int4, [1, -3, 3, -4]),
    "u4": (ml_dtypes.uint4, [1, 3, 7, 0]),
}
X = np.float32([1, 2, 3])
SCALE = np.float32([10, 20, 30])
SHIFT = np.float32([0.5, -0.5, 100])


def raw(array: np.ndarray) -> np.ndarray:
    return array.view(f"V{array.dtype.itemsize}")


@pytest.mark.parametrize("type_name", list(RAW_TYPES))
def test_raw_ml_dtypes_arrays_in_and_out(tmp_path, type_name):
    dtype, values = RAW_TYPES[type_name]
    x = np.array(values, dtype)
    (tmp_path / "double.py").write_text(
        f"import hlogen as hg\n\n\n@hg.function\ndef double(x: hg.{type_name}[4]):\n"
        f"    return x + x\n")
    # numpy saves these types as raw bytes (float8_e5m2 excepted: as '<f1', which it
    # cannot load, so a user saves its raw bytes)
    np.save(tmp_path / "x.npy", raw(x) if type_name == "f8e5m2" else x)
    assert np.load(tmp_path / "x.npy").dtype.kind == "V"
    want = (x.astype(np.float32) * 2).astype(dtype)
    run = hlogen(tmp_path, "run", "double.py", "--input", "@x.npy", "--output", "@y.npy")
    assert run.returncode == 0, run.stderr
    got = np.load(tmp_path / "y.npy").view(dtype)  # how --help says to read it back
    np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    np.savez(tmp_path / "y.npz", result_0=raw(want))
    for expected in ("@y.npy", "y.npz"):
        checked = hlogen(tmp_path, "run", "double.py", "--input", "@x.npy",
                         "--expected-output", expected)
        assert checked.returncode == 0, checked.stderr
        assert "result[0]: all 4 elements match" in checked.stdout


def test_an_npy_that_numpy_cannot_read_says_how_to_save_it(tmp_path):
    (tmp_path / "f.py").write_text(
        "import hlogen as hg\n\n\n@hg.function\ndef f(x: hg.f8e5m2[2]):\n    return x\n")
    np.save(tmp_path / "x.npy", np.array([1, 2], ml_dtypes.float8_e5m2))
    result = hlogen(tmp_path, "run", "f.py", "--input", "@x.npy")
    assert result.returncode == 2
    assert "descr is not a valid dtype descriptor: '<f1' (np.save writes float8_e5m2 arrays " \
        "so, and np.load refuses them: save x.view('V1') instead)" in result.stderr


def test_raw_bytes_of_another_width_are_refused(tmp_path):
    (tmp_path / "f.py").write_text(FUNCTIONS)
    np.save(tmp_path / "b.npy", np.array([1, 2, 3], ml_dtypes.bfloat16))
    result = hlogen(tmp_path, "run", "f.py", "--input", "@b.npy", "--input", "3xf32=1",
                    "--input", "3xf32=0")
    assert result.returncode == 2
    assert result.stderr == ("error: --input value 0: raw 2-byte data (|V2: how numpy saves "
                             "bf16, f4, f6, f8, int2 and int4 arrays) is read as the element type "
                             "of the "
                             "value it goes to, when that type is 2 byte(s) wide; 'x' is "
                             "f32[3]\n")


@pytest.mark.parametrize("source", ["py", "bytecode"])
def test_an_npz_keyed_by_parameter_names_is_matched_by_name(tmp_path, source):
    (tmp_path / "f.py").write_text(FUNCTIONS)
    module = "f.py"
    if source == "bytecode":
        emitted = hlogen(tmp_path, "emit", "f.py", "--format", "bytecode", "-o", "f.mlirbc")
        assert emitted.returncode == 0, emitted.stderr
        assert "affine(x: f32[3], scale: f32[3], shift: f32[3])" in emitted.stdout
        module = "f.mlirbc"
    np.savez(tmp_path / "named.npz", shift=SHIFT, x=X, scale=SCALE)  # not in parameter order
    np.savez(tmp_path / "ordered.npz", arg0=X, arg1=SCALE, arg2=SHIFT)
    np.savez(tmp_path / "positional.npz", X, SCALE, SHIFT)  # arr_0, arr_1, arr_2
    np.savez(tmp_path / "shift.npz", shift=SHIFT)
    want = X * SCALE + SHIFT
    for inputs in (["named.npz"], ["ordered.npz"], ["positional.npz"],
                   ["3xf32=1,2,3", "3xf32=10,20,30", "shift.npz"]):
        result = hlogen(tmp_path, "run", module, *[a for i in inputs for a in ("--input", i)],
                        "--output", "out.npz")
        assert result.returncode == 0, (inputs, result.stderr)
        np.testing.assert_array_equal(np.load(tmp_path / "out.npz")["result_0"], want)


def test_npz_keys_that_name_no_parameter_are_refused(tmp_path):
    (tmp_path / "f.py").write_text(FUNCTIONS)
    np.savez(tmp_path / "typo.npz", x=X, scale=SCALE, shfit=SHIFT)
    typo = hlogen(tmp_path, "run", "f.py", "--input", "typo.npz")
    assert typo.returncode == 2
    assert typo.stderr == ("error: --input typo.npz: its arrays are named x, scale, shfit; the "
                           "names wanted are x, scale, shift (shfit names none of them): key the "
                           "arrays by these names, or arg0, arg1, ... for order (np.savez's "
                           "arr_0, arr_1, ... too)\n")
    np.savez(tmp_path / "shift.npz", shift=SHIFT)
    misplaced = hlogen(tmp_path, "run", "f.py", "--input", "3xf32=1", "--input", "shift.npz",
                       "--input", "3xf32=2")
    assert misplaced.returncode == 2
    assert "its array 'shift' comes as value 1, for parameter 1 'scale'" in misplaced.stderr
    np.savez(tmp_path / "results.npz", result_0=X)
    expected = hlogen(tmp_path, "run", "f.py", "--input", "3xf32=1", "--input", "3xf32=1",
                      "--input", "3xf32=1", "--expected-output", "results.npz")
    assert expected.returncode == 1  # matched by name (result_0), and it differs: [2 2 2]
    assert "result[0]: 2 of 3 elements differ" in expected.stdout
