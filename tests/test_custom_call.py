"""CustomCall that really runs: native targets compiled here with the system compiler,
registered with XLA CPU (the typed FFI and the legacy API versions), called from
computations built with custom_call, checked against numpy."""
from __future__ import annotations

import contextlib
import ctypes
import io
import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import hlogen as hg
from hlogen.runtime.custom_calls import register_custom_call
from hlogen.ops.custom_call import custom_call

SOURCE = r"""
#include <cstdint>
#include <cstring>
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

// typed FFI (api_version 4) -------------------------------------------------------------

static ffi::Error TwiceAddImpl(ffi::Buffer<ffi::F32> x, ffi::Buffer<ffi::F32> y,
                               ffi::ResultBuffer<ffi::F32> out) {
  if (x.element_count() != y.element_count())
    return ffi::Error::InvalidArgument("twice_add: x and y differ in size");
  for (size_t i = 0; i < x.element_count(); ++i)
    out->typed_data()[i] = x.typed_data()[i] * 2.0f + y.typed_data()[i];
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(TwiceAdd, TwiceAddImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Arg<ffi::Buffer<ffi::F32>>()
        .Ret<ffi::Buffer<ffi::F32>>());

// y = x * scale + offset; total = sum(x) + sum(weights): attributes and two results
static ffi::Error AffineSumImpl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y,
                                ffi::ResultBuffer<ffi::F64> total, float scale, int64_t offset,
                                ffi::Span<const int64_t> weights) {
  double sum = 0;
  for (size_t i = 0; i < x.element_count(); ++i) {
    y->typed_data()[i] = x.typed_data()[i] * scale + static_cast<float>(offset);
    sum += x.typed_data()[i];
  }
  for (int64_t w : weights) sum += w;
  *total->typed_data() = sum;
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(AffineSum, AffineSumImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>()
        .Ret<ffi::Buffer<ffi::F64>>().Attr<float>("scale").Attr<int64_t>("offset")
        .Attr<ffi::Span<const int64_t>>("weights"));

// row-major check: out[i][j] = 10 * i + j read back from the layout the handler sees
static ffi::Error RowMajorImpl(ffi::Buffer<ffi::S32> x, ffi::ResultBuffer<ffi::S32> out) {
  std::memcpy(out->typed_data(), x.typed_data(), x.element_count() * sizeof(int32_t));
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(RowMajor, RowMajorImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::S32>>().Ret<ffi::Buffer<ffi::S32>>());

static ffi::Error FailImpl(ffi::Buffer<ffi::F32>, ffi::ResultBuffer<ffi::F32>) {
  return ffi::Error::InvalidArgument("fail_target refuses every input");
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Fail, FailImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>());

// side effects: a counter, and tokens that order the calls
static int64_t ticks = 0;
extern "C" int64_t get_ticks() { return ticks; }
static ffi::Error TickImpl() { ++ticks; return ffi::Error::Success(); }
XLA_FFI_DEFINE_HANDLER_SYMBOL(Tick, TickImpl, ffi::Ffi::Bind());
static ffi::Error StartImpl(ffi::Result<ffi::Token>) { return ffi::Error::Success(); }
XLA_FFI_DEFINE_HANDLER_SYMBOL(Start, StartImpl, ffi::Ffi::Bind().Ret<ffi::Token>());
static ffi::Error StampImpl(ffi::Token, ffi::Buffer<ffi::F32> x, ffi::Result<ffi::Token>,
                            ffi::ResultBuffer<ffi::F32> out) {
  ++ticks;
  for (size_t i = 0; i < x.element_count(); ++i)
    out->typed_data()[i] = x.typed_data()[i] + static_cast<float>(ticks);
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Stamp, StampImpl,
    ffi::Ffi::Bind().Arg<ffi::Token>().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Token>()
        .Ret<ffi::Buffer<ffi::F32>>());

// legacy API versions: no shapes reach the function, so n comes as an operand ------------

struct XlaCustomCallStatus;

// api_version 1, the spec's form: out = x + y
extern "C" void legacy_add(void* out, const void** in) {
  const float* x = static_cast<const float*>(in[0]);
  const float* y = static_cast<const float*>(in[1]);
  int32_t n = *static_cast<const int32_t*>(in[2]);
  for (int32_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = x[i] + y[i];
}

// api_version 2: out = x - y
extern "C" void legacy_sub_status(void* out, const void** in, XlaCustomCallStatus*) {
  const float* x = static_cast<const float*>(in[0]);
  const float* y = static_cast<const float*>(in[1]);
  int32_t n = *static_cast<const int32_t*>(in[2]);
  for (int32_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = x[i] - y[i];
}

// api_version 3: out = x + factor * y, factor a float packed in opaque
extern "C" void legacy_scaled_add(void* out, const void** in, const char* opaque,
                                  size_t opaque_len, XlaCustomCallStatus*) {
  float factor = 0;
  if (opaque_len == sizeof(float)) std::memcpy(&factor, opaque, sizeof(float));
  const float* x = static_cast<const float*>(in[0]);
  const float* y = static_cast<const float*>(in[1]);
  int32_t n = *static_cast<const int32_t*>(in[2]);
  for (int32_t i = 0; i < n; ++i) static_cast<float*>(out)[i] = x[i] + factor * y[i];
}

// api_version 1 with two results: out points at the result buffers
extern "C" void legacy_sum_product(void* out, const void** in) {
  const float* x = static_cast<const float*>(in[0]);
  const float* y = static_cast<const float*>(in[1]);
  int32_t n = *static_cast<const int32_t*>(in[2]);
  float* sum = static_cast<float*>(static_cast<void**>(out)[0]);
  float* product = static_cast<float*>(static_cast<void**>(out)[1]);
  for (int32_t i = 0; i < n; ++i) { sum[i] = x[i] + y[i]; product[i] = x[i] * y[i]; }
}
"""

