"""Reports of a conformance run: the terminal summary, JUnit XML, JSON lines."""
from __future__ import annotations

import collections
import json
import os
import statistics
import xml.etree.ElementTree as ET

from hlogen.conformance.check import FAILING, STATUSES, Run, identity


def _name(record: dict) -> str:
    return f"{record['file']}#{record['module']}" if record.get("module") else record["file"]


def summary(run: Run, per_op: bool = True, max_listed: int = 50) -> str:
    lines = []
    by_backend: dict = collections.defaultdict(list)
    for r in run.records:
        by_backend[r["backend"]].append(r)
    lines.append(f"{len(run.records)} module runs in {run.seconds:.1f} s with {run.jobs} workers")
    for backend, records in by_backend.items():
        counts = collections.Counter(r["status"] for r in records)
        judged = counts["pass"] + sum(counts[s] for s in FAILING) + counts["known"]
        rate = f"{100 * counts['pass'] / judged:.2f}% pass of {judged} judged" if judged else "none judged"
        parts = ", ".join(f"{counts[s]} {s}" for s in STATUSES if counts[s])
        times = [r["seconds"] for r in records if "seconds" in r]
        median = f", median {1e3 * statistics.median(times):.1f} ms" if times else ""
        aside = (counts["skipped"] + counts["known"]) / len(records)
        lines.append(f"  {backend}: {parts} ({rate}{median}; {100 * aside:.2f}% skipped or known)")
        plugin = identity(backend)  # a plugin's: which one was judged
        if plugin:
            lines.append(f"    {plugin['library']} (version {plugin['version'] or '?'}, "
                         f"platform {plugin['platform']} {plugin['platform_version']}, "
                         f"PJRT C API {plugin['pjrt_c_api']}); its failures say whether "
                         f"jaxlib's cpu fails them too")
        per_file: dict = collections.defaultdict(set)
        for r in records:
            per_file[r["file"]].add(r["status"])
        judged_files = [s for s in per_file.values() if s & {"pass", "known", *FAILING}]
        passing = sum(1 for s in judged_files if s <= {"pass", "ran", "skipped"})
        if judged_files:
            lines.append(f"    files: {passing} of {len(judged_files)} judged files pass every module "
                         f"({100 * passing / len(judged_files):.2f}%), {len(per_file)} files in all")
    if per_op:
        ops: dict = collections.defaultdict(collections.Counter)
        for r in run.records:
            ops[(r["backend"], r.get("op", "(none)"))][r["status"]] += 1
        troubled = {k: c for k, c in ops.items() if set(c) - {"pass"}}
        if troubled:
            lines.append("by op (those not all passing):")
            for (backend, op), c in sorted(troubled.items()):
                lines.append(f"  {backend:9} {op:40} " + ", ".join(f"{c[s]} {s}" for s in STATUSES if c[s]))
    if per_op or not any(r["status"] not in ("skipped", "disabled") for r in run.records):
        lines += _why_not_judged(run.records)  # on its own, "N skipped" does not say why
    for entry in run.entries if per_op else ():
        if entry.explained:
            files = ", ".join(os.path.basename(f) for f in entry.explained_files)
            modules = f"{entry.explained} module{'s' * (entry.explained != 1)}"
            lines.append(f"known on {entry.backend}: {modules} of {files}: {entry.reason}")
    listed = [r for r in run.records if r["status"] in FAILING]
    if listed and not max_listed:
        lines.append(f"failures: {len(listed)} (not listed here: see --json or --junit)")
    elif listed:
        lines.append("failures:")
        for r in listed[:max_listed]:
            lines.append(f"  {r['status'].upper():8} {r['backend']:9} {_name(r)}: {r['message'][:400]}")
        if len(listed) > max_listed:
            lines.append(f"  ... and {len(listed) - max_listed} more (see --json or --junit)")
    for entry in run.stale:
        lines.append(f"stale known deviation ({entry.covered} modules of its files ran, none "
                     f"explained): {entry.describe()}")
    return "\n".join(lines)


def _why_not_judged(records: list, most: int = 10) -> list:
    """Skipped modules by reason (the module's own file left out of the reason), the
    most frequent first."""
    reasons = collections.Counter()
    for r in records:
        if r["status"] == "skipped":
            message = r.get("message", "").replace(f"{r['file']}: ", "").split("\n")[0]
            reasons[(r["backend"], message[:300])] += 1
    if not reasons:
        return []
    lines = ["skipped, by reason:"]
    for (backend, message), n in reasons.most_common(most):
        lines.append(f"  {n:5} {backend:9} {message}")
    if len(reasons) > most:
        lines.append(f"  ... and {len(reasons) - most} other reasons (see --json)")
    return lines


def json_lines(run: Run) -> bytes:
    """One JSON record per module run, a line each."""
    return "".join(json.dumps(r, default=str) + "\n" for r in run.records).encode()


def junit(run: Run) -> bytes:
    """JUnit XML: one testsuite per backend, one testcase per module: failures with their
    message; known deviations, skipped and disabled modules as skipped with the reason."""
    root = ET.Element("testsuites", name="hlogen check", time=f"{run.seconds:.3f}")
    by_backend: dict = collections.defaultdict(list)
    for r in run.records:
        by_backend[r["backend"]].append(r)
    for backend, records in by_backend.items():
        counts = collections.Counter(r["status"] for r in records)
        suite = ET.SubElement(root, "testsuite", name=f"conformance.{backend}",
                              tests=str(len(records)),
                              failures=str(counts["fail"]),
                              errors=str(counts["error"] + counts["crash"] + counts["timeout"]),
                              skipped=str(counts["known"] + counts["skipped"] + counts["disabled"]),
                              time=f"{sum(r.get('seconds', 0) for r in records):.3f}")
        for r in records:
            case = ET.SubElement(suite, "testcase", classname=f"conformance.{backend}",
                                 name=_name(r), time=f"{r.get('seconds', 0):.3f}",
                                 file=r["file"], line=str(r.get("line", 1)))
            status, message = r["status"], r.get("message", "")
            if status == "fail":
                ET.SubElement(case, "failure", type="mismatch", message=message[:2000]).text = message
            elif status in ("error", "crash", "timeout"):
                ET.SubElement(case, "error", type=status, message=message[:2000]).text = message
            elif status == "known":
                ET.SubElement(case, "skipped", message=f"known deviation: {r.get('known')}").text = message
            elif status in ("skipped", "disabled"):
                ET.SubElement(case, "skipped", message=message[:2000])
            elif status == "ran":
                ET.SubElement(case, "system-out").text = message
    stale = run.stale
    if stale:
        out = ET.SubElement(root, "system-out")
        out.text = "\n".join(f"stale known deviation: {e.describe()}" for e in stale)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
