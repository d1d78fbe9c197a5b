"""The graph of a StableHLO module, as written (before XLA): `hg.graph.of(comp)`.

One node per op (its name without the `stablehlo.` prefix, its result shapes, where it
was written: file:line of the user's code, or of the .mlir file), one per parameter of
a function or region; an edge per use of a value; a cluster per function, per op with
regions (while, if, case, reduce, sort, ...) and per region (cond and body, branches,
the reducer). `hlogen.drawing` turns it into DOT, SVG or an HTML page; a `Computation`
shows its signature and this graph in a notebook (installed here, below).
"""
from __future__ import annotations

import html
import os

from jaxlib.mlir import ir

from hlogen import computation, drawing, mlir
from hlogen.computation import Computation
from hlogen.errors import HlogenError

# What the regions of an op are called, by the op (StableHLO's spec names them).
REGION_NAMES = {
    "stablehlo.while": ("cond", "body"),
    "stablehlo.if": ("true branch", "false branch"),
    "stablehlo.reduce": ("body",),
    "stablehlo.reduce_window": ("body",),
    "stablehlo.select_and_scatter": ("select", "scatter"),
    "stablehlo.scatter": ("update computation",),
    "stablehlo.sort": ("comparator",),
    "stablehlo.all_reduce": ("computation",),
    "stablehlo.reduce_scatter": ("computation",),
    "stablehlo.map": ("computation",),
}
_TOOLTIP_CHARS = 600
_CONSTANT_CHARS = 28
_CONSTANT_ELEMENTS = 16


def of(comp: Computation, title: str | None = None) -> drawing.Graph:
    """The graph of every function of `comp`'s module (@main first)."""
    if not isinstance(comp, Computation):
        raise HlogenError(f"graph.of takes a Computation, got {type(comp).__name__}")
    graph = drawing.Graph(title or comp.name)
    functions = [op.operation for op in comp.module.body.operations
                 if op.operation.name == "func.func"]
    functions.sort(key=lambda f: _symbol(f) != "main")
    for f in functions:
        name = _symbol(f)
        cluster = graph.cluster(f"func @{name}", kind="function")
        if not f.regions[0].blocks:
            continue  # a declaration
        block = f.regions[0].blocks[0]
        names = comp.parameter_names if name == "main" else [f"%arg{i}" for i in range(len(block.arguments))]
        values = {}
        _parameters(graph, block, names, cluster, values)
        _block(graph, block, cluster, values, comp.source)
    return graph


def _symbol(op) -> str:
    return ir.StringAttr(op.attributes["sym_name"]).value


def _parameters(graph, block, names, cluster, values) -> None:
    for i, (arg, name) in enumerate(zip(block.arguments, names)):
        values[arg] = (graph.node(f"parameter {i}: {name}", [_shape(arg.type)], cluster,
                                  kind="parameter"), "")


def _block(graph, block, cluster, values, source) -> None:
    """The ops of `block` as nodes of `cluster`; `values` maps each value in scope to
    (its node, the edge label that says which result it is); `source`: the file the
    module was loaded from, or None."""
    for op in block.operations:
        op = op.operation
        name = "return" if op.name == "func.return" else op.name.removeprefix("stablehlo.")
        kind = {"func.return": "return", "stablehlo.return": "return",
                "stablehlo.constant": "constant"}.get(op.name, "op")
        details = [", ".join(_shape(r.type) for r in op.results), _where(op.location, source)]
        if op.name == "stablehlo.constant":
            details.insert(0, _constant_text(op))
        elif op.name == "func.call":
            details.insert(0, f"@{ir.FlatSymbolRefAttr(op.attributes['callee']).value}")
        regions = [r for r in op.regions if r.blocks]
        home = graph.cluster(name, cluster, kind="op") if regions else cluster
        node = graph.node(name, details, home, kind, _tooltip(op))
        for operand in op.operands:
            if operand in values:
                producer, label = values[operand]
                graph.edge(producer, node, label)
        for i, result in enumerate(op.results):
            values[result] = (node, f"#{i}" if len(op.results) > 1 else "")
        names = REGION_NAMES.get(op.name, ())
        for i, region in enumerate(regions):
            label = names[i] if i < len(names) else \
                ("branch " if op.name == "stablehlo.case" else "region ") + str(i)
            inner = graph.cluster(label, home)
            block_values = dict(values)  # a region sees the values around it
            args = region.blocks[0]
            _parameters(graph, args, [f"%arg{k}" for k in range(len(args.arguments))], inner,
                        block_values)
            _block(graph, args, inner, block_values, source)


def _shape(t) -> str:
    try:
        return str(mlir.shape_of_type(t))
    except HlogenError:
        return str(t)


def _where(location, source) -> str:
    """file:line of a location (the first file location it holds), or "". A loaded
    module's text was parsed as "-": its lines are those of `source`."""
    found = mlir.file_location(location, source)
    return "" if found is None else f"{os.path.basename(found[0])}:{found[1]}"


def _attribute_text(attr) -> str:
    """An attribute as MLIR prints it, but a large array constant by its size (printing
    a million elements for a label would take the time of the whole drawing)."""
    if isinstance(attr, ir.DenseElementsAttr) and not attr.is_splat and \
            len(attr) > _CONSTANT_ELEMENTS:
        return f"dense<{len(attr)} values> : {attr.type}"
    return str(attr)


def _constant_text(op) -> str:
    text = _attribute_text(op.attributes["value"]).split(" : ")[0]
    if text.startswith("dense<") and text.endswith(">"):
        text = text[len("dense<"):-1]
    return text if len(text) <= _CONSTANT_CHARS else text[:_CONSTANT_CHARS - 3] + "..."


def _tooltip(op) -> str:
    """The op's name, attributes and types (printing the op itself numbers the values of
    its whole function: quadratic over a module)."""
    attributes = ", ".join(f"{name} = {_attribute_text(op.attributes[name])}"
                           for name in op.attributes)
    types = (f"({', '.join(str(v.type) for v in op.operands)}) -> "
             f"({', '.join(str(r.type) for r in op.results)})")
    text = f"{op.name} {{{attributes}}} : {types}" if attributes else f"{op.name} : {types}"
    return text if len(text) <= _TOOLTIP_CHARS else text[:_TOOLTIP_CHARS - 3] + "..."


# -- in a notebook --------------------------------------------------------------------------

def repr_html(comp: Computation) -> str:
    """The signature and the graph, as an HTML fragment (the SVG inline)."""
    return (f'<div class="hlogen-computation"><pre>{html.escape(comp.signature())}</pre>'
            f"{drawing.to_svg(of(comp))}</div>")


def repr_svg(comp: Computation) -> str:
    return drawing.to_svg(of(comp))


computation.install_drawing(html=repr_html, svg=repr_svg)