TYPED = {"hlogen_test.twice_add": "TwiceAdd", "hlogen_test.affine_sum": "AffineSum",
         "hlogen_test.row_major": "RowMajor", "hlogen_test.fail": "Fail",
         "hlogen_test.tick": "Tick", "hlogen_test.start": "Start", "hlogen_test.stamp": "Stamp"}
LEGACY = {"hlogen_test.legacy_add": ("legacy_add", 1),
          "hlogen_test.legacy_sub_status": ("legacy_sub_status", 2),
          "hlogen_test.legacy_scaled_add": ("legacy_scaled_add", 3),
          "hlogen_test.legacy_sum_product": ("legacy_sum_product", 1)}


def _compiler():
    for name in ("g++", "c++", "clang++"):
        if shutil.which(name):
            return name
    return None


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """The test targets, compiled into a shared library and registered for the CPU."""
    compiler = _compiler()
    if compiler is None:
        pytest.skip("no C++ compiler (g++, c++ or clang++) on PATH to build the test targets")
    import jax.ffi
    directory = tmp_path_factory.mktemp("custom_call")
    (directory / "targets.cc").write_text(SOURCE)
    path = directory / "libtargets.so"
    subprocess.run([compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-w",
                    f"-I{jax.ffi.include_dir()}", str(directory / "targets.cc"), "-o", str(path)],
                   check=True, capture_output=True, timeout=300)
    for name, symbol in TYPED.items():
        register_custom_call(name, path, symbol)
    for name, (symbol, version) in LEGACY.items():
        register_custom_call(name, path, symbol, api_version=version)
    lib = ctypes.CDLL(str(path))
    lib.get_ticks.restype = ctypes.c_int64
    return path, lib


def _vectors(n=7, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32))


# -- the typed FFI (api_version 4, the default) ------------------------------------------

def test_typed_ffi_elementwise(library):
    b = hg.Builder("twice_add")
    x, y = b.parameter(hg.f32[7], "x"), b.parameter(hg.f32[7], "y")
    comp = b.build(custom_call("hlogen_test.twice_add", [x, y], hg.f32[7]))
    text = comp.as_text()
    assert "stablehlo.custom_call @hlogen_test.twice_add" in text
    assert "api_version = 4" in text and "backend_config = {}" in text
    xs, ys = _vectors()
    np.testing.assert_array_equal(hg.compile(comp)(xs, ys), xs * np.float32(2) + ys)
    # the portable artifact keeps the call: loaded back, it runs the same
    again = hg.load(comp.to_portable())
    np.testing.assert_array_equal(hg.compile(again)(xs, ys), xs * np.float32(2) + ys)


