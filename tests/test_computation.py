"""Builder, Computation, serialization round trips, load errors, locations, passes."""
from __future__ import annotations


import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests.helpers import BACKENDS, EVERY_TYPE, run


def _matvec():
    b = hg.Builder("matvec")
    x = b.parameter(hg.f32[2, 3], "x")
    v = b.parameter(hg.f32[3], "v")
    return b.build(ops.erf(ops.add(x, v, broadcast_dimensions=[1])), ops.iota(b, hg.s32[4], 0))


ARGS = (np.arange(6, dtype=np.float32).reshape(2, 3) / 4, np.array([-1, 0, 1], np.float32))


def test_signature():
    comp = _matvec()
    assert comp.name == "matvec"
    assert comp.parameter_shapes == [hg.f32[2, 3], hg.f32[3]]
    assert comp.parameter_names == ["x", "v"]
    assert comp.result_shapes == [hg.f32[2, 3], hg.s32[4]]
    assert comp.signature() == "matvec(x: f32[2,3], v: f32[3]) -> (f32[2,3], s32[4])"


@pytest.mark.parametrize("form", ["text", "bytecode", "portable", "portable-1.0.0", "file"])
def test_round_trip(form, tmp_path):
    comp = _matvec()
    if form == "text":
        loaded = hg.load(comp.as_text())
    elif form == "bytecode":
        loaded = hg.load(comp.to_bytecode())
    elif form.startswith("portable"):
        version = form.partition("-")[2] or None
        loaded = hg.load(comp.to_portable(target_version=version))
    else:
        path = tmp_path / "m.mlir"
        path.write_text(comp.as_text(debug_info=True))
        loaded = hg.load(path)
        assert loaded.parameter_names == ["x", "v"]  # names travel in the locations
    assert loaded.parameter_shapes == comp.parameter_shapes
    assert loaded.result_shapes == comp.result_shapes
    # a portable artifact holds StableHLO only: CHLO ops arrive legalized
    expected = hg.passes.run(comp, "legalize") if form.startswith("portable") else comp
    assert loaded.as_text() == expected.as_text()
    for backend in BACKENDS:
        for got, want in zip(run(loaded, backend, *ARGS), run(comp, backend, *ARGS)):
            np.testing.assert_array_equal(got, want)


def test_portable_artifact_rejects_bad_versions():
    with pytest.raises(hg.HlogenError, match="target_version must look like"):
        _matvec().to_portable("latest")
    with pytest.raises(hg.HlogenError, match="cannot serialize for StableHLO 0.1.0"):
        _matvec().to_portable("0.1.0")


def test_every_op_carries_the_users_file_and_line():
    b = hg.Builder("located")
    x = b.parameter(hg.f32[2], "x")
    line = _line_of_next_statement()
    comp = b.build(ops.add(ops.exp(x), 1.0))
    body = comp.module.body.operations[0].regions[0].blocks[0].operations
    for op in body:
        if op.operation.name != "func.return":
            assert str(op.location) == f'loc("{__file__}":{line}:0)', op


def _line_of_next_statement():
    import inspect
    return inspect.currentframe().f_back.f_lineno + 1


@pytest.mark.parametrize("text,where", [
    ("module {\n  func.func @main() {\n    %0 = stablehlo.bogus : tensor<f32>\n", r"<text>:3:"),
    ("func.func @main(%a: tensor<2xf32>) -> tensor<3xf32> {\n  return %a : tensor<2xf32>\n}", r"<text>:2:3"),
    ("this is not MLIR {", r"<text>:1:1"),
])
def test_malformed_text_names_line_and_column(text, where):
    with pytest.raises(hg.InputError, match=where):
        hg.load(text)


def test_load_errors_name_the_file(tmp_path):
    with pytest.raises(hg.InputError, match=r"missing\.mlir: cannot read"):
        hg.load(tmp_path / "missing.mlir")
    bad = tmp_path / "bad.mlir"
    bad.write_text("func.func @main() {\n  %0 = stablehlo.add\n}\n")
    with pytest.raises(hg.InputError, match=rf"{bad}:2:"):
        hg.load(str(bad))
    with pytest.raises(hg.InputError, match="no function @main"):
        hg.load("func.func @f() {\n return\n}")
    with pytest.raises(hg.InputError, match="takes a path, MLIR text or bytes"):
        hg.load(42)


def test_builder_errors():
    b = hg.Builder("once")
    x = b.parameter(hg.f32[2], "x")
    with pytest.raises(hg.HlogenError, match="name 'x' is already used by parameter 0"):
        b.parameter(hg.f32[2], "x")
    with pytest.raises(hg.HlogenError, match="needs at least one result"):
        b.build()
    with pytest.raises(hg.HlogenError, match="belongs to Builder"):
        b.build(hg.Builder("other").parameter(hg.f32[2]))
    b.build(x)
    with pytest.raises(hg.HlogenError, match="was already built"):
        ops.neg(x)
    with pytest.raises(hg.HlogenError, match="must be an identifier"):
        hg.Builder("no spaces")
    with pytest.raises(hg.ShapeError, match="not an element type"):
        hg.Shape("f33", (2,))
    with pytest.raises(hg.ShapeError, match="non-negative integers"):
        hg.f32[2, -1]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("et", EVERY_TYPE, ids=lambda t: t.name)
