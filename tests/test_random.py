"""RngUniform, RngNormal, RngBitGenerator on PJRT (CPU): determinism for a fixed state,
statistics of large samples, every algorithm and data type XLA accepts; the
interpreter's refusal; every argument error.

States and bounds are parameters, not constants, so XLA cannot fold the ops away.
Statistical bounds are 5 standard errors: a correct generator fails one with
probability below 1e-6.
"""
from __future__ import annotations

import functools
import itertools

import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from hlogen.ops.random import rng_bit_generator, rng_normal, rng_uniform

ALGORITHMS = ("DEFAULT", "THREE_FRY", "PHILOX")
STATE_SIZES = {"DEFAULT": (2, 3), "THREE_FRY": (2,), "PHILOX": (2, 3)}
ALGORITHM_STATES = [(a, n) for a in ALGORITHMS for n in STATE_SIZES[a]]
DATA_TYPES = ("s4", "u4", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64",
              "f8e4m3fn", "f8e5m2", "f16", "bf16", "f32", "f64")
_names = itertools.count()


def bits_computation(algorithm, state_size, data_shape):
    """(state) -> (new_state, data); each call a new module, so a new compile."""
    b = hg.Builder(f"bits{next(_names)}")
    state = b.parameter(hg.u64[state_size], "state")
    return b.build(*rng_bit_generator(algorithm, state, data_shape))


def bits(algorithm, state, data_shape):
    state = np.asarray(state, np.uint64)
    return hg.compile(bits_computation(algorithm, state.size, data_shape))(state)


def sample(op, et, first, second, dims):
    """op(first, second, dims) with the bounds as parameters of element type `et`."""
    et = hg.element_type(et)
    b = hg.Builder(f"sample{next(_names)}")
    x = b.parameter(et[()], "first")
    y = b.parameter(et[()], "second")
    exe = hg.compile(b.build(op(x, y, et[dims])))
    return exe(np.asarray(first, et.dtype), np.asarray(second, et.dtype))


def unsigned_bits(data: np.ndarray) -> np.ndarray:
    """The bit patterns of `data` as unsigned integers (int64 for 4-bit types)."""
    if data.dtype in (ml_dtypes.int4, ml_dtypes.uint4):
        return data.astype(np.int64) & 0xF
    return data.view(f"u{data.dtype.itemsize}")


# -- RngBitGenerator: determinism ------------------------------------------------------------

@pytest.mark.parametrize("algorithm,state_size", ALGORITHM_STATES)
def test_same_state_same_bits_twice_and_across_compiles(algorithm, state_size):
    state = np.arange(7, 7 + state_size, dtype=np.uint64)
    exe = hg.compile(bits_computation(algorithm, state_size, hg.u32[4, 64]))
    first_state, first = exe(state)
    again_state, again = exe(state)
    other_state, other = hg.compile(bits_computation(algorithm, state_size, hg.u32[4, 64]))(state)
    assert first.dtype == np.uint32 and first.shape == (4, 64)
    assert first.tobytes() == again.tobytes() == other.tobytes()
    assert first_state.tobytes() == again_state.tobytes() == other_state.tobytes()


@pytest.mark.parametrize("algorithm,state_size", ALGORITHM_STATES)
def test_different_states_give_different_bits(algorithm, state_size):
    base = np.arange(1, 1 + state_size, dtype=np.uint64)
    exe = hg.compile(bits_computation(algorithm, state_size, hg.u32[1000]))
    outputs = [exe(base)[1]]
    for word in range(state_size):  # each word of the state matters
        changed = base.copy()
        changed[word] += np.uint64(1)
        outputs.append(exe(changed)[1])
    for x, y in itertools.combinations(outputs, 2):
        assert np.mean(x == y) < 0.01  # equal u32 words by chance: 1000 * 2**-32


