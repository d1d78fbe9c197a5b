"""No input crashes hlogen: every reproducer of issue 12, each a test.

Cases that once ended the process run in a worker process (`run_cases`): a
regression fails the test instead of killing pytest. Each case is Python code
that ends in an hg.HlogenError (whose type and message the test checks) or runs
to the end (then what it printed is checked).
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops

# -- the worker ------------------------------------------------------------------------

_WORKER = r'''
import contextlib, io, json, os, resource, sys, traceback
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a case that dies leaves no core file
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import hlogen as hg
from hlogen import ops
out = os.fdopen(os.dup(1), "w")  # the protocol; the cases' own prints are captured
def show(*results):  # results as plain lists, one line
    print(*[np.asarray(r).tolist() if not isinstance(r, tuple) else [np.asarray(x).tolist() for x in r]
            for r in results])
for line in sys.stdin:
    case = json.loads(line)
    out.write(json.dumps({"start": case["name"]}) + "\n"); out.flush()
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            exec(case["code"], {"np": np, "hg": hg, "ops": ops, "show": show, "__name__": "case"})
        result = {"kind": "ok", "detail": printed.getvalue()}
    except hg.HlogenError as e:
        result = {"kind": "hlogen", "error": type(e).__name__, "detail": str(e)}
    except BaseException as e:
        result = {"kind": "other", "error": type(e).__name__,
                  "detail": "".join(traceback.format_exception(e))[-3000:]}
    result["name"] = case["name"]
    out.write(json.dumps(result) + "\n"); out.flush()
'''


@dataclasses.dataclass
class Outcome:
    kind: str           # ok, hlogen, other (a non-HlogenError exception), signal, timeout
    error: str = ""     # the exception's type name, or the signal's name
    detail: str = ""    # the message, what the case printed, or the worker's stderr

    def __str__(self):
        return f"{self.kind} {self.error}: {self.detail}"


def run_cases(cases: dict, timeout: float = 120.0) -> dict[str, Outcome]:
    """Runs each case's code in a worker process; a worker that dies (or runs past
    `timeout` seconds on one case) is replaced, and the case it was on is recorded."""
    pending = list(cases.items())
    outcomes: dict[str, Outcome] = {}
    env = dict(os.environ, PYTHONFAULTHANDLER="")
    while pending:
        errors = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would block it
        worker = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=errors, env=env)
        feed = "".join(json.dumps({"name": n, "code": c}) + "\n" for n, c in pending)
        current = None
        threading.Thread(target=_feed, args=(worker.stdin, feed.encode()), daemon=True).start()
        deadline = time.monotonic() + timeout + 30  # the first case also imports jax
        buffer = b""
        while True:
            ready, _, _ = select.select([worker.stdout], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                worker.kill()
                worker.wait()
                # the case it was on, or the first it did not start (it hung starting)
                name = current or next((n for n, _ in pending if n not in outcomes), None)
                if name is not None:
                    outcomes[name] = Outcome("timeout", "", f"no answer after {timeout} s")
                break
            chunk = os.read(worker.stdout.fileno(), 65536)
            if not chunk:
                worker.wait()
                errors.seek(0)
                stderr = errors.read().decode(errors="replace")
                if current is not None:
                    code = -worker.returncode if worker.returncode < 0 else worker.returncode
                    kind = "signal" if worker.returncode < 0 else "other"
                    name = signal.Signals(code).name if worker.returncode < 0 else f"exit {code}"
                    outcomes[current] = Outcome(kind, name, stderr[-2000:])
                break
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                message = json.loads(line)
                if "start" in message:
                    current = message["start"]
                    deadline = time.monotonic() + timeout
                else:
                    outcomes[message["name"]] = Outcome(message["kind"], message.get("error", ""),
                                                        message.get("detail", ""))
                    current = None
        worker.stdout.close()
        errors.close()
        pending = [(n, c) for n, c in pending if n not in outcomes]
    return outcomes


def _feed(pipe, data: bytes) -> None:
    try:
        pipe.write(data)
        pipe.close()
    except (BrokenPipeError, ValueError):  # the worker died or was killed
        pass


# -- modules of the reproducers ---------------------------------------------------------

def module(body: str, params: str = "", results: str = "tensor<2xf32>") -> str:
    return f"func.func @main({params}) -> {results} {{\n{textwrap.dedent(body).strip()}\n}}\n"


DIVISION = module("""
  %0 = stablehlo.divide %a, %b : tensor<2xi32>
  %1 = stablehlo.remainder %a, %b : tensor<2xi32>
  return %0, %1 : tensor<2xi32>, tensor<2xi32>
