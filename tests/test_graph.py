"""Drawing modules (hlogen.graph, hlogen.drawing, hlogen.runtime.inspection, `hlogen graph`):
the structure of what is drawn, read back from the DOT and from the HTML page's SVG."""
from __future__ import annotations

import html
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import hlogen as hg
from hlogen import drawing, ops
from hlogen.runtime import inspection, pjrt

SVG = "{http://www.w3.org/2000/svg}"


def loop_and_reduce() -> hg.Computation:
    """A While loop (i < 3: acc = exp(acc) * acc + 1) and a Reduce of its result."""
    b = hg.Builder("loop_reduce")
    x = b.parameter(hg.f32[4, 8], "x")
    _, acc = ops.while_loop(lambda i, acc: ops.lt(i, 3),
                            lambda i, acc: (i + 1, ops.exp(acc) * acc + 1.0),
                            (b.constant(np.int32(0)), x))
    return b.build(ops.reduce(acc, b.constant(np.float32(0)), lambda a, c: ops.add(a, c), [1]))


@pytest.fixture(scope="module")
def comp():
    return loop_and_reduce()


# -- reading drawings back ------------------------------------------------------------------

def parse_dot(text: str) -> dict:
    """Nodes (id -> (label lines, cluster)), clusters (id -> (label, parent)), edges
    [(source, target, label)] of DOT as to_dot writes it."""
    def unescape(s):
        return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)
    string = r'"((?:[^"\\]|\\.)*)"'
    nodes, clusters, edges, stack = {}, {}, [], [None]
    for line in text.splitlines():
        line = line.strip()
        if m := re.fullmatch(r"subgraph cluster_(\w+) \{", line):
            clusters[m.group(1)] = [None, stack[-1]]
            stack.append(m.group(1))
        elif line == "}":
            stack.pop()
        elif (m := re.match(rf"label={string}; style=", line)) and stack[-1] is not None:
            clusters[stack[-1]][0] = unescape(m.group(1))
        elif m := re.fullmatch(rf"(\w+) -> (\w+)(?: \[label={string}\])?;", line):
            edges.append((m.group(1), m.group(2), unescape(m.group(3) or "")))
        elif m := re.match(rf"(\w+) \[label={string}", line):
            nodes[m.group(1)] = (unescape(m.group(2)).split("\n"), stack[-1])
    assert stack == [], "unbalanced braces"
    return {"nodes": nodes, "clusters": {k: tuple(v) for k, v in clusters.items()}, "edges": edges}


def parse_svg(svg: ET.Element) -> dict:
    """The same, from to_svg's groups, with every box: id -> (x, y, w, h)."""
    nodes, clusters, edges, boxes = {}, {}, [], {}
    for g in svg.iter(f"{SVG}g"):
        classes = g.get("class", "").split()
        if "edge" in classes:
            text = g.find(f"{SVG}text")
            edges.append((g.get("data-source"), g.get("data-target"),
                          text.text if text is not None else ""))
            continue
        rect = g.find(f"{SVG}rect")
        boxes[g.get("id")] = tuple(float(rect.get(k)) for k in ("x", "y", "width", "height"))
        texts = [t.text for t in g.findall(f"{SVG}text")]
        if "node" in classes:
            nodes[g.get("id")] = (texts, g.get("data-cluster") or None)
        elif "cluster" in classes:
            clusters[g.get("id")] = (texts[0], g.get("data-parent") or None)
    return {"nodes": nodes, "clusters": clusters, "edges": edges, "boxes": boxes}


def clusters_labelled(found: dict, label: str) -> list[str]:
    return [c for c, (text, _) in found["clusters"].items() if text == label]


def clusters_within(found: dict, cluster: str) -> set:
    """`cluster` and the clusters inside it, at any depth."""
    inside, more = set(), {cluster}
    while more:
        inside |= more
        more = {c for c, (_, p) in found["clusters"].items() if p in more} - inside
    return inside


def nodes_in(found: dict, cluster: str) -> list[str]:
    """The labels of the nodes in `cluster` and the clusters inside it."""
    inside = clusters_within(found, cluster)
    return [lines[0] for lines, c in found["nodes"].values() if c in inside]


