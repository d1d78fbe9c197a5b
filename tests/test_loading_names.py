"""Parameter names that hold (hlogen.computation.NAME_ATTRIBUTE): kept in text printed
without locations, bytecode, portable artifacts and modules converted from HLO, read
back from each; an .npz keyed by them feeds each parameter its own array in every form."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops

HLOGEN = str(pathlib.Path(sys.executable).with_name("hlogen"))
AFFINE_PY = textwrap.dedent("""\
    import hlogen as hg
    from hlogen import ops


    @hg.function
    def affine(x: hg.f32[3], scale: hg.f32[3], shift: hg.f32[3]):
        return ops.add(ops.mul(x, scale), shift)
    """)
X = np.array([1, 2, 3], np.float32)
SCALE = np.array([10, 100, 1000], np.float32)
SHIFT = np.array([0.5, 0.25, 0.125], np.float32)


def affine() -> hg.Computation:
    b = hg.Builder("affine")
    x = b.parameter(hg.f32[3], "x")
    scale = b.parameter(hg.f32[3], "scale")
    shift = b.parameter(hg.f32[3], "shift")
    return b.build(ops.add(ops.mul(x, scale), shift))


FORMS = {
    "text": lambda c: c.as_text().encode(),  # no locations
    "text_with_locations": lambda c: c.as_text(debug_info=True).encode(),
    "bytecode": lambda c: c.to_bytecode(),
    "portable": lambda c: c.to_portable(),
    "portable_1.0.0": lambda c: c.to_portable("1.0.0"),
}


@pytest.mark.parametrize("form", sorted(FORMS))
def test_names_survive_every_form(form):
    comp = hg.load(FORMS[form](affine()))
    assert comp.parameter_names == ["x", "scale", "shift"]
    assert hg.load(comp.as_text()).parameter_names == ["x", "scale", "shift"]


def test_text_without_locations_says_the_names():
    text = affine().as_text()
    assert "loc(" not in text and 'hlogen.name = "scale"' in text


def test_unnamed_parameters_are_numbered_and_named_ones_kept():
    b = hg.Builder("mixed")
    a = b.parameter(hg.f32[()])
    n = b.parameter(hg.f32[()], "n")
    comp = hg.load(b.build(ops.add(a, n)).as_text())
    assert comp.parameter_names == ["arg0", "n"]


def test_hlo_names_are_kept_through_conversion():
    hlo = textwrap.dedent("""\
        HloModule m
        ENTRY %main (x: f32[3], shift: f32[3]) -> f32[3] {
          %x = f32[3] parameter(0)
          %shift = f32[3] parameter(1)
          ROOT %r = f32[3] add(%x, %shift)
        }
        """)
    comp = hg.load(hlo)
    assert comp.parameter_names == ["x", "shift"]
    for form in ("text", "bytecode", "portable"):
        assert hg.load(FORMS[form](comp)).parameter_names == ["x", "shift"]


def cli(*args, cwd=None):
    return subprocess.run([HLOGEN, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    """affine emitted by `hlogen emit` in each format, and an .npz keyed by its names in
    another order than the parameters' (np.savez keeps the keys' order)."""
    where = tmp_path_factory.mktemp("names")
    (where / "affine.py").write_text(AFFINE_PY)
    for fmt in ("text", "bytecode", "portable"):
        run = cli("emit", where / "affine.py", "--format", fmt, "-o", where / f"affine.{fmt}")
        assert run.returncode == 0, run.stderr
    np.savez(where / "by_name.npz", shift=SHIFT, x=X, scale=SCALE)
    np.savez(where / "by_order.npz", arg0=X, arg1=SCALE, arg2=SHIFT)
    np.savez(where / "wrong.npz", shift=SHIFT, x=X, scales=SCALE)
    return where


@pytest.mark.parametrize("fmt", ["text", "bytecode", "portable"])
def test_an_npz_keyed_by_name_is_matched_by_name_in_every_form(emitted, fmt):
    out = emitted / f"out_{fmt}.npz"
    run = cli("run", emitted / f"affine.{fmt}", "--input", emitted / "by_name.npz",
              "--output", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["result_0"], X * SCALE + SHIFT)


def test_arg_names_mean_order(emitted):
    out = emitted / "out_order.npz"
    run = cli("run", emitted / "affine.text", "--input", emitted / "by_order.npz",
              "--output", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as saved:
        np.testing.assert_array_equal(saved["result_0"], X * SCALE + SHIFT)


def test_keys_that_name_no_parameter_are_an_error_listing_both(emitted):
    run = cli("run", emitted / "affine.text", "--input", emitted / "wrong.npz")
    assert run.returncode == 2
    assert "scales" in run.stderr and "x, scale, shift" in run.stderr
