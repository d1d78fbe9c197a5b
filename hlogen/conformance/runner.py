"""Running one module of a conformance file on one backend, in the calling process.

`run_one` is what a worker (hlogen.conformance.worker) does per task; it returns a
plain dict (it crosses a pipe as JSON). Statuses: pass, fail (a check failed), error
(the module cannot be read, compiled or run), skipped (the backend or this runner
cannot run it, with the reason); the parent adds crash, timeout, known and disabled.
"""
from __future__ import annotations

import time

import numpy as np

import hlogen as hg
from hlogen import types as T
from hlogen.conformance import files, judge
from hlogen.conformance.module import Case, load_case
from hlogen.errors import ExecutionError, HlogenError, InputError, UnsupportedError

BACKENDS = ("interpret", "cpu", "gpu")


def read_modules(path: str) -> tuple[files.Plan, list[files.Module]]:
    try:
        with open(path, encoding="utf-8", errors="strict") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from None
    plan = files.plan_of(text)
    return plan, files.modules_of(path, text, plan)


def execute(case: Case, backend: str) -> list:
    """The module's results (actual values, then expected values) as numpy arrays."""
    comp = case.computation
    if backend == "interpret":
        out = hg.interpret(comp, *case.arguments)
    else:
        out = hg.compile(comp, backend=backend)(*case.arguments)
    out = out if isinstance(out, tuple) else (out,)
    return [np.asarray(a) for a in out]


def run_one(path: str, index: int, backend: str, explain: bool = False) -> dict:
    """Runs module `index` of `path` on `backend`; the result record."""
    start = time.perf_counter()
    record = {"file": path, "module": index, "backend": backend, "line": 1, "op": "(none)",
              "ops": [], "types": []}
    try:
        plan, modules = read_modules(path)
        module = modules[index]
        record["line"] = module.line
        where = path
        if not plan.interpret and not plan.disabled:
            if plan.roundtrip:
                record["backend"] = "roundtrip"
                record.update(roundtrip(module.text, where))
            else:
                record.update(status="skipped", message="no RUN line runs or serializes it")
            return record
        if plan.filecheck:
            record.update(status="skipped", message="its RUN line checks the interpreter's "
                                                    "printed output with FileCheck")
            return record
        feature = files.INTERPRETER_ONLY.search(module.text)
        if feature:
            record.update(status="skipped", message=f"uses {feature.group(0)}, which only the "
                                                    f"interpreter's own test runner has")
            return record
        # blank lines first, so that MLIR's locations are lines of the file
        case = load_case("\n" * (module.line - 1) + module.text, where, lift_constants=backend != "interpret")
        record.update(op=case.primary_op, ops=case.ops, types=case.element_types)
        results = execute(case, backend)
        record.update(judge_results(case, results))
        if explain and record["status"] == "fail":
            record["explain"] = explain_case(case, backend)
    except UnsupportedError as e:
        record.update(status="skipped", message=str(e))
    except ExecutionError as e:
        record.update(status="error", message=str(e))
    except HlogenError as e:
        if "no XLA counterpart" in str(e):  # an element type outside hlogen's table
            record.update(status="skipped", message=f"{e} (hlogen's element types are XLA's)")
        else:
            record.update(status="error", message=str(e))
    finally:
        record["seconds"] = round(time.perf_counter() - start, 6)
    return record


def explain_case(case: Case, backend: str) -> str:
    from hlogen.conformance.explain import first_divergence
    try:
        found = first_divergence(case.computation, case.arguments, backend=backend)
    except HlogenError as e:
        return f"cannot localise: {e}"
    if found is None:
        return (f"{backend} and the interpreter agree at every op (within 3 ULP): the "
                f"expected values differ from both")
    return str(found)


def judge_results(case: Case, results: list) -> dict:
    n = len(case.checks)
    failures, traits = [], {"max_ulp": 0, "subnormal_only": True, "nan_only": True}
    for k, check in enumerate(case.checks):
        got, want = results[k], results[n + k]
        verdict = judge.judge(check.kind, check.params, got, want)
        if verdict.ok:
            continue
        failures.append(f"check {k + 1} of {n} (@check.{check.call}): {verdict.describe()}")
        traits["max_ulp"] = max(traits["max_ulp"], verdict.max_ulp or _HUGE_IF_NOT_FLOAT(got))
        if verdict.mask is not None:
            traits["subnormal_only"] &= _explained_by_subnormals(verdict.mask, got, want,
                                                                 case.arguments)
            traits["nan_only"] &= _nan_on_one_side(verdict.mask, got, want)
        else:
            traits["subnormal_only"] = traits["nan_only"] = False
    if not failures:
        return {"status": "pass", "message": ""}
    return {"status": "fail", "message": "; ".join(failures), "traits": traits}


def _HUGE_IF_NOT_FLOAT(a) -> int:
    return 0 if T.element_type(np.asarray(a).dtype).kind in (T.FLOAT, T.COMPLEX) else 2 ** 62


def _subnormal(a: np.ndarray) -> np.ndarray:
    et = T.element_type(a.dtype)
    if et.kind == T.COMPLEX:
        return _subnormal(a.real) | _subnormal(a.imag)
    if et.kind != T.FLOAT:
        return np.zeros(a.shape, bool)
    import ml_dtypes
    tiny = float(ml_dtypes.finfo(a.dtype).smallest_normal)
    x = np.abs(a.astype(np.float64))
    return (x > 0) & (x < tiny)


def _explained_by_subnormals(mask, got, want, arguments) -> bool:
    """Every mismatch sits where a same-shaped input, the expected or the actual value is
    subnormal: what flushing subnormals to zero (XLA CPU) changes."""
    covered = _subnormal(np.asarray(want)) | _subnormal(np.asarray(got))
    for a in arguments:
        if a.shape == mask.shape:
            covered |= _subnormal(a)
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
    from jaxlib.mlir._mlir_libs import _stablehlo
    from hlogen import mlir
    from hlogen.computation import parse_module
    from hlogen.conformance.module import _load_quant_dialect
    if "!quant." in text:
        _load_quant_dialect()
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