""", "%a: tensor<2xi32>, %b: tensor<2xi32>", "(tensor<2xi32>, tensor<2xi32>)")

CONSTANT_DIVISION = module("""
  %a = stablehlo.constant dense<[7, -2147483648]> : tensor<2xi32>
  %b = stablehlo.constant dense<[0, -1]> : tensor<2xi32>
  %0 = stablehlo.divide %a, %b : tensor<2xi32>
  %1 = stablehlo.remainder %a, %b : tensor<2xi32>
  return %0, %1 : tensor<2xi32>, tensor<2xi32>
""", "", "(tensor<2xi32>, tensor<2xi32>)")

UNSIGNED_DIVISION = module("""
  %0 = stablehlo.divide %a, %b : tensor<2xui8>
  %1 = stablehlo.remainder %a, %b : tensor<2xui8>
  return %0, %1 : tensor<2xui8>, tensor<2xui8>
""", "%a: tensor<2xui8>, %b: tensor<2xui8>", "(tensor<2xui8>, tensor<2xui8>)")

TOTAL_ORDER = module("""
  %0 = stablehlo.compare LT, %a, %b, TOTALORDER : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi1>
  return %0 : tensor<4xi1>
""", "%a: tensor<4xf32>, %b: tensor<4xf32>", "tensor<4xi1>")

REDUCE_PRECISION = module("""
  %0 = stablehlo.reduce_precision %a, format = e5m0 : tensor<3xf64>
  return %0 : tensor<3xf64>
""", "%a: tensor<3xf64>", "tensor<3xf64>")

_UNSUPPORTED_BY_INTERPRETER = {
    "cholesky": module("""
      %0 = stablehlo.cholesky %a, lower = true : tensor<2x2xf32>
      return %0 : tensor<2x2xf32>""", "%a: tensor<2x2xf32>", "tensor<2x2xf32>"),
    "triangular_solve": module("""
      %0 = "stablehlo.triangular_solve"(%a, %a) {left_side = false, lower = false, unit_diagonal = true, transpose_a = #stablehlo<transpose ADJOINT>} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
      return %0 : tensor<2x2xf32>""", "%a: tensor<2x2xf32>", "tensor<2x2xf32>"),
    "rng": module("""
      %lo = stablehlo.constant dense<0.0> : tensor<f32>
      %hi = stablehlo.constant dense<1.0> : tensor<f32>
      %s = stablehlo.constant dense<2> : tensor<1xi64>
      %0 = stablehlo.rng %lo, %hi, %s, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<2xf32>
      return %0 : tensor<2xf32>"""),
    "rng_bit_generator": module("""
      %s = stablehlo.constant dense<1> : tensor<2xui64>
      %0:2 = stablehlo.rng_bit_generator %s, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<2xui32>)
      return %0#1 : tensor<2xui32>""", "", "tensor<2xui32>"),
    "create_token": module("""
      %t = stablehlo.create_token : !stablehlo.token
      %0 = stablehlo.constant dense<1.0> : tensor<2xf32>
      return %0 : tensor<2xf32>"""),
    "replica_id": module("""
      %0 = stablehlo.replica_id : tensor<ui32>
      return %0 : tensor<ui32>""", "", "tensor<ui32>"),
    "partition_id": module("""
      %0 = stablehlo.partition_id : tensor<ui32>
      return %0 : tensor<ui32>""", "", "tensor<ui32>"),
    "all_reduce": module("""
      %0 = "stablehlo.all_reduce"(%a) ({
        ^bb0(%x: tensor<f32>, %y: tensor<f32>):
          %s = stablehlo.add %x, %y : tensor<f32>
          stablehlo.return %s : tensor<f32>
      }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<2xf32>) -> tensor<2xf32>
      return %0 : tensor<2xf32>""", "%a: tensor<2xf32>"),
    "fft_c64": module("""
      %0 = stablehlo.fft %a, type = FFT, length = [2] : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
      return %0 : tensor<2xcomplex<f32>>""", "%a: tensor<2xcomplex<f32>>", "tensor<2xcomplex<f32>>"),
    "tuple_to_call": module("""
      %t = stablehlo.tuple %a, %a : tuple<tensor<2xf32>, tensor<2xf32>>
      %0 = func.call @first(%t) : (tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32>
      return %0 : tensor<2xf32>
    }
    func.func private @first(%t: tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32> {
      %x = stablehlo.get_tuple_element %t[0] : (tuple<tensor<2xf32>, tensor<2xf32>>) -> tensor<2xf32>
      return %x : tensor<2xf32>""", "%a: tensor<2xf32>"),
    "other_dialect": module("""
      %0 = arith.addf %a, %a : tensor<2xf32>
      return %0 : tensor<2xf32>""", "%a: tensor<2xf32>"),
}

