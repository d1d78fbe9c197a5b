"""A module read from a file keeps the file in its ops' locations: XLA's metadata
(`compile --hlo`), hlogen's messages and graphs say where an op is."""
from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import numpy as np

import hlogen as hg

HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")
MODULE = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = stablehlo.exponential %x : tensor<3xf32>
  %1 = stablehlo.add %0, %x : tensor<3xf32>
  return %1 : tensor<3xf32>
}
"""


def test_a_loaded_file_names_itself_in_the_locations(tmp_path):
    path = tmp_path / "f.mlir"
    path.write_text(MODULE)
    text = hg.load(path).as_text(debug_info=True)
    assert f'loc("{path}":3:8)' in text  # the add, at its line and column
    assert '"-"' not in text
    metadata = set(re.findall(r'source_file="([^"]*)"', hg.compile(hg.load(path)).optimized_hlo()))
    assert metadata == {str(path)}


def test_compile_hlo_names_the_file_and_standard_input_stays_unnamed(tmp_path):
    path = tmp_path / "f.mlir"
    path.write_text(MODULE)
    by_file = subprocess.run([HLOGEN, "compile", path, "--hlo", "--no-cache"], capture_output=True,
                             text=True, timeout=300)
    assert by_file.returncode == 0, by_file.stderr
    assert set(re.findall(r'source_file="([^"]*)"', by_file.stdout)) == {str(path)}
    piped = subprocess.run([HLOGEN, "compile", "-", "--hlo", "--no-cache"], input=MODULE,
                           capture_output=True, text=True, timeout=300)
    assert piped.returncode == 0, piped.stderr
    assert "exponential" in piped.stdout


def test_text_given_as_a_string_still_runs(tmp_path):
    x = np.array([0, 1, 2], np.float32)
    np.testing.assert_allclose(hg.compile(hg.load(MODULE))(x), np.exp(x) + x, rtol=1e-6)
