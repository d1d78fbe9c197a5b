"""The files hlogen is handed, as a user's shell hands them (issue 24): every output
option of every command writes where the user said and nowhere else, in place to what
is not a regular file (a character device, a FIFO, /dev/fd/N), never over one of the
command's inputs, and a path it cannot write is exit 2 with the reason, never a
traceback, a signal or a changed input. Bad input values and malformed HLO are exit 2
too. The installed `hlogen`, run as a process.

The read-only folder is a folder made immutable (`chattr +i`): root, which these tests
run as, ignores permission bits, but not that (creating a file in it is "Operation not
permitted"); where chattr cannot (a file system without the attribute, a user without
the capability) those cases are skipped. `/proc/self/` is the other place nothing can be
created in.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import select
import stat
import subprocess
import sys
import threading

import numpy as np
import pytest

from tests.test_conformance import write_testdata

HLOGEN = str(pathlib.Path(sys.executable).with_name("hlogen"))
MODULE = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""
SOURCE = """import hlogen as hg


@hg.function
def double(x: hg.f32[4]):
    return x + x
"""
A = np.array([1, 2, 3, 4], np.float32)
RUN = ["run", "m.mlir", "--input", "@a.npy", "--input", "4xf32=2"]

# each output option: (the command line that writes OUT, the suffix OUT takes, the input
# of the command that "same as input" links OUT to, how what it writes starts)
OPTIONS = {
    "emit -o": (["emit", "f.py", "-o", "OUT", "--force"], ".mlir", "f.py", b"module"),
    "opt -o": (["opt", "m.mlir", "-o", "OUT", "--force"], ".mlir", "m.mlir", b"module"),
    "compile -o": (["compile", "m.mlir", "-o", "OUT"], ".hlx", "m.mlir", b"hlogen-compiled"),
    "run --output @x.npy": ([*RUN, "--output", "@OUT"], ".npy", "a.npy", b"\x93NUMPY"),
    "run --output x.npz": (["run", "m.mlir", "--input", "in.npz", "--output", "OUT"], ".npz",
                           "in.npz", b"PK"),
    "check --junit": (["check", "conf.mlir", "--backend", "interpret", "-j", "1", "--junit",
                       "OUT"], ".xml", "conf.mlir", b"<?xml"),
    "check --json": (["check", "conf.mlir", "--backend", "interpret", "-j", "1", "--json",
                      "OUT"], ".jsonl", "conf.mlir", b'{"file"'),
    "run --profile": ([*RUN, "--profile", "OUT"], "", "m.mlir", None),  # a folder
    "graph -o": (["graph", "m.mlir", "-o", "OUT"], ".dot", "m.mlir", b"digraph"),
}
CASES = ("missing folder", "character device", "FIFO", "same as input", "read-only folder",
         "/proc")


def hlogen(home, *args):
    return subprocess.run([HLOGEN, *args], cwd=home, capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, HLOGEN_CACHE_DIR=str(home / "cache")))


@pytest.fixture(scope="module")
def read_only(tmp_path_factory):
    """An immutable folder (see the module's docstring), or None where chattr cannot."""
    folder = tmp_path_factory.mktemp("read-only")
    try:
        made = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    except FileNotFoundError:
        made = False
    yield folder if made else None
    if made:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.fixture
def home(tmp_path):
    (tmp_path / "m.mlir").write_text(MODULE)
    (tmp_path / "f.py").write_text(SOURCE)
    np.save(tmp_path / "a.npy", A)
    np.savez(tmp_path / "in.npz", arg0=A, arg1=A)
    write_testdata(tmp_path / "conf.mlir", "%2 = stablehlo.add %0, %0 : tensor<4xf32>",
                   "[1.0, 2.0, 3.0, 4.0]", "[2.0, 4.0, 6.0, 8.0]")
    return tmp_path


def digests(home) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in home.iterdir() if p.is_file() and not p.is_symlink()}