# complex operands that StableHLO's verifier takes and a backend ends the process on
COMPLEX_REMAINDER = module("""
  %0 = stablehlo.remainder %a, %b : tensor<2xcomplex<f32>>
  return %0 : tensor<2xcomplex<f32>>""", "%a: tensor<2xcomplex<f32>>, %b: tensor<2xcomplex<f32>>",
                           "tensor<2xcomplex<f32>>")
COMPLEX_LESS = module("""
  %0 = stablehlo.compare LT, %a, %b : (tensor<2xcomplex<f32>>, tensor<2xcomplex<f32>>) -> tensor<2xi1>
  return %0 : tensor<2xi1>""", "%a: tensor<2xcomplex<f32>>, %b: tensor<2xcomplex<f32>>", "tensor<2xi1>")

# what the interpreter refuses (before running) of the modules above and below; it runs the
# others of _UNSUPPORTED_BY_INTERPRETER, which all once aborted it
_INTERPRETER_REFUSES = {"rng", "tuple_to_call", "other_dialect", "custom_call_in_reduce"}

CUSTOM_CALL_IN_REDUCE = module("""
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = "stablehlo.reduce"(%a, %z) ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %c = stablehlo.custom_call @foo(%x, %y) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      stablehlo.return %c : tensor<f32>
  }) {dimensions = array<i64: 0>} : (tensor<2xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
""", "%a: tensor<2xf32>", "tensor<f32>")


def nested_regions(depth: int) -> str:
    """`depth` stablehlo.case ops, each inside the previous one's branch."""
    head = "".join(
        f'%r{i} = "stablehlo.case"(%i) ({{\n' for i in range(depth))
    tail = "".join(
        f'  stablehlo.return %r{i + 1} : tensor<f32>\n}}) : (tensor<i32>) -> tensor<f32>\n'
        for i in reversed(range(depth - 1)))
    inner = "  stablehlo.return %x : tensor<f32>\n}) : (tensor<i32>) -> tensor<f32>\n"
    return module(head + inner + tail + "return %r0 : tensor<f32>",
                  "%i: tensor<i32>, %x: tensor<f32>", "tensor<f32>")