@pytest.mark.parametrize("algorithm,state_size", ALGORITHM_STATES)
def test_new_state_differs_and_chains(algorithm, state_size):
    state = np.array([5, 6, 7][:state_size], np.uint64)
    exe = hg.compile(bits_computation(algorithm, state_size, hg.u64[16]))
    new_state, data = exe(state)
    assert new_state.dtype == np.uint64 and new_state.shape == (state_size,)
    assert not np.array_equal(new_state, state)
    newer_state, next_data = exe(new_state)  # the next call's state: fresh bits
    assert not np.array_equal(newer_state, new_state)
    assert np.mean(data == next_data) == 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_bits_are_uniform(algorithm):
    """Every bit position of 10^5 u32 words is set half of the time, within 5 sigma."""
    n = 100_000
    data = bits(algorithm, [3, 4], hg.u32[n])[1]
    per_bit = ((data[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
    assert np.all(np.abs(per_bit - 0.5) < 5 * np.sqrt(0.25 / n)), per_bit
    assert len(np.unique(data)) > n - 10  # 32-bit words rarely repeat (about 1 expected)


def test_algorithms_differ_and_default_is_philox_on_cpu():
    """DEFAULT is implementation-defined: XLA CPU expands it as PHILOX (same bits)."""
    state = [11, 12]
    three_fry = bits("THREE_FRY", state, hg.u32[256])[1]
    philox = bits("PHILOX", state, hg.u32[256])[1]
    default = bits("DEFAULT", state, hg.u32[256])[1]
    assert np.mean(three_fry == philox) < 0.01
    assert default.tobytes() == philox.tobytes()


@pytest.fixture(scope="module")
def every_data_type():
    """Data of every type and of the unsigned type of its width, from one state, in one
    module (one compile): {name: (data, unsigned data)}."""
    b = hg.Builder("every_type")
    state = b.parameter(hg.u64[2], "state")
    results = []
    for et in map(hg.element_type, DATA_TYPES):
        width = hg.element_type({4: "u4", 8: "u8", 16: "u16", 32: "u32", 64: "u64"}[et.bits])
        results += [rng_bit_generator("PHILOX", state, et[3, 50])[1],
                    rng_bit_generator("PHILOX", state, width[3, 50])[1]]
    out = hg.compile(b.build(*results))(np.array([21, 22], np.uint64))
    return {et: (out[2 * i], out[2 * i + 1]) for i, et in enumerate(DATA_TYPES)}


@pytest.mark.parametrize("et", DATA_TYPES)
def test_every_data_type_is_the_same_bits(et, every_data_type):
    """Data of any integer or float type are the bits of the unsigned type of that width,
    with the requested dtype (XLA CPU alone would return the unsigned type)."""
    data, reference = every_data_type[et]
    assert data.dtype == hg.element_type(et).dtype and data.shape == (3, 50)
    np.testing.assert_array_equal(unsigned_bits(data), unsigned_bits(reference))


def test_float_data_feeds_float_ops():
    """Ops applied to float data compute in floats (XLA CPU typed them as integers)."""
    b = hg.Builder("float_data")
    state = b.parameter(hg.u64[2], "state")
    _, data = rng_bit_generator("THREE_FRY", state, hg.f32[1000])
    data, doubled = hg.compile(b.build(data, ops.mul(data, 2.0)))(np.array([1, 2], np.uint64))
    assert doubled.dtype == np.float32
    tiny, big = np.finfo(np.float32).tiny, np.finfo(np.float32).max / 2
    normal = np.isfinite(data) & (np.abs(data) >= tiny) & (np.abs(data) <= big)
    assert normal.sum() > 400
    np.testing.assert_array_equal(doubled[normal], data[normal] * np.float32(2))


@pytest.mark.parametrize("dims", [(), (0,), (3, 0, 2), (2, 3, 5)])
def test_data_shapes(dims):
    new_state, data = bits("THREE_FRY", [1, 2], hg.u16[dims])
    assert data.shape == dims and data.dtype == np.uint16 and new_state.shape == (2,)


# -- RngUniform, RngNormal ---------------------------------------------------------------------

N = 100_000


@pytest.mark.parametrize("et,a,b", [
    ("f32", -2.5, 4.0), ("f64", 1e-3, 2e-3), ("s32", -7, 5), ("u32", 3, 11),
    ("s64", -2**40, 2**40), ("u64", 2**64 - 10, 2**64 - 1)])
def test_uniform_in_range(et, a, b):
    """Every value in [a, b); the mean within 5 standard errors of (a + b) / 2."""
    x = sample(rng_uniform, et, a, b, (N,))
    assert x.dtype == hg.element_type(et).dtype and x.shape == (N,)
    if hg.element_type(et).is_integer:
        values = np.array([int(v) for v in x[:1000]] + [int(x.min()), int(x.max())], dtype=object)
        assert all(a <= v < b for v in values)
        if b - a <= 16:  # every value occurs in a small range
            assert set(np.unique(x).tolist()) == set(range(a, b))
        mean, sd = (a + b - 1) / 2, np.sqrt(((b - a) ** 2 - 1) / 12)
        x = x.astype(np.float64)
    else:
        assert a <= x.min() and x.max() < b
        mean, sd = (a + b) / 2, (b - a) / np.sqrt(12)
    assert abs(x.mean() - mean) < 5 * sd / np.sqrt(N) + abs(mean) * 1e-12


def test_uniform_empty_interval_runs():
    """b <= a is implementation-defined: XLA CPU returns a for floats when a == b and
    integers of the type's whole range; it must not fail."""
    b = hg.Builder("empty_interval")
    f, i, u = (b.parameter(hg.f32[()], "f"), b.parameter(hg.s32[()], "i"),
               b.parameter(hg.u64[()], "u"))
    exe = hg.compile(b.build(rng_uniform(f, f, [100]), rng_uniform(i, -3, [100]),
                             rng_uniform(u, 2, [100])))
    same, signed, unsigned = exe(np.float32(1.5), np.int32(7), np.uint64(9))
    assert np.all(same == 1.5)
    assert signed.dtype == np.int32 and unsigned.dtype == np.uint64


@functools.lru_cache(maxsize=None)
def half_precision_uniform(et):
    return sample(rng_uniform, et, 0, 10, (N,)).astype(np.float64)


@pytest.mark.parametrize("et", ["f16", "bf16"])
def test_uniform_half_precision_reaches_the_bound(et):
    """XLA CPU rounds f16/bf16 numbers to nearest, so b itself occurs: within [a, b]."""
    x = half_precision_uniform(et)
    assert 0 <= x.min() and x.max() <= 10 and abs(x.mean() - 5) < 0.05


@pytest.mark.xfail(strict=True, reason="XLA CPU deviation: f16/bf16 RngUniform rounds to "
                                       "nearest and returns b, outside [a, b)")
@pytest.mark.parametrize("et", ["f16", "bf16"])
def test_uniform_half_precision_below_the_bound(et):
    x = half_precision_uniform(et)
    assert x.max() < 10


@pytest.mark.parametrize("et", ["f16", "bf16", "f32", "f64"])
def test_normal_mean_and_variance(et):
    """10^5 samples of N(3, 2): mean within 5 sigma / sqrt(n) of 3, variance within 5
    standard errors (sigma^2 sqrt(2 / (n - 1))) of 4, plus the rounding of the type."""
    mu, sigma = 3.0, 2.0
    x = sample(rng_normal, et, mu, sigma, (N,)).astype(np.float64)
    assert x.shape == (N,) and np.all(np.isfinite(x))
    assert abs(x.mean() - mu) < 5 * sigma / np.sqrt(N)
    assert abs(x.var(ddof=1) - sigma**2) < 5 * sigma**2 * np.sqrt(2 / (N - 1)) + 1e-3
    # the tails: about 68.3% within one sigma
    assert abs(np.mean(np.abs(x - mu) < sigma) - 0.6827) < 5 * np.sqrt(0.2166 / N)


def test_every_execution_draws_new_numbers():
    """RngUniform/RngNormal have no state argument: XLA keeps one in the process."""
    b = hg.Builder("draws")
    lo = b.parameter(hg.f32[()], "lo")
    exe = hg.compile(b.build(rng_uniform(lo, 1.0, [64]), rng_normal(lo, 1.0, hg.f32[64])))
    (u1, n1), (u2, n2) = exe(np.float32(0)), exe(np.float32(0))
    assert not np.array_equal(u1, u2) and not np.array_equal(n1, n2)


def test_uniform_shape_forms_and_numbers():
    """shape as a Shape or as dimension sizes (a's type); either bound a Python number."""
    b = hg.Builder("forms")
    lo = b.parameter(hg.s32[()], "lo")
    hi = b.parameter(hg.f64[()], "hi")
    results = (rng_uniform(lo, 4, [2, 3]), rng_uniform(-3, lo, hg.s32[5]),
               rng_uniform(0.5, hi, ("f64", (7,))), rng_normal(hi, 0.0, []))
    assert [r.shape for r in results] == [hg.s32[2, 3], hg.s32[5], hg.f64[7], hg.f64[()]]
    u, v, w, z = hg.compile(b.build(*results))(np.int32(1), np.float64(0.75))
    assert u.shape == (2, 3) and np.all((1 <= u) & (u < 4))
    assert np.all((-3 <= v) & (v < 1))
    assert np.all((0.5 <= w) & (w < 0.75))
    assert z == 0.75  # sigma 0: exactly mu


# -- the interpreter (it runs rng_bit_generator rewritten: tests/test_interpreter_rewrites.py) --

@pytest.mark.parametrize("make,op_name", [
    (lambda b: rng_uniform(b.parameter(hg.f32[()]), 1.0, [3]), "stablehlo.rng"),
    (lambda b: rng_normal(b.parameter(hg.f32[()]), 1.0, [3]), "stablehlo.rng")])
def test_interpreter_refuses(make, op_name):
    b = hg.Builder("interpreted")
    comp = b.build(make(b))
    with pytest.raises(hg.UnsupportedError) as e:
        hg.interpret(comp, *[np.zeros(s.dimensions, s.dtype) for s in comp.parameter_shapes])
    assert f"reference interpreter cannot run {op_name}:" in str(e.value)
    assert "test_random.py" in str(e.value)  # the user's line


# -- argument errors ----------------------------------------------------------------------------

def _param(shape):
    return hg.Builder(f"errors{next(_names)}").parameter(shape, "p")


def _two(shape_a, shape_b):
    b = hg.Builder(f"errors{next(_names)}")
    return b.parameter(shape_a, "a"), b.parameter(shape_b, "b")


def _cases():
    f32, s32 = hg.f32[()], hg.s32[()]
    return [
        # (call, error type, words the message must contain)
        (lambda: rng_uniform(*_two(hg.f32[2], f32), hg.f32[3]), hg.ShapeError,
         ["rng_uniform", "a f32[2]", "must be a scalar"]),
        (lambda: rng_uniform(*_two(f32, s32), hg.f32[3]), hg.ShapeError,
         ["rng_uniform", "b s32[]", "output's element type f32"]),
        (lambda: rng_uniform(*_two(f32, f32), hg.f64[3]), hg.ShapeError,
         ["rng_uniform", "shape f64[3]", "a must have the output's element type f64"]),
        (lambda: rng_uniform(*_two(hg.c64[()], hg.c64[()]), [2]), hg.ShapeError,
         ["rng_uniform", "pred, integer or floating-point", "not c64"]),
        (lambda: rng_uniform(_param(f32), 1.5, hg.s32[3]), hg.ShapeError,
         ["rng_uniform", "a must have the output's element type s32, got f32"]),
        (lambda: rng_uniform(_param(s32), 1.5, [3]), hg.ShapeError, ["rng_uniform: b"]),
        (lambda: rng_uniform(0.0, 1.0, hg.f32[3]), hg.ShapeError,
         ["rng_uniform", "a or b must be an Op"]),
        (lambda: rng_uniform(_param(f32), "x", [3]), hg.ShapeError, ["rng_uniform: b"]),
        (lambda: rng_uniform(_param(f32), _param(f32), [3]), hg.ShapeError,
         ["rng_uniform", "different builders"]),
        (lambda: rng_uniform(_param(f32), 1.0, [-1]), hg.ShapeError,
         ["rng_uniform", "shape", "non-negative"]),
        (lambda: rng_uniform(_param(f32), 1.0, "f32[3]"), hg.ShapeError,
         ["rng_uniform: shape"]),
        (lambda: rng_uniform(_param(hg.tuple_shape(f32)), 1.0, [3]), hg.ShapeError,
         ["rng_uniform", "a must be an array"]),
        (lambda: rng_normal(*_two(s32, s32), [3]), hg.ShapeError,
         ["rng_normal", "mu s32[]", "floating-point", "not s32"]),
        (lambda: rng_normal(*_two(f32, hg.f32[1]), [3]), hg.ShapeError,
         ["rng_normal", "sigma f32[1]", "must be a scalar"]),
        (lambda: rng_bit_generator("MERSENNE", _param(hg.u64[2]), hg.u32[3]), hg.ShapeError,
         ["rng_bit_generator", "algorithm='MERSENNE'", "'DEFAULT', 'THREE_FRY', 'PHILOX'"]),
        (lambda: rng_bit_generator("philox", _param(hg.u64[2]), hg.u32[3]), hg.ShapeError,
         ["rng_bit_generator", "algorithm='philox'"]),
        (lambda: rng_bit_generator(1, _param(hg.u64[2]), hg.u32[3]), hg.ShapeError,
         ["rng_bit_generator", "algorithm=1"]),
        (lambda: rng_bit_generator("THREE_FRY", _param(hg.u64[3]), hg.u32[3]), hg.ShapeError,
         ["rng_bit_generator", "initial_state must be u64[2] for THREE_FRY, got u64[3]"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[4]), hg.u32[3]), hg.ShapeError,
         ["initial_state must be u64[2] or u64[3] for PHILOX, got u64[4]"]),
        (lambda: rng_bit_generator("DEFAULT", _param(hg.u64[1]), hg.u32[3]), hg.ShapeError,
         ["initial_state must be u64[2] or u64[3] for DEFAULT, got u64[1]"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u32[2]), hg.u32[3]), hg.ShapeError,
         ["initial_state must be", "got u32[2]"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.s64[2]), hg.u32[3]), hg.ShapeError,
         ["initial_state must be", "got s64[2]"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[1, 2]), hg.u32[3]), hg.ShapeError,
         ["initial_state must be", "got u64[1,2]"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[()]), hg.u32[3]), hg.ShapeError,
         ["initial_state must be", "got u64[]"]),
        (lambda: rng_bit_generator("PHILOX", np.array([1, 2], np.uint64), hg.u32[3]),
         hg.ShapeError, ["rng_bit_generator", "initial_state must be an Op"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[2]), hg.pred[3]), hg.ShapeError,
         ["rng_bit_generator", "shape pred[3]", "integer or floating-point", "not pred"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[2]), hg.c64[3]), hg.ShapeError,
         ["rng_bit_generator", "not c64"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[2]), [3]), hg.ShapeError,
         ["rng_bit_generator: shape", "hg.f32[2, 3]"]),
        (lambda: rng_bit_generator("PHILOX", _param(hg.u64[2]), hg.tuple_shape(hg.u32[3])),
         hg.ShapeError, ["rng_bit_generator", "shape must be an array shape"]),
    ] + [
        # types the spec allows but XLA does not generate (XLA CPU aborts on them)
        (lambda et=et: rng_uniform(*_two(et[()], et[()]), [3]), hg.UnsupportedError,
         ["rng_uniform", "generate rng_uniform numbers only of", f"aborts on {et}"])
        for et in (hg.pred, hg.s8, hg.u8, hg.s16, hg.u16, hg.s4, hg.f8e4m3fn)
    ] + [
        (lambda et=et: rng_normal(*_two(et[()], et[()]), [3]), hg.UnsupportedError,
         ["rng_normal", "only of bf16, f16, f32, f64", f"aborts on {et}"])
        for et in (hg.f8e4m3fn, hg.f8e5m2)
    ]


