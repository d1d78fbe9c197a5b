"""A stratified sample of conformance files: every op, and every element type of each
op, at least once.

Files are grouped by what they test, read from their text (the ops they use and the
element types on those ops' lines, not the files' names): each stratum (an op, or an
op with an element type) that appears in some file is covered by one chosen file,
chosen to keep the sample small (a greedy set cover, smaller files first among
equals), so a sample run is fast and still touches every op of the set.
"""
from __future__ import annotations

import os
import re

from hlogen.conformance import files

_OP = re.compile(r"\b((?:stablehlo|chlo)\.[a-z_]+)\b")
_TYPE = re.compile(r"tensor<(?:[0-9?]+x)*([a-z][A-Za-z0-9]*)")
_NOT_TESTED = {"stablehlo.constant", "stablehlo.custom_call", "stablehlo.return"}


def ops_in(text: str) -> list:
    """The ops `text` tests, in order of appearance, each once."""
    return [m for m in dict.fromkeys(_OP.findall(text)) if m not in _NOT_TESTED]


def element_types_in(text: str) -> list:
    """The MLIR names of the tensors' element types in `text`, in order, each once."""
    return list(dict.fromkeys(_TYPE.findall(text)))


def strata_of(text: str) -> set:
    """The ops of `text`, and (op, element type) for the types on each op's line."""
    strata: set = set()
    for line in text.splitlines():
        ops = ops_in(line)
        if not ops:
            continue
        types = set(_TYPE.findall(line))
        for op in ops:
            strata.add(op)
            strata.update((op, t) for t in types)
    return strata


def stratified(paths) -> list[str]:
    """Files of `paths` (files or directories) such that every stratum of any of them
    (see strata_of) is a stratum of at least one chosen file."""
    candidates = []
    for path in files.discover(paths):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        plan = files.plan_of(text)
        if not plan.interpret:  # disabled and round-trip-only files judge no backend
            continue
        candidates.append((path, strata_of(text), os.path.getsize(path)))
    uncovered = set().union(*(ops for _, ops, _ in candidates)) if candidates else set()
    chosen = []
    # deterministic: most new ops first, then the smaller file, then the path
    while uncovered:
        path, ops, _ = max(candidates, key=lambda c: (len(c[1] & uncovered), -c[2], c[0]))
        if not ops & uncovered:
            break
        chosen.append(path)
        uncovered -= ops
    return sorted(chosen)