def nested_type(depth: int) -> str:
    t = "tensor<f32>"
    for _ in range(depth):
        t = f"tuple<{t}>"
    return f"func.func @main(%a: {t}) -> {t} {{\n  return %a : {t}\n}}\n"


def _load(text, then=""):
    """Code that loads `text` as `comp`, then runs `then`."""
    return f"comp = hg.load({text!r})\n" + textwrap.dedent(then).strip() + "\n"


def _expect(outcome: Outcome, error: str, pattern: str):
    assert outcome.kind == "hlogen" and outcome.error == error, str(outcome)
    assert re.search(pattern, outcome.detail), str(outcome)


# -- once killed by a signal -------------------------------------------------------------

CRASHES = {
    # integer division by zero (SIGFPE in the interpreter and in XLA's constant folder)
    "division_interpret": _load(DIVISION, """
        a, b = np.array([7, -2147483648], np.int32), np.array([0, -1], np.int32)
        show(hg.interpret(comp, a, b), hg.compile(comp)(a, b))"""),
    "division_constants_cpu": _load(CONSTANT_DIVISION, "show(hg.compile(comp)())"),
    "division_constants_interpret": _load(CONSTANT_DIVISION, "show(hg.interpret(comp))"),
    "unsigned_division": _load(UNSIGNED_DIVISION, """
        a, b = np.array([7, 200], np.uint8), np.array([0, 0], np.uint8)
        show(hg.interpret(comp, a, b), hg.compile(comp)(a, b))"""),
    **{f"interpreter_{name}": _load(text, """
        args = [np.ones(s.dimensions, s.dtype) for s in comp.parameter_shapes]
        hg.interpret(comp, *args)""") for name, text in _UNSUPPORTED_BY_INTERPRETER.items()},
    "dynamic_result_type": _load(module("""
        %0 = stablehlo.abs %a : (tensor<2xf32>) -> tensor<?xf32>
        %1 = stablehlo.convert %0 : (tensor<?xf32>) -> tensor<2xf32>
        return %1 : tensor<2xf32>""", "%a: tensor<2xf32>"), "hg.compile(comp)"),
    "overflowing_tensor": _load(module(
        "return %a : tensor<4294967296x4294967296xf32>",
        "%a: tensor<4294967296x4294967296xf32>", "tensor<4294967296x4294967296xf32>")),
    "overflowing_iota": "b = hg.Builder('x'); ops.iota(b, hg.f32[2**40, 2**40], 0)",
    "overflowing_parameter": "b = hg.Builder('x'); b.parameter(hg.f32[2**62])",
    "declared_main": "hg.compile(hg.load('func.func private @main() -> tensor<f32>'))",
    "private_main": _load("func.func private @main() -> tensor<f32> {\n"
                          "  %0 = stablehlo.constant dense<1.0> : tensor<f32>\n"
                          "  return %0 : tensor<f32>\n}"),
    "custom_call_in_reduce_cpu": _load(CUSTOM_CALL_IN_REDUCE, "hg.compile(comp)"),
    "custom_call_in_reduce_interpret": _load(CUSTOM_CALL_IN_REDUCE,
                                             "hg.interpret(comp, np.ones(2, np.float32))"),
    "nested_regions_3000": _load(nested_regions(3000)),
    "complex_remainder_cpu": _load(COMPLEX_REMAINDER, "hg.compile(comp, backend='cpu')"),
    "complex_remainder_interpret": _load(COMPLEX_REMAINDER, """
        a = np.ones(2, np.complex64)
        hg.interpret(comp, a, a)"""),
    "complex_less_interpret": _load(COMPLEX_LESS, """
        a = np.ones(2, np.complex64)
        hg.interpret(comp, a, a)"""),
    "nested_type_20000": _load(nested_type(20000)),
    "flipped_portable_artifact": textwrap.dedent("""
        b = hg.Builder('p'); x = b.parameter(hg.f32[2]); data = bytearray(b.build(ops.abs(x)).to_portable())
        for i in sorted({22, 162, *range(8, len(data), 16)}):  # 22, 162: once SIGABRT
            flipped = bytearray(data); flipped[i] ^= 0xFF
            try:
                hg.load(bytes(flipped))
            except hg.HlogenError:
                pass
        raise hg.InputError('all flipped artifacts were refused or loaded')"""),
}

