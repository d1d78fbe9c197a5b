"""Third-party native code cannot take hlogen down: PJRT plugin libraries that abort or
crash while loading, compiling or running, built here with gcc, are refused or fail
their module cleanly, with the plugin and the signal named, in a child process; this
(the test) process lives on.

The libraries: GetPjrtApi that aborts; one that returns NULL; one whose API is of
another major version; one whose functions are all NULL (jaxlib's client start calls
one: SIGSEGV); and two that pass on the API of OpenXLA's CPU plugin (xla-cpu-pjrt, the
test extra) with its compile function replaced by one that aborts, or its execute
function by one that segfaults (and one that passes it on unchanged: a build of one's
own).
"""
from __future__ import annotations

import importlib.metadata
import os
import pathlib
import subprocess

import numpy as np
import pytest

import hlogen as hg
from hlogen import backends, conformance, ops
from hlogen.differential import IsolatedRunner
from hlogen.runtime import plugins

CONFORMANCE = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo"

_API_START = """
#include <stddef.h>
struct version { size_t struct_size; void *extension_start; int major_version; int minor_version; };
struct api { size_t struct_size; void *extension_start; struct version pjrt_api_version;
             void *functions[256]; };
"""
SOURCES = {
    "aborts": "#include <stdlib.h>\nvoid *GetPjrtApi(void) { abort(); }\n",
    "returns_null": "void *GetPjrtApi(void) { return 0; }\n",
    "other_major": _API_START + """
static struct api api = {sizeof(struct api), 0, {sizeof(struct version), 0, 99, 0}, {0}};
void *GetPjrtApi(void) { return &api; }
""",
    "no_functions": _API_START + """
static struct api api = {sizeof(struct api), 0, {sizeof(struct version), 0, 0, 81}, {0}};
void *GetPjrtApi(void) { return &api; }
""",
}
# OpenXLA's CPU plugin with one function replaced (pjrt_c_api.h ships with it)
WRAPPER = """
#include <dlfcn.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "pjrt_c_api.h"

static PJRT_Api api;
static PJRT_Error* compile_aborts(PJRT_Client_Compile_Args* args) { abort(); }
static PJRT_Error* execute_segfaults(PJRT_LoadedExecutable_Execute_Args* args) {
  raise(SIGSEGV);
  return NULL;
}

const PJRT_Api* GetPjrtApi(void) {
  void* real = dlopen(REAL_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  const PJRT_Api* (*get)(void) = (const PJRT_Api* (*)(void))dlsym(real, "GetPjrtApi");
  const PJRT_Api* found = get();
  memcpy(&api, found, found->struct_size < sizeof api ? found->struct_size : sizeof api);
#if defined(COMPILE_ABORTS)
  api.PJRT_Client_Compile = compile_aborts;
#elif !defined(PASSES_ON)
  api.PJRT_LoadedExecutable_Execute = execute_segfaults;
#endif
  return &api;
}
"""


def _gcc(source: pathlib.Path, out: pathlib.Path, *flags: str) -> str:
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(out), str(source), *flags],
                   check=True, capture_output=True, timeout=120)
    return str(out)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("plugins")
    libraries = {}
    for name, code in SOURCES.items():
        (folder / f"{name}.c").write_text(code)
        libraries[name] = _gcc(folder / f"{name}.c", folder / f"lib{name}.so")
    return libraries


@pytest.fixture(scope="module")
def wrappers(tmp_path_factory) -> dict:
    try:
        real = pathlib.Path(importlib.metadata.distribution("xla-cpu-pjrt").locate_file(
            "xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so"))
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("xla-cpu-pjrt (the test extra) is not installed")
    folder = tmp_path_factory.mktemp("wrappers")
    (folder / "wrapper.c").write_text(WRAPPER)
    flags = [f"-I{real.parent / 'include'}", f'-DREAL_LIBRARY="{real}"', "-ldl"]
    return {"real": os.path.realpath(real),
            "compile_aborts": _gcc(folder / "wrapper.c", folder / "compile_aborts.so",
                                   "-DCOMPILE_ABORTS", *flags),
            "execute_segfaults": _gcc(folder / "wrapper.c", folder / "execute_segfaults.so",
                                      *flags),
            # a plugin author's own build, its file named as the installed one's
            "own_build": _gcc(folder / "wrapper.c", folder / "xla_cpu_pjrt.so",
                              "-DPASSES_ON", *flags)}


