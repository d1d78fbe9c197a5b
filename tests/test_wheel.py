"""A package that installs whole (issue 24): the wheel built from this working tree,
installed (not editable) into a fresh venv, runs the README's quick starts from folders of
its own, its samples included.

How, fast and offline: the package's files (pyproject.toml, README.md, hlogen/, hlogen_cli/,
samples/) are copied to a temporary folder (building writes build/ and *.egg-info into
its source) and built there with `pip wheel --no-deps --no-build-isolation` (the test
extra holds setuptools>=77, so no index is asked). The fresh venv is made without pip
(`venv --without-pip`); this venv's pip installs the wheel into it (`pip --python`,
`--no-deps --no-index`), and a .pth file in its site-packages names this venv's
site-packages for the dependencies (jax, numpy, click: nothing downloaded). A .pth file
only adds that folder to sys.path (the .pth files inside it, such as the editable
install's finder, are not run), so `hlogen` is the wheel's copy, which the test checks."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

from tests.test_cli_readme import ROOT, shell
from tests.test_readme import _block, quick_start_commands

PACKAGE_FILES = ["pyproject.toml", "README.md", "hlogen", "hlogen_cli", "samples"]


def _run(args, **kwargs):
    done = subprocess.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The environment of a fresh venv that holds the wheel (PATH first)."""
    where = tmp_path_factory.mktemp("wheel")
    source = where / "source"
    source.mkdir()
    for name in PACKAGE_FILES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--wheel-dir", str(where / "dist"), str(source)])
    (wheel,) = (where / "dist").glob("hlogen-*.whl")
    venv = where / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--no-deps", "--no-index", str(wheel)])
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (pathlib.Path(purelib.stdout.strip()) / "_dependencies.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    return env, venv


def test_the_installed_package_is_the_wheel_s(installed, tmp_path):
    env, venv = installed
    found = _run(["python", "-c", "import hlogen, hlogen_cli; print(hlogen.__file__); "
                  "print(hlogen_cli.__file__)"], env=env, cwd=tmp_path)
    assert all(line.startswith(str(venv)) for line in found.stdout.split()), found.stdout
    assert shutil.which("hlogen", path=env["PATH"]) == str(venv / "bin" / "hlogen")


def test_the_samples_come_with_it(installed, tmp_path):
    env, _ = installed
    listed = _run(["hlogen", "samples"], env=env, cwd=tmp_path).stdout
    assert "mlp.mlp" in listed and "elementwise.shifts" in listed
    assert _run(["hlogen", "samples", "list"], env=env, cwd=tmp_path).stdout == listed
    assert "stablehlo.dot_general" in _run(["hlogen", "samples", "show", "mlp.mlp"],
                                           env=env, cwd=tmp_path).stdout
    ran = _run(["hlogen", "samples", "run", "elementwise.shifts"], env=env, cwd=tmp_path).stdout
    assert "[ 0  2  8 24]" in ran


def test_the_readme_quick_starts_run_with_it_in_a_fresh_clone(installed, tmp_path):
    env, _ = installed
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "samples", clone / "samples")  # what a clone has; no out/
    for line, expected in quick_start_commands():
        output, code = shell(f"cd {clone} && {line}", env=env)
        assert code == 0 and output == expected, f"$ {line}\n{output}"
    code = _block("Quick start (Python)", "python")
    printed = _run(["python", "-c", code], env=env, cwd=tmp_path).stdout
    assert printed.count("[[10. 21. 32.]\n [13. 24. 35.]]") == 2