def _affine_sum(opaque, shape=None):
    b = hg.Builder("affine_sum")
    x = b.parameter(hg.f32[5], "x")
    shape = hg.tuple_shape(hg.f32[5], hg.f64[()]) if shape is None else shape
    y, total = custom_call("hlogen_test.affine_sum", [x], shape, opaque=opaque)
    assert (y.shape, total.shape) == (hg.f32[5], hg.f64[()])
    return b.build(y, total)


@pytest.mark.parametrize("opaque", [
    {"scale": np.float32(0.5), "offset": 3, "weights": [10, 20, 30]},
    {"scale": np.float32(0.5), "offset": np.int64(3), "weights": np.array([10, 20, 30])},
    "{scale = 5.0e-01 : f32, offset = 3 : i64, weights = array<i64: 10, 20, 30>}",
    b"{scale = 0.5 : f32, offset = 3 : i64, weights = dense<[10, 20, 30]> : tensor<3xi64>}",
], ids=["dict", "dict-numpy", "mlir-text", "mlir-bytes"])
def test_typed_ffi_attributes_and_two_results(library, opaque):
    xs = np.array([1, 2, 3, 4, 5.5], np.float32)
    y, total = hg.compile(_affine_sum(opaque))(xs)
    np.testing.assert_array_equal(y, xs * np.float32(0.5) + np.float32(3))
    assert total.dtype == np.float64 and total == xs.astype(np.float64).sum() + 60


def test_results_as_a_python_tuple_of_shapes(library):
    comp = _affine_sum({"scale": np.float32(2), "offset": 0, "weights": []},
                       shape=(hg.f32[5], hg.f64[()]))
    xs = np.arange(5, dtype=np.float32)
    y, total = hg.compile(comp)(xs)
    np.testing.assert_array_equal(y, 2 * xs)
    assert total == 10


def test_attribute_types_are_the_handlers(library):
    # the handler binds `scale` as float: a Python float is f64, which XLA refuses when it runs
    comp = _affine_sum({"scale": 0.5, "offset": 3, "weights": []})
    with pytest.raises(hg.ExecutionError, match="expected F32 but got F64"):
        hg.compile(comp)(np.zeros(5, np.float32))


def test_targets_see_row_major_arrays(library):
    # a transpose before the call must reach the native code as C-order data
    b = hg.Builder("row_major")
    m = b.parameter(hg.s32[3, 2], "m")
    t = hg.ops.transpose(m, [1, 0])
    comp = b.build(custom_call("hlogen_test.row_major", [t], hg.s32[2, 3]))
    ms = np.arange(6, dtype=np.int32).reshape(3, 2)
    np.testing.assert_array_equal(hg.compile(comp)(ms), ms.T)


def test_errors_of_the_handler_are_execution_errors(library):
    b = hg.Builder("fails")
    x = b.parameter(hg.f32[3], "x")
    exe = hg.compile(b.build(custom_call("hlogen_test.fail", [x], hg.f32[3])))
    with pytest.raises(hg.ExecutionError, match="fail_target refuses every input"):
        exe(np.zeros(3, np.float32))


def test_side_effects_run_on_every_call(library):
    _, lib = library
    b = hg.Builder("ticks")
    x = b.parameter(hg.f32[2], "x")
    assert custom_call("hlogen_test.tick", [], hg.tuple_shape(), builder=b,
                       has_side_effect=True) == ()
    exe = hg.compile(b.build(x))
    before = lib.get_ticks()
    exe(np.zeros(2, np.float32))
    exe(np.zeros(2, np.float32))
    assert lib.get_ticks() == before + 2


