"""Conformance files: which modules a file holds and what its RUN lines ask for.

Formats (see ../shared/conformance/README.md in the project):
- testdata: one module, `stablehlo.custom_call @check.*(actual, expected)` in `@main`;
- split files (`-split-input-file`): modules separated by lines `// -----`;
- the `check` dialect (`check.expect_eq`, `check.expect_almost_eq_const`, ... in short
  or generic form): rewritten here, as text, into the testdata form, since jaxlib's
  MLIR context has no `check` dialect. Only the check statements are rewritten; the
  module itself is parsed by MLIR (hlogen.loading.parse_module);
- `interpreter.run_parallel` (replicas) and `interpreter.probe`: rewritten as text too,
  into a custom call that MLIR parses (`rewrite_interpreter_ops`); module.py runs the
  program on replicas, and a probe is the identity it is for the values it returns;
- files whose RUN lines only round-trip serialization (no interpreter run); those of
  them with dynamic dimensions (StableHLO's `*_dynamic.mlir`, from jax's shape
  polymorphism: leading i64 dimension variables, `tensor<?x20x20xf32>` parameters) are
  also refined from inputs chosen by the runner and run (`Plan.refine`).
"""
from __future__ import annotations

import dataclasses
import os
import re

from hlogen import mlir
from hlogen.errors import InputError

SPLIT = re.compile(r"^// -----\s*$", re.M)
_RUN = re.compile(r"^//\s*(RUN(?:-DISABLED)?)(\([^)]*\))?:?\s*(.*)$", re.M)
# features only the interpreter's own runner has (printing, interpreter ops other than
# those rewritten below, a probe's value at one iteration of a loop), each with its name
_INTERPRETER_ONLY = [
    (re.compile(r"\binterpreter\.(?!run_parallel\b|probe\b)\w+|\bcheck\.print\b|\bstablehlo\.print\b"),
     None),
    (re.compile(r"\bcheck\.expect_serialized_eq\b[^\n]*\biter\s*="),
     "a probe's value at one iteration of a loop (check.expect_serialized_eq with iter)"),
]


@dataclasses.dataclass
class Plan:
    """What a file's RUN lines ask for."""
    interpret: bool = False        # run and check the results
    split: bool = False            # several modules, split on `// -----`
    roundtrip: bool = False        # serialize to a portable artifact and back
    disabled: str | None = None    # the reason given by RUN-DISABLED(...), when the run is off
    filecheck: bool = False        # the interpreter's printed output is what is checked
    refine: bool = False           # round trip only, of a module with dynamic dimensions:
    #                                refined from inputs chosen here and run (runner)


@dataclasses.dataclass
class Module:
    """One module of a conformance file."""
    file: str
    index: int          # 0-based position in the file
    line: int           # 1-based line where its text starts
    text: str


def interpreter_only(text: str) -> str | None:
    """The first feature of `text` that only the interpreter's own runner has, or None."""
    for pattern, name in _INTERPRETER_ONLY:
        m = pattern.search(text)
        if m:
            return name or m.group(0)
    return None


# The records of files whose RUN lines only serialize and read back (StableHLO's
# `*_dynamic.mlir`) carry this in place of a backend: no backend ran them.
ROUNDTRIP = "roundtrip"