EXPECTED = {
    "division_interpret": ("ok", r"^(\[\[-1, -2147483648\], \[7, 0\]\] ?){2}$"),
    "division_constants_cpu": ("ok", r"^\[\[-1, -2147483648\], \[7, 0\]\]$"),
    "division_constants_interpret": ("ok", r"^\[\[-1, -2147483648\], \[7, 0\]\]$"),
    "unsigned_division": ("ok", r"^(\[\[255, 255\], \[7, 200\]\] ?){2}$"),
    # each once aborted the interpreter: refused before running, or run (collectives in its
    # parallel runner, the others rewritten by hlogen/decompositions.py, hlogen/random_bits.py)
    **{f"interpreter_{name}": ("UnsupportedError", r"<text>:\d+:\d+: the reference interpreter "
                                                    r"cannot run \S+")
       if name in _INTERPRETER_REFUSES else ("ok", r"^$") for name in _UNSUPPORTED_BY_INTERPRETER},
    # loads (bounded or refinable dynamism runs); unrefined, it is refused naming the dimension
    "dynamic_result_type": ("ShapeError", r"dimension 0 of result 0 of stablehlo.abs at "
                                          r"<text>:2:\d+ \(tensor<\?xf32>\) is dynamic with no bound"),
    "overflowing_tensor": ("InputError", r"<text>:1:1: func.func: f32\[4294967296,4294967296\] "
                                         r"has 18446744073709551616 elements"),
    "overflowing_iota": ("ShapeError", r"does not fit in 64 bits"),
    "overflowing_parameter": ("ShapeError", r"f32\[4611686018427387904\] .* does not fit"),
    "declared_main": ("InputError", r"<text>:1:1: function @main is a declaration without a body"),
    "private_main": ("InputError", r"<text>:1:1: @main must be public"),
    "custom_call_in_reduce_cpu": ("UnsupportedError", r"<text>:5:\d+: XLA \(PJRT\) cannot run "
                                                      r"stablehlo.custom_call: XLA CPU does not run "
                                                      r"a custom_call inside the computation of "
                                                      r"stablehlo.reduce"),
    "custom_call_in_reduce_interpret": ("UnsupportedError", r"cannot run stablehlo.custom_call"),
    "complex_remainder_cpu": ("UnsupportedError", r"<text>:2:\d+: XLA \(PJRT\) cannot run "
                                                  r"stablehlo.remainder"),
    "complex_remainder_interpret": ("UnsupportedError", r"<text>:2:\d+: the reference interpreter "
                                                        r"cannot run stablehlo.remainder"),
    "complex_less_interpret": ("UnsupportedError", r"<text>:2:\d+: the reference interpreter "
                                                   r"cannot run stablehlo.compare"),
    "nested_regions_3000": ("InputError", r"<text>:\d+:\d+: brackets nest deeper than 512"),
    "nested_type_20000": ("InputError", r"<text>:1:\d+: brackets nest deeper than 512"),
    "flipped_portable_artifact": ("InputError", r"all flipped artifacts were refused or loaded"),
}


@pytest.fixture(scope="module")
def crash_outcomes():
    return run_cases(CRASHES)


# LIBRARY BUGS, open: these still end the process (found writing tests/spec_elementwise.py;
# seen on jaxlib 0.10.2). hlogen's own ops refuse both; loaded modules reach the backends.
_STILL_CRASH: dict = {}  # reproducers that still end the process: none


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="LIBRARY BUG: " + _STILL_CRASH[n]))
    if n in _STILL_CRASH else n for n in sorted(CRASHES)])
