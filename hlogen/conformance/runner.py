"""Running one module of a conformance file on one backend, in the calling process.

`run_one` is what a worker (hlogen.conformance.worker) does per task; it returns a
plain dict (it crosses a pipe as JSON). Statuses: pass, fail (a check failed), ran (it
checks nothing and ran without error), error (the module cannot be read, compiled or
run), skipped (the backend or this runner cannot run it, with the reason); the parent
adds crash, timeout, known and disabled. Whatever goes wrong with one module is that
module's record: a batch's other modules and the worker's next tasks never see it.
"""
from __future__ import annotations

import time

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _stablehlo

from hlogen import backends, builder, differential, mlir, passes, runtime
from hlogen import types as T
from hlogen.conformance import files, judge
from hlogen.differential.allowed import BOUNDS, within
from hlogen.conformance.module import Case, load_case, load_quant_dialect
from hlogen.differential.near import Tolerance, subnormal
from hlogen.differential.origin import find_origin
from hlogen.loading import parse_module
from hlogen.errors import HlogenError, InputError, ShapeError, UnsupportedError


def read_modules(path: str) -> tuple[files.Plan, list[files.Module]]:
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    plan = files.plan_of(text)
    return plan, files.modules_of(path, text, plan)


def execute(case: Case, backend: backends.Backend) -> list:
    """The module's results (actual values, then expected values) as numpy arrays."""
    comp, replicated = case.computation, case.replicated
    if comp is None:
        return []
    if replicated is not None:
        exe = runtime.compile(comp, backend=backend, num_replicas=replicated.count)
        outputs = [a for out in exe.run_replicated(case.arguments) for a in _flat(out)]
        return [outputs[i] for i in replicated.actual] + replicated.expected
    return _flat(runtime.compile(comp, backend=backend)(*case.arguments))


def _flat(out) -> list:
    return [np.asarray(a) for a in (out if isinstance(out, tuple) else (out,))]


def declared(name: str, xla_options=()) -> backends.Backend:
    """The backend a task names, under the task's XLA options (`hlogen check --xla-flag`:
    checked (name, value) pairs)."""
    backend = backends.get(name)
    return backend.with_options(dict(map(tuple, xla_options))) if xla_options else backend


def run_one(path: str, index: int, backend: str, explain: bool = False, xla_options=(),
            refined: bool = False) -> dict:
    """Runs module `index` of `path` on `backend` (compiled with `xla_options`; `refined`:
    a round-trip-only module with dynamic dimensions, refined: `refined_case`); the
    result record."""
    start = time.perf_counter()
    record = _new_record(path, index, backend)
    with _recording(record, start):
        on = declared(backend, xla_options)  # the task's name, looked up once
        case = _load(path, index, on, record, refined)
        if case is not None:
            _judge(case, execute(case, on), record, on, explain)
    return record


def run_batch(items: list, explain: bool = False) -> list:
    """Runs PJRT modules (dicts: file, module, backend, xla_options) compiled together as one
    executable: XLA's compile time is mostly fixed cost (one op or ten independent ones
    compile in about the same time), so a batch pays it once. Each module's values stay
    its own (separate parameters and results). Modules that cannot join a batch (extra
    functions) or a batch that fails to compile or run are run one by one."""
    records, cases = [], []
    options = items[0].get("xla_options", ()) if items else ()  # (one check run: the same)
    resolved: dict = {}  # each backend name looked up once
    for item in items:
        start = time.perf_counter()
        record = _new_record(item["file"], item["module"], item["backend"])
        case = None
        with _recording(record, start):
            if item["backend"] not in resolved:
                resolved[item["backend"]] = declared(item["backend"], options)
            case = _load(item["file"], item["module"], resolved[item["backend"]], record,
                         item.get("refined", False))
        records.append(record)
        if case is not None:
            cases.append((record, case))
    by_backend: dict = {}
    for record, case in cases:
        joinable = (case.computation is not None and case.replicated is None
                    and len(list(case.computation.module.body.operations)) == 1)
        by_backend.setdefault((record["backend"], joinable), []).append((record, case))
    for (name, joinable), group in by_backend.items():
        backend = resolved[name]
        outputs, share = None, 0.0
        if joinable and len(group) > 1:
            start = time.perf_counter()
            try:
                outputs = _run_joined([c for _, c in group], backend)
            except Exception:  # any failure: one by one, each with its own error
                outputs = None
            share = (time.perf_counter() - start) / len(group)
        for k, (record, case) in enumerate(group):
            spent = record["seconds"] + share
            with _recording(record, time.perf_counter() - spent):
                results = outputs[k] if outputs is not None else execute(case, backend)
                _judge(case, results, record, backend, explain)
    return records


