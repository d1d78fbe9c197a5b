"""The console sessions of the documentation run as written, outputs included, in a
folder that holds what a fresh clone does (`fresh_clone`: no out/): `run_section` runs
one (tests/docs.py reads it), and this file runs the command reference's worked examples
(docs/reference.md). `...` in an expected line stands for any text, a line of `...` for
any lines. Commands other than hlogen's (`mkdir -p out/cli`) run in a shell.

A command ending in `&` (with `> FILE`) runs as a real process in the background, and
`wait; cat FILE` waits for it (at most 120 s: killed and failed after that, never a
hang) and shows what it printed: the two-process example, whose coordinator port (12355
on the page) is replaced by a free one."""
from __future__ import annotations

import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from click.testing import CliRunner

from hlogen_cli.main import main
from tests import docs
from tests.test_cli_replicas import free_port

ROOT = pathlib.Path(__file__).resolve().parent.parent
README_PORT = "localhost:12355"
BACKGROUND_SECONDS = 120


def fresh_clone(tmp_path: pathlib.Path) -> pathlib.Path:
    """A folder with what a fresh clone holds that the pages' commands read (samples/),
    and nothing they write (no out/)."""
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "samples", clone / "samples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return clone


def shell(line: str, env=None) -> tuple[str, int]:
    """What a command line (not hlogen's) prints, and its exit status."""
    done = subprocess.run(line, shell=True, capture_output=True, text=True, env=env, timeout=300)
    return done.stdout + done.stderr, done.returncode


def _pattern(expected: str) -> re.Pattern:
    parts = []
    for line in expected.splitlines():
        if line == "...":
            parts.append(r"(?:.*\n)*?")
        else:
            parts.append(".*".join(map(re.escape, line.split("..."))) + r"\n")
    return re.compile("".join(parts))


# a command of a session that does not end with status 0 says so: `$ hlogen ...
# # exit status 1: why` (the comment is not part of the command)
_EXIT = re.compile(r"\s+# exit status (\d+)\b.*$")


def run_session(session: str, port: str | None = None) -> list[str]:
    """Runs each `$ ` command of `session` in the current folder (hlogen's in this process,
    others in a shell; `hlogen ... &` in the background, `wait; ...` after it, the page's
    coordinator port replaced by `port`), checks its exit status and its output (`...` as
    above); returns the commands run."""
    commands = []
    background: list[subprocess.Popen] = []
    try:
        for command in re.split(r"^\$ ", session, flags=re.M)[1:]:
            line, _, expected = command.partition("\n")
            status = _EXIT.search(line)
            line = _EXIT.sub("", line)
            if port is not None:
                line = line.replace(README_PORT, port)
            commands.append(line)
            if line.startswith("wait; "):
                _wait(background)
                output, code = shell(line[len("wait; "):])
            elif not line.startswith("hlogen "):
                output, code = shell(line)
            else:
                args = shlex.split(line)
                if args[-1] == "&":
                    background.append(_in_background(args))
                    continue
                result = CliRunner().invoke(main, args[1:], catch_exceptions=False)
                output, code = result.output, result.exit_code
            assert code == (int(status.group(1)) if status else 0), f"$ {line}\n{output}"
            assert _pattern(expected).fullmatch(output), f"$ {line}\n{output}"
    finally:
        for process in background:  # never left running
            process.kill()
            process.wait()
    return commands


def _in_background(args: list[str]) -> subprocess.Popen:
    """`hlogen ARGS [> FILE] &` as a process."""
    args, target = args[:-1], None
    if ">" in args:
        args, target = args[:args.index(">")], args[args.index(">") + 1]
    with open(target, "w") if target else open("/dev/null", "w") as out:
        return subprocess.Popen([sys.executable, "-m", "hlogen_cli.main", *args[1:]], stdout=out,
                                stderr=subprocess.PIPE, text=True)


def _wait(background: list[subprocess.Popen]) -> None:
    for process in background:
        try:
            _, err = process.communicate(timeout=BACKGROUND_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            _, err = process.communicate()
            raise AssertionError(f"a background hlogen did not end in {BACKGROUND_SECONDS} s: {err}")
        assert process.returncode == 0, err
    background.clear()


def test_every_command_of_the_worked_examples(tmp_path, monkeypatch):
    assert len(run_section("docs/reference.md", "Worked examples", tmp_path, monkeypatch)) >= 10


def run_section(page: str, heading: str, tmp_path, monkeypatch, prepare=None) -> list[str]:
    """Runs the console session under `heading` of `page` (tests/docs.py's `console`) in
    a fresh clone, to which `prepare(clone)` adds what the session reads; the commands
    run."""
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    clone = fresh_clone(tmp_path)
    if prepare is not None:
        prepare(clone)
    monkeypatch.chdir(clone)
    return run_session(docs.console(page, heading), port=f"localhost:{free_port()}")
