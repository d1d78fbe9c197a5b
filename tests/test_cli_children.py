"""One way to name a command's work in a child (hlogen_cli.isolation.in_child): the function
itself, at the top of its command's module, never a "module:function" string."""
from __future__ import annotations

import ast
import pathlib

import pytest

from hlogen_cli import isolation

ROOT = pathlib.Path(__file__).resolve().parent.parent / "hlogen_cli"


def _calls():
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text())
        top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("in_child", "run_in_child") \
                    and isinstance(node.func.value, ast.Name) \
                    and node.func.value.id == "isolation":
                yield path.relative_to(ROOT.parent), node, top


def test_every_child_work_is_a_function_beside_its_command():
    calls = list(_calls())
    assert len(calls) >= 6  # run, compile, samples run, compare, bisect, graph --optimized
    for path, node, top in calls:
        work = node.args[0]
        assert isinstance(work, ast.Name) and work.id in top, (
            f"{path}:{node.lineno}: isolation.in_child takes the work's function, defined at "
            f"the top of the command's module ({ast.unparse(work)})")
        assert path.parent.name == "commands", f"{path}: a child's work is beside its command"


def test_address_refuses_what_a_child_could_not_import():
    from hlogen_cli.commands import compare

    assert isolation.address(compare.compare_sides) == \
        "hlogen_cli.commands.compare:compare_sides"

    def nested():
        pass

    with pytest.raises(ValueError, match="at the top of a module of hlogen_cli.commands"):
        isolation.address(nested)
