"""Modules jax writes, as it writes them (hlogen.loading, hlogen.exports): `.lower(...)`'s
text and bytecode, jax.export's portable artifact and its serialized `Exported`, with
what jax puts in them (sdy attributes, LAPACK custom calls, random bits, bf16, f64,
pytrees, scans); each run with hlogen (PJRT, and the interpreter where its ops allow)
and compared with jax, through the API and the command line."""
from __future__ import annotations

import io
import pathlib
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import hlogen as hg

HLOGEN = str(pathlib.Path(sys.executable).with_name("hlogen"))
RNG = np.random.default_rng(1)
A = (RNG.standard_normal((4, 4)) + 4 * np.eye(4)).astype(np.float32)
B = RNG.standard_normal((4, 2)).astype(np.float32)


def solve_and_inverse(a, b):
    return jnp.linalg.solve(a, b), jnp.linalg.inv(a)


def cholesky_and_eigh(a):
    spd = a @ a.T + 4 * jnp.eye(a.shape[0], dtype=a.dtype)
    return jnp.linalg.cholesky(spd), jnp.linalg.eigh(spd)[0]


def normal(seed):
    return jax.random.normal(jax.random.key(seed), (5,))


def bf16_softmax(x):
    return jax.nn.softmax(x.astype(jnp.bfloat16)).astype(jnp.float32)


def f64_cumsum(x):
    return jax.lax.scan(lambda c, y: (c + y, c * y), jnp.float64(0), x)


_tanh_composite = jax.lax.composite(lambda x: jnp.tanh(x), name="hlogen_test.tanh")


def composite(x):  # a stablehlo.composite op, with its decomposition
    return _tanh_composite(x) * 2


def pytree(params, x):
    h = jnp.tanh(x @ params["w"] + params["b"])
    return {"out": h, "norm": jnp.sum(h * h)}


PARAMS = {"b": RNG.standard_normal(3).astype(np.float32),
          "w": RNG.standard_normal((2, 3)).astype(np.float32)}
XS = RNG.standard_normal((4, 2)).astype(np.float32)
CASES = {
    # name: (function, its arguments (a pytree), whether the interpreter runs it)
    # (the interpreter runs jaxlib's LAPACK getrf and trsm as hlogen rewrites them, not
    # its eigensolver)
    "linalg_solve": (solve_and_inverse, (A, B), True),
    "linalg_eigh": (cholesky_and_eigh, (A,), False),
    "random": (normal, (np.uint32(7),), True),
    # (XLA CPU computes bf16 in f32 where jax's own run does; the interpreter rounds each
    # op's result to bf16: they agree to bf16's precision)
    "bf16": (bf16_softmax, (RNG.standard_normal(6).astype(np.float32),), True),
    "f64_scan": (f64_cumsum, (np.arange(5, dtype=np.float64),), True),
    "pytree": (pytree, (PARAMS, XS), True),
    "composite": (composite, (np.linspace(-1, 1, 4, dtype=np.float32),), True),
}


@pytest.fixture(autouse=True, scope="module")
def x64():
    with jax.enable_x64(True):
        yield


def _flat(args):
    return jax.tree_util.tree_leaves(args)


def _expected(name):
    f, args, _ = CASES[name]
    return [np.asarray(r) for r in jax.tree_util.tree_leaves(jax.jit(f)(*args))]


TOLERANCE = {"bf16": 2e-2}


def _check(comp, name, backends=None):
    f, args, interpretable = CASES[name]
    rtol = TOLERANCE.get(name, 1e-5)
    expected = _expected(name)
    for backend in backends or (["cpu", "interpret"] if interpretable else ["cpu"]):
        out = hg.compile(comp, backend=backend)(*_flat(args))
        got = [np.asarray(r) for r in (out if isinstance(out, tuple) else (out,))]
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=rtol, atol=1e-6)


def _lowered(name):
    f, args, _ = CASES[name]
    return jax.jit(f).lower(*args)


def _exported(name):
    f, args, _ = CASES[name]
    return jax.export.export(jax.jit(f))(*args)


def _bytecode(lowered) -> bytes:
    buf = io.BytesIO()
    lowered.compiler_ir("stablehlo").operation.write_bytecode(buf)
    return buf.getvalue()


