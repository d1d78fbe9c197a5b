"""What XLA made of a module: its optimized HLO as a graph, its memory analysis, its
cost analysis, with names a person reads.

`optimized_graph(exe)` draws the optimized HLO of a PJRT executable (hlogen.runtime.pjrt)
as an `hlogen.drawing.Graph`: one node per HLO instruction (opcode, shape without layout,
source line from XLA's metadata), an edge per operand, and a cluster per instruction that
calls computations (a fusion and its fused computation, a while with its condition and
body, a reduce with its reducer). `xla_dot(exe)` is XLA's own Graphviz rendering.
"""
from __future__ import annotations

import os
import re

from hlogen import drawing
from hlogen.runtime import _jaxlib

# Instruction text: "%name = SHAPE opcode(operands), attributes"
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?(\S+) = (.*?) ([a-z][a-z0-9-]*)\(")
_SOURCE = re.compile(r'source_file="([^"]*)" source_line=(\d+)')
_KIND = re.compile(r"\bkind=k(\w+)")
_LAYOUT = re.compile(r"\{[^{}]*\}")
_ENTRY = re.compile(r"^ENTRY %?([\w.\-]+)", re.M)
# The attributes that call computations, and how a called one is named in a cluster's label.
_ROLES = {"calls": "fused computation", "to_apply": "computation", "condition": "condition",
          "body": "body", "branch_computations": "branch", "true_computation": "true branch",
          "false_computation": "false branch", "select": "select", "scatter": "scatter"}
_CALLS = re.compile(rf"\b({'|'.join(_ROLES)})=(\{{[^}}]*\}}|%?[\w.\-]+)")
_MAX_DEPTH = 16  # computations call computations; XLA's are never this deep


def optimized_graph(exe, title: str | None = None) -> drawing.Graph:
    """The graph of XLA's optimized HLO of `exe`: the entry computation of each module."""
    graph = drawing.Graph(title or f"{exe.computation.name} (XLA {exe.backend}, optimized)")
    for module in exe.hlo_modules():
        computations = {c.name: c for c in module.computations()}
        entry = _ENTRY.search(module.to_string())
        cluster = graph.cluster(f"ENTRY %{entry.group(1)}", kind="function")
        _computation(graph, computations, computations[entry.group(1)], cluster, 0)
    return graph


def _computation(graph, computations, computation, cluster, depth) -> None:
    nodes = {}
    instructions = _in_order(computation.instructions())
    for instruction in instructions:
        text = instruction.to_string()
        name, shape, opcode, label = _parsed(instruction, text)
        source = _SOURCE.search(text)
        calls = [(role, callee.strip(" %")) for role, called in _CALLS.findall(text)
                 for callee in called.strip("{}").split(",") if callee.strip(" %") in computations]
        home = graph.cluster(f"{label} %{name}", cluster,
                             kind="fusion" if opcode == "fusion" else "op") \
            if calls and depth < _MAX_DEPTH else cluster
        nodes[instruction.name] = graph.node(
            label, [f"%{name}", _LAYOUT.sub("", shape),
                    f"{os.path.basename(source.group(1))}:{source.group(2)}" if source else ""],
            home, {"parameter": "parameter", "constant": "constant"}.get(opcode, "op"),
            tooltip=text.strip()[:600])
        if home != cluster:
            for role, callee in calls:
                inner = graph.cluster(f"{_ROLES[role]} %{callee}", home, kind="computation")
                _computation(graph, computations, computations[callee], inner, depth + 1)
    for instruction in instructions:  # operands come in any order: edges once all are known
        for operand in instruction.operands():
            if operand.name in nodes:
                graph.edge(nodes[operand.name], nodes[instruction.name])


def _parsed(instruction, text: str) -> tuple[str, str, str, str]:
    """(name, shape, opcode, label) of an instruction; the label of a fusion names its
    kind ("fusion Loop")."""
    m = _INSTRUCTION.match(text)
    name, shape, opcode = (m.group(1), m.group(2), m.group(3)) if m else \
        (instruction.name, "", str(instruction.opcode))
    kind = _KIND.search(text)
    return name, shape, opcode, f"{opcode} {kind.group(1)}" if opcode == "fusion" and kind else opcode


def instruction_kinds(exe) -> dict:
    """The label of every instruction of `exe`'s optimized HLO, by name ("fusion Loop")."""
    return {instruction.name: _parsed(instruction, instruction.to_string())[3]
            for module in exe.hlo_modules() for c in module.computations()
            for instruction in c.instructions()}


def _in_order(instructions) -> list:
    """Operands before their users (XLA lists a fused computation's root first)."""
    by_name = {i.name: i for i in instructions}
    done, ordered = set(), []
    for start in instructions:
        stack = [(start, False)]
        while stack:
            instruction, expanded = stack.pop()
            if instruction.name in done:
                continue
            if expanded:
                done.add(instruction.name)
                ordered.append(instruction)
                continue
            stack.append((instruction, True))
            stack += [(by_name[o.name], False) for o in reversed(instruction.operands())
                      if o.name in by_name and o.name not in done]
    return ordered


def xla_dot(exe) -> str:
    """XLA's own DOT of the optimized entry computation (the first module's)."""
    return _jaxlib.hlo_dot(exe.hlo_modules()[0])


# -- memory and cost ------------------------------------------------------------------------

# XLA's names of the memory analysis, and what hlogen calls them, in the order printed.
MEMORY_NAMES = {
    "argument_size_in_bytes": "arguments",
    "output_size_in_bytes": "outputs",
    "alias_size_in_bytes": "aliased (outputs in argument buffers)",
    "temp_size_in_bytes": "temporaries",
    "generated_code_size_in_bytes": "generated code",
    "peak_memory_in_bytes": "peak",
}


def memory_analysis(exe) -> dict:
    """XLA's memory analysis of `exe`, in bytes, by the names of MEMORY_NAMES; the host
    side's (host_*) where the device has any."""
    stats = exe.memory_stats()
    found = {words: stats[name] for name, words in MEMORY_NAMES.items() if name in stats}
    for name, words in MEMORY_NAMES.items():
        if stats.get(f"host_{name}"):
            found[f"host {words}"] = stats[f"host_{name}"]
    return found


def byte_size(n: int) -> str:
    """`1536` -> "1536 B (1.5 KiB)"."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n} B ({n / size:.1f} {unit})"
    return f"{n} B"
