"""XLA options per compile (hlogen.runtime.xla_options, hg.compile(xla_options=...)):
names and types from jaxlib's own DebugOptions descriptor, checked before compiling,
in force in the executable, part of both caches' keys; running optimized HLO as it is."""
from __future__ import annotations

import glob

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hlogen as hg
from hlogen.runtime import _jaxlib, pjrt
from hlogen.runtime import xla_options as X
from hlogen.runtime.cache import ExecutableCache
from tests.differential_cases import jax_module


@pytest.fixture(scope="module")
def log_exp():
    """log(exp(x)): XLA's algebraic simplifier makes it x (CPU gives 100 at x = 100);
    computed as written, exp overflows (inf)."""
    return jax_module(lambda x: jnp.log(jnp.exp(x)), np.zeros(3, np.float32))


def test_the_descriptor_has_every_field_jaxlib_types():
    """An independent source: the fields jaxlib's CompileOptions exposes as attributes,
    typed by their defaults, are all in the descriptor with those types."""
    options = _jaxlib.xla_client.CompileOptions()  # (kept: the others point into it)
    build = options.executable_build_options
    exposed = build.debug_options
    names = [n for n in dir(exposed) if n.startswith("xla_")]
    fields = X.fields()
    assert len(fields) > 200 and len(names) > 20
    kinds = {bool: "bool", int: "int", str: "string"}
    for name in names:
        default = getattr(exposed, name)
        field = fields[name]
        if isinstance(default, list):
            assert field.repeated, name
        elif type(default) in kinds:
            assert field.kind == kinds[type(default)] or field.kind == "enum", name
    assert fields["xla_disable_hlo_passes"].repeated
    scheduler = fields["xla_cpu_scheduler_type"]
    assert scheduler.kind == "enum" and ("CPU_SCHEDULER_TYPE_DEFAULT", 0) in scheduler.values


def test_values_are_typed_as_xla_reads_them():
    checked = X.check({"xla_cpu_enable_fast_math": "true", "xla_backend_optimization_level": "2",
                       "xla_disable_hlo_passes": ["algsimp", "cse"],
                       "xla_cpu_scheduler_type": "CPU_SCHEDULER_TYPE_DEFAULT"})
    assert checked == (("xla_backend_optimization_level", 2), ("xla_cpu_enable_fast_math", True),
                       ("xla_cpu_scheduler_type", "CPU_SCHEDULER_TYPE_DEFAULT"),
                       ("xla_disable_hlo_passes", "algsimp,cse"))
    assert X.check(["--xla_cpu_enable_fast_math=0", "xla_dump_to=/tmp/d=x"]) == \
        (("xla_cpu_enable_fast_math", False), ("xla_dump_to", "/tmp/d=x"))
    assert X.check(None) == () and X.check(checked) == checked
    assert X.text(checked[:2]) == "xla_backend_optimization_level=2 xla_cpu_enable_fast_math=true"


@pytest.mark.parametrize("options, words", [
    ({"xla_disable_hlo_pass": "algsimp"}, "closest known: xla_disable_hlo_passes"),
    ({"no_such_thing": 1}, "DebugOptions in XLA's xla/xla.proto"),
    ({"xla_cpu_enable_fast_math": "maybe"}, "takes true or false"),
    ({"xla_backend_optimization_level": 1.5}, "takes an integer"),
    ({"xla_backend_optimization_level": 2**40}, "takes an integer in [-2147483648, 2147483647]"),
    ({"xla_dump_to": 5}, "takes a string"),
    ({"xla_cpu_scheduler_type": "CPU_SCHEDULER_DEFAULT"}, "the closest: CPU_SCHEDULER_TYPE_DEFAULT"),
    ({"xla_backend_extra_options": "a=b"}, "message field"),
    (["xla_dump_to"], "NAME=VALUE"),
    (["xla_dump_to=a", "--xla_dump_to=b"], "given twice"),
    ([("a", 1, 2)], "(name, value) pair"),
])
def test_bad_options_are_input_errors_before_any_compile(options, words, log_exp):
    with pytest.raises(hg.InputError, match=None) as raised:
        X.check(options)
    assert words in str(raised.value)
    with pytest.raises(hg.InputError):
        hg.compile(log_exp, backend="cpu", xla_options=options)


