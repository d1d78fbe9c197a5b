"""The command line as real processes: each command, its exit codes, no tracebacks,
no jax for commands that need no backend, and the persistent executable cache (corrupt
entries ignored and rewritten; concurrent writers)."""
from __future__ import annotations

import hashlib
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hlogen.runtime.cache import ExecutableCache
from tests.test_cli import ALWAYS_TRUE_SORT

ROOT = pathlib.Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
ELEMENTWISE = str(SAMPLES / "elementwise.py")
VERSION = "0.10.2"
TINY = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  %1 = stablehlo.add %0, %a : tensor<4xf32>
  return %1 : tensor<4xf32>
}
"""


@pytest.fixture
def env(tmp_path):
    return dict(os.environ, HLOGEN_CACHE_DIR=str(tmp_path / "cache"))


def hlogen(*args, env, input=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "hlogen_cli.main", *args], capture_output=True,
                          text=True, env=env, input=input, cwd=cwd)


def test_each_command_as_a_process(tmp_path, env):
    emitted = hlogen("emit", ELEMENTWISE, "--function", "integer_division", "-o", str(tmp_path / "d.mlir"), env=env)
    assert emitted.returncode == 0 and emitted.stdout.startswith(f"{tmp_path / 'd.mlir'}: integer_division(")
    again = hlogen("emit", ELEMENTWISE, "--function", "integer_division", "-o", str(tmp_path / "d.mlir"), env=env)
    assert again.returncode == 2 and "--force" in again.stderr
    opt = hlogen("opt", "-", "--format", "bytecode", "-o", str(tmp_path / "d.mlirbc"),
                 input=(tmp_path / "d.mlir").read_text(), env=env)
    assert opt.returncode == 0, opt.stderr
    run = hlogen("run", str(tmp_path / "d.mlirbc"), "--input", "4xs32=7,-7,-2147483648,5",
                 "--input", "4xs32=2,0,-1,0", "--check-interpret", "--expected-output",
                 "4xs32=3,-1,-2147483648,-1", "--expected-output", "4xs32=1,-7,0,5", env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("result[0]: s32[4]\n[          3          -1 -2147483648          -1]")
    compiled = hlogen("compile", str(tmp_path / "d.mlirbc"), "--cost", env=env)
    assert compiled.returncode == 0 and "flops: " in compiled.stdout
    info = hlogen("cache", "info", env=env)
    # two entries: run --check-interpret gives XLA the module as written (what jax would
    # give it, issue 35), compile hlogen's legalized form
    assert info.returncode == 0 and "valid: 2" in info.stdout
    assert hlogen("samples", env=env).stdout.count("\n") > 20
    devices = hlogen("devices", env=env)
    assert devices.returncode == 0 and devices.stdout.startswith("cpu: ")
    assert hlogen("--version", env=env).stdout.startswith("hlogen, version ")


@pytest.mark.parametrize("args,code,message", [
    (["run", "nowhere.mlir"], 2, "error: nowhere.mlir: no such file"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1"], 2, "missing --input for parameter 1 'n'"),
    (["run", ELEMENTWISE, "--function", "shifts", "--input", "4xs8=1", "--input", "4xs8=1",
      "--expected-output", "4xs8=0", "--expected-output", "4xs8=0", "--expected-output", "4xs8=0"],
     1, "elements differ"),
    (["opt", "-", "--pipeline", "nope"], 2, "unknown pipeline 'nope'"),
    (["compile", "nowhere.py"], 2, "nowhere.py: no such file"),
    (["samples", "show", "nope"], 2, "no sample named 'nope'"),
    (["run", "--bogus"], 2, "No such option '--bogus'"),
])
def test_exit_codes_and_messages_without_tracebacks(args, code, message, env):
    result = hlogen(*args, env=env, input="")
    assert result.returncode == code, result.stderr
    assert message in result.stderr + result.stdout and "Traceback" not in result.stderr + result.stdout


def test_a_native_abort_is_exit_1(tmp_path, env):
    path = tmp_path / "sort.mlir"
    path.write_text(ALWAYS_TRUE_SORT)
    np.save(tmp_path / "x.npy", np.random.default_rng(0).random(2000).astype(np.float32))
    result = hlogen("run", str(path), "--input", f"@{tmp_path / 'x.npy'}", "--backend", "interpret",
                    env=env, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith(f"error: the interpreter aborted (SIGABRT) while running {path}")
    assert not list(tmp_path.glob("core*"))


def test_commands_without_a_backend_do_not_import_jax(tmp_path):
    (tmp_path / "m.mlir").write_text(TINY)
    code = textwrap.dedent(f"""
        import sys
        from hlogen_cli.main import main
        for args in (["--help"], ["opt", {str(tmp_path / 'm.mlir')!r}, "-o", {str(tmp_path / 'o.mlir')!r}],
                     ["emit", {ELEMENTWISE!r}, "--function", "shifts", "-o", "-"], ["cache", "info"]):
            try:
                main(args)
            except SystemExit as e:
                assert not e.code, (args, e.code)
        assert "jax" not in sys.modules, "jax was imported"
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, HLOGEN_CACHE_DIR=str(tmp_path / "c")))
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("ok\n")
    help_only = subprocess.run([sys.executable, "-c", "import sys\nfrom hlogen_cli.main import main\n"
                                "try: main(['--help'])\nexcept SystemExit: pass\n"
                                "print('hlogen' in sys.modules)"], capture_output=True, text=True)
    assert help_only.stdout.rstrip().endswith("False")  # --help does not even import the library