@contextlib.contextmanager
def fifo_read(path: pathlib.Path):
    """A FIFO at `path` and a thread reading all that is written to it; yields the list
    its chunks go to (whole once the block ends)."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # a reader there: writers do not wait
    chunks, done = [], threading.Event()

    def read():
        while True:
            ready, _, _ = select.select([fd], [], [], 0.05)
            chunk = os.read(fd, 1 << 16) if ready else b""
            chunks.append(chunk)
            if not chunk and done.is_set():
                return
            if not chunk:  # no writer yet (or not any more): a FIFO reads as empty
                done.wait(0.05)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        yield chunks
    finally:
        done.set()
        reader.join()
        os.close(fd)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("option", OPTIONS)
def test_every_output_option_meets_every_kind_of_path(home, read_only, option, case):
    command, suffix, source, starts = OPTIONS[option]
    before = digests(home)
    with contextlib.ExitStack() as stack:
        if case == "missing folder":
            out = f"nowhere/out{suffix}"
        elif case == "character device":  # what /dev/null is (1, 3), in the test's folder
            out = f"device{suffix}"
            os.mknod(home / out, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        elif case == "FIFO":
            out = f"fifo{suffix}"
            written = stack.enter_context(fifo_read(home / out))
        elif case == "same as input":
            out = f"link{suffix}"
            (home / out).symlink_to(source)
        elif case == "read-only folder":
            if read_only is None:
                pytest.skip("chattr +i cannot make a read-only folder here")
            out = str(read_only / f"out{suffix}")
        else:
            out = f"/proc/self/out{suffix}"
        done = hlogen(home, *[a.replace("OUT", out) for a in command])
    said = done.stdout + done.stderr
    assert "Traceback" not in said and "internal error" not in said, said
    assert digests(home) == before  # no input changed, nothing else written
    if case in ("character device", "FIFO") and starts is not None:
        assert done.returncode == 0, said
        kind = stat.S_ISCHR if case == "character device" else stat.S_ISFIFO
        assert kind(os.lstat(home / out).st_mode)  # written in place, not replaced
        if case == "FIFO":
            assert b"".join(written).startswith(starts)
        return
    assert done.returncode == 2, said
    assert done.stderr.startswith(("error: ", "Usage: ")) and out in done.stderr, said
    assert not (home / "nowhere").exists() and not (read_only and os.listdir(read_only))
    if case == "same as input":  # (--profile's: a file, not a folder)
        assert (home / out).is_symlink() and "input" in done.stderr or starts is None


def test_links_and_dot_paths_do_not_hide_an_input(home):
    os.link(home / "m.mlir", home / "hard.mlir")
    for out in ("./m.mlir", "hard.mlir", str(home / "m.mlir")):
        refused = hlogen(home, "opt", "m.mlir", "-o", out, "--force")
        assert refused.returncode == 2 and "never writes over its inputs" in refused.stderr
    standard_input = subprocess.run([HLOGEN, "opt", "-", "-o", "hard.mlir", "--force"],
                                    cwd=home, stdin=open(home / "m.mlir"), capture_output=True,
                                    text=True, timeout=300)
    assert standard_input.returncode == 2, standard_input.stderr
    assert "the same file as the input <stdin>" in standard_input.stderr
    assert (home / "m.mlir").read_text() == MODULE


def test_a_symlink_to_an_output_stays_a_link_and_the_file_keeps_its_mode(home):
    (home / "real.mlir").write_text("old")
    (home / "real.mlir").chmod(0o640)
    (home / "link.mlir").symlink_to("real.mlir")
    done = hlogen(home, "opt", "m.mlir", "-o", "link.mlir", "--force")
    assert done.returncode == 0, done.stderr
    assert (home / "link.mlir").is_symlink()
    assert "stablehlo.multiply" in (home / "real.mlir").read_text()
    assert stat.S_IMODE((home / "real.mlir").stat().st_mode) == 0o640


def test_dev_null_and_standard_output_need_no_force(home):
    assert hlogen(home, "opt", "m.mlir", "-o", "/dev/null").returncode == 0
    # standard output a file the shell opened (>>): appended to, not replaced
    (home / "log").write_text("before\n")
    with open(home / "log", "a") as log:
        done = subprocess.run([HLOGEN, "opt", "m.mlir", "-o", "/dev/stdout"], cwd=home,
                              stdout=log, stderr=subprocess.PIPE, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    text = (home / "log").read_text()
    assert text.startswith("before\nmodule") and "stablehlo.multiply" in text
    # compile's child writes to the parent's standard output, not to its own
    compiled = subprocess.run([HLOGEN, "compile", "m.mlir", "-o", "/dev/stdout"], cwd=home,
                              capture_output=True, timeout=300,
                              env=dict(os.environ, HLOGEN_CACHE_DIR=str(home / "cache")))
    assert compiled.returncode == 0 and compiled.stdout.startswith(b"hlogen-compiled 1\n")


def test_process_substitution_is_written_in_place(home):
    done = subprocess.run(["bash", "-c", f"'{HLOGEN}' run m.mlir --input @a.npy --input "
                           f"4xf32=2 --output @>(cat > got.npy); wait $!"], cwd=home,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(np.load(home / "got.npy"), A * 2)


def test_a_full_device_is_exit_2_with_the_reason(home):
    """/dev/full's numbers (1, 7): every write fails with ENOSPC, at the end of the work."""
    os.mknod(home / "full", stat.S_IFCHR | 0o666, os.makedev(1, 7))
    for args in (["opt", "m.mlir", "-o", "full"], [*RUN, "--output", "@full"]):
        done = hlogen(home, *args)
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: ") and "full: cannot write: No space left on " \
            "device" in done.stderr


def test_profile_makes_its_folder_not_the_ones_above(home):
    made = hlogen(home, *RUN, "--profile", "prof")
    assert made.returncode == 0, made.stderr
    assert list((home / "prof").glob("plugins/profile/*/perfetto_trace.json.gz"))


@pytest.mark.parametrize("value,words", [
    ("100000000000x4xf32=1", "f32[100000000000,4] needs 1600000000000 bytes"),
    ("99999999999999999999x1xf32=1", "below 2**63"),
    ("4611686018427387904x4xf32=@a.npy", "does not fit in 64 bits"),
])
def test_input_literals_larger_than_memory_are_refused_before_allocating(home, value, words):
    done = hlogen(home, "run", "m.mlir", "--input", value, "--input", "4xf32=1")
    assert done.returncode == 2 and f"error: --input '{value}': " in done.stderr, done.stderr
    assert words in done.stderr


MALFORMED_HLO = """HloModule bad

ENTRY main {
  p = f32[2,3] parameter(0)
  ROOT r = f32[7] reshape(p)
}
"""


@pytest.mark.parametrize("command", [["graph", "bad.hlo", "-o", "g.dot"],
                                     ["run", "bad.hlo", "--input", "2x3xf32=1"],
                                     ["compile", "bad.hlo"]])
def test_malformed_hlo_is_bad_input_in_every_command(home, command):
    """XLA's HLO parser aborts on a reshape of 6 elements to 7: every command reads HLO
    in a child process, as `opt` did (`graph` died of the signal; `run` and `compile`,
    whose work runs in a child already, said so with exit status 1)."""
    (home / "bad.hlo").write_text(MALFORMED_HLO)
    done = hlogen(home, *command)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: bad.hlo: XLA's HLO reader ended the process on it")
    assert "@ 0x" not in done.stderr and not (home / "g.dot").exists()
