"""The one reader of the examples in README.md and the documentation pages (docs/*.md).

A page is named by its path from the repository's root ("README.md",
"docs/reduce.md"). A section is the text under a heading, named by its title without
the #s, up to the next heading of the same or a higher level; `#` lines inside fenced
blocks are not headings. The tests take code and sessions from here, so that every
```console block of a page is run by a test that names it: `console(page, heading)`
with both as string literals (tests/test_docs.py reads the tests for those calls and
fails on a block that none names)."""
from __future__ import annotations

import pathlib
import re
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parent.parent


class Block(NamedTuple):
    language: str
    code: str
    heading: str    # the nearest heading above the block ("" before the first)
    line: int       # where the block starts, 1-based


class _Heading(NamedTuple):
    level: int
    title: str
    line: int


def pages() -> list[str]:
    """README.md and every page of docs/."""
    return ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").rglob("*.md"))]


def text(page: str) -> str:
    return (ROOT / page).read_text()


def _parse(page: str) -> tuple[list[_Heading], list[Block]]:
    headings, blocks = [], []
    fence, heading = None, ""
    for number, line in enumerate(text(page).splitlines(), 1):
        if fence is not None:
            if line.startswith("```"):
                blocks.append(Block(fence[0], "".join(fence[2]), heading, fence[1]))
                fence = None
            else:
                fence[2].append(line + "\n")
        elif line.startswith("```"):
            fence = (line[3:].strip(), number, [])
        elif (match := re.match(r"(#+) (.*)$", line)):
            heading = match.group(2).strip()
            headings.append(_Heading(len(match.group(1)), heading, number))
    assert fence is None, f"{page}: a fenced block from line {fence[1]} is not closed"
    return headings, blocks


def section_lines(page: str, heading: str) -> range:
    """The lines of the section `heading` of `page` (its heading's line included)."""
    headings, _ = _parse(page)
    found = [h for h in headings if h.title == heading]
    assert len(found) == 1, f"{page} has {len(found)} headings {heading!r}"
    start = found[0]
    end = next((h.line for h in headings if h.line > start.line and h.level <= start.level),
               len(text(page).splitlines()) + 1)
    return range(start.line, end)


def section(page: str, heading: str) -> str:
    lines = section_lines(page, heading)
    return "".join(text(page).splitlines(keepends=True)[lines.start - 1:lines.stop - 1])


def blocks(page: str, language: str, heading: str | None = None) -> list[str]:
    """The code of the `language` blocks of `page`, or of its section `heading` (its
    subsections included), in order."""
    _, found = _parse(page)
    lines = section_lines(page, heading) if heading is not None else None
    return [b.code for b in found
            if b.language == language and (lines is None or b.line in lines)]


def all_blocks(page: str) -> list[Block]:
    return _parse(page)[1]


def console(page: str, heading: str) -> str:
    """The one console session right under `heading` of `page` (the block whose nearest
    heading it is)."""
    found = [b.code for b in all_blocks(page) if b.language == "console" and b.heading == heading]
    assert len(found) == 1, f"{page}, {heading!r}: {len(found)} console blocks, not 1"
    return found[0]
