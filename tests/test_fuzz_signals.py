"""A signal to `hlogen fuzz` (SIGINT as Ctrl-C sends it, SIGTERM as `kill` does) ends it
as other commands end (128 + the signal's number, no process of its left), and what it
found so far is written all the same: summary.json (saying it was stopped) and junit.xml.
The installed `hlogen`, in a session of its own; the signal comes once a finding is
saved (its report beside it), while the run goes on for minutes more."""
from __future__ import annotations

import json
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_cli_signals import HLOGEN, living


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_writes_what_fuzz_found(tmp_path, signum):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    emitted = CliRunner().invoke(main, ["emit", "samples/differential.py", "--function",
                                        "rounded_residual", "-o", str(corpus / "residual.mlir")])
    assert emitted.exit_code == 0, emitted.output
    out = tmp_path / "fuzz"
    proc = subprocess.Popen([HLOGEN, "fuzz", "--seconds", "900", "--seed", "0", "--reduce-timeout", "10", "--corpus",
                             str(corpus), "-o", str(out)], start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # a guard against a hang, not a measurement
        while not list(out.glob("*.report.md")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no finding saved"
            time.sleep(0.2)
        proc.send_signal(signum)
        said, complaints = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signum, complaints
    assert "Traceback" not in complaints
    assert f"stopped by {signal.Signals(signum).name}: partial" in said, said
    for _ in range(40):  # (the kernel's parent-death signal reaches the child as it dies)
        if not living(proc.pid, proc.pid):
            break
        time.sleep(0.05)
    assert living(proc.pid, proc.pid) == []
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stopped"] == signal.Signals(signum).name
    assert [f["signature"] for f in summary["findings"]] and summary["new"] >= 1
    assert all((tmp_path / f["module"]).exists() or __import__("os").path.exists(f["module"])
               for f in summary["findings"])
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert int(suite.get("failures")) == summary["new"]
    assert summary["findings"][0]["signature"] in [c.get("name") for c in suite.iter("testcase")]