def discover(paths) -> list[str]:
    """The .mlir files under `paths` (files or directories), sorted; an InputError for a
    path that does not exist or holds none."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            n = len(found)
            for root, dirs, files in os.walk(path):
                dirs.sort()
                found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith(".mlir"))
            if len(found) == n:
                raise InputError(f"{path}: no .mlir files in this directory")
        elif os.path.isfile(path):
            found.append(path)
        else:
            raise InputError(f"{path}: no such file or directory")
    return list(dict.fromkeys(found))


def plan_of(text: str) -> Plan:
    plan = Plan()
    for kind, why, command in _RUN.findall(text):
        if "--interpret" in command:
            if kind == "RUN":
                plan.interpret = True
                plan.split |= "-split-input-file" in command
                plan.filecheck |= "FileCheck" in command
            else:
                plan.disabled = why.strip("()") or "disabled upstream"
        if "--serialize" in command and kind == "RUN":
            plan.roundtrip = True
    if plan.interpret:
        plan.disabled = None
    plan.refine = plan.roundtrip and not plan.interpret and not plan.disabled and \
        _DYNAMIC_TYPE.search(text) is not None
    return plan


_DYNAMIC_TYPE = re.compile(r"tensor<[^<>]*\?")


def modules_of(file: str, text: str, plan: Plan) -> list[Module]:
    if not plan.split:
        return [Module(file, 0, 1, text)]
    out, start = [], 0
    for i, m in enumerate([*SPLIT.finditer(text), None]):
        end = m.start() if m else len(text)
        out.append(Module(file, i, text.count("\n", 0, start) + 1, text[start:end]))
        if m:
            start = min(m.end() + 1, len(text))  # after the separator line
    return out


# -- the check dialect, as text -------------------------------------------------------

# A check statement starts a line: `check.NAME ...` or `"check.NAME"(...)`.
_CHECK_START = re.compile(r'^[ \t]*(?:%[\w#]+\s*=\s*)?("?)check\.(\w+)\1', re.M)


def _statement_end(text: str, start: int) -> int:
    """End of the statement starting at `start`: the first newline outside brackets that
    does not follow a comma (a dense literal may start on the next line)."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == '"':  # a string: skip it
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "-" and text.startswith("->", i):
            i += 1
        elif c in "[({<":
            depth += 1
        elif c in "])}>":
            depth -= 1
        elif c == "\n" and depth <= 0 and not text[start:i].rstrip().endswith(","):
            return i
        i += 1
    return n


_SHORT = re.compile(r"^\s*check\.(?P<name>\w+)\s+(?P<lhs>%[\w#]+)\s*,\s*(?P<rest>.*)$", re.S)
_GENERIC = re.compile(r'^\s*"check\.(?P<name>\w+)"\((?P<operands>[^)]*)\)\s*(?P<props><\{.*\}>)?'
                      r'\s*(?P<attrs>\{.*\})?\s*:\s*\((?P<types>.*)\)\s*->\s*\(\s*\)\s*$', re.S)
_COMMENT = re.compile(r'//[^\n"]*$', re.M)  # a comment after a statement
_NAMED = re.compile(r"(tolerance|max_ulp_difference|min_ulp_difference)\s*=\s*"
                    r"([-+0-9.eE]+)(?:\s*:\s*\w+)?")


def rewrite_checks(text: str, where: str) -> tuple[str, list[dict]]:
    """`text` with every check-dialect statement replaced by the testdata form
    (`stablehlo.custom_call @check.NAME(actual, expected)`, a constant first for the
    `_const` forms), and per check, in order, its parameters (tolerance, ULP bounds)."""
    out, checks, pos = [], [], 0
    for m in _CHECK_START.finditer(text):
        if m.start() < pos:
            continue
        end = _statement_end(text, m.start())
        statement = text[m.start():end]
        line = text.count("\n", 0, m.start()) + 1
        indent = statement[:len(statement) - len(statement.lstrip())]
        try:
            name, lhs, expected, type_, params = _parse_check(statement)
        except ValueError as e:
            raise InputError(f"{where}:{line}: cannot read this check statement ({e}): "
                             f"{statement.strip()[:200]}") from None
        k = len(checks)
        params["name"] = name
        checks.append(params)
        replacement = []
        if isinstance(expected, tuple):  # a constant: dense<...> and its type
            replacement.append(f"{indent}%__check_expected_{k} = stablehlo.constant "
                               f"{expected[0]} : {expected[1]}")
            expected = f"%__check_expected_{k}"
        call = name[:-len("_const")] if name.endswith("_const") else name
        replacement.append(f'{indent}stablehlo.custom_call @check.{call}({lhs}, {expected}) '
                           f'{{backend_config = "{k}", has_side_effect = true}} : '
                           f'({type_}, {type_}) -> ()')
        out.append(text[pos:m.start()])
        out.append("\n".join(replacement))
        pos = end
    out.append(text[pos:])
    return "".join(out), checks