@pytest.mark.parametrize("case", range(len(_cases())))
def test_argument_errors(case):
    call, error, words = _cases()[case]
    with pytest.raises(error) as e:
        call()
    for word in words:
        assert word in str(e.value), f"{word!r} not in {str(e.value)!r}"


@pytest.mark.parametrize("text,message", [
    ("""func.func @main(%a: tensor<i8>, %b: tensor<i8>) -> tensor<3xi8> {
      %s = stablehlo.constant dense<3> : tensor<1xi64>
      %0 = stablehlo.rng %a, %b, %s, distribution = UNIFORM : (tensor<i8>, tensor<i8>, tensor<1xi64>) -> tensor<3xi8>
      return %0 : tensor<3xi8>
    }""", "generates only .* not s8"),
    ("""func.func @main(%s: tensor<2xui64>) -> tensor<4xf32> {
      %0:2 = stablehlo.rng_bit_generator %s, algorithm = THREE_FRY : (tensor<2xui64>) -> (tensor<2xui64>, tensor<4xf32>)
      return %0#1 : tensor<4xf32>
    }""", "miscompiles random bits of type f32"),
], ids=["rng-i8", "bits-f32"])
def test_loaded_modules_that_xla_cpu_would_abort_on_or_miscompile_are_refused(text, message):
    """What hlogen's own ops avoid (tests above), refused for loaded modules by the preflight."""
    with pytest.raises(hg.UnsupportedError, match=message):
        hg.compile(hg.load(text), backend="cpu")
