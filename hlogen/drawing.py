"""Drawing graphs of modules: the graph, and its DOT, SVG and HTML forms.

A `Graph` is what `hlogen.graph` (a StableHLO module) and `hlogen.runtime.inspection`
(XLA's optimized HLO) make: nodes (an op, with its shape and source location), edges
(a value from the op that makes it to an op that uses it) and clusters (regions, called
computations, fusions), nested. Three forms:

- `to_dot`: Graphviz's DOT text, clusters as `subgraph cluster_*`;
- `to_svg`: an SVG laid out here (layers top to bottom, clusters as nested boxes), so
  that notebooks and HTML pages need no Graphviz;
- `to_html`: one self-contained page (the SVG, inline CSS and a little inline script to
  pan, zoom and highlight a node's edges; nothing fetched), which opens offline;

and `graphviz_svg`, Graphviz's own SVG of the DOT, when its `dot` program is installed.
"""
from __future__ import annotations

import dataclasses
import html
import shutil
import subprocess

from hlogen.errors import InputError, UnsupportedError


@dataclasses.dataclass
class Node:
    id: str
    label: str                      # the op: "add", "while", "fusion"
    details: list[str]              # shape, location, ...: one line each
    cluster: str | None = None      # the innermost cluster holding it
    kind: str = "op"                # "op", "parameter", "return", "constant"
    tooltip: str = ""               # the op's own text


@dataclasses.dataclass
class Edge:
    source: str
    target: str
    label: str = ""                 # "#1": which result of the source, when it has several


@dataclasses.dataclass
class Cluster:
    id: str
    label: str
    parent: str | None = None
    kind: str = "region"            # "function", "op", "region", "fusion", "computation"


@dataclasses.dataclass
class Graph:
    title: str
    nodes: dict = dataclasses.field(default_factory=dict)     # id -> Node, in order
    edges: list = dataclasses.field(default_factory=list)
    clusters: dict = dataclasses.field(default_factory=dict)  # id -> Cluster, in order

    def node(self, label, details, cluster=None, kind="op", tooltip="") -> str:
        node_id = f"n{len(self.nodes)}"
        self.nodes[node_id] = Node(node_id, label, [d for d in details if d], cluster, kind, tooltip)
        return node_id

    def cluster(self, label, parent=None, kind="region") -> str:
        cluster_id = f"c{len(self.clusters)}"
        self.clusters[cluster_id] = Cluster(cluster_id, label, parent, kind)
        return cluster_id

    def edge(self, source: str, target: str, label: str = "") -> None:
        self.edges.append(Edge(source, target, label))


# -- DOT ------------------------------------------------------------------------------------

def _dot_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# The colours of nodes and clusters by kind, in every form.
NODE_FILL = {"op": "#e8f0fe", "parameter": "#e6f4ea", "return": "#fce8e6", "constant": "#f1f3f4"}
CLUSTER_FILL = {"function": "#ffffff", "op": "#fff8e1", "region": "#fafafa",
                "fusion": "#f3e5f5", "computation": "#fafafa"}


def to_dot(graph: Graph) -> str:
    """Graphviz's DOT: one node per op (label, details), one `subgraph cluster_ID` per cluster."""
    children: dict = {}
    for c in graph.clusters.values():
        children.setdefault(c.parent, []).append(c.id)
    members: dict = {}
    for n in graph.nodes.values():
        members.setdefault(n.cluster, []).append(n)
    lines = [f"digraph {_dot_string(graph.title)} {{",
             f"  label={_dot_string(graph.title)}; labelloc=t; rankdir=TB; compound=true;",
             '  node [shape=box, style="rounded,filled", fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=9];']

    def emit(cluster_id, indent):
        pad = "  " * indent
        for n in members.get(cluster_id, []):
            label = "\n".join([n.label, *n.details])
            lines.append(f"{pad}{n.id} [label={_dot_string(label)}, "
                         f"fillcolor={_dot_string(NODE_FILL.get(n.kind, '#ffffff'))}];")
        for child in children.get(cluster_id, []):
            c = graph.clusters[child]
            lines.append(f"{pad}subgraph cluster_{c.id} {{")
            lines.append(f"{pad}  label={_dot_string(c.label)}; style=filled; "
                         f"fillcolor={_dot_string(CLUSTER_FILL.get(c.kind, '#ffffff'))};")
            emit(child, indent + 1)
            lines.append(f"{pad}}}")

    emit(None, 1)
    for e in graph.edges:
        label = f" [label={_dot_string(e.label)}]" if e.label else ""
        lines.append(f"  {e.source} -> {e.target}{label};")
    lines.append("}")
    return "\n".join(lines) + "\n"