def test_tokens_order_calls(library):
    _, lib = library
    b = hg.Builder("stamps")
    x = b.parameter(hg.f32[3], "x")
    token = custom_call("hlogen_test.start", [], hg.token, builder=b, has_side_effect=True)
    assert token.shape == hg.token
    token, first = custom_call("hlogen_test.stamp", [token, x], (hg.token, hg.f32[3]),
                               has_side_effect=True)
    _, second = custom_call("hlogen_test.stamp", [token, x], (hg.token, hg.f32[3]),
                            has_side_effect=True)
    exe = hg.compile(b.build(first, second))
    xs = np.array([0, 10, 20], np.float32)
    before = lib.get_ticks()
    a, c = exe(xs)
    np.testing.assert_array_equal(a, xs + before + 1)
    np.testing.assert_array_equal(c, xs + before + 2)


# -- the legacy API versions --------------------------------------------------------------

def _legacy(target, version, opaque=b"", two=False):
    b = hg.Builder("legacy")
    x, y = b.parameter(hg.f32[6], "x"), b.parameter(hg.f32[6], "y")
    n = b.constant(np.int32(6))
    shape = (hg.f32[6], hg.f32[6]) if two else hg.f32[6]
    out = custom_call(target, [x, y, n], shape, opaque=opaque, api_version=version)
    comp = b.build(*out) if two else b.build(out)
    assert f"api_version = {version}" in comp.as_text() or version == 1  # 1 prints as default
    return comp


def test_legacy_original(library):
    xs, ys = _vectors(6, seed=1)
    np.testing.assert_array_equal(hg.compile(_legacy("hlogen_test.legacy_add", 1))(xs, ys), xs + ys)


def test_legacy_status_returning(library):
    xs, ys = _vectors(6, seed=2)
    comp = _legacy("hlogen_test.legacy_sub_status", 2)
    np.testing.assert_array_equal(hg.compile(comp)(xs, ys), xs - ys)


def test_legacy_unified_gets_opaque_bytes(library):
    xs, ys = _vectors(6, seed=3)
    comp = _legacy("hlogen_test.legacy_scaled_add", 3, opaque=struct.pack("<f", -0.25))
    np.testing.assert_array_equal(hg.compile(comp)(xs, ys), xs + np.float32(-0.25) * ys)


def test_legacy_two_results(library):
    xs, ys = _vectors(6, seed=4)
    total, product = hg.compile(_legacy("hlogen_test.legacy_sum_product", 1, two=True))(xs, ys)
    np.testing.assert_array_equal(total, xs + ys)
    np.testing.assert_array_equal(product, xs * ys)


# -- what does not run, refused with an HlogenError ---------------------------------------

def test_interpreter_refuses_custom_calls():
    b = hg.Builder("interpreted")
    x = b.parameter(hg.f32[3], "x")
    comp = b.build(custom_call("any_target", [x], hg.f32[3]))
    with pytest.raises(hg.UnsupportedError, match="interpreter cannot run stablehlo.custom_call"):
        hg.compile(comp, backend="interpret")


def test_unregistered_target_is_an_execution_error():
    # checked in a child process first: XLA reports it, it does not end the process
    b = hg.Builder("unregistered")
    x = b.parameter(hg.f32[3], "x")
    comp = b.build(custom_call("hlogen_test.nobody_registered_this", [x], hg.f32[3]))
    with pytest.raises(hg.ExecutionError, match="No FFI handler registered for "
                                                "hlogen_test.nobody_registered_this"):
        hg.compile(comp)
    b = hg.Builder("unregistered_legacy")
    x = b.parameter(hg.f32[3], "x")
    comp = b.build(custom_call("hlogen_test.nobody_registered_this", [x], hg.f32[3],
                               api_version=3))
    with pytest.raises(hg.ExecutionError, match="No registered implementation"):
        hg.compile(comp)


def test_wrong_api_version_for_the_target(library):
    b = hg.Builder("mismatch")
    x, y = b.parameter(hg.f32[7], "x"), b.parameter(hg.f32[7], "y")
    comp = b.build(custom_call("hlogen_test.twice_add", [x, y], hg.f32[7], api_version=3))
    with pytest.raises(hg.ExecutionError, match="No registered implementation"):
        hg.compile(comp)


@pytest.mark.parametrize("name", ["TopK", "Sharding", "SliceToDynamic", "xla.sdy.Whatever",
                                  "__onednn$matmul"])