def ops_in_text(comp) -> list[str]:
    """Every op of the module but the functions, read from its generic text (independent
    of the MLIR walk the graph makes)."""
    text = comp.module.operation.get_asm(print_generic_op_form=True)
    return [m.group(1) for m in re.finditer(r'^\s*(?:%[^=]+= )?"(\w+\.\w+)"', text, re.M)
            if m.group(1) not in ("func.func", "builtin.module")]


# -- the module as written ------------------------------------------------------------------

def check_module_structure(found: dict, comp) -> None:
    labels = [lines[0] for lines, _ in found["nodes"].values()]
    ops_ = ops_in_text(comp)
    params = [lb for lb in labels if lb.startswith("parameter")]
    # one node per op, one per parameter (of @main: x; of the regions: 2 + 2 + 2)
    assert len(labels) == len(ops_) + len(params)
    assert len(params) == 1 + 2 + 2 + 2 and "parameter 0: x" in labels
    assert sorted(lb for lb in labels if not lb.startswith("parameter")) == \
        sorted("return" if o == "func.return" else o.removeprefix("stablehlo.") for o in ops_)
    (main_fn,) = clusters_labelled(found, "func @main")
    (loop,) = clusters_labelled(found, "while")
    (reduce,) = clusters_labelled(found, "reduce")
    assert found["clusters"][loop][1] == main_fn and found["clusters"][reduce][1] == main_fn
    (cond,) = clusters_labelled(found, "cond")
    bodies = clusters_labelled(found, "body")
    assert found["clusters"][cond][1] == loop
    (loop_body,) = [c for c in bodies if found["clusters"][c][1] == loop]
    (reducer,) = [c for c in bodies if found["clusters"][c][1] == reduce]
    assert sorted(nodes_in(found, cond)) == sorted(
        ["parameter 0: %arg0", "parameter 1: %arg1", "constant", "compare", "return"])
    assert {"exponential", "multiply", "add", "broadcast_in_dim", "return"} <= \
        set(nodes_in(found, loop_body))
    assert sorted(nodes_in(found, reducer)) == sorted(
        ["parameter 0: %arg0", "parameter 1: %arg1", "add", "return"])
    # shapes and source lines of the ops
    by_label = {lines[0]: lines for lines, _ in found["nodes"].values()}
    assert by_label["while"][1] == "s32[], f32[4,8]" and by_label["reduce"][1] == "f32[4]"
    assert re.fullmatch(r"test_graph\.py:\d+", by_label["reduce"][2])
    # the edges: x into the loop, the loop's second result into the reduce, it into return
    node = {lines[0]: n for n, (lines, _) in found["nodes"].items()}
    assert (node["parameter 0: x"], node["while"], "") in found["edges"]
    assert (node["while"], node["reduce"], "#1") in found["edges"]
    assert (node["reduce"], [n for n, (lines, c) in found["nodes"].items()
                             if lines[0] == "return" and c == main_fn][0], "") in found["edges"]
    assert len(found["edges"]) == len(set(found["edges"]))


def test_dot_of_a_module_with_a_loop_and_a_reduce(comp):
    found = parse_dot(drawing.to_dot(hg.graph.of(comp)))
    check_module_structure(found, comp)


def test_html_page_draws_the_same_graph_and_opens_offline(comp):
    graph = hg.graph.of(comp)
    page = drawing.to_html(graph, comp.signature())
    assert page.startswith("<!DOCTYPE html>") and html.escape(comp.signature()) in page
    # self-contained: nothing fetched (the SVG namespace is a name, not a download)
    assert not re.search(r"""(src|href)\s*=|@import|url\((?!#)|https?://(?!www\.w3\.org/2000/svg)""",
                         page)
    svg = ET.fromstring(re.search(r"<svg.*</svg>", page, re.S).group(0))
    found = parse_svg(svg)
    check_module_structure(found, comp)
    dot = parse_dot(drawing.to_dot(graph))
    assert sorted(found["edges"]) == sorted(dot["edges"])
    # the layout: every box inside its cluster's box, and an edge's target below its source
    boxes = found["boxes"]
    for item, (_, parent) in [*found["nodes"].items(), *found["clusters"].items()]:
        if parent is not None:
            x, y, w, h = boxes[item]
            px, py, pw, ph = boxes[parent]
            assert px <= x and py <= y and x + w <= px + pw and y + h <= py + ph, (item, parent)
    for source, target, _ in found["edges"]:
        assert boxes[source][1] < boxes[target][1], (source, target)