def test_reproducers_that_once_killed_the_process(name, crash_outcomes):
    outcome = crash_outcomes[name]
    expected, pattern = EXPECTED[name]
    if expected == "ok":
        assert outcome.kind == "ok", str(outcome)
        assert re.search(pattern, outcome.detail.strip()), str(outcome)
    else:
        _expect(outcome, expected, pattern)


def test_deep_nesting_within_the_bounds_works():
    # 100 nested regions: within MAX_REGION_NESTING, walked without recursion, and run
    comp = hg.load(nested_regions(100))
    assert hg.interpret(comp, np.int32(0), np.float32(2.5)) == np.float32(2.5)
    assert hg.compile(comp)(np.int32(0), np.float32(2.5)) == np.float32(2.5)
    with pytest.raises(hg.InputError, match=r"regions nest deeper than 128 levels"):
        hg.load(nested_regions(200))


# -- XLA's semantics for loaded modules -------------------------------------------------

def _both(comp, *args):
    return hg.interpret(comp, *args), hg.compile(comp)(*args)


def test_loaded_division_gets_xla_semantics_on_both_backends():
    comp = hg.load(DIVISION)
    a = np.array([7, -2147483648], np.int32)
    for b, (quotient, remainder) in (([0, -1], ([-1, -2147483648], [7, 0])),
                                     ([2, 0], ([3, -1], [1, -2147483648]))):
        for result in _both(comp, a, np.array(b, np.int32)):
            np.testing.assert_array_equal(result[0], quotient)
            np.testing.assert_array_equal(result[1], remainder)


def test_loaded_total_order_compare_on_both_backends():
    comp = hg.load(TOTAL_ORDER)
    a = np.array([-0.0, np.nan, 1, -np.inf], np.float32)
    b = np.array([0.0, np.inf, np.nan, -1], np.float32)
    for result in _both(comp, a, b):
        np.testing.assert_array_equal(result, [True, False, True, True])


def test_reduce_precision_keeps_nan_on_every_backend():
    x = np.array([np.nan, -np.nan, 1e10], np.float64)
    loaded = hg.load(REDUCE_PRECISION)
    b = hg.Builder("rp")
    built = b.build(ops.reduce_precision(b.parameter(hg.f64[3], "x"), exponent_bits=5, mantissa_bits=0))
    for comp in (loaded, built):
        for result in _both(comp, x):
            assert np.isnan(result[:2]).all() and result[2] == np.inf, result


def test_rewrites_are_idempotent_and_the_builder_uses_them():
    from hlogen import rewrites

    def rewrite(module):
        return rewrites.rewrite_module(module, rewrites.XLA_SEMANTICS)
    b = hg.Builder("div")
    x, y = b.parameter(hg.s32[2], "x"), b.parameter(hg.s32[2], "y")
    f = b.parameter(hg.f16[2], "f")
    built = b.build(ops.div(x, y), ops.rem(x, y), ops.lt_total_order(f, f),
                    ops.reduce_precision(f, exponent_bits=5, mantissa_bits=0))
    reloaded = hg.load(built.as_text())
    assert rewrite(reloaded.module) == 0  # what the builder emitted is kept
    assert reloaded.as_text() == hg.load(built.as_text()).as_text()
    loaded = hg.load(DIVISION)
    assert rewrite(loaded.module) == 2
    assert rewrite(loaded.module) == 0


def test_xla_semantics_pipeline_shows_the_rewrites():
    comp = hg.passes.run(hg.load(DIVISION), "xla-semantics")
    assert comp.as_text().count("stablehlo.select") == 4
    assert hg.passes.run(hg.load(DIVISION), "legalize").as_text().count("stablehlo.select") == 0


# -- the wrong exception -----------------------------------------------------------------

def _builder():
    b = hg.Builder("args")
    return b, b.parameter(hg.f32[2], "x")


