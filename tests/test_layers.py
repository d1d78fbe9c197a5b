"""The layering contract: modules import one way only (docs/architecture.md, "The layers").

`pyproject.toml`'s import-linter contract names the layers top to bottom; these tests
run it, refuse any import circle (imports inside functions included), make every module
take its place in a layer, and make every import inside a function say why it is there
(start-up time, or an optional dependency: never to dodge a circle).
"""
from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import tomllib

import grimp
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = {"hlogen": ROOT / "hlogen", "hlogen_cli": ROOT / "hlogen_cli"}
# what a comment on (or just above) an import inside a function must say
REASONS = ("start-up", "optional dependency")


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(*PACKAGES)


def _layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    return contract["layers"]


def test_the_layers_contract_holds():
    lint = pathlib.Path(sys.executable).with_name("lint-imports")
    run = subprocess.run([str(lint), "--no-cache"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def _circles(graph) -> list[str]:
    """Each import a -> b that closes a circle (b leads back to a), with the circle."""
    return [" -> ".join([a, *graph.find_shortest_chain(importer=b, imported=a)])
            for a in sorted(graph.modules)
            for b in sorted(graph.find_modules_directly_imported_by(a))
            if graph.chain_exists(importer=b, imported=a)]


def test_no_import_circle(graph):
    circles = _circles(graph)
    assert not circles, "import circles:\n  " + "\n  ".join(circles)


def test_a_circle_is_found():
    graph = grimp.ImportGraph()  # a -> b -> c -> a, and d -> a outside the circle
    for importer, imported in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.d", "p.a")]:
        graph.add_import(importer=importer, imported=imported)
    assert _circles(graph) == ["p.a -> p.b -> p.c -> p.a", "p.b -> p.c -> p.a -> p.b",
                               "p.c -> p.a -> p.b -> p.c"]


def test_every_module_has_a_layer(graph):
    placed = [name.strip() for layer in _layers() for name in layer.replace("|", ":").split(":")]
    unplaced = sorted(m for m in graph.modules if m not in PACKAGES
                      and not any(m == p or m.startswith(p + ".") for p in placed))
    assert not unplaced, f"modules in no layer of pyproject.toml's contract: {unplaced}"


def _imports_inside_functions(path: pathlib.Path):
    lines = path.read_text().splitlines()
    tree = ast.parse("\n".join(lines), str(path))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    said = " ".join(lines[max(inner.lineno - 2, 0):inner.end_lineno])
                    yield inner.lineno, said


def test_imports_inside_functions_say_why():
    silent = [f"{path.relative_to(ROOT)}:{line}"
              for package in PACKAGES.values() for path in sorted(package.rglob("*.py"))
              for line, said in _imports_inside_functions(path)
              if "#" not in said or not any(r in said for r in REASONS)]
    assert not silent, (f"imports inside functions without a comment that says why "
                        f"({' or '.join(REASONS)}): {silent}")
