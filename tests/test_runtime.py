"""Executables: calling convention, argument checks, the cache, the dispatch fast path."""
from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
from hlogen import backends, ops
from tests.helpers import BACKENDS, single_op


def _axpy():
    return single_op(lambda a, x, y: ops.add(ops.mul(a, x), y), hg.f32[()], hg.f32[3], hg.f32[3])


X, Y = np.array([1, 2, 3], np.float32), np.array([10, 20, 30], np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_argument_errors_name_the_parameter(backend):
    exe = hg.compile(_axpy(), backend=backend)
    with pytest.raises(hg.InputError, match=r"case takes 3 argument\(s\) \(p0: f32\[\], p1: f32\[3\], p2: f32\[3\]\), got 2"):
        exe(np.float32(2), X)
    with pytest.raises(hg.InputError, match=r"parameter 'p1' of case expects f32\[3\] \(float32 elements\), got a float64 array"):
        exe(np.float32(2), X.astype(np.float64), Y)
    with pytest.raises(hg.InputError, match=r"parameter 'p2' of case expects f32\[3\], got a float32 array of shape \(4,\)"):
        exe(np.float32(2), X, np.zeros(4, np.float32))
    with pytest.raises(hg.InputError, match=r"parameter 'p1'.*not a number"):
        exe(np.float32(2), "abc", Y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_values_are_converted_to_the_parameter_type(backend):
    exe = hg.compile(_axpy(), backend=backend)
    np.testing.assert_array_equal(exe(2, [1, 2, 3], Y), [12, 24, 36])
    np.testing.assert_array_equal(exe(0.5, X, Y), [10.5, 21, 31.5])


def test_repeated_calls_through_the_fast_path_give_fresh_results():
    exe = hg.compile(_axpy())
    for i in range(5):
        x = np.full(3, i, np.float32)
        np.testing.assert_array_equal(exe(np.float32(2), x, Y), 2 * x + Y)
    # a call with other types after the fast path has been taken is still checked
    with pytest.raises(hg.InputError, match="float64 array"):
        exe(np.float32(2), X.astype(np.float64), Y)
    with pytest.raises(hg.InputError, match="shape"):
        exe(np.float32(2), np.zeros((2, 3), np.float32), Y)
    np.testing.assert_array_equal(exe(np.float32(1), X, Y), X + Y)
    # Python values and strided views, once the fast path is warm
    np.testing.assert_array_equal(exe(1, [1, 2, 3], Y), X + Y)
    wide = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(exe(np.float32(1), wide[::2], Y), wide[::2] + Y)


@pytest.mark.parametrize("et, wide", [(hg.f32, np.float64), (hg.s32, np.int64),
                                      (hg.u32, np.uint64), (hg.c64, np.complex128)])
def test_wider_arguments_are_refused_once_the_fast_path_is_warm(et, wide):
    """Without x64, jax's dispatch would take a 64-bit array or numpy scalar for its
    32-bit twin and narrow it silently; hlogen refuses it on every call."""
    exe = hg.compile(single_op(ops.add, et[()], et[2]))
    right = np.array([1, 2], et.dtype)
    for _ in range(3):
        np.testing.assert_array_equal(exe(et.dtype.type(1), right), right + 1)
    with pytest.raises(hg.InputError, match=f"parameter 'p1' of case expects {et}\\[2\\]"):
        exe(et.dtype.type(1), right.astype(wide))
    with pytest.raises(hg.InputError, match=f"parameter 'p0' of case expects {et}\\[\\]"):
        exe(wide(1), right)


@pytest.mark.parametrize("et", [hg.f64, hg.s64, hg.u64, hg.c128, hg.bf16, hg.s4, hg.pred])
def test_every_type_survives_repeated_calls(et):
    """64-bit types stay 64-bit (jax would canonicalize them without x64)."""
    from tests.references import values
    x = values(et)
    exe = hg.compile(single_op(lambda a: ops.tuple([a, a]), hg.Shape(et, x.shape)))
    for _ in range(3):
        a, b = exe(x)
        assert a.dtype == et.dtype
        np.testing.assert_array_equal(a.astype(np.complex128), x.astype(np.complex128))


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_byte_orders_are_read_correctly(backend):
    """jax's dispatch misreads big-endian arrays once it has a fast path (jax.jit returns
    zeros for them); hlogen converts them first."""
    exe = hg.compile(_axpy(), backend=backend)
    for _ in range(3):  # the first call fills the fast path; the later ones use it
        np.testing.assert_array_equal(exe(np.float32(2), X, Y), 2 * X + Y)
        np.testing.assert_array_equal(exe(np.float32(2), X.astype(">f4"), Y.astype(">f4")), 2 * X + Y)
    # in a tuple parameter (a call that never takes the fast path)
    b = hg.Builder("pair")
    t = b.parameter(hg.tuple_shape(hg.f32[3], hg.f32[3]), "t")
    pair = hg.compile(b.build(ops.add(ops.get_tuple_element(t, 0), ops.get_tuple_element(t, 1))),
                      backend=backend)
    np.testing.assert_array_equal(pair((X.astype(">f4"), Y.astype(">f4"))), X + Y)


def test_jax_arrays_are_accepted():
    import jax.numpy as jnp
    exe = hg.compile(_axpy())
    np.testing.assert_array_equal(exe(jnp.float32(2), jnp.asarray(X), jnp.asarray(Y)), 2 * X + Y)


def test_executables_are_cached_by_module_and_backend():
    a, b = _axpy(), _axpy()
    assert hg.compile(a) is hg.compile(b)  # same module text, same executable
    assert hg.compile(a, backend="cpu") is hg.compile(a)
    assert hg.compile(a, backend="interpret").backend == "interpret"


def test_each_interpreter_declaration_prepares_the_module_its_own_way():
    # a second declaration of the interpreter kind (hlogen.backends: adding a backend is
    # one declaration) that refuses add: the module the first one prepared is not its
    strict = backends.declare(dataclasses.replace(
        backends.INTERPRET, name="interpret_without_add",
        refuses={**backends.INTERPRET.refuses, "stablehlo.add": backends.Refusal("refused here")}))
    try:
        comp = _axpy()
        np.testing.assert_array_equal(hg.compile(comp, backend="interpret")(2, X, Y), 2 * X + Y)
        with pytest.raises(hg.UnsupportedError, match="cannot run stablehlo.add: refused here"):
            hg.compile(comp, backend=strict)
    finally:
        del backends.BACKENDS[strict.name]


def test_a_pjrt_declaration_cannot_say_it_hands_back_fewer_types():
    # PJRT executables return their results as they are (jax's dispatch reads them): a
    # `readable` would wrap results into carriers that nothing turns back
    with pytest.raises(hg.InputError, match="readable"):
        dataclasses.replace(backends.CPU, name="cpu_f32_only", readable=frozenset({"f32"}))


@pytest.mark.parametrize("backend", BACKENDS)
def test_tuple_parameters_and_nested_results(backend):
    b = hg.Builder("nested")
    t = b.parameter(hg.tuple_shape(hg.s32[2], hg.tuple_shape(hg.f32[()], hg.bf16[1])), "t")
    inner = ops.get_tuple_element(t, 1)
    comp = b.build(ops.tuple([ops.get_tuple_element(inner, 1), ops.get_tuple_element(t, 0)]),
                   ops.get_tuple_element(inner, 0))
    arg = (np.array([1, 2], np.int32), (np.float32(3), np.array([4], ml_dtypes.bfloat16)))
    (bf, ints), scalar = hg.compile(comp, backend=backend)(arg)
    assert bf.dtype == ml_dtypes.bfloat16 and bf[0] == 4
    np.testing.assert_array_equal(ints, [1, 2])
    assert scalar == 3
    with pytest.raises(hg.InputError, match=r"parameter 't' of nested is the tuple .*: pass a tuple of 2 values"):
        hg.compile(comp, backend=backend)(np.zeros(2, np.int32))


def test_unsupported_requests_say_so():
    comp = _axpy()
    with pytest.raises(hg.InputError, match="2 partitions asked, but the module has no sharding"):
        hg.compile(comp, num_partitions=2)
    with pytest.raises(hg.HlogenError, match="backend must be one of cpu, gpu, interpret"):
        hg.compile(comp, backend="tpu")
    import jax
    if not any(d.platform == "gpu" for d in jax.devices()):
        with pytest.raises(hg.UnsupportedError, match="backend 'gpu' is not available"):
            hg.compile(comp, backend="gpu")
    with pytest.raises(hg.HlogenError, match="compile takes a Computation"):
        hg.compile("module {}")


def test_ops_that_would_end_the_process_are_refused():
    # a module the interpreter cannot run (a custom call) fails with a message, the process lives
    comp = hg.load("""
    func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
      %0 = stablehlo.custom_call @no_such_target(%a) : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }""")
    with pytest.raises(hg.UnsupportedError, match="reference interpreter cannot run stablehlo.custom_call"):
        hg.interpret(comp, np.zeros(2, np.float32))
    with pytest.raises(hg.ExecutionError, match="cannot compile"):
        hg.compile(comp, backend="cpu")