def _run_joined(cases: list, backend: backends.Backend) -> list:
    """One computation holding every case's main side by side; the outputs per case."""
    b = builder.Builder("conformance_batch")
    results, arguments = [], []
    for i, case in enumerate(cases):
        comp = case.computation
        params = [b.parameter(s, f"m{i}_{k}") for k, s in enumerate(comp.parameter_shapes)]
        results += builder.apply(b, "conformance batch", "a case's main", comp, params)
        arguments += case.arguments
    joined = b.build(*results)
    out = _flat(runtime.compile(joined, backend=backend)(*arguments))
    per_case, at = [], 0
    for case in cases:
        n = len(case.computation.result_shapes)
        per_case.append(out[at:at + n])
        at += n
    return per_case


def _new_record(path, index, backend) -> dict:
    return {"file": path, "module": index, "backend": backend, "line": 1, "op": "(none)",
            "ops": [], "types": []}


class _recording:
    """Turns errors into the record's status (an error other than hlogen's is the
    runner's, reported as such for this module alone); adds the seconds spent."""

    def __init__(self, record: dict, start: float):
        self.record, self.start = record, start

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        record = self.record
        record["seconds"] = round(time.perf_counter() - self.start, 6)
        if error is None or not isinstance(error, Exception):
            return False
        if not isinstance(error, HlogenError):
            record.update(status="error", message=f"runner error: {type(error).__name__}: {error}")
        elif isinstance(error, UnsupportedError):
            record.update(status="skipped", message=str(error))
        elif "no XLA counterpart" in str(error):  # an element type outside hlogen's table
            record.update(status="skipped", message=f"{error} (hlogen's element types are XLA's)")
        else:
            record.update(status="error", message=str(error))
        return True


def _load(path: str, index: int, backend: backends.Backend, record: dict,
          refined: bool = False) -> Case | None:
    """The module made runnable, or None when the record is already decided (skipped,
    round trip)."""
    plan, modules = read_modules(path)
    module = modules[index]
    record["line"] = module.line
    if refined:
        return refined_case(module, path, record)
    if not plan.interpret and not plan.disabled:
        if plan.roundtrip:
            record["backend"] = files.ROUNDTRIP
            record.update(roundtrip(module.text, path))
        else:
            record.update(status="skipped", message="no RUN line runs or serializes it")
        return None
    if plan.filecheck:
        record.update(status="skipped", message="its RUN line checks the interpreter's "
                                                "printed output with FileCheck")
        return None
    feature = files.interpreter_only(module.text)
    if feature:
        record.update(status="skipped", message=f"uses {feature}, which only the "
                                                f"interpreter's own test runner has")
        return None
    # blank lines first, so that MLIR's locations are lines of the file
    case = load_case("\n" * (module.line - 1) + module.text, path,
                     lift_constants=backend.compiles)
    record.update(op=case.primary_op, ops=case.ops, types=case.element_types)
    return case


# The size refined_case gives every dynamic dimension and dimension variable.
DYNAMIC_SIZE = 2


def refined_case(module: files.Module, path: str, record: dict) -> Case | None:
    """A round-trip-only module with dynamic dimensions (StableHLO's `*_dynamic.mlir`:
    jax's leading i64 dimension variables and `tensor<?x20x20xf32>` parameters) refined
    with each of them DYNAMIC_SIZE (hlogen.passes.refine), with random inputs from seed 0;
    it checks nothing (no expected values): it runs. None, with the record skipped as
    round-tripped only, where refinement leaves it dynamic."""
    case = load_case("\n" * (module.line - 1) + module.text, path, lift_constants=False)
    record.update(op=case.primary_op, ops=case.ops, types=case.element_types)
    main = case.computation.main
    chosen = []
    for arg in main.regions[0].blocks[0].arguments:
        t = ir.RankedTensorType(arg.type)
        et = T.element_type_of_mlir(str(t.element_type))
        dims = [DYNAMIC_SIZE if d == mlir.DYNAMIC else d for d in t.shape]
        chosen.append(np.full(dims, DYNAMIC_SIZE if et.is_integer else 0, et.dtype))
    try:
        refined = passes.refine(case.computation, chosen)
    except ShapeError as e:
        record.update(status="skipped", message=f"round-tripped only: {e}")
        return None
    record["refined"] = f"each dynamic dimension and dimension variable {DYNAMIC_SIZE}"
    arguments = differential.random_inputs(refined, seed=0)
    for i, a in enumerate(chosen):  # the dimension variables keep their values
        if a.ndim == 0 and np.issubdtype(a.dtype, np.integer):
            arguments[i] = a
    return Case(refined, arguments, [], case.ops, case.element_types)