@pytest.mark.parametrize("make", [
    lambda b, x: ops.add(x, ops.tuple([x])),
    lambda b, x: ops.add(x, b.parameter(hg.token, "t")),
    lambda b, x: ops.clamp(x, ops.tuple([x]), x),
    lambda b, x: ops.clamp(ops.tuple([x]), x, x),
    lambda b, x: ops.iota(b, hg.Shape(hg.f32, (2**63,)), 0),
    lambda b, x: ops.broadcast(x, [2**63]),
    lambda b, x: ops.broadcast_in_dim(x, [2**63, 2], [1]),
    lambda b, x: ops.reduce_precision(x, exponent_bits=2**31, mantissa_bits=1),
    lambda b, x: ops.reduce_precision(x, exponent_bits=2**32 + 8, mantissa_bits=7),
    lambda b, x: ops.reduce_precision(x, exponent_bits=8, mantissa_bits=2**40),
    lambda b, x: hg.Shape(hg.f32, 5),
    lambda b, x: hg.Shape(hg.f32, (2, "3")),
    lambda b, x: ops.tuple(None),
    lambda b, x: ops.tuple(5),
    lambda b, x: ops.tuple([], builder="x"),
    lambda b, x: hg.passes.run(b.build(x), None),
    lambda b, x: hg.passes.run("not a computation", "default"),
    lambda b, x: hg.function(5),
    lambda b, x: hg.element_type(None),
    lambda b, x: b.constant([1, 2**64], dtype=hg.u64),
    lambda b, x: b.constant([0.5, 2**63], dtype=hg.u64),
], ids=lambda f: "")
def test_api_mistakes_are_hlogen_errors(make):
    b, x = _builder()
    with pytest.raises(hg.HlogenError):
        make(b, x)


def test_binary_op_messages_name_the_operand():
    b, x = _builder()
    with pytest.raises(hg.ShapeError, match=r"add: rhs must be an array, got \(f32\[2\]\)"):
        ops.add(x, ops.tuple([x]))
    with pytest.raises(hg.ShapeError, match=r"reduce_precision: exponent_bits=4294967304 must be "
                                             r"an integer in \[1, 2\*\*31\)"):
        ops.reduce_precision(x, exponent_bits=2**32 + 8, mantissa_bits=7)


# -- silently wrong ----------------------------------------------------------------------

@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_u64_python_ints_travel_exactly(backend):
    b = hg.Builder("u64")
    x = b.parameter(hg.u64[2], "x")
    comp = b.build(x, b.constant([1, 2**63 + 1], dtype=hg.u64))
    got, constant = hg.compile(comp, backend=backend)([1, 2**63 + 1])
    np.testing.assert_array_equal(got, np.array([1, 2**63 + 1], np.uint64))
    np.testing.assert_array_equal(constant, np.array([1, 2**63 + 1], np.uint64))


def test_element_type_strings_mean_one_thing():
    assert hg.element_type("i8") is hg.s8  # MLIR's name, as on the command line
    assert hg.element_type("ui32") is hg.u32 and hg.element_type("float32") is hg.f32
    for bad in (None, "<f4", "d", "int", "x"):
        with pytest.raises(hg.ShapeError, match="not an element type"):
            hg.element_type(bad)


def test_u64_on_the_command_line(tmp_path):
    from click.testing import CliRunner
    from hlogen_cli.main import main
    path = tmp_path / "id.mlir"
    path.write_text(module("return %a : tensor<2xui64>", "%a: tensor<2xui64>", "tensor<2xui64>"))
    result = CliRunner().invoke(main, ["run", str(path), "--backend", "interpret",
                                       "--input", "2xui64=1,9223372036854775809"])
    assert result.exit_code == 0, result.output
    assert "9223372036854775809" in result.output


# -- messages ------------------------------------------------------------------------------