_NO_GRAPHVIZ = ("SVG needs Graphviz's dot program, which is not installed: install the Debian "
                "package graphviz (apt-get install graphviz), or write .dot or .html instead "
                "(HTML needs nothing)")


def graphviz_svg(dot_text: str) -> str:
    """Graphviz's SVG of DOT text (its `dot` program)."""
    dot = shutil.which("dot")
    if dot is None:
        raise UnsupportedError(_NO_GRAPHVIZ)
    done = subprocess.run([dot, "-Tsvg"], input=dot_text.encode(), capture_output=True,
                          timeout=300)
    if done.returncode:
        raise UnsupportedError(f"Graphviz's dot failed (status {done.returncode}): "
                               f"{done.stderr.decode(errors='replace')[-2000:]}")
    return done.stdout.decode()


# -- layout ---------------------------------------------------------------------------------
# Each cluster is laid out on its own, as a box: its direct members (nodes and child
# clusters) in layers, a member one layer below every member that feeds it (members come
# in definition order, which MLIR's SSA order makes a topological one; an edge back is
# ignored), each layer a centred row. A cluster's box is then a member of its parent's.

_CHAR_W, _LINE_H = 7.0, 14.0       # monospace 11px
_PAD, _GAP_X, _GAP_Y, _TITLE_H = 10.0, 16.0, 30.0, 18.0


@dataclasses.dataclass
class _Box:
    x: float = 0.0
    y: float = 0.0
    w: float = 0.0
    h: float = 0.0


def _node_size(n: Node) -> tuple[float, float]:
    lines = [n.label, *n.details]
    return max(len(s) for s in lines) * _CHAR_W + 2 * _PAD, len(lines) * _LINE_H + _PAD


def layout(graph: Graph) -> dict:
    """Boxes (x, y, w, h) of every node and cluster id, and "" for the whole drawing."""
    members: dict = {}  # cluster id or None -> member ids in order
    for n in graph.nodes.values():
        members.setdefault(n.cluster, []).append(n.id)
    for c in graph.clusters.values():
        members.setdefault(c.parent, []).append(c.id)
    order = {m: i for i, m in enumerate([*graph.nodes, *graph.clusters])}
    for ids in members.values():  # a cluster comes where its first node comes
        ids.sort(key=lambda m: _first_position(graph, m, order, members))

    def ancestry(item: str) -> dict:
        """{container: the member of it that holds `item`} for every container around it."""
        found = {}
        while item is not None:
            parent = graph.nodes[item].cluster if item in graph.nodes else graph.clusters[item].parent
            found[parent] = item
            item = parent
        return found

    # An edge orders two members of the innermost container that holds both ends (each
    # end is, or is inside, a member of it): the feeds of each container.
    feeds_in: dict = {}
    for e in graph.edges:
        around_source, around_target = ancestry(e.source), ancestry(e.target)
        for container, s in around_source.items():  # innermost first
            t = around_target.get(container)
            if t is not None:
                if s != t:
                    feeds_in.setdefault(container, []).append((s, t))
                break
    boxes: dict = {}

    def measure(container) -> tuple[float, float]:
        """Lays out the members of `container` relative to its top left; returns its size."""
        ids = members.get(container, [])
        for m in ids:
            if m in graph.clusters:
                w, h = measure(m)
                boxes[m] = _Box(0, 0, w, h)
            else:
                boxes[m] = _Box(0, 0, *_node_size(graph.nodes[m]))
        position = {m: i for i, m in enumerate(ids)}
        layer = {m: 0 for m in ids}
        feeds: dict = {m: [] for m in ids}
        for s, t in feeds_in.get(container, []):
            if position[s] < position[t]:
                feeds[t].append(s)
        for m in ids:
            layer[m] = max([layer[s] + 1 for s in feeds[m]], default=0)
        rows: list = [[] for _ in range(max(layer.values(), default=-1) + 1)]
        for m in ids:
            rows[layer[m]].append(m)
        top = _TITLE_H if container is not None else 0.0
        width = max([sum(boxes[m].w for m in row) + _GAP_X * (len(row) - 1) for row in rows],
                    default=0.0)
        y = top + _PAD
        for k, row in enumerate(rows):
            if k:  # under what feeds it: order a row by its feeders' centres
                row.sort(key=lambda m: _mean([boxes[s].x + boxes[s].w / 2 for s in feeds[m]]))
            row_w = sum(boxes[m].w for m in row) + _GAP_X * (len(row) - 1)
            x = _PAD + (width - row_w) / 2
            for m in row:
                boxes[m].x, boxes[m].y = x, y
                x += boxes[m].w + _GAP_X
            y += max(boxes[m].h for m in row) + _GAP_Y
        height = y - _GAP_Y + _PAD if rows else top + 2 * _PAD
        return max(width + 2 * _PAD, len(_cluster_label(graph, container)) * _CHAR_W + 2 * _PAD), \
            height

    def place(container, dx, dy):
        for m in members.get(container, []):
            boxes[m].x += dx
            boxes[m].y += dy
            if m in graph.clusters:
                place(m, boxes[m].x, boxes[m].y)

    w, h = measure(None)
    place(None, 0.0, 0.0)
    boxes[""] = _Box(0, 0, w, h)
    return boxes


