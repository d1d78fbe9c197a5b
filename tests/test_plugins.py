"""PJRT plugins as backends, with a real plugin from the package registry: OpenXLA's
`xla-cpu-pjrt` (the test extra installs it), a PJRT C API library built from another XLA
than jaxlib's, found through its `xla_plugins` entry point and loaded by path.

Results are checked against numpy and against jaxlib's own CPU; executables of the
plugin and of jaxlib's CPU never share a cache entry. The plugin loads once in this
process; what needs a fresh process (HLOGEN_PLUGINS, jax's own plugin discovery, a
plain `import hlogen`) runs in a child.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import io
import os
import pathlib
import platform
import subprocess
import sys

import jaxlib
import numpy as np
import pytest

import hlogen as hg
from hlogen import backends, conformance, ops
from hlogen.runtime import pjrt, plugins
from hlogen.runtime.cache import ExecutableCache
from tests import docs

NAME = "xla_cpu_pjrt"
CONFORMANCE = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo"

try:
    DIST = importlib.metadata.distribution("xla-cpu-pjrt")
except importlib.metadata.PackageNotFoundError:
    DIST = None
# the wheel exists for Linux x86-64 only (pyproject.toml's test extra says so); there it
# must be installed
pytestmark = pytest.mark.skipif(
    DIST is None and (platform.system(), platform.machine()) != ("Linux", "x86_64"),
    reason="xla-cpu-pjrt has no wheel for this platform")


@pytest.fixture(scope="module")
def plugin() -> backends.Backend:
    return backends.get(NAME)  # not declared: discovery loads the installed plugins


@pytest.fixture(scope="module")
def library(plugin) -> str:
    return plugin.identity["library"]


def _child(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **env})


# -- found and declared ----------------------------------------------------------------------

def test_found_through_its_entry_point_with_its_library_beside_it(plugin):
    (found,) = [f for f in plugins.available() if f.name == NAME]
    package = pathlib.Path(DIST.locate_file("xla_plugins/xla_cpu_pjrt/__init__.py"))
    assert pathlib.Path(found.library) == package.parent.resolve() / "xla_cpu_pjrt.so"
    assert found.version == DIST.version and "xla_plugins entry point" in found.source
    identity = plugin.identity
    assert (identity["library"], identity["version"]) == (found.library, DIST.version)
    assert identity["platform"] == "cpu"  # its platform is called cpu, its backend not
    assert backends.get("cpu").identity == {} and plugin.name == NAME
    major, minor = identity["pjrt_c_api"].split(".")
    assert major == "0" and int(minor) > 0
    client_devices = pjrt.client(plugin.platform).local_devices()
    assert identity["devices"] == str(len(client_devices))
    assert identity["device_kind"] == client_devices[0].device_kind
    assert identity["xla_options"].endswith("DebugOptions fields (read from its library)")
    assert "jaxlib's XLA's" in identity["refusals"]
    assert plugin.kind is backends.Kind.PJRT and backends.compiles(NAME)
    assert plugin.refuses == backends.XLA_REFUSES_UNMEASURED
    assert all(isinstance(v, str) for v in identity.values())  # `hlogen devices` prints them


def test_a_plain_import_starts_no_jax_and_loads_no_plugin_and_the_environment_is_honoured(library):
    code = ("import sys, hlogen as hg\n"
            "from hlogen import backends\n"
            "from hlogen.runtime import plugins\n"
            "assert 'jax' not in sys.modules and not plugins._loaded\n"
            "assert [f.name for f in plugins.available()][-1] == 'from_env'\n"
            "b = hg.Builder('f'); x = b.parameter(hg.f32[3], 'x')\n"
            "exe = hg.compile(b.build(hg.ops.mul(x, x)), backend='from_env')\n"
            "import numpy as np; print(exe(np.array([1, 2, 3], np.float32)).tolist())\n"
            "print(backends.get('from_env').identity['source'])\n")
    done = _child(code, HLOGEN_PLUGINS=f"{library}:from_env")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[1.0, 4.0, 9.0]", "$HLOGEN_PLUGINS"]
    assert "fusion type" not in done.stderr and "experimental" not in done.stderr


def _jax_plugin(folder: pathlib.Path, name: str, library) -> None:
    """A jax plugin `name` of `library` under `folder`: a jax_plugins namespace package,
    as jax documents them."""
    package = folder / "jax_plugins" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "from jax._src import xla_bridge\n"
        "def initialize():\n"
        f"    xla_bridge.register_plugin({name!r}, library_path={str(library)!r})\n")


def test_jax_plugins_found_by_jax_are_declared_under_jax_names(library, tmp_path):
    _jax_plugin(tmp_path, "by_jax", library)
    code = ("import hlogen as hg, numpy as np\n"
            "from hlogen import backends\n"
            "b = hg.Builder('f'); x = b.parameter(hg.f32[2], 'x')\n"
            "exe = hg.compile(b.build(hg.ops.add(x, x)), backend='by_jax')\n"
            "print(exe(np.array([1, 2], np.float32)).tolist())\n"
            "print(backends.get('by_jax').identity['library'])\n")
    done = _child(code, PYTHONPATH=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[2.0, 4.0]", library]


def test_a_jax_plugin_whose_library_is_gone_is_refused_with_why(library, tmp_path):
    # its file removed after jax loaded it (an upgrade, a temporary folder): what keys its
    # executables cannot be read, so hlogen refuses it, in words (no OSError)
    link = tmp_path / "libgone.so"
    link.symlink_to(library)
    _jax_plugin(tmp_path, "gone", link)
    code = ("import os, jax, hlogen as hg\n"
            "jax.devices()  # jax starts its backends, the plugin among them\n"
            f"os.remove({str(link)!r})\n"
            "b = hg.Builder('f'); x = b.parameter(hg.f32[2], 'x')\n"
            "try:\n"
            "    hg.compile(b.build(hg.ops.add(x, x)), backend='gone')\n"
            "except hg.UnsupportedError as e:\n"
            "    print(e)\n")
    done = _child(code, PYTHONPATH=str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith(f"backend 'gone' cannot be used: PJRT plugin gone ({link}): "
                                  f"its library cannot be read"), done.stdout


def test_a_name_of_its_own(library):
    with pytest.raises(hg.InputError, match="a backend named 'cpu' is declared already"):
        hg.load_plugin(library, name="cpu", isolate=False)
    with pytest.raises(hg.InputError, match="lowercase letters, digits and _"):
        hg.load_plugin(library, name="Bad-Name", isolate=False)
    with pytest.raises(hg.InputError, match="no such file"):
        hg.load_plugin(pathlib.Path(library).with_name("missing.so"))
    assert plugins.name_from_file("/x/libfoo-pjrt.so.1") == "foo_pjrt"
    assert plugins.parse_list("/a/b.so:one, /c/d.so") == [("/a/b.so", "one"), ("/c/d.so", None)]


# -- compiled and run, as jaxlib's CPU runs it -------------------------------------------------

def _elementwise():
    b = hg.Builder("elementwise")
    x, y = b.parameter(hg.f32[6], "x"), b.parameter(hg.f32[6], "y")
    args = [np.linspace(-2, 2, 6, dtype=np.float32), np.linspace(0, 1, 6, dtype=np.float32)]
    return b.build(ops.mul(ops.tanh(x), ops.exp(y))), args, [np.tanh(args[0]) * np.exp(args[1])]


def _dot():
    b = hg.Builder("dot")
    x, y = b.parameter(hg.f32[3, 4], "x"), b.parameter(hg.f32[4, 2], "y")
    args = [np.arange(12, dtype=np.float32).reshape(3, 4),
            np.arange(8, dtype=np.float32).reshape(4, 2)]
    return b.build(ops.dot(x, y)), args, [args[0] @ args[1]]


def _reduce():
    b = hg.Builder("reduce")
    x = b.parameter(hg.s32[3, 5], "x")
    args = [np.arange(-7, 8, dtype=np.int32).reshape(3, 5)]
    comp = b.build(ops.reduce(x, b.constant(np.int32(0)), lambda p, q: ops.add(p, q), [1]))
    return comp, args, [args[0].sum(axis=1, dtype=np.int32)]


def _while():
    b = hg.Builder("loop")
    n = b.parameter(hg.s32[()], "n")
    count, total, _ = ops.while_loop(
        lambda i, t, n: ops.lt(i, n),
        lambda i, t, n: (ops.add(i, 1), ops.add(t, ops.mul(i, i)), n),
        (b.constant(np.int32(0)), b.constant(np.int32(0)), n))
    return b.build(count, total), [np.int32(10)], [np.int32(10), np.int32(285)]  # 0^2+...+9^2


def _gather():
    b = hg.Builder("gather")
    x, idx = b.parameter(hg.f32[5, 3], "x"), b.parameter(hg.s32[4, 1], "idx")
    comp = b.build(ops.gather(x, idx, offset_dims=[1], collapsed_slice_dims=[0],
                              start_index_map=[0], index_vector_dim=1, slice_sizes=[1, 3]))
    args = [np.arange(15, dtype=np.float32).reshape(5, 3), np.array([[4], [0], [2], [4]], np.int32)]
    return comp, args, [args[0][args[1][:, 0]]]


def _sort():
    b = hg.Builder("sort")
    keys, values = b.parameter(hg.f32[7], "keys"), b.parameter(hg.s32[7], "values")
    comp = b.build(*ops.sort([keys, values], lambda p, q, *_: ops.lt(p, q), is_stable=True))
    args = [np.array([3, -1, 2, -1, 0, 9, 2], np.float32), np.arange(7, dtype=np.int32)]
    order = np.argsort(args[0], kind="stable")
    return comp, args, [args[0][order], args[1][order]]


@pytest.mark.parametrize("case", [_elementwise, _dot, _reduce, _while, _gather, _sort],
                         ids=lambda f: f.__name__[1:])
def test_results_are_numpy_s_and_jaxlib_cpu_s(plugin, case):
    comp, args, expected = case()
    on_plugin, on_cpu = hg.compile(comp, backend=NAME), hg.compile(comp, backend="cpu")
    assert on_plugin.backend == NAME and on_plugin.device.client is not on_cpu.device.client
    got, reference = on_plugin(*args), on_cpu(*args)
    got, reference = (list(r) if isinstance(r, tuple) else [r] for r in (got, reference))
    for g, r, e in zip(got, reference, expected):
        assert g.dtype == np.asarray(e).dtype
        np.testing.assert_allclose(g, e, rtol=1e-6)
        np.testing.assert_allclose(g, r, rtol=1e-6)


def test_optimized_hlo_cost_and_memory_analysis_and_serialization(plugin):
    comp, args, expected = _dot()
    exe = hg.compile(comp, backend=NAME)
    assert exe.optimized_hlo().startswith("HloModule dot")
    assert exe.cost_analysis()["flops"] == 2 * 3 * 4 * 2  # a multiply and an add per product
    memory = exe.memory_stats()
    assert (memory["argument_size_in_bytes"], memory["output_size_in_bytes"]) == (80, 24)
    assert len(exe.serialize()) > 0


def test_replicas_on_the_plugin_s_devices(plugin):
    b = hg.Builder("sum_over_replicas")
    comp = b.build(ops.cross_replica_sum(b.parameter(hg.f32[3], "x")))
    exe = hg.compile(comp, backend=NAME, num_replicas=2)
    results = exe.run_replicated([[np.full(3, 1, np.float32)], [np.full(3, 2, np.float32)]])
    assert [r.tolist() for r in results] == [[3, 3, 3]] * 2
    have = int(plugin.identity["devices"])
    with pytest.raises(hg.UnsupportedError, match=f"the PJRT plugin {NAME} has {have}"):
        hg.compile(comp, backend=NAME, num_replicas=have + 1)


def test_xla_options_are_the_ones_its_library_takes(plugin):
    comp, args, expected = _dot()
    jaxlib_only = "xla_cpu_ftz"  # a DebugOptions field of jaxlib's XLA, newer than the plugin's
    assert hg.compile(comp, backend="cpu", xla_options={jaxlib_only: True})(*args).shape == (3, 2)
    with pytest.raises(hg.InputError, match=f"no XLA option named '{jaxlib_only}'"):
        hg.compile(comp, backend=NAME, xla_options={jaxlib_only: True})
    exe = hg.compile(comp, backend=NAME, xla_options={"xla_cpu_enable_fast_math": False})
    np.testing.assert_array_equal(exe(*args), expected[0])


# -- one plugin's executable is never another's --------------------------------------------------

def test_caches_keep_the_plugin_s_executables_apart_from_jaxlib_s(plugin, tmp_path):
    b = hg.Builder("kept_apart")  # a module no other test compiled (the memory cache)
    x = b.parameter(hg.f32[3], "x")
    comp, args, expected = b.build(ops.sub(ops.mul(x, x), x)), [np.float32([1, 2, 3])], [[0, 2, 6]]
    store = ExecutableCache(tmp_path)
    on_cpu = pjrt.compile(comp, "cpu", store)
    on_plugin = pjrt.compile(comp, NAME, store)
    assert on_plugin is not on_cpu and on_plugin.device.client is not on_cpu.device.client
    assert (on_cpu.cache_outcome, on_plugin.cache_outcome) == ("miss", "miss")  # not each other's
    assert f"plugin=library={plugin.identity['library']}" in on_plugin.options_key
    assert "plugin=" not in on_cpu.options_key
    headers = {e.header["backend"]: e.header for e in store.entries(jaxlib.__version__)}
    assert set(headers) == {"cpu", NAME}
    assert headers[NAME]["plugin"]["library"] == plugin.identity["library"]
    assert "plugin" not in headers["cpu"]
    # a fresh executable (not the memory cache's) loads the plugin's own entry
    again = pjrt.Executable(comp, plugin, pjrt.client(NAME), on_plugin.devices, store)
    assert again.cache_outcome == "hit"
    np.testing.assert_array_equal(again(*args), expected[0])


def test_loaded_by_path_under_another_name(plugin, library):
    assert hg.load_plugin(library, isolate=False) is plugin  # the entry point's, same library
    direct = hg.load_plugin(library, name="xla_cpu_direct", isolate=False)
    assert direct.identity["library"] == library and direct.identity["source"] == "hg.load_plugin"
    comp, args, expected = _sort()
    got = hg.compile(comp, backend="xla_cpu_direct")(*args)
    for g, e in zip(got, expected):
        np.testing.assert_array_equal(g, e)
    # conformance workers (child processes) load it too: it was loaded here by path
    files = [str(CONFORMANCE / "testdata" / name) for name in
             ("add_float32_20_20_float32_20_20.mlir", "sort_float64_5_7.mlir")]
    run = conformance.run(files, ["xla_cpu_direct", NAME], jobs=1)
    assert [(r["backend"], r["status"]) for r in run.records] == [
        ("xla_cpu_direct", "pass"), (NAME, "pass")] * 2


def test_the_readme_example(plugin):
    (code,), (printed,) = (docs.blocks("docs/plugins.md", language, "From Python")
                           for language in ("python", ""))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/plugins.md", "exec"), {})
    assert out.getvalue() == printed


def test_probed_in_a_child_process(library):
    identity = plugins.probe(library, "probed")
    assert identity["library"] == library and identity["pjrt_c_api"] == \
        backends.get(NAME).identity["pjrt_c_api"]
    assert "probed" not in backends.BACKENDS  # this process loaded nothing


def test_a_failure_is_set_beside_jaxlib_s_cpu_under_the_same_xla_options(plugin, tmp_path):
    """`hlogen check --xla-flag` compiles the cpu run that a plugin's failure is set beside
    with the same options: log(exp(100)) expected 100 (algsimp's rewrite) fails on both
    backends without algsimp."""
    from tests.test_conformance import write_testdata
    path = write_testdata(tmp_path / "log_exp.mlir",
                          "%9 = stablehlo.exponential %0 : tensor<4xf32>\n"
                          "    %2 = stablehlo.log %9 : tensor<4xf32>",
                          "[1.0, 100.0, 2.0, 3.0]", "[1.0, 100.0, 2.0, 3.0]", "expect_close")
    assert conformance.run([str(path)], [NAME], jobs=1).records[0]["status"] == "pass"
    run = conformance.run([str(path)], [NAME], jobs=1,
                          xla_options=(("xla_disable_hlo_passes", "algsimp"),))
    (record,) = run.records
    assert record["status"] == "fail", record
    assert record["message"].endswith("(jaxlib's cpu fails it too: fail)"), record["message"]