def _judge(case: Case, results: list, record: dict, backend: backends.Backend,
           explain: bool) -> None:
    record.update(judge_results(case, results))
    if explain and record["status"] == "fail":
        record["explain"] = explain_case(case, backend)


def explain_case(case: Case, backend: backends.Backend) -> str:
    """Where the difference between `backend` and the interpreter is born
    (hlogen.differential.origin.find_origin), in words."""
    if case.replicated is not None:
        return "cannot localise: find_origin follows one replica, this module runs several"
    try:
        found = find_origin(case.computation, case.arguments, backend, backends.INTERPRET.name,
                            Tolerance(ulp=3))
    except HlogenError as e:
        return f"cannot localise: {e}"
    if found is None:
        return (f"{backend} and the interpreter agree at every op (within 3 ULP): the "
                f"expected values differ from both")
    return found.text()


def judge_results(case: Case, results: list) -> dict:
    n = len(case.checks)
    if n == 0:
        what = "holds no function" if case.computation is None else "checks nothing"
        return {"status": "ran", "message": f"ran without error; the module {what} "
                                            f"(StableHLO's runner passes such a module)"}
    failures = []
    traits = {"max_ulp": 0, "subnormal_only": True, "nan_only": True,
              **{f"{name}_only": True for name in BOUNDS}}
    for k, check in enumerate(case.checks):
        got, want = results[k], results[n + k]
        verdict = judge.judge(check.rule, got, want)
        if verdict.ok:
            continue
        failures.append(f"check {k + 1} of {n} (@check.{check.call}): {judge.describe(verdict)}")
        traits["max_ulp"] = max(traits["max_ulp"], _ulp_of(verdict, got))
        if verdict.mask is not None:
            traits["subnormal_only"] &= _explained_by_subnormals(verdict.mask, got, want,
                                                                 case.arguments)
            traits["nan_only"] &= _nan_on_one_side(verdict.mask, got, want)
            for name in BOUNDS:
                traits[f"{name}_only"] &= within(name, *_computed(case), k, verdict.mask, got, want)
        else:
            traits.update({key: False for key in traits if key.endswith("_only")})
    if not failures:
        return {"status": "pass", "message": ""}
    return {"status": "fail", "message": "; ".join(failures), "traits": traits}


def _ulp_of(verdict, got) -> int:
    """A failed check's largest distance in ULP; as far as can be where ULPs measure
    nothing (integers, predicates, results of another shape or type)."""
    measured = verdict.problem is None and \
        T.element_type(np.asarray(got).dtype).kind in (T.FLOAT, T.COMPLEX)
    return verdict.max_ulp if measured else 2 ** 62


def _explained_by_subnormals(mask, got, want, arguments) -> bool:
    """Every mismatch sits where a same-shaped input, the expected or the actual value is
    subnormal: what flushing subnormals to zero (XLA CPU) changes."""
    covered = subnormal(np.asarray(want)) | subnormal(np.asarray(got))
    for a in arguments:
        if a.shape == mask.shape:
            covered |= subnormal(a)
    return bool(np.all(covered[mask]))


def _nan_on_one_side(mask, got, want) -> bool:
    def isnan(a):
        a = np.asarray(a)
        if T.element_type(a.dtype).kind not in (T.FLOAT, T.COMPLEX):
            return np.zeros(a.shape, bool)
        return np.isnan(a.astype(np.complex128 if np.iscomplexobj(a) else np.float64))
    return bool(np.all((isnan(got) ^ isnan(want))[mask]))


def roundtrip(text: str, where: str) -> dict:
    """Serializes to a portable artifact and back; the same module text is a pass."""
    if "!quant." in text:
        load_quant_dialect()
    module = parse_module(text.encode(), where)
    if any(name.startswith("chlo.") for name in mlir.op_names(module)):
        mlir.run_pipeline(module, "builtin.module(func.func(chlo-legalize-to-stablehlo))")
    before = module.operation.get_asm()
    try:
        data = _stablehlo.serialize_portable_artifact_str(before, _stablehlo.get_current_version())
        after = _stablehlo.deserialize_portable_artifact(mlir.context(), data).operation.get_asm()
    except Exception as e:
        return {"status": "fail", "message": f"serialization round trip failed: {e}"}
    if after != before:
        return {"status": "fail", "message": "the module read back differs from the module written"}
    return {"status": "pass", "message": "serialization round trip"}


def _computed(case) -> tuple:
    """(the computation, its arguments) that a bound reads a result of: none for a case
    run on several replicas (its results are not main's)."""
    return (None, []) if case.replicated is not None else (case.computation, case.arguments)