def _first_position(graph, member, order, members) -> int:
    if member in graph.nodes:
        return order[member]
    inside = members.get(member, [])
    return min([_first_position(graph, m, order, members) for m in inside], default=order[member])


def _cluster_label(graph, cluster_id) -> str:
    return graph.clusters[cluster_id].label if cluster_id is not None else ""


def _mean(values) -> float:
    return sum(values) / len(values) if values else -1.0  # no feeder (a constant): leftmost


# -- SVG and HTML ---------------------------------------------------------------------------

_SVG_STYLE = "".join(
    [f".node.{kind} rect {{ fill: {fill}; }}\n" for kind, fill in NODE_FILL.items()] +
    [f".cluster.{kind} rect {{ fill: {fill}; }}\n" for kind, fill in CLUSTER_FILL.items()]) + """
.node rect { stroke: #5f6368; stroke-width: 1; rx: 4; }
.node text { font: 11px monospace; fill: #202124; }
.node text.label { font-weight: bold; }
.cluster rect { stroke: #9aa0a6; stroke-dasharray: 4 2; fill-opacity: 0.6; }
.cluster.function rect { stroke-dasharray: none; }
.cluster text { font: bold 11px sans-serif; fill: #5f6368; }
.edge path { fill: none; stroke: #5f6368; stroke-width: 1.2; }
.edge text { font: 10px monospace; fill: #5f6368; }
.edge.lit path { stroke: #1a73e8; stroke-width: 2.5; } .node.lit rect { stroke: #1a73e8; stroke-width: 2.5; }
"""


def to_svg(graph: Graph) -> str:
    """An SVG of the graph, laid out here (no Graphviz): `<g class="node ..." id="ID">`,
    `<g class="cluster ..." id="ID">`, `<g class="edge" data-source=.. data-target=..>`."""
    boxes = layout(graph)
    whole = boxes[""]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="hlogen-graph" '
           f'width="{whole.w:.0f}" height="{whole.h:.0f}" viewBox="0 0 {whole.w:.0f} {whole.h:.0f}">',
           f"<title>{html.escape(graph.title)}</title>",
           f"<style>{_SVG_STYLE}</style>",
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
           'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#5f6368"/></marker>'
           '</defs>']
    for c in graph.clusters.values():
        b = boxes[c.id]
        out.append(f'<g class="cluster {c.kind}" id="{c.id}" data-parent="{c.parent or ""}">'
                   f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}"/>'
                   f'<text x="{b.x + 6:.1f}" y="{b.y + 13:.1f}">{html.escape(c.label)}</text></g>')
    for e in graph.edges:
        s, t = boxes[e.source], boxes[e.target]
        x1, y1, x2, y2 = s.x + s.w / 2, s.y + s.h, t.x + t.w / 2, t.y
        bend = max(abs(y2 - y1) / 2, 20.0)
        label = (f'<text x="{(x1 + x2) / 2 + 4:.1f}" y="{(y1 + y2) / 2:.1f}">'
                 f'{html.escape(e.label)}</text>') if e.label else ""
        out.append(f'<g class="edge" data-source="{e.source}" data-target="{e.target}">'
                   f'<path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} {x2:.1f},{y2 - bend:.1f} '
                   f'{x2:.1f},{y2:.1f}" marker-end="url(#arrow)"/>{label}</g>')
    for n in graph.nodes.values():
        b = boxes[n.id]
        texts = [f'<text class="label" x="{b.x + _PAD:.1f}" y="{b.y + _LINE_H:.1f}">'
                 f'{html.escape(n.label)}</text>']
        texts += [f'<text x="{b.x + _PAD:.1f}" y="{b.y + _LINE_H * (i + 2):.1f}">{html.escape(d)}</text>'
                  for i, d in enumerate(n.details)]
        tip = f"<title>{html.escape(n.tooltip)}</title>" if n.tooltip else ""
        out.append(f'<g class="node {n.kind}" id="{n.id}" data-cluster="{n.cluster or ""}">{tip}'
                   f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}"/>'
                   f'{"".join(texts)}</g>')
    out.append("</svg>")
    return "\n".join(out)


