"""`hlogen check`: conformance files -> tasks -> workers -> judged records -> reports."""
from __future__ import annotations

import copy
import dataclasses
import os
import time

from hlogen import backends as declared
from hlogen import types as T
from hlogen.conformance import files, known, pool
from hlogen.conformance.sample import element_types_in, ops_in
from hlogen.errors import ExecutionError, InputError

# Failing statuses: they make the run fail (exit 1).
FAILING = ("fail", "error", "crash", "timeout")
# ran: the module checks nothing and ran without error (StableHLO's runner passes it)
STATUSES = ("pass", "ran", "fail", "error", "crash", "timeout", "known", "skipped", "disabled")


def identity(backend: str) -> dict | None:
    """A plugin's identity (which library was judged); None for the others and for the
    round-trip records, which no backend ran."""
    return None if backend == files.ROUNDTRIP else declared.get(backend).identity


@dataclasses.dataclass
class Run:
    records: list
    backends: list
    seconds: float
    jobs: int
    entries: list            # known.Entry, with their counts

    @property
    def failed(self) -> list:
        return [r for r in self.records if r["status"] in FAILING]

    @property
    def stale(self) -> list:
        return known.stale(self.entries)


def tasks_for(paths, backends: list) -> tuple[list, dict]:
    """One task per module and backend; and each file's Plan."""
    tasks, plans = [], {}
    for path in files.discover(paths):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as e:
            raise InputError(f"{path}: cannot read: {e.strerror}") from None
        plan = plans[path] = files.plan_of(text)
        count = len(files.modules_of(path, text, plan))
        run_on = backends if (plan.interpret or plan.disabled) else backends[:1]  # round trip once
        for index in range(count):
            for backend in run_on:
                tasks.append({"file": path, "module": index, "backend": backend})
            if plan.refine:  # and each backend runs it refined (runner.refined_case)
                tasks += [{"file": path, "module": index, "backend": backend, "refined": True}
                          for backend in backends]
    return tasks, plans


def run(paths, backends, jobs: int | None = None, timeout: float = 120.0, known_lists=(),
        use_default_known: bool = True, on_record=None, explain: bool = False,
        batch: int = 8, xla_options=()) -> Run:
    """Runs every module of `paths` on each of `backends` (Backends, or names hlogen.backends
    declares, each looked up here once); PJRT modules are compiled `batch` at a time (see
    runner.run_batch), with `xla_options` (XLA's options, checked by hlogen.runtime.xla_options)."""
    jobs = jobs or os.cpu_count() or 1
    entries = known.load(known.DEFAULT) if use_default_known else []
    for path in known_lists:
        entries += known.load(path)
    chosen = {b.name: b for b in map(declared.get, backends)}
    tasks, plans = tasks_for(paths, list(chosen))  # (names: JSON carries tasks to the workers)
    options = [list(o) for o in xla_options]
    for t in tasks:
        compiled = chosen[t["backend"]].compiles
        if explain:
            t["explain"] = compiled
        if options and compiled:
            t["xla_options"] = options
    records: list = []
    start = time.perf_counter()

    def finish(record):
        finish_record(record, plans.get(record["file"]), entries)
        records.append(record)
        if on_record is not None:
            on_record(record, len(records), len(tasks))

    try:
        pool.run_tasks(tasks, jobs, timeout, finish, batch=batch)
    except RuntimeError as e:  # a worker could not start at all
        raise ExecutionError(str(e)) from None
    order = {(t["file"], t["module"], t["backend"]): i for i, t in enumerate(tasks)}
    records.sort(key=lambda r: order.get((r["file"], r["module"], r["backend"]), 1 << 30))
    _beside_jaxlib_cpu(records, plans, entries, jobs, timeout, batch, options)
    return Run(records, list(chosen), time.perf_counter() - start, jobs, entries)


def _beside_jaxlib_cpu(records: list, plans: dict, entries: list, jobs: int, timeout: float,
                       batch: int, xla_options: list) -> None:
    """Each failure of a PJRT plugin says whether jaxlib's own cpu fails the module too
    (then a known XLA deviation with the same outcome is known on the plugin as well: a
    plugin that crashes where cpu refuses still crashes) or only the plugin does.
    cpu's records come from this run, or from running cpu on those modules now, with the
    run's XLA options (judged against a copy of the known-deviation list: they are not
    this run's)."""
    failures = [r for r in records
                if r["status"] in FAILING and identity(r["backend"])]
    if not failures:
        return
    cpu = {(r["file"], r["module"]): r for r in records if r["backend"] == declared.CPU.name}
    missing = sorted({(r["file"], r["module"]) for r in failures} - set(cpu))
    if missing:
        aside = copy.deepcopy(entries)

        def keep(record):
            finish_record(record, plans.get(record["file"]), aside)
            cpu[(record["file"], record["module"])] = record

        pool.run_tasks([{"file": f, "module": m, "backend": declared.CPU.name,
                         "xla_options": xla_options} for f, m in missing],
                       jobs, timeout, keep, batch=batch)
    for r in failures:
        twin = cpu.get((r["file"], r["module"]))
        if twin is None:
            continue
        if twin["status"] == "known" and twin["was"] == r["status"]:
            r["was"], r["status"] = r["status"], "known"
            r["known"] = f"as on jaxlib's cpu: {twin['known']}"
        elif twin["status"] == "known":  # another outcome (a crash where cpu refuses): its own
            r["message"] += (f" (only on {r['backend']}: jaxlib's cpu gives {twin['was']}, a "
                             f"known deviation there: {twin['known']})")
        elif twin["status"] in FAILING:
            r["message"] += f" (jaxlib's cpu fails it too: {twin['status']})"
        else:
            r["message"] += f" (only on {r['backend']}: jaxlib's cpu gives {twin['status']})"


def finish_record(record: dict, plan, entries: list) -> None:
    if record.get("status") in ("crash", "timeout") and not record.get("ops"):
        _ops_from_text(record)  # the worker died before it could say
    record.setdefault("ops", [])
    record.setdefault("types", [])
    record.setdefault("op", record["ops"][0] if record["ops"] else "(none)")
    record.setdefault("message", "")
    known.classify(record, entries)
    if plan is not None and plan.disabled and not plan.interpret:
        # the outcome here stays in the message, explained by a known entry or not
        outcome = record["status"] + (f" {record['was']}" if "known" in record else "")
        record["was"] = record["status"]
        record["message"] = (f"RUN-DISABLED upstream ({plan.disabled}); here: {outcome}"
                             + (f": {record['message']}" if record["message"] else ""))
        record["status"] = "disabled"


def _ops_from_text(record: dict) -> None:
    """Ops and element types of a module, read from its text (for known-deviation
    patterns and the per-op summary)."""
    try:
        with open(record["file"], encoding="utf-8", errors="replace") as f:
            text = f.read()
        plan = files.plan_of(text)
        text = files.modules_of(record["file"], text, plan)[record["module"]].text
    except (OSError, IndexError, KeyError):
        return
    ops = ops_in(text)
    types = []
    for name in element_types_in(text):
        try:
            types.append(T.element_type_of_mlir(name).name)
        except Exception:  # a type outside hlogen's table: its MLIR name
            types.append(name)
    record["ops"], record["types"] = ops, types
    record["op"] = ops[0] if ops else "(none)"

