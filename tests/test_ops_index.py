"""hlogen/ops/__init__.pyi, the index of the op library that editors and grep read, holds
every op of hlogen.ops with the signature the function really has."""
from __future__ import annotations

import ast
import inspect
import pathlib

import hlogen
from hlogen import ops

INDEX = pathlib.Path(hlogen.__file__).parent / "ops" / "__init__.pyi"


def _indexed() -> dict:
    tree = ast.parse(INDEX.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def test_every_op_is_indexed_and_nothing_else():
    assert sorted(_indexed()) == sorted(ops.__all__)


def test_each_signature_is_the_functions():
    for name, node in _indexed().items():
        written = ast.unparse(node.args)
        real = str(inspect.signature(getattr(ops, name)))[1:-1]
        assert written == real, f"{name}: the index says ({written}), the function ({real})"


def test_each_op_has_its_summary():
    for name, node in _indexed().items():
        summary = ast.get_docstring(node) or ""
        real = " ".join((inspect.getdoc(getattr(ops, name)) or "").split("\n\n")[0].split())
        assert " ".join(summary.split()) == real, name
