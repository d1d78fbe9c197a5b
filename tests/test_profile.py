"""Profiles (hlogen.runtime.profile): jax's trace of a compile and its runs parses, and
names the module's ops with the number of times each ran."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from hlogen.runtime import inspection, pjrt, profile

TRIPS, RUNS = 3, 2


def loop_and_reduce() -> hg.Computation:
    """TRIPS iterations of acc = tanh(acc . acc) * acc + 1, then a row sum."""
    b = hg.Builder("profiled")
    x = b.parameter(hg.f32[64, 64], "x")
    _, acc = ops.while_loop(lambda i, acc: ops.lt(i, TRIPS),
                            lambda i, acc: (i + 1, ops.tanh(ops.dot(acc, acc)) * acc + 1.0),
                            (b.constant(np.int32(0)), x))
    return b.build(ops.reduce(acc, b.constant(np.float32(0)), lambda a, c: ops.add(a, c), [1]))


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    directory = tmp_path_factory.mktemp("profile")
    comp = loop_and_reduce()
    x = np.full((64, 64), 0.01, np.float32)
    with profile.trace(directory) as found:
        exe = pjrt.compile(comp, "cpu")
        results = [exe(x) for _ in range(RUNS)]
    assert all(np.array_equal(r, results[0]) for r in results)
    return found, exe


def test_the_trace_is_perfetto_json_and_an_xplane(traced):
    found, _ = traced
    assert found.file.name == "perfetto_trace.json.gz"
    with gzip.open(found.file, "rt") as f:
        data = json.load(f)
    assert any(e.get("ph") == "X" for e in data["traceEvents"])
    assert list(found.file.parent.glob("*.xplane.pb"))  # what TensorBoard reads
    # the compile is in it too: XLA's passes ran while tracing
    names = {e["name"] for e in profile.events(found.file)}
    assert "PjRtCpuClient::Compile" in names or any("Compile" in n for n in names)


def test_ops_are_the_modules_instructions_with_their_calls(traced):
    found, exe = traced
    rows = found.ops(exe)
    kinds = inspection.instruction_kinds(exe)
    assert rows and all(r.name in kinds and r.kind == kinds[r.name] for r in rows)
    assert abs(sum(r.share for r in rows) - 1) < 1e-6
    assert [r.seconds for r in rows] == sorted((r.seconds for r in rows), reverse=True)
    calls = {r.name: r.calls for r in rows}
    (loop,) = [n for n in calls if kinds[n] == "while"]
    assert calls[loop] == RUNS
    # the body's ops run once per trip: the loop's fusions TRIPS times per run
    body_ops = [n for n, c in calls.items() if c == TRIPS * RUNS]
    assert body_ops and all(kinds[n].startswith("fusion") for n in body_ops)


def test_a_loops_own_time_leaves_its_body_out(traced):
    found, exe = traced
    kinds = inspection.instruction_kinds(exe)
    spans = [e for e in profile.events(found.file)
             if kinds.get(e.get("args", {}).get("hlo_op")) == "while"]
    (loop,) = [r for r in found.ops(exe) if r.kind == "while"]
    assert loop.seconds < sum(e["dur"] for e in spans) / 1e6


def test_table_lists_the_top_ops(traced):
    found, exe = traced
    rows = found.ops(exe)
    text = profile.table(rows, top=2).splitlines()
    assert text[0].split() == ["op", "kind", "calls", "time", "share"]
    assert text[1].startswith(rows[0].name) and text[1].endswith("%")
    assert len(text) == (4 if len(rows) > 2 else 1 + len(rows))


def test_a_trace_into_a_file_or_a_bad_trace_is_an_error(tmp_path):
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(hg.InputError, match="goes into a folder"):
        with profile.trace(file):
            pass
    with pytest.raises(hg.InputError, match="not a JSON trace"):
        profile.events(file)
