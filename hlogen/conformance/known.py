"""Known deviations: differences of a backend from the reference that are understood.

The list is data (`known_deviations.json` in this package; `--known FILE` adds more,
same format): a JSON list of entries, each with
- `backend`: a glob over backend names (cpu, gpu, interpret);
- `op` and/or `element_type` and/or `file`: globs over the ops a module uses (as
  written, e.g. stablehlo.cbrt, chlo.sinh), the element types of their values (hlogen's
  names: bf16, c64, f64, ...), and the file's path; an entry needs at least one;
- `status`: the outcomes it explains (default ["fail"]);
- `when` (optional), what the failure must look like, so that an entry does not hide
  other failures of the same op: "subnormal" (every differing element sits where an
  input, the expected or the actual value is subnormal), "ulp<=N" (no difference
  beyond N units in the last place), "nan" (every difference is a NaN on one side);
  `message` (optional): a regular expression the failure message must contain;
- `reason`: why, in a sentence.
A matching failure is reported as "known", never as a pass. An entry that applies to
modules of a run but explains none of them is reported as stale.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re

from hlogen.errors import InputError

DEFAULT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_deviations.json")
_FIELDS = {"backend", "op", "element_type", "file", "status", "when", "message", "reason"}
_WHEN = re.compile(r"^(subnormal|nan|ulp<=\d+)$")


@dataclasses.dataclass
class Entry:
    backend: str
    reason: str
    source: str              # file:entry number, for messages
    op: str | None = None
    element_type: str | None = None
    file: str | None = None
    status: tuple = ("fail",)
    when: str | None = None
    message: str | None = None
    applied: int = 0         # modules it applied to in this run
    explained: int = 0       # failures it explained

    def applies(self, record: dict) -> bool:
        if not fnmatch.fnmatchcase(record.get("backend", ""), self.backend):
            return False
        if self.op and not any(fnmatch.fnmatchcase(o, self.op) for o in record.get("ops", [])):
            return False
        if self.element_type and not any(fnmatch.fnmatchcase(t, self.element_type)
                                         for t in record.get("types", [])):
            return False
        if self.file and not (fnmatch.fnmatchcase(record["file"], self.file) or
                              fnmatch.fnmatchcase(os.path.basename(record["file"]), self.file)):
            return False
        return True

    def explains(self, record: dict) -> bool:
        if record.get("status") not in self.status:
            return False
        if self.message and not re.search(self.message, record.get("message", "")):
            return False
        if self.when:
            traits = record.get("traits") or {}
            if self.when == "subnormal":
                return bool(traits.get("subnormal_only"))
            if self.when == "nan":
                return bool(traits.get("nan_only"))
            if self.when.startswith("ulp<="):
                return "max_ulp" in traits and traits["max_ulp"] <= int(self.when[5:])
        return True

    def describe(self) -> str:
        what = ", ".join(f"{k}={getattr(self, k)}" for k in ("op", "element_type", "file", "when")
                         if getattr(self, k))
        return f"{self.source}: backend={self.backend}, {what}: {self.reason}"


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
        status = item.get("status", ["fail"])
        status = [status] if isinstance(status, str) else status
        if not isinstance(status, list) or not set(status) <= {"fail", "error", "crash", "timeout", "skipped"}:
            raise InputError(f"{where}: `status` is a list of fail, error, crash, timeout, skipped")
        when = item.get("when")
        if when is not None and not (isinstance(when, str) and _WHEN.match(when)):
            raise InputError(f"{where}: `when` is subnormal, nan or ulp<=N, got {when!r}")
        if item.get("message") is not None:
            try:
                re.compile(item["message"])
            except re.error as e:
                raise InputError(f"{where}: `message` is not a regular expression: {e}") from None
        entries.append(Entry(item["backend"], item["reason"], where, item.get("op"),
                             item.get("element_type"), item.get("file"), tuple(status), when,
                             item.get("message")))
    return entries


def classify(record: dict, entries: list[Entry]) -> None:
    """Marks `record` known when an entry explains it; counts applications for staleness."""
    matched = None
    for entry in entries:
        if not entry.applies(record):
            continue
        entry.applied += 1
        if matched is None and entry.explains(record):
            entry.explained += 1
            matched = entry
    if matched is not None:
        record["known"] = matched.reason
        record["was"] = record["status"]
        record["status"] = "known"


def stale(entries: list[Entry]) -> list[Entry]:
    return [e for e in entries if e.applied and not e.explained]