@pytest.mark.parametrize("name, said", [
    ("aborts", "ended the process with SIGABRT while reading its API"),
    ("returns_null", r"its GetPjrtApi returned NULL \(no API\)"),
    ("other_major", r"its API is PJRT C API version 99\.0 .*jaxlib speaks major version 0"),
    ("no_functions", "ended the process with SIGSEGV while starting its client"),
])
def test_a_broken_library_is_refused_in_a_child(built, name, said):
    path = built[name]
    with pytest.raises(hg.UnsupportedError, match=f"PJRT plugin {name} \\({path}\\).*{said}"):
        hg.load_plugin(path)  # isolated: probed in a child first
    assert name not in backends.BACKENDS


@pytest.mark.parametrize("name", ["returns_null", "other_major"])
def test_what_can_be_read_safely_is_refused_in_this_process_too(built, name):
    with pytest.raises(hg.UnsupportedError, match=f"PJRT plugin {name} "):
        hg.load_plugin(built[name], isolate=False)  # its API is read before jax sees it


def test_a_plugin_that_dies_is_left_out_of_discovery_with_why(built, monkeypatch):
    monkeypatch.setenv(plugins.ENVIRONMENT, f"{built['aborts']}:dies")
    try:
        declared = plugins.discover(isolate=True)
        assert "dies" not in [b.name for b in declared]
        with pytest.raises(hg.UnsupportedError, match="backend 'dies' cannot be used: PJRT "
                                                      "plugin dies .* SIGABRT"):
            backends.get("dies")
    finally:
        backends.UNAVAILABLE.pop("dies", None)


def test_a_plugin_that_aborts_compiling_or_segfaults_running_is_refused(wrappers):
    with pytest.raises(hg.UnsupportedError, match="SIGABRT while compiling a small module"):
        plugins.probe(wrappers["compile_aborts"])
    with pytest.raises(hg.UnsupportedError, match="SIGSEGV while running a small module"):
        plugins.probe(wrappers["execute_segfaults"])


def test_a_run_that_segfaults_fails_in_a_child(wrappers):
    hg.load_plugin(wrappers["execute_segfaults"], name="segfaults_running", isolate=False)
    b = hg.Builder("doubled")
    x = b.parameter(hg.f32[3], "x")
    with IsolatedRunner("segfaults_running", b.build(ops.add(x, x)),
                        [np.ones(3, np.float32)]) as runner:
        with pytest.raises(hg.ExecutionError, match="doubled on the PJRT plugin "
                                                    "segfaults_running .*killed by SIGSEGV"):
            runner.run()


def test_conformance_records_a_crash_per_module_and_goes_on(wrappers, monkeypatch):
    # found by discovery in this process and in each worker ($HLOGEN_PLUGINS)
    monkeypatch.setenv(plugins.ENVIRONMENT, f"{wrappers['compile_aborts']}:aborts_compiling")
    plugins.discover()  # as a process started with it does (it loads: compiling aborts)
    files = [str(CONFORMANCE / "testdata" / name) for name in
             ("abs_float32_20_20.mlir", "add_float32_20_20_float32_20_20.mlir")]
    run = conformance.run(files, ["aborts_compiling", "cpu"], jobs=1)
    statuses = [(os.path.basename(r["file"]), r["backend"], r["status"]) for r in run.records]
    assert statuses == [("abs_float32_20_20.mlir", "aborts_compiling", "crash"),
                        ("abs_float32_20_20.mlir", "cpu", "pass"),
                        ("add_float32_20_20_float32_20_20.mlir", "aborts_compiling", "crash"),
                        ("add_float32_20_20_float32_20_20.mlir", "cpu", "pass")]
    assert all("killed by SIGABRT" in r["message"] for r in run.records if r["status"] == "crash")