def test_names_xla_handles_itself_are_refused(name):
    # XLA CPU ends the process on these (checked in child processes with jaxlib 0.10.2)
    b = hg.Builder("reserved")
    x = b.parameter(hg.f32[3], "x")
    with pytest.raises(hg.ShapeError, match="custom_call: target_name .* XLA's compiler handles"):
        custom_call(name, [x], hg.f32[3])
    with pytest.raises(hg.HlogenError, match="XLA's compiler handles"):
        register_custom_call(name, "/nonexistent.so")


def _argument_cases():
    b = hg.Builder("arguments")
    x = b.parameter(hg.f32[3], "x")
    pair = hg.ops.tuple([x, x])
    other = hg.Builder("other")
    z = other.parameter(hg.f32[3], "z")
    return b, x, [
        (("", [x], hg.f32[3]), {}, "target_name must be a non-empty string"),
        ((3, [x], hg.f32[3]), {}, "target_name must be a non-empty string"),
        (("t", 3, hg.f32[3]), {}, "args must be a list of Ops"),
        (("t", [x, 1.0], hg.f32[3]), {}, r"args\[1\] must be an Op"),
        (("t", [pair], hg.f32[3]), {}, r"args\[0\] is a tuple"),
        (("t", [x, z], hg.f32[3]), {}, "operands come from different builders"),
        (("t", [], hg.f32[3]), {}, "a call without args needs builder="),
        (("t", [], hg.f32[3]), {"builder": "b"}, "builder must be a Builder"),
        (("t", [x], hg.f32[3]), {"builder": other}, "args belong to"),
        (("t", [x], "f32[3]"), {}, "shape must be an array shape"),
        (("t", [x], (hg.f32[3], 2)), {}, "shape must be an array shape"),
        (("t", [x], (hg.f32[3], hg.tuple_shape(hg.f32[1]))), {}, "shape element 1 is a tuple"),
        (("t", [x], ()), {}, "has no results, so it needs has_side_effect=True"),
        (("t", [x], hg.f32[3]), {"has_side_effect": 1}, "has_side_effect must be True or False"),
        (("t", [x], hg.f32[3]), {"api_version": 0}, "api_version must be one of 1 .*4 "),
        (("t", [x], hg.f32[3]), {"api_version": 5}, "api_version must be one of"),
        (("t", [x], hg.f32[3]), {"api_version": True}, "api_version must be one of"),
        (("t", [x], hg.f32[3]), {"opaque": 3}, "opaque must be a dict of attributes or the text"),
        (("t", [x], hg.f32[3]), {"opaque": "hello"}, "opaque 'hello' is not an MLIR dictionary"),
        (("t", [x], hg.f32[3]), {"opaque": '"text"'}, "is an MLIR attribute but not a dictionary"),
        (("t", [x], hg.f32[3]), {"opaque": b"\xff"}, "is not UTF-8 text"),
        (("t", [x], hg.f32[3]), {"opaque": "{" * 600 + "}" * 600}, "brackets nest deeper"),
        (("t", [x], hg.f32[3]), {"opaque": {1: 2}}, "attribute names must be non-empty strings"),
        (("t", [x], hg.f32[3]), {"opaque": {"a": None}},
         r"opaque\['a'\]=None: a typed-FFI attribute is"),
        (("t", [x], hg.f32[3]), {"opaque": {"a": 2**63}}, "does not fit in 64 bits"),
        (("t", [x], hg.f32[3]), {"opaque": {"a": [1, 2**64]}}, "does not fit in 64 bits"),
        (("t", [x], hg.f32[3]), {"opaque": {"a": np.float16(1)}}, "has dtype float16"),
        (("t", [x], hg.f32[3]), {"opaque": {"a": [1, "b"]}}, "a list attribute holds Python ints"),
        (("t", [x], hg.f32[3]), {"opaque": {"a": np.zeros((2, 2))}}, "array attributes are 1-D"),
        (("t", [x], hg.f32[3]), {"opaque": {"d": {"e": 1j}}}, r"opaque\['d'\]\['e'\]=1j"),
        (("t", [x], hg.f32[3]), {"opaque": {"k": 1}, "api_version": 2},
         "a dict of attributes needs the typed FFI"),
        (("t", [x], hg.f32[3]), {"opaque": 1.5, "api_version": 3}, "opaque must be bytes or a str"),
        (("t", [x], hg.f32[3]), {"operand_layouts": [(0,), (0,)]},
         r"operand_layouts must give one layout \(or None\) per operand \(1\)"),
        (("t", [x], hg.f32[3]), {"result_layouts": [(1,)]},
         r"result_layouts\[0\]=\[1\] must order the 1 dimensions of f32\[3\]"),
        (("t", [x], hg.f32[3]), {"result_layouts": "0"}, "result_layouts must give one layout"),
    ]