FORMS = {
    # (debug_info: jax's argument names are locations, printed only then)
    "text": lambda name: _lowered(name).as_text(debug_info=True),
    "bytecode": lambda name: _bytecode(_lowered(name)),
    "portable": lambda name: _exported(name).mlir_module_serialized,
    "exported": lambda name: bytes(_exported(name).serialize()),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", sorted(CASES))
def test_jax_modules_run_as_jax_runs_them(name, form):
    _check(hg.load(FORMS[form](name)), name)


def test_linear_algebra_carries_sdy_attributes_and_lapack_targets():
    text = _lowered("linalg_solve").as_text()
    assert "sdy.sharding_rule" in text and "lapack_sgetrf_ffi" in text
    comp = hg.load(text)
    assert "lapack_sgetrf_ffi" in comp.as_text()


def test_names_come_from_jax():
    assert hg.load(FORMS["text"]("pytree")).parameter_names == ["params['b']", "params['w']", "x"]
    assert hg.load(FORMS["exported"]("linalg_solve")).parameter_names == ["a", "b"]
    # jax's text without debug information has no names: parameters go by order
    assert hg.load(_lowered("pytree").as_text()).parameter_names == ["arg0", "arg1", "arg2"]


def test_a_serialized_exported_takes_every_argument_exp_call_takes():
    def f(x, unused, y):  # `unused` is not in the module (module_kept_var_idx)
        return x * 2 + y

    x, u, y = np.float32([1, 2]), np.int32(5), np.float32([10, 20])
    exp = jax.export.export(jax.jit(f))(x, u, y)
    assert exp.module_kept_var_idx == (0, 2)
    comp = hg.load(bytes(exp.serialize()))
    assert comp.parameter_shapes == [hg.f32[2], hg.s32[()], hg.f32[2]]
    assert comp.parameter_names == ["x", "arg1", "y"]  # unused: known by position
    np.testing.assert_array_equal(hg.compile(comp)(x, u, y), exp.call(x, u, y))
    np.testing.assert_array_equal(hg.interpret(comp, x, u, y), [12, 24])


def test_a_multi_platform_export_runs_its_cpu_lowering():
    def f(x):
        return jnp.sin(x) * 3

    x = np.linspace(0, 1, 5, dtype=np.float32)
    exp = jax.export.export(jax.jit(f), platforms=("cuda", "cpu"))(x)
    comp = hg.load(bytes(exp.serialize()))
    assert comp.parameter_shapes == [hg.f32[5]]  # the platform index is not an argument
    np.testing.assert_allclose(hg.compile(comp)(x), exp.call(x), rtol=1e-6)
    np.testing.assert_allclose(hg.interpret(comp, x), np.sin(x) * 3, rtol=1e-6)


def test_a_shape_polymorphic_export_is_refused():
    (b,) = jax.export.symbolic_shape("b")
    exp = jax.export.export(jax.jit(jnp.sin))(jax.ShapeDtypeStruct((b,), jnp.float32))
    with pytest.raises(hg.UnsupportedError, match="shape-polymorphic"):
        hg.load(bytes(exp.serialize()))


def test_a_corrupt_exported_is_an_input_error():
    data = bytearray(_exported("bf16").serialize())
    data[8:40] = b"\xff" * 32
    with pytest.raises(hg.HlogenError):
        hg.load(bytes(data))


def test_a_jax_host_callback_is_refused_not_called():
    # the callback is a Python function of this process, by index: in another process
    # XLA would call whatever that index holds
    def f(x):
        jax.debug.callback(lambda v: None, x)
        return x + 1

    comp = hg.load(jax.jit(f).lower(np.ones(3, np.float32)).as_text())
    with pytest.raises(hg.UnsupportedError, match="jax host callback"):
        hg.compile(comp)


def test_bf16_parameters_of_an_export():
    def f(x):
        return (x * 2).astype(jnp.float32)

    x = np.array([1.5, -2, 3], ml_dtypes.bfloat16)
    comp = hg.load(bytes(jax.export.export(jax.jit(f))(x).serialize()))
    assert comp.parameter_shapes == [hg.bf16[3]]
    np.testing.assert_array_equal(hg.compile(comp)(x), [3, -4, 6])


# -- the command line ----------------------------------------------------------------------

def cli(*args):
    return subprocess.run([HLOGEN, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_cli_runs_jax_linear_algebra(tmp_path):
    path = tmp_path / "solve.mlir"
    path.write_text(FORMS["text"]("linalg_solve"))
    np.savez(tmp_path / "in.npz", a=A, b=B)
    out = tmp_path / "out.npz"
    run = cli("run", path, "--input", tmp_path / "in.npz", "--output", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as saved:
        for i, e in enumerate(_expected("linalg_solve")):
            np.testing.assert_allclose(saved[f"result_{i}"], e, rtol=1e-5, atol=1e-6)


def test_cli_runs_a_serialized_exported(tmp_path):
    path = tmp_path / "pytree.exported"
    path.write_bytes(FORMS["exported"]("pytree"))
    np.savez(tmp_path / "in.npz", **{"params['b']": PARAMS["b"], "params['w']": PARAMS["w"],
                                     "x": XS})
    out = tmp_path / "out.npz"
    run = cli("run", path, "--input", tmp_path / "in.npz", "--check-interpret", "--output", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as saved:
        for i, e in enumerate(_expected("pytree")):
            np.testing.assert_allclose(saved[f"result_{i}"], e, rtol=1e-5, atol=1e-6)