def _parse_check(statement: str):
    statement = _COMMENT.sub("", statement)
    params: dict = {}
    for key, value in _NAMED.findall(statement):
        params[key] = float(value)
    g = _GENERIC.match(statement)
    if g:
        operands = mlir.split_top_level(g.group("operands"))
        types = mlir.split_top_level(g.group("types"))
        props = g.group("props") or g.group("attrs") or ""
        if len(operands) == 2:
            return g.group("name"), operands[0], operands[1], types[0], params
        value = re.search(r"value\s*=\s*(dense<.*?>)\s*:\s*(tensor<[^{}]*?>)(?=\s*[,}])", props, re.S)
        if len(operands) != 1 or value is None:
            raise ValueError("expected one operand and a value, or two operands")
        return g.group("name"), operands[0], (value.group(1), value.group(2)), types[0], params
    s = _SHORT.match(statement)
    if not s:
        raise ValueError("neither the short nor the generic form")
    name, lhs, rest = s.group("name"), s.group("lhs"), s.group("rest")
    rest = re.sub(r"\{[^{}]*\}\s*$", "", rest.strip()).strip()  # a trailing attribute dict
    if name.endswith("_const"):
        # `dense<...> : TYPE`
        parts = mlir.split_top_level(rest, ":")
        if len(parts) < 2:
            raise ValueError("no type after the constant")
        value, type_ = parts[0], parts[1].split(",")[0].strip()
        return name, lhs, (value, type_), type_, params
    # `%rhs[, named = value...] : TYPE[, TYPE]`
    head, _, types = rest.partition(":")
    rhs = mlir.split_top_level(head)[0]
    type_ = mlir.split_top_level(types)[0]
    return name, lhs, rhs, type_, params


# -- interpreter ops, as text --------------------------------------------------------

RUN_PARALLEL = "interpreter.run_parallel"
_RUN_PARALLEL = re.compile(r'"interpreter\.run_parallel"\s*\(([^)]*)\)\s*\{')
_PROBE = re.compile(r'^(?P<head>[ \t]*%[\w#]+\s*=\s*)interpreter\.probe\s+(?P<x>%[\w#]+)\s*,\s*'
                    r'probe_id\s*=\s*"(?P<id>[^"]*)"\s*:\s*(?P<type>[^\n]+)$', re.M)
_SERIALIZED_EQ = re.compile(r'^(?P<head>[ \t]*)check\.expect_serialized_eq\s+(?P<x>%[\w#]+)\s*,\s*'
                            r'probe_id\s*=\s*"(?P<id>[^"]*)"\s*:\s*(?P<type>[^\n]+)$', re.M)


def rewrite_interpreter_ops(text: str, where: str) -> str:
    """`text` with `"interpreter.run_parallel"(...) {programs = ...}` as a custom call of
    that target (its attributes kept), and each `%y = interpreter.probe %x, probe_id = ID`
    as `%y = stablehlo.optimization_barrier %x` (the identity: a probe records %x) with its
    `check.expect_serialized_eq %z, probe_id = ID` as `check.expect_eq %z, %x` (the
    recorded value equals %z)."""
    text = _RUN_PARALLEL.sub(r'"stablehlo.custom_call"(\1) {call_target_name = "%s", ' % RUN_PARALLEL,
                             text)
    probed = {}

    def probe(m):
        probed[m.group("id")] = m.group("x")
        return f"{m.group('head')}stablehlo.optimization_barrier {m.group('x')} : {m.group('type')}"

    def serialized_eq(m):
        if m.group("id") not in probed:
            line = text.count("\n", 0, m.start()) + 1
            raise InputError(f"{where}:{line}: check.expect_serialized_eq names probe_id "
                             f"\"{m.group('id')}\", which no interpreter.probe before it records")
        return (f"{m.group('head')}check.expect_eq {m.group('x')}, {probed[m.group('id')]} : "
                f"{m.group('type')}")

    text = _PROBE.sub(probe, text)
    return _SERIALIZED_EQ.sub(serialized_eq, text)