def test_constants_of_every_type(et, backend):
    from tests.references import values
    array = values(et)
    b = hg.Builder("constants")
    comp = b.build(b.constant(array), b.constant(array[:1].reshape(()) if array.size else array))
    got, scalar = run(comp, backend)
    assert got.dtype == et.dtype
    np.testing.assert_array_equal(got.astype(np.complex128), array.astype(np.complex128))
    assert scalar.shape == ()


def test_constant_defaults_and_splats():
    b = hg.Builder("defaults")
    assert b.constant(1).shape == hg.s32[()]
    assert b.constant(1.5).shape == hg.f32[()]
    assert b.constant(True).shape == hg.pred[()]
    assert b.constant(1j).shape == hg.c64[()]
    assert b.constant([[1, 2], [3, 4]]).shape == hg.s32[2, 2]
    assert b.constant(np.zeros(3, np.float64)).shape == hg.f64[3]
    assert b.constant(2, dtype="bf16").shape == hg.bf16[()]
    splat = b.constant(np.full((64, 64), 0.5, np.float32))
    assert "dense<5.000000e-01> : tensor<64x64xf32>" in str(splat.value.owner)
    signed_zeros = b.constant(np.array([0.0, -0.0], np.float32))  # not a splat: -0 differs
    assert "-0.0" in str(signed_zeros.value.owner)
    with pytest.raises(hg.ShapeError, match="not representable as s8"):
        b.constant(300, dtype=hg.s8)
    # numpy values given a dtype convert only where nothing is lost (floats may round)
    assert b.constant(np.array([0.1, 2]), dtype=hg.f16).shape == hg.f16[2]
    with pytest.raises(hg.ShapeError, match="not representable as u8"):
        b.constant(np.array([300]), dtype=hg.u8)
    with pytest.raises(hg.ShapeError, match="not representable as s32"):
        b.constant(np.array([1.5]), dtype=hg.s32)
    with pytest.raises(hg.ShapeError, match="not a number"):
        b.constant("text")


def test_passes():
    comp = _matvec()
    assert "chlo.erf" in comp.as_text()
    legal = hg.passes.run(comp, "legalize")
    assert "chlo." not in legal.as_text()
    assert "chlo.erf" in comp.as_text()  # the original is unchanged
    for pipeline in ("default", "legalize,canonicalize"):
        assert hg.passes.foreign_ops(hg.passes.run(comp, pipeline)) == []
    raw = hg.passes.run(comp, "builtin.module(func.func(chlo-legalize-to-stablehlo))")
    assert "chlo." not in raw.as_text()
    for backend in BACKENDS:
        np.testing.assert_allclose(run(hg.passes.run(comp, "default"), backend, *ARGS)[0],
                                   run(comp, backend, *ARGS)[0], rtol=1e-6)
    with pytest.raises(hg.HlogenError, match="unknown pipeline 'optimize'"):
        hg.passes.run(comp, "optimize")
    with pytest.raises(hg.HlogenError, match="invalid pass pipeline"):
        hg.passes.run(comp, "builtin.module(no-such-pass)")


def test_canonicalize_simplifies():
    b = hg.Builder("simplify")
    x = b.parameter(hg.f32[4], "x")
    comp = b.build(ops.add(ops.mul(x, 1.0), ops.mul(x, 1.0)))
    assert comp.as_text().count("stablehlo.multiply") == 2
    assert hg.passes.run(comp, "canonicalize").as_text().count("stablehlo.multiply") <= 1


@hg.function
def _annotated(x: hg.f32[3], n: hg.s32[()]):
    return ops.mul(x, ops.convert_element_type(n, hg.f32)), n


def test_function_decorator():
    assert _annotated.computation.signature() == "_annotated(x: f32[3], n: s32[]) -> (f32[3], s32[])"
    y, n = _annotated(np.array([1, 2, 3], np.float32), np.int32(2))
    np.testing.assert_array_equal(y, [2, 4, 6])
    assert n == 2
    with pytest.raises(hg.HlogenError, match="parameter 'y' needs a shape annotation"):
        hg.function(lambda y: y)
    def returns_a_number(y: hg.f32[2]):
        return 3
    with pytest.raises(hg.HlogenError, match="returns_a_number: must return an Op"):
        hg.function(returns_a_number)


def test_shapes_accept_names_and_numpy_types():
    assert hg.Shape("f32", (2, 3)) == hg.Shape(hg.f32, (2, 3)) == hg.f32[2, 3]
    assert hg.Shape(np.float32, (2, 3)) == hg.f32[2, 3]
    assert hg.Shape(np.dtype("int8"), ()) == hg.s8[()]
    assert hg.element_type("bfloat16") is hg.bf16
    assert str(hg.tuple_shape(hg.f32[10], hg.s32[()])) == "(f32[10], s32[])"
    b = hg.Builder("names")
    assert b.parameter(hg.Shape("u8", [4])).shape == hg.u8[4]
