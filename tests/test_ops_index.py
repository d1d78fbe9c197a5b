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


def write_index() -> None:
    """Rewrites the index from the functions: `python -m tests.test_ops_index` after an
    op's signature or summary changed (the tests above then pass)."""
    import textwrap
    lines = ['"""Every op of hlogen.ops with its signature, for editors and grep (several are '
             'made from', 'the tables of hlogen/ops/elementwise.py); tests/test_ops_index.py '
             'checks it against the', 'functions."""',
             "from hlogen.ops.collectives import ChannelHandle as ChannelHandle", "", ""]
    for name in ops.__all__:
        function = getattr(ops, name)
        head = f"def {name}{inspect.signature(function)}:"
        if len(head) > 96:
            params = str(inspect.signature(function))[1:-1]
            head = (f"def {name}(\n        " + textwrap.fill(
                params, 88, subsequent_indent="        ", break_long_words=False) + "):")
        summary = " ".join((inspect.getdoc(function) or "").split("\n\n")[0].split())
        body = textwrap.fill(summary, 92, initial_indent='    """', subsequent_indent="    ")
        lines.append(f'{head}\n{body}"""\n\n')
    INDEX.write_text("\n".join(lines).rstrip() + "\n")


if __name__ == "__main__":
    write_index()