def test_argument_errors_name_the_op_and_the_argument():
    b, x, cases = _argument_cases()
    for args, kwargs, message in cases:
        with pytest.raises(hg.ShapeError, match=message) as info:
            custom_call(*args, **kwargs)
        assert str(info.value).startswith("custom_call") or "different builders" in str(info.value)
    # nothing of the failed calls reached the module: it still builds
    b.build(x)


def test_accepted_argument_forms():
    b = hg.Builder("forms")
    x = b.parameter(hg.f32[3], "x")
    one = custom_call("t", x, hg.f32[3], builder=b, opaque="")  # a bare Op, an empty text
    assert isinstance(one, hg.Op) and one.shape == hg.f32[3]
    assert custom_call("t", [], [hg.s32[()]], builder=b)[0].shape == hg.s32[()]
    nested = {"a": True, "b": np.uint8(7), "c": "s", "d": {"e": [1.5, 2]}, "f": np.int32(-1),
              "g": np.array([1, 2], np.uint16), "h": np.float64(2.5), "i": np.array(4, np.int16)}
    custom_call("t", [x], hg.f32[3], opaque=nested)
    custom_call("t", [x], hg.f32[3], opaque=bytearray(b"\x00\xff"), api_version=3)
    m = b.parameter(hg.f32[2, 3, 4], "m")
    custom_call("t", [m, x], hg.f32[4, 3], operand_layouts=[(1, 2, 0), None], result_layouts=[[0, 1]])
    text = b.build(one).as_text()
    assert ("operand_layouts = [dense<[1, 2, 0]> : tensor<3xindex>, dense<0> : tensor<1xindex>], "
            "result_layouts = [dense<[0, 1]> : tensor<2xindex>]") in text
    for part in ("a = true", "b = 7 : ui8", 'c = "s"', "f = -1 : i32",
                 "d = {e = dense<[1.500000e+00, 2.000000e+00]>", "g = dense<[1, 2]> : tensor<2xui16>", "h = 2.500000e+00 : f64",
                 "i = 4 : i16", 'backend_config = "\\00\\FF"'):
        assert part in text, part


# -- register_custom_call -----------------------------------------------------------------

def test_register_errors(library, tmp_path):
    path, _ = library
    with pytest.raises(hg.InputError, match="no such shared library"):
        register_custom_call("hlogen_test.x", tmp_path / "missing.so")
    (tmp_path / "not_a_library.so").write_text("hello")
    with pytest.raises(hg.InputError, match="cannot load it as a shared library"):
        register_custom_call("hlogen_test.x", tmp_path / "not_a_library.so")
    with pytest.raises(hg.InputError, match="no exported symbol 'NoSuchSymbol'"):
        register_custom_call("hlogen_test.x", path, "NoSuchSymbol")
    with pytest.raises(hg.HlogenError, match="name must be a non-empty string"):
        register_custom_call("", path, "TwiceAdd")
    with pytest.raises(hg.HlogenError, match="api_version must be one of"):
        register_custom_call("hlogen_test.x", path, "TwiceAdd", api_version=0)
    with pytest.raises(hg.HlogenError, match="platform must be one of"):
        register_custom_call("hlogen_test.x", path, "TwiceAdd", platform="tpu")
    with pytest.raises(hg.HlogenError, match="library must be a path or a ctypes.CDLL"):
        register_custom_call("hlogen_test.x", 42, "TwiceAdd")
    # the same function again is fine; another one under the same name is refused
    register_custom_call("hlogen_test.twice_add", path, "TwiceAdd")
    register_custom_call("hlogen_test.twice_add", ctypes.CDLL(str(path)), "TwiceAdd")
    with pytest.raises(hg.HlogenError, match="already registered for cpu with another typed-FFI"):
        register_custom_call("hlogen_test.twice_add", path, "AffineSum")


