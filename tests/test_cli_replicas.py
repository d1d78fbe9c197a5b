"""`hlogen run --replicas N` and `--num-processes P`: inputs per replica in each form,
results per replica (printed, saved with a leading replica dimension, compared with
--expected-output and the interpreter) against numpy; the options that do not go
together (exit 2); two real processes over jax's distributed runtime, in bounded time."""
from __future__ import annotations

import os
import pathlib
import re
import socket
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from hlogen_cli.main import main

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLREDUCE = str(ROOT / "samples" / "allreduce.py")
# Two parameters and two results: replica r gets (x + y summed over the replicas, x * r).
TWO_BY_TWO = """import hlogen as hg
from hlogen import ops


@hg.function
def f(x: hg.f32[3], y: hg.s32[2]):
    total = ops.all_reduce(x, ops.add)
    r = ops.convert_element_type(ops.replica_id(x.builder), hg.s32)
    return total, ops.mul(y, ops.broadcast(r, [2]))
"""


def hlogen(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def literal(array: np.ndarray, type_name: str) -> str:
    dims = "x".join(map(str, array.shape))
    return f"{dims}x{type_name}=" + ",".join(str(v) for v in array.reshape(-1).tolist())


def printed(output: str) -> dict:
    """{'replica 0 result[0]': the array's text, ...} from what run printed."""
    found, key = {}, None
    for line in output.splitlines():
        header = re.match(r"^(replica \d+ result\[\d+\]): [a-z]\w*\[[\d,]*\]$", line)
        if header:
            key = header.group(1)
            found[key] = ""
        elif key and not line.startswith(("replica ", "result[")):
            found[key] += " " + line
        else:
            key = None
    return found


def values(text: str) -> np.ndarray:
    return np.array(text.strip("[] ").split(), dtype=np.float64)


@pytest.fixture
def two_by_two(tmp_path):
    path = tmp_path / "two.py"
    path.write_text(TWO_BY_TWO)
    return str(path)


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 4  # one row per replica
Y = np.array([[1, 2], [3, 4], [5, 6], [7, 8]], np.int32)


def expected_results(x, y):
    """numpy's model: result 0 is the sum over replicas, result 1 is y[r] * r."""
    return [(x.sum(axis=0), y[r] * r) for r in range(len(x))]


def check_per_replica(output: str, x, y):
    shown = printed(output)
    for r, (total, scaled) in enumerate(expected_results(x, y)):
        np.testing.assert_allclose(values(shown[f"replica {r} result[0]"]), total, rtol=1e-6)
        np.testing.assert_array_equal(values(shown[f"replica {r} result[1]"]), scaled)


def test_a_leading_replica_dimension_in_npy_and_npz_inputs(two_by_two, tmp_path):
    np.save(tmp_path / "x.npy", X)
    np.savez(tmp_path / "y.npz", y=Y)
    out = tmp_path / "out.npz"
    result = hlogen("run", two_by_two, "--replicas", "4", "--input", f"@{tmp_path / 'x.npy'}",
                    "--input", str(tmp_path / "y.npz"), "--output", str(out))
    assert result.exit_code == 0, result.output
    check_per_replica(result.stdout, X, Y)
    with np.load(out) as saved:  # the form --input reads: a leading replica dimension
        np.testing.assert_allclose(saved["result_0"], np.stack([X.sum(axis=0)] * 4), rtol=1e-6)
        np.testing.assert_array_equal(saved["result_1"], Y * np.arange(4)[:, None])
    assert "saved 2 result(s) of replicas 0, 1, 2, 3 (along the first dimension)" in result.stderr


def test_an_npz_keyed_by_parameter_name_with_a_replica_dimension(two_by_two, tmp_path):
    np.savez(tmp_path / "in.npz", y=Y[:2], x=X[:2])
    result = hlogen("run", two_by_two, "--replicas", "2", "--input", str(tmp_path / "in.npz"),
                    "--output", f"@{tmp_path / 'total.npy'}")
    assert result.exit_code == 0, result.output
    check_per_replica(result.stdout, X[:2], Y[:2])
    assert np.load(tmp_path / "total.npy").shape == (2, 3)


def test_input_repeated_per_replica(two_by_two):
    args = [a for r in range(4) for a in ("--input", literal(X[r], "f32"), "--input", literal(Y[r], "s32"))]
    result = hlogen("run", two_by_two, "--replicas", "4", *args)
    assert result.exit_code == 0, result.output
    check_per_replica(result.stdout, X, Y)


def test_one_value_for_every_replica_and_the_interpreter_per_replica(two_by_two):
    result = hlogen("run", two_by_two, "--replicas", "2", "--input", "3xf32=1,2,3",
                    "--input", "2x2xs32=[1 2][3 4]", "--check-interpret")
    assert result.exit_code == 0, result.output
    check_per_replica(result.stdout, np.array([[1, 2, 3]] * 2, np.float32), np.array([[1, 2], [3, 4]]))
    assert result.stdout.count("cpu vs interpret: all") == 4
    assert "replica 1 result[1]: cpu vs interpret:" in result.stdout


def test_expected_outputs_per_replica(tmp_path):
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    total = x.sum(axis=0)
    np.save(tmp_path / "want.npy", np.stack([total] * 4))
    base = ["run", ALLREDUCE, "--replicas", "4", "--input", literal(x, "f32")]
    same = hlogen(*base, "--expected-output", literal(total, "f32"))  # the same for all
    assert same.exit_code == 0, same.output
    assert same.stdout.count("all 8 elements match") == 4
    stacked = hlogen(*base, "--expected-output", f"@{tmp_path / 'want.npy'}")
    assert stacked.exit_code == 0, stacked.output
    wrong = np.stack([total] * 4)
    wrong[2, 5] += 1
    np.save(tmp_path / "wrong.npy", wrong)
    differs = hlogen(*base, "--expected-output", f"@{tmp_path / 'wrong.npy'}")
    assert differs.exit_code == 1
    assert "replica 2 result[0]: 1 of 8 elements differ" in differs.stdout
    assert f"at [5]: got {total[5]:g}, expected {total[5] + 1:g}" in differs.stdout
    assert "replica 3 result[0]: all 8 elements match" in differs.stdout


def test_repeat_times_every_replica():
    result = hlogen("run", ALLREDUCE, "--replicas", "2", "--input", "8xf32=1", "--repeat", "3")
    assert result.exit_code == 0, result.output
    assert "3 runs on cpu (2 replicas): min " in result.stderr


@pytest.mark.parametrize("args,message", [
    (["--replicas", "0"], "Invalid value for '--replicas': 0 is not in the range x>=1"),
    (["--replicas", "4", "--input", "8xf32=1", "--input", "8xf32=2"],
     "--input: sum_over_replicas takes 1 argument(s); with --replicas 4 give 1 value(s) (each "
     "the same on every replica, or with a leading dimension of 4: replica r gets [r]) or 4"),
    (["--replicas", "4", "--input", "3x8xf32=1"],
     "--input for 'x': f32[3,8] has a leading (replica) dimension of 3; --replicas 4 needs 4"),
    (["--replicas", "2", "--input", "8xf32=1", "--input", "7xf32=1"],
     "replica 1: parameter 'x' of sum_over_replicas expects f32[8]"),
    (["--replicas", "2", "--input", "8xf32=1", "--expected-output", "8xf32=1",
      "--expected-output", "8xf32=1", "--expected-output", "8xf32=1"],
     "--expected-output: sum_over_replicas has 1 result(s); with --replicas 2 give 1 value(s)"),
    (["--replicas", "2", "--input", "8xf32=1", "--explain", "--check-interpret"],
     "--explain follows one replica: not with --replicas 2"),
    (["--num-processes", "2", "--replicas", "2", "--input", "8xf32=1"],
     "--num-processes 2 needs --coordinator HOST:PORT"),
    (["--num-processes", "2", "--process-id", "2", "--coordinator", "localhost:1234"],
     "--process-id 2 is out of range: --num-processes 2 numbers the processes 0..1"),
    (["--process-id", "1"], "--process-id 1 is out of range: --num-processes 1"),
    (["--num-processes", "2", "--replicas", "3", "--coordinator", "localhost:1234"],
     "--replicas 3 cannot be shared by --num-processes 2"),
    (["--num-processes", "2", "--coordinator", "localhost"],
     "--coordinator 'localhost': expected HOST:PORT"),
    (["--num-processes", "2", "--coordinator", "localhost:99999"],
     "--coordinator 'localhost:99999': the port must be in 1..65535"),
    (["--coordinator", "localhost:1234"], "--coordinator needs --num-processes P"),
    (["--num-processes", "2", "--coordinator", "localhost:1234", "--backend", "interpret"],
     "--backend interpret runs every replica in one process"),
    (["--num-processes", "2", "--coordinator", "localhost:1234", "--check-interpret"],
     "--check-interpret needs every replica's inputs in one process"),
])
def test_options_that_do_not_go_together_exit_2(args, message):
    result = hlogen("run", ALLREDUCE, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_more_replicas_than_the_interpreter_has_cores():
    result = hlogen("run", ALLREDUCE, "--replicas", str(len(os.sched_getaffinity(0)) + 1),
                    "--input", "8xf32=1", "--backend", "interpret")
    assert result.exit_code == 2
    assert "the reference interpreter's parallel runner has one thread per core" in result.output


# -- two processes ----------------------------------------------------------------------------

def start_process(process_id: int, port: int, *args, timeout="60"):
    env = dict(os.environ, HLOGEN_CACHE_DIR=os.environ["HLOGEN_CACHE_DIR"])
    return subprocess.Popen(
        [sys.executable, "-m", "hlogen_cli.main", "run", ALLREDUCE, "--replicas", "2",
         "--num-processes", "2", "--process-id", str(process_id),
         "--coordinator", f"localhost:{port}", "--timeout", timeout, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process, seconds=120):
    try:
        out, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:  # never hang CI: kill, then fail
        process.kill()
        out, err = process.communicate()
        pytest.fail(f"hlogen run did not finish in {seconds} s: {out}\n{err}")
    return process.returncode, out, err


def test_two_processes_each_with_its_replica(tmp_path):
    port = free_port()
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    np.save(tmp_path / "x.npy", x)  # process p takes row p: the inputs of its replica
    processes = [start_process(p, port, "--input", f"@{tmp_path / 'x.npy'}",
                               "--output", str(tmp_path / f"out{p}.npz")) for p in (0, 1)]
    for p, process in enumerate(processes):
        code, out, err = finish(process)
        assert code == 0, err
        assert out.splitlines()[0] == f"replica {p} result[0]: f32[8]"
        np.testing.assert_array_equal(values(out.splitlines()[1]), x.sum(axis=0))
        assert f"saved 1 result(s) of replica {p} (along the first dimension)" in err
        with np.load(tmp_path / f"out{p}.npz") as saved:
            np.testing.assert_array_equal(saved["result_0"], x.sum(axis=0)[None])


def test_a_process_whose_peers_never_come_fails_in_bounded_time():
    code, out, err = finish(start_process(1, free_port(), "--input", "8xf32=1", timeout="3"),
                            seconds=60)
    assert code == 1, err
    assert err.startswith("error: ") and "process 1 of 2" in err and "Traceback" not in err