def test_loaded_parameters_are_named():
    comp = hg.load(DIVISION)
    assert comp.parameter_names == ["arg0", "arg1"]
    b = hg.Builder("named")
    assert hg.load(b.build(b.parameter(hg.f32[2], "x")).as_text(debug_info=True)).parameter_names == ["x"]


def test_errors_name_the_file(tmp_path):
    path = tmp_path / "nomain.mlir"
    path.write_text("func.func @f() -> tensor<f32> {\n  %0 = stablehlo.constant dense<1.0> : "
                    "tensor<f32>\n  return %0 : tensor<f32>\n}\n")
    with pytest.raises(hg.InputError, match=re.escape(f"{path}: the module has no function @main")):
        hg.load(path)
    path.write_text(module("""
      %0 = stablehlo.abs %a : (tensor<2xf32>) -> tensor<?xf32>
      %1 = stablehlo.convert %0 : (tensor<?xf32>) -> tensor<2xf32>
      return %1 : tensor<2xf32>""", "%a: tensor<2xf32>"))
    with pytest.raises(hg.ShapeError, match=re.escape(f"stablehlo.abs at {path}:2:6 (tensor<?xf32>) "
                                                      f"is dynamic with no bound")):
        hg.compile(hg.load(path))
    path.write_text(module("return %a : tensor<2xi3>", "%a: tensor<2xi3>", "tensor<2xi3>"))
    with pytest.raises(hg.InputError, match=re.escape(f"{path}:1:1: func.func: MLIR element type i3")):
        hg.load(path)


def test_a_bytecode_check_that_cannot_run_is_an_error(monkeypatch):
    # the check reports by its child's exit: a child that fails before checking anything
    # (here made to) must not pass the bytes on as checked
    from hlogen import native
    monkeypatch.setattr(native, "_PRELUDE", native._PRELUDE + "raise SystemExit('no check')\n")
    b = hg.Builder("bc")
    data = b.build(ops.abs(b.parameter(hg.f32[2], "x"))).to_bytecode()
    with pytest.raises(hg.ExecutionError, match="failed to run: no check"):
        hg.load(data)


def test_bad_bytecode_prints_nothing_but_the_error(capfd):
    b = hg.Builder("bc")
    data = b.build(ops.abs(b.parameter(hg.f32[2], "x"))).to_bytecode()
    with pytest.raises(hg.InputError):
        hg.load(data[: len(data) // 2])
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


# every reproducer a backend can load, by name; nothing of those the interpreter refuses
# is compared
_REPRODUCERS = {"division": DIVISION, "constant_division": CONSTANT_DIVISION,
                "unsigned_division": UNSIGNED_DIVISION, "total_order": TOTAL_ORDER,
                "reduce_precision": REDUCE_PRECISION, "custom_call_in_reduce": CUSTOM_CALL_IN_REDUCE,
                "nested_regions": nested_regions(10), **_UNSUPPORTED_BY_INTERPRETER}


@pytest.mark.parametrize("name", sorted(_REPRODUCERS))
def test_interpreter_and_xla_agree_on_every_reproducer_both_can_run(name):
    comp = hg.load(_REPRODUCERS[name])
    if name in _INTERPRETER_REFUSES:
        with pytest.raises(hg.UnsupportedError, match="the reference interpreter cannot run"):
            hg.compile(comp, backend="interpret")
        return
    rng = np.random.default_rng(1)
    args = [(rng.standard_normal(s.dimensions) * 3).astype(s.dtype) for s in comp.parameter_shapes]
    interpreted, compiled = (r if isinstance(r, tuple) else (r,) for r in (
        hg.compile(comp, backend=backend)(*args) for backend in ("interpret", "cpu")))
    assert len(interpreted) == len(compiled) == len(comp.result_shapes)
    compared = 0
    for a, b in zip(interpreted, compiled):
        if np.asarray(b).dtype.kind in "fc":  # rewritten ops (cholesky, fft) round differently
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(a, b)
        compared += np.size(a)
    assert compared > 0, f"{name}: nothing compared"
