"""The recipes of CONTRIBUTING.md hold: each step it names is forced by a test here (or by
the test it names), so that a change that skips one fails and says where to make it."""
from __future__ import annotations

import pathlib
import re

import click

from hlogen import loading, ops
from hlogen.fuzz import generators
from hlogen.ops import elementwise
from hlogen.xla_client import ops as xla_ops
from hlogen_cli import options

ROOT = pathlib.Path(__file__).resolve().parent.parent

GENERATOR = pathlib.Path(generators.__file__).relative_to(ROOT)


def _left_out_holds(table: dict, name: str, done: set) -> None:
    """A table of ops left out on purpose names ops, none of them done, each with why."""
    assert not set(table) & done, f"{name} names ops that are there after all"
    assert set(table) <= set(ops.__all__), f"{name} names no op"
    assert all(why.strip() for why in table.values()), f"{name} gives an op no reason"


def test_every_op_is_generated_or_says_why_not():
    """A new op of hlogen.ops is fuzzed only with a row in the generator's table."""
    rows = {g.name for g in generators.GENERATORS} - {g.name for g in generators.IDIOMS}
    missing = sorted(set(ops.__all__) - rows - set(generators.NOT_GENERATED))
    assert not missing, (
        f"ops the fuzzer never generates: {', '.join(missing)}; add a Generator row to "
        f"GENERATORS in {GENERATOR} (element-wise ops come from hlogen/ops/elementwise.py's "
        f"tables), or the op and why it is left out to NOT_GENERATED there")
    _left_out_holds(generators.NOT_GENERATED, "NOT_GENERATED", rows)


def test_xla_client_has_every_element_wise_op_by_its_xla_name():
    """hlogen.xla_client.ops reads the element-wise ops from hlogen's tables (the spec's
    name is XLA's); the ones XLA's binding lacks are named there."""
    rows = {**{row.spec: name for name, row in elementwise.UNARY.items()},
            **{row.spec: name for name, row in elementwise.BINARY_ARITHMETIC.items()},
            **{xla: name for name, (xla, _) in elementwise.COMPARISONS.items()}}
    left_out = xla_ops._NOT_IN_BINDING
    assert left_out <= set(rows), "_NOT_IN_BINDING names no element-wise op"
    for xla, name in rows.items():
        if xla in left_out:
            assert not hasattr(xla_ops, xla)
            continue
        assert xla in xla_ops.__all__, f"xla_client.ops has no {xla} (hlogen.ops.{name})"
        table = xla_ops._UNARY if name in elementwise.UNARY else xla_ops._BINARY
        assert table[xla] is getattr(ops, name), xla


def test_xla_client_builds_every_op_or_says_why_not():
    """Every op of hlogen.ops has XLA's binding's function in hlogen.xla_client (which
    builds it with `_ops.NAME`), or is named in its _NOT_BUILT with why."""
    folder = ROOT / "hlogen" / "xla_client"
    used = {m for path in folder.glob("*.py") for m in re.findall(r"_ops\.(\w+)", path.read_text())}
    missing = sorted(set(ops.__all__) - set(elementwise.__all__) - used - set(xla_ops._NOT_BUILT))
    assert not missing, (
        f"hlogen.xla_client builds none of {', '.join(missing)}: add XLA's binding's function "
        f"to hlogen/xla_client/ops.py (and its test to tests/test_xla_client_ops.py), or the "
        f"op and why to _NOT_BUILT there")
    _left_out_holds(xla_ops._NOT_BUILT, "_NOT_BUILT", used)


def test_help_texts_read_the_formats_from_the_one_list():
    """hlogen_cli/options.py's MODULE_FORMATS says hlogen.loading.FORMATS (a new input
    format: a phrase in FORMATS, and the same words there); run, compile and opt print it."""
    *first, last = loading.FORMATS
    assert options.MODULE_FORMATS == f"{', '.join(first)}, or {last}", (
        "hlogen_cli/options.py's MODULE_FORMATS must say hlogen/loading.py's FORMATS")
    from hlogen_cli.main import main
    for name in ("run", "compile", "opt"):
        command = main.get_command(click.Context(main), name)
        assert "{formats}" not in command.help, name
        assert options.MODULE_FORMATS in " ".join(command.help.split()), name


def test_every_path_contributing_names_exists():
    text = (ROOT / "CONTRIBUTING.md").read_text()
    named = set(re.findall(r"`((?:hlogen|hlogen_cli|tests|docs|benchmarks)/[\w/.]+\.(?:py|pyi|md))",
                           text))
    named = {p for p in named if not re.search(r"/[A-Z]+\.py$", p)}  # (FAMILY.py: any)
    assert len(named) > 10
    assert sorted(p for p in named if not (ROOT / p).exists()) == []