def test_a_loaded_module_names_lines_of_its_file(tmp_path, comp):
    path = tmp_path / "loop.mlir"
    path.write_text(comp.as_text())
    loaded = hg.load(str(path))
    found = parse_dot(drawing.to_dot(hg.graph.of(loaded)))
    lines = path.read_text().splitlines()
    (reduce,) = [ls for ls, _ in found["nodes"].values() if ls[0] == "reduce"]
    file, line = reduce[-1].split(":")
    assert file == "loop.mlir" and "stablehlo.reduce" in lines[int(line) - 1]


def test_a_notebook_shows_the_signature_and_the_graph(comp):
    page = comp._repr_html_()
    assert html.escape(comp.signature()) in page
    for svg in (re.search(r"<svg.*</svg>", page, re.S).group(0), comp._repr_svg_()):
        check_module_structure(parse_svg(ET.fromstring(svg)), comp)


def test_graph_of_something_else_is_an_error():
    with pytest.raises(hg.HlogenError, match="graph.of takes a Computation"):
        hg.graph.of("main")


# -- XLA's optimized HLO ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def executable(comp):
    return pjrt.compile(comp, "cpu")


def test_optimized_graph_has_fusions_the_loop_and_the_reduce(executable):
    graph = inspection.optimized_graph(executable)
    found = parse_svg(ET.fromstring(drawing.to_svg(graph)))
    dot = parse_dot(drawing.to_dot(graph))
    assert found["nodes"] == dot["nodes"] and found["clusters"] == dot["clusters"]
    assert sorted(found["edges"]) == sorted(dot["edges"])
    hlo = executable.optimized_hlo()
    instructions = re.findall(r"^\s*(?:ROOT )?%(\S+) = ", hlo, re.M)
    names = [lines[1] for lines, _ in found["nodes"].values()]
    # every instruction reached from the entry, once per call (no computation here is
    # called twice)
    assert sorted(names) == sorted(f"%{n}" for n in instructions)
    fusions = [c for c, (label, _) in found["clusters"].items() if label.startswith("fusion")]
    assert fusions and all(
        any(label.startswith("fused computation %") and parent == f
            for label, parent in found["clusters"].values()) for f in fusions)
    # the loop's body is fused: exponential and multiply sit in a fusion inside the while
    (loop,) = [c for c, (label, _) in found["clusters"].items() if label.startswith("while %")]
    roles = sorted(label.split(" %")[0] for label, parent in found["clusters"].values()
                   if parent == loop)
    assert roles == ["body", "condition"]
    (in_loop,) = [f for f in fusions if "exponential" in nodes_in(found, f)]
    assert "multiply" in nodes_in(found, in_loop) and in_loop in clusters_within(found, loop)
    (reduce,) = [c for c, (label, _) in found["clusters"].items() if label.startswith("reduce %")]
    assert "add" in nodes_in(found, reduce)


def test_xla_renders_its_own_dot(executable):
    dot = inspection.xla_dot(executable)
    assert dot.startswith("digraph") and "subgraph cluster" in dot and "fusion" in dot


def test_memory_analysis_counts_arguments_and_outputs(executable):
    memory = inspection.memory_analysis(executable)
    assert memory["arguments"] == 4 * 8 * 4 and memory["outputs"] == 4 * 4
    assert memory["temporaries"] >= 0 and set(memory) >= {"generated code", "peak"}
    assert inspection.byte_size(1536) == "1536 B (1.5 KiB)" and inspection.byte_size(5) == "5 B"