def test_options_are_in_force_and_key_the_executable_cache(log_exp):
    x = np.array([1, 100, 2], np.float32)
    plain = hg.compile(log_exp, backend="cpu")
    without = hg.compile(log_exp, backend="cpu", xla_options={"xla_disable_hlo_passes": "algsimp"})
    assert plain is not without and without.xla_options == (("xla_disable_hlo_passes", "algsimp"),)
    assert plain(x)[1] == 100 and np.isinf(without(x)[1])
    assert hg.compile(log_exp, backend="cpu") is plain  # each set of options keeps its own
    everything = hg.compile(log_exp, backend="cpu", xla_options=["xla_disable_all_hlo_passes=true"])
    assert np.isinf(everything(x)[1])


def test_the_disk_cache_keys_by_options_and_xla_flags(tmp_path, monkeypatch):
    comp = jax_module(lambda x: jnp.log(jnp.exp(x)) + 17.25, np.zeros(2, np.float32))
    cache = ExecutableCache(tmp_path)
    pjrt.compile(comp, "cpu", disk_cache=cache)
    other = pjrt.compile(comp, "cpu", disk_cache=cache,
                         xla_options=X.check({"xla_disable_hlo_passes": "algsimp"}))
    assert other.cache_outcome == "miss"
    assert len(cache.entries(_jaxlib.jaxlib_version())) == 2
    devices = other.devices
    key = _jaxlib.compile_options_key(devices, other.xla_options)
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert _jaxlib.compile_options_key(devices, other.xla_options) != key


def test_the_interpreter_takes_no_options(log_exp):
    with pytest.raises(hg.UnsupportedError, match="takes no XLA options"):
        hg.compile(log_exp, backend="interpret", xla_options={"xla_cpu_enable_fast_math": True})
    assert hg.compile(log_exp, backend="interpret", xla_options={}) is not None


def test_without_the_descriptor_xla_refuses_unknown_names(log_exp, monkeypatch):
    monkeypatch.setattr(X, "fields", lambda library=None: {})
    with pytest.raises(hg.InputError, match="No such compile option"):
        hg.compile(log_exp, backend="cpu", xla_options={"xla_not_an_option": True})


def optimized_dump(f, args, folder) -> str:
    """The path of XLA CPU's `*after_optimizations*` dump of jax's `f` for `args`."""
    pjrt.client("cpu")  # hlogen's backend first (see tests.differential_cases)
    jax.jit(f).lower(*args).compile(compiler_options={"xla_dump_to": str(folder),
                                                      "xla_dump_hlo_as_text": True})
    (dump,) = glob.glob(str(folder / "*cpu_after_optimizations.txt"))
    return dump


# what XLA CPU's optimizations leave unfused, which the HLO-to-StableHLO converter reads
@pytest.mark.parametrize("f, args, reference", [
    (lambda x, y: jnp.dot(x, y), (np.arange(12, dtype=np.float32).reshape(3, 4),
                                  np.ones((4, 2), np.float32)), lambda x, y: x @ y),
    (lambda x: x @ x.T, (np.arange(12, dtype=np.float32).reshape(3, 4),), lambda x: x @ x.T),
])
def test_an_optimized_dump_runs_as_it_is(tmp_path, f, args, reference):
    comp = hg.load(optimized_dump(f, args, tmp_path))
    got = hg.compile(comp, backend="cpu", xla_options=X.NO_HLO_PASSES)(*args)
    np.testing.assert_array_equal(got, reference(*args))


def test_an_optimized_dump_with_fusions_runs_with_no_hlo_passes(tmp_path):
    # hlogen reads XLA's fusions as calls (hlogen.hlo), so the fused dump runs as it is
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    dump = optimized_dump(lambda v: jnp.sin(v) * 2 + 1, [x], tmp_path)
    got = hg.compile(hg.load(dump), backend="cpu", xla_options=X.NO_HLO_PASSES)(x)
    np.testing.assert_allclose(got, np.sin(x) * 2 + 1, rtol=1e-6)
