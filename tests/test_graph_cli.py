"""`hlogen graph`: the module drawn as DOT, HTML and SVG, read back (tests/test_graph.py's
readers); --optimized draws XLA's optimized HLO."""
from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import sys
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from hlogen_cli.main import main
from tests.test_graph import SVG, check_module_structure, loop_and_reduce, parse_dot, parse_svg


@pytest.fixture(scope="module")
def comp():
    return loop_and_reduce()


def hlogen(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture
def module_file(tmp_path, comp):
    path = tmp_path / "loop.mlir"
    path.write_text(comp.as_text(debug_info=True))
    return path


@pytest.mark.parametrize("suffix", [".dot", ".html"])
def test_hlogen_graph_writes_dot_and_html(tmp_path, module_file, comp, suffix):
    out = tmp_path / f"g{suffix}"
    result = hlogen("graph", str(module_file), "-o", str(out))
    assert result.exit_code == 0, result.output
    assert f"{out}: loop_reduce: " in result.output
    text = out.read_text()
    found = parse_dot(text) if suffix == ".dot" else \
        parse_svg(ET.fromstring(re.search(r"<svg.*</svg>", text, re.S).group(0)))
    check_module_structure(found, comp)


def test_hlogen_graph_optimized_html(tmp_path, module_file):
    out = tmp_path / "opt.html"
    result = hlogen("graph", str(module_file), "--optimized", "-o", str(out))
    assert result.exit_code == 0, result.output
    found = parse_svg(ET.fromstring(re.search(r"<svg.*</svg>", out.read_text(), re.S).group(0)))
    assert any(label.startswith("fusion") for label, _ in found["clusters"].values())


def test_hlogen_graph_optimized_dot_is_xlas_rendering(tmp_path, module_file):
    out = tmp_path / "opt.dot"
    result = hlogen("graph", str(module_file), "--optimized", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert result.output == f"{out}: XLA's own rendering of loop_reduce (XLA cpu, optimized)\n"
    text = out.read_text()
    assert text.startswith("digraph") and "subgraph cluster" in text and "fusion" in text


def test_hlogen_graph_refuses_other_suffixes(tmp_path, module_file):
    result = hlogen("graph", str(module_file), "-o", str(tmp_path / "g.png"))
    assert result.exit_code == 2 and "written as .dot, .svg or .html" in result.output
    assert not (tmp_path / "g.png").exists()


@pytest.mark.skipif(shutil.which("dot") is not None, reason="Graphviz is installed here")
def test_svg_without_graphviz_names_the_package(tmp_path, module_file):
    result = hlogen("graph", str(module_file), "-o", str(tmp_path / "g.svg"))
    assert result.exit_code == 2 and "Debian package graphviz" in result.output


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot is not installed (make check-browser installs it)")
@pytest.mark.parametrize("optimized", [False, True])
def test_svg_with_graphviz(tmp_path, module_file, optimized):
    out = tmp_path / "g.svg"
    result = hlogen("graph", str(module_file), *(["--optimized"] if optimized else []),
                    "-o", str(out))
    assert result.exit_code == 0, result.output
    svg = ET.fromstring(out.read_text())
    titles = {t.text for t in svg.iter(f"{SVG}title")}
    texts = " ".join(t.text or "" for t in svg.iter(f"{SVG}text"))
    assert any(t.startswith("cluster") for t in titles)  # Graphviz names clusters' groups
    assert ("fusion" in texts) if optimized else ("while" in texts and "reduce" in texts)


def test_view_without_the_extra_says_how_to_install_it(monkeypatch, module_file):
    monkeypatch.setitem(sys.modules, "model_explorer", None)  # as if not installed
    result = hlogen("view", str(module_file))
    assert result.exit_code == 2 and "pip install 'hlogen[view]'" in result.output


def test_graph_reads_standard_input(tmp_path, comp):
    out = tmp_path / "g.dot"
    result = CliRunner().invoke(main, ["graph", "-", "-o", str(out)],
                                input=comp.as_text(debug_info=True),
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    check_module_structure(parse_dot(out.read_text()), comp)


@pytest.mark.skipif(importlib.util.find_spec("model_explorer") is None,
                    reason="the extra hlogen[view] is not installed")
def test_view_refuses_a_port_in_use(module_file):
    with socket.socket() as held:
        held.bind(("localhost", 0))
        held.listen()
        result = hlogen("view", str(module_file), "--port", str(held.getsockname()[1]),
                        "--no-browser")
    assert result.exit_code == 2 and "cannot serve there" in result.output