def test_shell_completion(env):
    result = subprocess.run([sys.executable, "-m", "hlogen_cli.main"], capture_output=True, text=True,
                            env=dict(env, _HLOGEN_COMPLETE="bash_complete", COMP_WORDS="hlogen ca",
                                     COMP_CWORD="1"))
    assert "plain,cache" in result.stdout


# -- the persistent executable cache ------------------------------------------------------

def test_cache_entries_that_are_not_whole_are_ignored(tmp_path):
    store = ExecutableCache(tmp_path)
    payload = os.urandom(5000)
    store.store("k" * 64, payload, jaxlib=VERSION)
    path = tmp_path / "executables" / f"{'k' * 64}.hlx"
    assert store.load("k" * 64, VERSION) == payload
    assert store.load("k" * 64, "0.9.0") is None  # another jaxlib: stale
    data = path.read_bytes()
    flipped = bytearray(data)
    flipped[-100] ^= 1
    for corrupt in (data[:-1], data[:40], b"", bytes(flipped), b"garbage\n" + data,
                    data.replace(b'"size": 5000', b'"size": 4999')):
        path.write_bytes(corrupt)
        assert store.load("k" * 64, VERSION) is None
    path.write_bytes(data)
    other = tmp_path / "executables" / f"{'j' * 64}.hlx"
    other.write_bytes(data)  # a whole entry under another key's name
    assert store.load("j" * 64, VERSION) is None
    statuses = sorted(e.status for e in store.entries(VERSION))
    assert statuses == ["corrupt", "valid"]
    assert store.clear(only_invalid=True, jaxlib_version=VERSION) == 1
    assert [e.status for e in store.entries(VERSION)] == ["valid"]


def test_a_corrupt_entry_is_compiled_again_and_rewritten(tmp_path, env):
    (tmp_path / "m.mlir").write_text(TINY)
    args = ["run", str(tmp_path / "m.mlir"), "--input", "4xf32=1,2,3,4", "--input", "4xf32=2", "-v"]
    first = hlogen(*args, env=env)
    assert first.returncode == 0 and "compiled, stored in the cache" in first.stderr
    [entry] = (tmp_path / "cache" / "executables").glob("*.hlx")
    good = entry.read_bytes()
    for corrupt in (good[: len(good) // 2], good[:-1] + bytes([good[-1] ^ 0xFF]), b"\0" * 100):
        entry.write_bytes(corrupt)
        assert "corrupt: 1" in hlogen("cache", "info", env=env).stdout
        result = hlogen(*args, env=env)
        assert result.returncode == 0, result.stderr
        assert "compiled, stored in the cache" in result.stderr
        assert "[ 3.  6.  9. 12.]" in result.stdout
        assert hashlib.sha256(entry.read_bytes()).digest() != hashlib.sha256(corrupt).digest()
        assert "loaded from the cache" in hlogen(*args, env=env).stderr


WRITER = """
import sys
from hlogen.runtime.cache import ExecutableCache
store = ExecutableCache(sys.argv[1])
payload = bytes([int(sys.argv[2])]) * int(sys.argv[3])
for _ in range(300):
    store.store("same", payload, jaxlib="0.10.2")
"""


def test_concurrent_writers_of_one_entry_leave_a_whole_one(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(i), str(size)])
               for i, size in ((1, 200_000), (2, 300_000))]
    store = ExecutableCache(tmp_path)
    seen = set()
    while any(w.poll() is None for w in writers):
        payload = store.load("same", VERSION)
        if payload is not None:  # never a mix: one writer's payload, whole
            assert payload in (b"\1" * 200_000, b"\2" * 300_000)
            seen.add(payload[0])
    assert all(w.wait() == 0 for w in writers)
    assert store.load("same", VERSION) in (b"\1" * 200_000, b"\2" * 300_000)
    assert not list((tmp_path / "executables").glob(".tmp-*"))  # no leftovers
    assert seen


def test_concurrent_runs_share_the_cache(tmp_path, env):
    (tmp_path / "m.mlir").write_text(TINY)
    args = [sys.executable, "-m", "hlogen_cli.main", "run", str(tmp_path / "m.mlir"),
            "--input", "4xf32=1,2,3,4", "--input", "4xf32=2"]
    runs = [subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    for r in runs:
        out, err = r.communicate()
        assert r.returncode == 0, err
        assert "[ 3.  6.  9. 12.]" in out
    info = hlogen("cache", "info", env=env).stdout
    assert "entries: 1 " in info and "valid: 1" in info


def test_run_leaves_reading_and_running_to_its_child(tmp_path):
    # The parent starts the child first and parses nothing: hlogen and jax are the
    # child's imports only (what a cached run's time is made of: benchmarks/cli.py).
    (tmp_path / "m.mlir").write_text(TINY)
    code = textwrap.dedent(f"""
        import sys
        from hlogen_cli.main import main
        try:
            main(["run", {str(tmp_path / 'm.mlir')!r}, "--input", "4xf32=1", "--input", "4xf32=2"])
        except SystemExit as e:
            assert not e.code, e.code
        assert not {{"hlogen", "jax", "numpy"}} & set(sys.modules), "the parent imported them"
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=dict(os.environ, HLOGEN_CACHE_DIR=str(tmp_path / "c")))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "result[0]: f32[4]\n[3. 3. 3. 3.]\n"