_PAGE_STYLE = """
body { margin: 0; font: 14px sans-serif; color: #202124; }
header { padding: 8px 12px; border-bottom: 1px solid #dadce0; }
header h1 { font-size: 16px; margin: 0 0 4px 0; }
header p { margin: 0; font: 12px monospace; color: #5f6368; }
#view { position: absolute; top: 64px; bottom: 0; left: 0; right: 0; overflow: hidden; cursor: grab; }
"""

# Pan (drag), zoom (wheel) and, on a click on a node, its edges and neighbours lit.
_PAGE_SCRIPT = """
(function () {
  var view = document.getElementById("view"), svg = view.querySelector("svg");
  var box = svg.viewBox.baseVal, drag = null;
  svg.setAttribute("width", "100%"); svg.setAttribute("height", "100%");
  view.addEventListener("wheel", function (e) {
    e.preventDefault();
    var k = e.deltaY > 0 ? 1.15 : 1 / 1.15, r = svg.getBoundingClientRect();
    var px = box.x + (e.clientX - r.left) / r.width * box.width;
    var py = box.y + (e.clientY - r.top) / r.height * box.height;
    box.x = px - (px - box.x) * k; box.y = py - (py - box.y) * k;
    box.width *= k; box.height *= k;
  }, {passive: false});
  view.addEventListener("mousedown", function (e) { drag = [e.clientX, e.clientY]; });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var r = svg.getBoundingClientRect();
    box.x -= (e.clientX - drag[0]) / r.width * box.width;
    box.y -= (e.clientY - drag[1]) / r.height * box.height;
    drag = [e.clientX, e.clientY];
  });
  svg.addEventListener("click", function (e) {
    var node = e.target.closest(".node");
    svg.querySelectorAll(".lit").forEach(function (x) { x.classList.remove("lit"); });
    if (!node) return;
    node.classList.add("lit");
    svg.querySelectorAll(".edge").forEach(function (edge) {
      if (edge.dataset.source === node.id || edge.dataset.target === node.id) {
        edge.classList.add("lit");
      }
    });
  });
})();
"""


def to_html(graph: Graph, subtitle: str = "") -> str:
    """One self-contained page: the title, `subtitle` (e.g. the signature) and the SVG."""
    return (f'<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>{html.escape(graph.title)}</title><style>{_PAGE_STYLE}</style></head>\n"
            f"<body><header><h1>{html.escape(graph.title)}</h1><p>{html.escape(subtitle)}</p>"
            f'</header>\n<div id="view">\n{to_svg(graph)}\n</div>\n'
            f"<script>{_PAGE_SCRIPT}</script></body></html>\n")


# The forms a file can be written in, by its suffix.
DOT, SVG, HTML = (".dot", ".gv"), (".svg",), (".html", ".htm")
SUFFIXES = DOT + SVG + HTML


def check_output(path: str) -> str:
    """The suffix of `path`, refused when it names no form, or SVG without Graphviz."""
    suffix = "." + path.rsplit(".", 1)[-1].lower() if "." in path else ""
    if suffix not in SUFFIXES:
        raise InputError(f"{path}: a graph is written as .dot, .svg or .html (by its suffix), "
                         f"not {suffix or 'a name without a suffix'}")
    if suffix in SVG and shutil.which("dot") is None:
        raise UnsupportedError(_NO_GRAPHVIZ)
    return suffix


def render(graph: Graph, path: str, subtitle: str = "", dot_text: str | None = None) -> str:
    """The text of `graph` in the form `path`'s suffix names. `dot_text`: DOT to use
    instead of `to_dot(graph)` for .dot and .svg (XLA's own renderer's)."""
    suffix = check_output(path)
    if suffix in HTML:
        return to_html(graph, subtitle)
    dot_text = dot_text if dot_text is not None else to_dot(graph)
    return dot_text if suffix in DOT else graphviz_svg(dot_text)
