"""Known deviations: differences of a backend from the reference that are understood.

The list is data (`known_deviations.json` in this package; `--known FILE` adds more,
same format): a JSON list of entries, each with
- `backend`: a glob over backend names (cpu, gpu, interpret);
- `op` and/or `element_type` and/or `file`: globs over the ops a module uses (as
  written, e.g. stablehlo.cbrt, chlo.sinh), the element types of their values (hlogen's
  names: bf16, c64, f64, ...), and the file's path or name (`file` may be a list: the
  files the deviation shows in); an entry needs at least one;
- `status`: the outcomes it explains (default ["fail"]);
- `when` (optional), what the failure must look like, so that an entry does not hide
  other failures of the same op: "subnormal" (every differing element sits where an
  input, the expected or the actual value is subnormal), "ulp<=N" (no difference
  beyond N units in the last place), "nan" (every difference is a NaN on one side),
  "reassociation" or "fft" (every difference within that bound of
  hlogen.conformance.bounds for the op that computes the value: a reduction's length
  and the magnitudes it sums, an FFT's length and its input's norm);
  `message` (optional): a regular expression the failure message must contain;
- `reason`: why, in a sentence; `issue` (optional): the upstream issue that reports it
  (owner/repo#N).
A matching failure is reported as "known", never as a pass. An entry with `file` that
explains none of the modules of its files in a run that ran some is reported as stale;
an entry without `file` describes a backend wherever it shows (its `when` keeps it
precise) and is never stale.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re

from hlogen.differential.allowed import BOUNDS
from hlogen.errors import InputError

DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_deviations.json")
_FIELDS = {"backend", "op", "element_type", "file", "status", "when", "message", "reason",
           "issue"}
_ISSUE = re.compile(r"^[\w.-]+/[\w.-]+#\d+$")
_WHEN = re.compile(rf"^(subnormal|nan|{'|'.join(BOUNDS)}|ulp<=\d+)$")


@dataclasses.dataclass
class Entry:
    backend: str
    reason: str
    source: str              # file:entry number, for messages
    op: str | None = None
    element_type: str | None = None
    file: tuple | None = None  # globs
    status: tuple = ("fail",)
    when: str | None = None
    message: str | None = None
    issue: str | None = None  # upstream: owner/repo#N
    covered: int = 0         # modules of its files run on its backend in this run
    explained: int = 0       # failures it explained
    explained_files: list = dataclasses.field(default_factory=list)

    def about(self, record: dict) -> bool:
        """The record is of this entry's backend and of one of its files."""
        name = record["file"]
        return (self.file is not None
                and fnmatch.fnmatchcase(record.get("backend", ""), self.backend)
                and any(fnmatch.fnmatchcase(name, g) or fnmatch.fnmatchcase(os.path.basename(name), g)
                        for g in self.file))

    def applies(self, record: dict) -> bool:
        if not fnmatch.fnmatchcase(record.get("backend", ""), self.backend):
            return False
        if self.op and not any(fnmatch.fnmatchcase(o, self.op) for o in record.get("ops", [])):
            return False
        if self.element_type and not any(fnmatch.fnmatchcase(t, self.element_type)
                                         for t in record.get("types", [])):
            return False
        return self.file is None or self.about(record)

    def explains(self, record: dict) -> bool:
        if record.get("status") not in self.status:
            return False
        if self.message and not re.search(self.message, record.get("message", "")):
            return False
        if self.when:
            traits = record.get("traits") or {}
            if self.when in ("subnormal", "nan", *BOUNDS):
                return bool(traits.get(f"{self.when}_only"))
            if self.when.startswith("ulp<="):
                return "max_ulp" in traits and traits["max_ulp"] <= int(self.when[5:])
        return True

    def describe(self) -> str:
        what = ", ".join(f"{k}={', '.join(v) if isinstance(v, tuple) else v}"
                         for k in ("op", "element_type", "file", "when") if (v := getattr(self, k)))
        upstream = f" ({self.issue})" if self.issue else ""
        return f"{self.source}: backend={self.backend}, {what}: {self.reason}{upstream}"


def load(path: str) -> list[Entry]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as e:
        raise InputError(f"{path}: cannot read the known-deviation list: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{path}:{e.lineno}:{e.colno}: not JSON: {e.msg}") from None
    if not isinstance(data, list):
        raise InputError(f"{path}: a known-deviation list is a JSON list of entries")
    entries = []
    for i, item in enumerate(data):
        where = f"{path}: entry {i + 1}"
        if not isinstance(item, dict):
            raise InputError(f"{where}: an entry is a JSON object")
        unknown = set(item) - _FIELDS
        if unknown:
            raise InputError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
                             f"fields are {', '.join(sorted(_FIELDS))}")
        for required in ("backend", "reason"):
            if not isinstance(item.get(required), str) or not item[required]:
                raise InputError(f"{where}: `{required}` (a string) is required")
        if not any(item.get(k) for k in ("op", "element_type", "file")):
            raise InputError(f"{where}: give at least one of op, element_type, file")
        file = item.get("file")
        file = [file] if isinstance(file, str) else file
        if file is not None and not (isinstance(file, list) and all(isinstance(g, str) and g
                                                                    for g in file)):
            raise InputError(f"{where}: `file` is a glob or a list of globs")
        status = item.get("status", ["fail"])
        status = [status] if isinstance(status, str) else status
        if not isinstance(status, list) or not set(status) <= {"fail", "error", "crash", "timeout", "skipped"}:
            raise InputError(f"{where}: `status` is a list of fail, error, crash, timeout, skipped")
        when = item.get("when")
        if when is not None and not (isinstance(when, str) and _WHEN.match(when)):
            raise InputError(f"{where}: `when` is subnormal, nan, {', '.join(BOUNDS)} or ulp<=N, "
                             f"got {when!r}")
        if item.get("message") is not None:
            try:
                re.compile(item["message"])
            except re.error as e:
                raise InputError(f"{where}: `message` is not a regular expression: {e}") from None
        issue = item.get("issue")
        if issue is not None and not (isinstance(issue, str) and _ISSUE.match(issue)):
            raise InputError(f"{where}: `issue` is an upstream issue, owner/repo#N, got {issue!r}")
        entries.append(Entry(item["backend"], item["reason"], where, item.get("op"),
                             item.get("element_type"), tuple(file) if file else None,
                             tuple(status), when, item.get("message"), issue))
    return entries


def classify(record: dict, entries: list[Entry]) -> None:
    """Marks `record` (any outcome) known when an entry explains it; counts the modules
    of each entry's files, for staleness."""
    matched = None
    for entry in entries:
        entry.covered += entry.about(record)
        if matched is None and entry.applies(record) and entry.explains(record):
            matched = entry
    if matched is not None:
        matched.explained += 1
        if record["file"] not in matched.explained_files:
            matched.explained_files.append(record["file"])
        record["known"] = matched.reason
        record["was"] = record["status"]
        record["status"] = "known"


def stale(entries: list[Entry]) -> list[Entry]:
    """Entries whose files this run ran, none of them explained."""
    return [e for e in entries if e.covered and not e.explained]