_SECOND_LEGACY = """
import jax.ffi, ctypes, sys
import hlogen as hg
from hlogen.runtime.custom_calls import register_custom_call
path = sys.argv[1]
# registered through jax directly: hlogen sees it in XLA's registry
jax.ffi.register_ffi_target("hlogen_test.legacy", jax.ffi.pycapsule(ctypes.CDLL(path).legacy_add),
                            platform="cpu", api_version=0)
register_custom_call("hlogen_test.legacy", path, "legacy_add", api_version=1)  # the same: fine
try:
    register_custom_call("hlogen_test.legacy", path, "legacy_sub_status", api_version=2)
except hg.HlogenError as e:
    print("refused:", e)
"""


def test_second_legacy_function_under_one_name_is_refused(library):
    # XLA ends the process on it (exit 1 with jaxlib 0.10.2): run where that cannot hurt
    path, _ = library
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SECOND_LEGACY), str(path)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "refused:" in done.stdout and "another legacy function" in done.stdout, done.stdout


_PLACES = """
func.func @main(%x: tensor<4xf32>, %k: tensor<i32>) -> (tensor<4xf32>, tensor<f32>, tensor<4xf32>) {
  %t = stablehlo.custom_call @TopK(%x) {api_version = 4 : i32, backend_config = {}} : (tensor<4xf32>) -> tensor<4xf32>
  %c = "stablehlo.case"(%k) ({
      %w = stablehlo.custom_call @in_case(%x) {api_version = 4 : i32, backend_config = {}} : (tensor<4xf32>) -> tensor<4xf32>
      stablehlo.return %w : tensor<4xf32> }, {
      stablehlo.return %x : tensor<4xf32> }) : (tensor<i32>) -> tensor<4xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
    reducer(%a: tensor<f32>, %b: tensor<f32>) {
      %w = stablehlo.custom_call @in_reduce(%a, %b) {api_version = 4 : i32, backend_config = {}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
      stablehlo.return %w : tensor<f32> }
  return %c, %r, %t : tensor<4xf32>, tensor<f32>, tensor<4xf32>
}
"""


def test_what_xla_cpu_cannot_run_is_named_before_compiling():
    # XLA CPU aborts on a custom call in a reduce body (checked in a child process) and
    # runs one in while, case, if and map bodies: its declaration (hlogen.backends) says so
    from hlogen import backends, mlir
    module = hg.load(_PLACES).module
    found = {mlir.call_target(op): backends.CPU.refusal(op) for op in mlir.walk(module)
             if op.name == "stablehlo.custom_call"}
    assert found["in_case"] is None
    assert "inside the computation of stablehlo.reduce" in found["in_reduce"]
    assert "'TopK' is a name XLA's compiler handles itself" in found["TopK"]


def test_the_page_s_example_builds_and_runs_as_written(tmp_path, monkeypatch):
    """docs/custom-calls.md: scale_add.cc from the page, built by the page's command (with
    this venv's python first on PATH), then the page's Python, output included."""
    from tests import docs
    page, heading = "docs/custom-calls.md", "A target of your own"
    if not shutil.which("g++"):
        pytest.skip("the page's command needs g++")
    (source,), (code,), (printed,) = (docs.blocks(page, language, heading)
                                      for language in ("cpp", "python", "text"))
    (tmp_path / "scale_add.cc").write_text(source)
    session = docs.console(page, heading)
    (line,) = [command.partition("\n")[0] for command in session.split("$ ")[1:]]
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    built = subprocess.run(line, shell=True, cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    # it prints nothing on standard output; g++ warns on standard error about jaxlib's
    # headers (the page says so)
    assert built.returncode == 0 and built.stdout == "", built.stderr
    assert (tmp_path / "libscale_add.so").exists()
    monkeypatch.chdir(tmp_path)  # the page loads ./libscale_add.so
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, page, "exec"), {"__name__": "docs"})
    assert out.getvalue() == printed
