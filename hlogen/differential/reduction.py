"""Reducing a module: the smallest module found that stays "interesting".

`shrink(module, interesting)` keeps shrinking a StableHLO module while a predicate of a
Computation holds (a divergence between backends, an error whose message matches, a
user's script), with these strategies, repeated until none makes progress:
- trim results: keep a subset of main's results;
- remove ops: delta debugging (ddmin) over the ops of every function and region; each
  result of a removed op becomes an operand of the op of the same type (the op is
  bypassed), else a new parameter of main (in main's body), else zeros; then, one op at
  a time, main returns an op's operands instead of its result, and an op is bypassed by
  each of its operands of its type;
- inline calls (jax's inliner, hlogen.passes);
- simplify regions: a while loop that runs once or never, a branch of an if or a case
  (the regions of WHOLE's ops are not edited inside: reducers, comparators, loops);
- fold constants: an op of constants becomes the constant of its value (computed by the
  reference interpreter); merge constants: one that equals an earlier one of its block
  gives way to it;
- simplify constants (zeros, ones) and attributes (optional ones and other dialects');
- shrink shapes: every dimension of one size halved, where the module still verifies;
- drop unused parameters.
Every candidate is built on a copy of the best module so far, has its dead ops and
unused functions removed, and must pass MLIR's verifier and hlogen.preflight.check_module before the predicate
sees it; a candidate is accepted only when it is smaller (fewer functions, then fewer
ops, then fewer elements, then shorter text), so the search ends. The same module,
predicate and seed (which orders delta debugging's tries) give the same result; a
`timeout` ends the search with the best module so far.

`script_interest(path)` makes a predicate of a user's test script, with C-Reduce's
convention: exit status 0 means "still interesting".
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import random
import re
import select
import signal
import subprocess
import tempfile
import time
from typing import Callable

import numpy as np
from jaxlib.mlir import ir

from hlogen import backends, mlir, native, preflight
from hlogen import types as T
from hlogen.computation import Computation, main_of
from hlogen.errors import HlogenError, InputError
from hlogen.loading import load
from hlogen.progress import Progress, reducing as searched
from hlogen.runtime import interpret

# Ops that give a function or region its structure: not counted, never removed.
_STRUCTURE = frozenset({"builtin.module", "func.func", "func.return", "stablehlo.return"})
# Ops kept without users: what they do is not their results.
_EFFECTS = frozenset({"stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
                      "stablehlo.infeed"})
# Attributes an op verifies without, that are not what the op computes: deleted when the
# module stays interesting (and, as any name with a dot, other dialects' attributes)
_OPTIONAL_ATTRIBUTES = frozenset({
    "precision_config", "algorithm", "indices_are_sorted", "unique_indices", "is_stable",
    "result_accuracy", "compare_type", "res_attrs", "backend_config", "operand_layouts",
    "result_layouts", "output_operand_aliases"})
_WHERE = "<candidate>"


def op_count(module) -> int:
    """The ops of a module's functions (a Computation or an ir.Module), without the
    functions and their terminators."""
    return len(_ops(module.module if isinstance(module, Computation) else module))


def _ops(module: ir.Module) -> list:
    """Every op of every function, regions included, in order (pre-order)."""
    return [op for op in mlir.walk(module) if op.name not in _STRUCTURE]


@dataclasses.dataclass(frozen=True)
class Reduced:
    """The result of `shrink`: the smallest interesting module found, and the search."""

    computation: Computation
    op_count: int
    original_op_count: int
    tried: int
    accepted: int
    seconds: float
    timed_out: bool
    interrupted: BaseException | None = None  # what ended the search early (interrupted_by)


class _Skip(Exception):
    """This candidate cannot be built (nothing to change, a value that cannot be replaced)."""


class _OutOfTime(Exception):
    pass


class NotInteresting(InputError):
    """The module given is not interesting to begin with: there is nothing to reduce."""


def shrink(module_or_computation, interesting: Callable[[Computation], bool], *, seed: int = 0,
           timeout: float | None = None,
           progress: Callable[[Progress], None] | None = None,
           interrupted_by: tuple = ()) -> Reduced:
    """The smallest module found that stays interesting (see the module docstring).

    `module_or_computation`: a Computation, or what hg.load takes. `interesting(comp)`
    says whether a candidate still shows what is being reduced; it is called on
    candidates that verify, and an hg.HlogenError it raises counts as "not interesting"
    (other exceptions end the search). `seed` orders delta debugging's tries; `timeout`
    (seconds) bounds the whole search, checked before each candidate; `progress` is
    called after each candidate judged; `interrupted_by` (exception classes, such as
    KeyboardInterrupt) end the search as the timeout does, the exception kept in the
    result's `interrupted` for the caller to raise again once it has saved the best
    module. Raises hg.InputError when the module is not interesting to begin with (and
    what the predicate raises on it: also an interruption while the original is judged,
    when there is nothing to keep)."""
    original = module_or_computation if isinstance(module_or_computation, Computation) \
        else load(module_or_computation)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise HlogenError(f"reduce: seed must be an int, got {seed!r}")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or timeout <= 0):
        raise HlogenError(f"reduce: timeout must be a positive number of seconds, got {timeout!r}")
    search = _Search(original, interesting, seed, timeout, progress)
    if not interesting(original):  # (an error it raises says why, here)
        raise NotInteresting(f"{original.source or original.name}: the module is not "
                             f"interesting to begin with (the predicate returns False on it): "
                             f"nothing to reduce")
    timed_out, interrupted = False, None
    try:
        search.run()
    except _OutOfTime:
        timed_out = True
    except tuple(interrupted_by) as e:  # (search.best is always a whole module)
        interrupted = e
    return Reduced(search.best_computation(), op_count(search.best_module()),
                   op_count(original), search.tried, search.accepted,
                   time.monotonic() - search.start, timed_out, interrupted)


class _Search:
    def __init__(self, original: Computation, interesting, seed: int, timeout, progress):
        self.source = original.source
        self.interesting, self.progress = interesting, progress
        self.rng = random.Random(seed)
        self.start = time.monotonic()
        self.deadline = None if timeout is None else self.start + timeout
        self.best = original.to_bytecode()
        self.best_size = _size(original.module, original.module.operation.get_asm())
        self.tried = self.accepted = 0
        self.seen: set = set()
        self.folded: dict = {}  # a folded op's module text -> its value's attribute

    def best_module(self) -> ir.Module:
        return ir.Module.parse(self.best, context=mlir.context())

    def best_computation(self) -> Computation:
        return Computation(self.best_module(), self.source)

    # -- judging candidates ---------------------------------------------------------------

    def judge(self, computation: Computation, strategy: str, size: tuple) -> bool:
        self.tried += 1
        try:
            verdict = bool(self.interesting(computation))
        except HlogenError:
            verdict = False
        if verdict:
            self.accepted += 1
            self.best, self.best_size = computation.to_bytecode(), size
        if self.progress is not None:
            self.progress(searched(strategy, self.best_size[1], self.tried, self.accepted,
                                   time.monotonic() - self.start))
        return verdict

    def attempt(self, strategy: str, edit) -> bool:
        """Whether `edit` (of a copy of the best module, in place, or returning a new
        module) makes a smaller module that stays interesting; it becomes the best."""
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise _OutOfTime
        module = self.best_module()
        with mlir.context(), ir.Location.unknown():
            try:
                module = edit(module) or module
            except _Skip:
                return False
            main = main_of(module, _WHERE)
            _remove_dead_ops(module)
            mlir.drop_unused_functions(module, main)
            _fix_signature(main)
        if not valid(module):
            return False
        text = module.operation.get_asm(assume_verified=True)
        size = _size(module, text)
        digest = hashlib.sha256(text.encode()).digest()
        if size >= self.best_size or digest in self.seen:
            return False
        self.seen.add(digest)
        return self.judge(Computation(module, self.source), strategy, size)

    def ddmin(self, strategy: str, changes, apply) -> bool:
        """Delta debugging over a list of changes: `changes(module)` lists them (keys) on
        the best module, `apply(module, keys)` makes some of them on a copy. Tries all at
        once, then halves, quarters, ... (in an order the seed shuffles), and starts again
        on the new list whenever a candidate is accepted."""
        items = changes(self.best_module())
        n, progressed = 1, False
        while items:
            n = min(n, len(items))
            chunks = [items[len(items) * i // n:len(items) * (i + 1) // n] for i in range(n)]
            order = list(range(n))
            self.rng.shuffle(order)
            for k in order:
                if self.attempt(strategy, lambda m, chunk=chunks[k]: apply(m, chunk)):
                    progressed = True
                    items = changes(self.best_module())
                    n = max(n - 1, 1)
                    break
            else:
                if n >= len(items):
                    break
                n = min(2 * n, len(items))
        return progressed

    def each(self, strategy: str, changes, variants, apply) -> bool:
        """One change at a time: for each key of `changes(module)`, its `variants(module,
        key)` in order until one is accepted."""
        progressed, position = False, 0
        while True:
            module = self.best_module()
            keys = changes(module)
            if position >= len(keys):
                return progressed
            key = keys[position]
            for variant in variants(module, key):
                if self.attempt(strategy, lambda m, v=variant: apply(m, key, v)):
                    progressed = True
                    break
            else:
                position += 1

    # -- the strategies, in the order a round runs them -----------------------------------

    def run(self) -> None:
        while True:
            progressed = [
                self.ddmin("trim results", _results, _trim_results),
                self.ddmin("remove ops", _removable, _remove_ops),
                self.each("return operands", _results, _returnable, _return_operand),
                self.each("bypass ops", _removable, _bypasses, _bypass),
                self.attempt("inline calls", _inline_calls),
                self.each("simplify regions", _with_regions, _region_variants, _simplify_region),
                self.ddmin("fold constants", _foldable, self.fold),
                self.ddmin("merge constants", _repeated_constants, _merge_constants),
                self.ddmin("simplify constants", _constants_not(0), _set_constants(0)),
                self.ddmin("simplify constants", _constants_not(1), _set_constants(1)),
                self.ddmin("simplify attributes", _attributes, _delete_attributes),
                self.each("shrink shapes", _sizes, lambda m, s: ("types", "arrays"), _halve),
                self.ddmin("drop unused parameters", _unused_parameters, _drop_parameters),
            ]
            if not any(progressed):
                return

    def fold(self, module: ir.Module, keys: list) -> None:
        """The ops at `keys` (whose operands are constants) replaced by constants of their
        values, computed by the reference interpreter (once per op)."""
        ops = _ops(module)
        for key in keys:
            op = ops[key]
            alone = op_alone(op)
            text = alone.operation.get_asm()
            if text not in self.folded:
                self.folded[text] = _value(alone, op)
            if self.folded[text] is None:
                raise _Skip
            with ir.InsertionPoint(op), op.location:
                for result, attr in zip(op.results, self.folded[text]):
                    result.replace_all_uses_with(_constant(attr, result.type))
            op.erase()


# -- the size of a module, and what every candidate must be ---------------------------------

def _size(module: ir.Module, text: str) -> tuple:
    """What a candidate must make smaller: (functions, ops, elements of every result,
    constants other than splats of 0 and 1, constants other than splats of 0, characters
    of the text `text` of the module)."""
    ops = _ops(module)
    elements, constants = 0, [0, 0]
    for op in ops:
        for t in op.results.types:
            if isinstance(t, ir.RankedTensorType) and t.has_static_shape:
                elements += int(np.prod(t.shape))
        if op.name == "stablehlo.constant":
            zero = _is_splat(op, 0)
            constants[0] += not zero and not _is_splat(op, 1)
            constants[1] += not zero
    return len(mlir.functions(module)), len(ops), elements, *constants, len(text)


def valid(module: ir.Module) -> bool:
    """Whether `module` passes MLIR's verifier and hlogen.preflight.check_module (quietly:
    a candidate that does not is dropped)."""
    with mlir.collected_diagnostics():
        try:
            module.operation.verify()
        except ir.MLIRError:
            return False
    try:
        preflight.check_module(module, _WHERE)
    except HlogenError:
        return False
    return True


def _remove_dead_ops(module: ir.Module) -> None:
    """Erases ops whose results nothing uses (and that do nothing else), users first."""
    for op in reversed(mlir.walk(module)):  # an op's regions come after it: erased first
        if op.name in _STRUCTURE or op.name in _EFFECTS or not len(op.results):
            continue
        if op.name == "stablehlo.custom_call" and "has_side_effect" in op.attributes and \
                ir.BoolAttr(op.attributes["has_side_effect"]).value:
            continue
        if all(not list(r.uses) for r in op.results):
            op.erase()


def _fix_signature(main: ir.Operation) -> None:
    """main's function type from its block and return, and as many argument and result
    attributes (those of new ones empty)."""
    block = main.regions[0].blocks[0]
    returned = list(block.operations)[-1]
    main.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(
        [a.type for a in block.arguments], [v.type for v in returned.operands]))
    for name, count in (("arg_attrs", len(block.arguments)), ("res_attrs", len(returned.operands))):
        if name in main.attributes:
            old = list(ir.ArrayAttr(main.attributes[name]))
            main.attributes[name] = ir.ArrayAttr.get((old + [ir.DictAttr.get({})] * count)[:count])


def _main_block(module: ir.Module) -> ir.Block:
    return main_of(module, _WHERE).regions[0].blocks[0]


def _constant(attr, result_type) -> ir.Value:
    return ir.Operation.create("stablehlo.constant", results=[result_type],
                               attributes={"value": attr}).result


@functools.lru_cache(maxsize=4096)
def _splat(value, result_type) -> ir.Attribute | None:
    """A splat attribute of `value` for an array type; None for other types."""
    try:
        shape = mlir.shape_of_type(result_type)
    except HlogenError:
        return None
    if not isinstance(shape, T.Shape):
        return None
    return mlir.dense_attr(np.full(shape.dimensions, value, shape.dtype), shape)


# -- inline calls ---------------------------------------------------------------------------

def _inline_calls(module: ir.Module) -> None:
    blocks = [op.block for op in mlir.walk(module) if op.name == "func.call"]
    if not blocks:
        raise _Skip
    table = mlir.functions(module)
    for block in {id(b): b for b in blocks}.values():
        mlir.inline_calls(block, table)
    mlir.drop_unused_functions(module, main_of(module, _WHERE))


# -- trim results ---------------------------------------------------------------------------

def _results(module: ir.Module) -> list:
    return list(range(len(_returned(module).operands)))


def _trim_results(module: ir.Module, keys: list) -> None:
    main = main_of(module, _WHERE)
    values = list(_returned(module).operands)
    kept = [i for i in range(len(values)) if i not in keys]
    if not kept:
        raise _Skip
    _set_returned(module, [values[i] for i in kept])
    if "res_attrs" in main.attributes:
        old = list(ir.ArrayAttr(main.attributes["res_attrs"]))
        main.attributes["res_attrs"] = ir.ArrayAttr.get([old[i] for i in kept])


def _returned(module: ir.Module) -> ir.Operation:
    return list(_main_block(module).operations)[-1]


def _set_returned(module: ir.Module, values: list) -> None:
    """main returns `values` (its type follows: _fix_signature)."""
    returned = _returned(module)
    with ir.InsertionPoint(returned), returned.location:
        ir.Operation.create("func.return", operands=values)
    returned.erase()


def _returnable(module: ir.Module, key: int) -> list:
    """Each operand of the op that makes main's result `key` (in main's body), then all
    of them (None)."""
    op = mlir.defining_op(_returned(module).operands[key])
    if op is None or op.block != _main_block(module):
        return []
    return list(range(len(op.operands))) + ([None] if len(op.operands) > 1 else [])


def _return_operand(module: ir.Module, key: int, operand: int | None) -> None:
    """main returns, instead of its result `key`, operand `operand` of the op that made
    it (every operand, for None)."""
    values = list(_returned(module).operands)
    made = list(mlir.defining_op(values[key]).operands)
    values[key:key + 1] = made if operand is None else [made[operand]]
    _set_returned(module, values)


# -- remove ops -----------------------------------------------------------------------------

# Ops whose regions are not edited: a reducer that is not associative and commutative, or
# a comparator that is not a strict weak order, leaves results to the implementation (a
# divergence that says nothing); a loop whose counter no longer counts runs forever. They
# go whole, or (a loop) once unrolled.
WHOLE = frozenset({"stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",
                    "stablehlo.select_and_scatter", "stablehlo.sort", "stablehlo.all_reduce",
                    "stablehlo.reduce_scatter", "stablehlo.while"})


def _removable(module: ir.Module) -> list:
    """Ops other than constants (a constant goes with its last user, and standing for one
    with a parameter would lose what the module holds), outside WHOLE's regions."""
    return [i for i, op in enumerate(_ops(module))
            if op.name != "stablehlo.constant" and not mlir.nested_in(op, WHOLE)]


def _remove_ops(module: ir.Module, keys: list) -> None:
    """The ops at `keys` removed, later ones first, each result replaced by an operand of
    its type, else a new parameter of main (in main's body), else zeros."""
    ops = _ops(module)
    main = _main_block(module)
    for key in sorted(keys, reverse=True):
        op = ops[key]
        replacements = [_replacement(op, r, main) for r in op.results]
        if any(r is None for r in replacements):
            continue  # (a tuple or a token made elsewhere) it stays
        for result, value in zip(op.results, replacements):
            result.replace_all_uses_with(value() if callable(value) else value)
        op.erase()


def _bypasses(module: ir.Module, key: int) -> list:
    """Each operand of the op at `key` whose type is its (one) result's."""
    op = _ops(module)[key]
    if len(op.results) != 1:
        return []
    return [i for i, v in enumerate(op.operands) if v.type == op.results[0].type]


def _bypass(module: ir.Module, key: int, operand: int) -> None:
    op = _ops(module)[key]
    op.results[0].replace_all_uses_with(op.operands[operand])
    op.erase()


def _replacement(op: ir.Operation, result: ir.Value, main: ir.Block):
    """What stands for `result` once `op` is gone: a value, or a function making one."""
    for operand in op.operands:
        if operand.type == result.type:
            return operand
    if op.block == main:
        return lambda: main.add_argument(result.type, op.location)
    attr = _splat(0, result.type)
    if attr is None:
        return None

    def zeros():
        with ir.InsertionPoint(op), op.location:
            return _constant(attr, result.type)
    return zeros


# -- simplify regions -----------------------------------------------------------------------

_REGION_OPS = ("stablehlo.while", "stablehlo.if", "stablehlo.case")


def _with_regions(module: ir.Module) -> list:
    return [i for i, op in enumerate(_ops(module)) if op.name in _REGION_OPS]


def _region_variants(module: ir.Module, key: int) -> list:
    """("never",): a while loop's results are its operands; ("once",): its body runs once
    on them; ("branch", i): an if's or a case's region i runs."""
    op = _ops(module)[key]
    if op.name == "stablehlo.while":
        return [("never",), ("once",)]
    return [("branch", i) for i in range(len(op.regions))]


def _simplify_region(module: ir.Module, key: int, variant: tuple) -> None:
    op = _ops(module)[key]
    if variant == ("never",):
        values = list(op.operands)
    else:
        region = op.regions[1 if variant == ("once",) else variant[1]]
        values = _inline_region(op, region.blocks[0], list(op.operands))
    for result, value in zip(op.results, values):
        result.replace_all_uses_with(value)
    op.erase()


def _inline_region(op: ir.Operation, block: ir.Block, arguments: list) -> list:
    """The ops of `block` moved before `op`, its arguments replaced by `arguments`;
    returns the values its terminator returned."""
    for argument, value in zip(block.arguments, arguments):
        argument.replace_all_uses_with(value)
    body = list(block.operations)
    for inner in body[:-1]:
        inner.move_before(op)
    return list(body[-1].operands)


# -- fold and simplify constants ------------------------------------------------------------

def _foldable(module: ir.Module) -> list:
    """Ops of constants alone that the interpreter runs: StableHLO ops that are not
    constants themselves, with no regions and array results."""
    found = []
    for i, op in enumerate(_ops(module)):
        if op.name == "stablehlo.constant" or op.name in _EFFECTS or len(op.regions) or \
                not len(op.operands) or not op.name.startswith("stablehlo.") or \
                backends.INTERPRET.refusal(op):
            continue
        defining = [mlir.defining_op(v) for v in op.operands]
        if all(d is not None and d.name == "stablehlo.constant" for d in defining) and \
                all(isinstance(t, ir.RankedTensorType) for t in op.results.types):
            found.append(i)
    return found


def op_alone(op: ir.Operation, parameters: bool = False) -> ir.Module:
    """A module whose main returns what `op` computes from its operands: copies of their
    constants, or (`parameters`) main's parameters, one per operand."""
    module = ir.Module.create()
    types = list(op.results.types)
    inputs = [v.type for v in op.operands] if parameters else []
    with ir.InsertionPoint(module.body):
        function = ir.Operation.create(
            "func.func", regions=1, attributes={
                "sym_name": ir.StringAttr.get("main"),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get(inputs, types))})
    block = function.regions[0].blocks.append(*inputs)
    with ir.InsertionPoint(block):
        operands = list(block.arguments) if parameters else \
            [mlir.defining_op(v).clone().result for v in op.operands]
        copy = op.clone()
        for i, value in enumerate(operands):
            copy.operands[i] = value
        ir.Operation.create("func.return", operands=list(copy.results))
    return module


def _value(alone: ir.Module, op: ir.Operation) -> list | None:
    """Attributes of the values `op`'s module computes (None when the interpreter cannot)."""
    try:
        values = interpret(Computation(alone))
    except HlogenError:
        return None
    values = values if isinstance(values, tuple) else (values,)
    return [mlir.dense_attr(v, mlir.shape_of_type(t)) for v, t in zip(values, op.results.types)]


def _is_splat(op: ir.Operation, value) -> bool:
    """Whether the constant `op` holds `value` everywhere (False where Python cannot read
    its attribute: complex constants)."""
    try:
        return op.attributes["value"] == _splat(value, op.results[0].type)
    except TypeError:  # "Can't cast unknown element type": complex numbers
        return False


def _constants_not(value):
    """Constants whose value is not a splat of `value`, outside WHOLE's regions."""
    def changes(module: ir.Module) -> list:
        return [i for i, op in enumerate(_ops(module)) if op.name == "stablehlo.constant"
                and not mlir.nested_in(op, WHOLE) and not _is_splat(op, value)]
    return changes


def _constant_key(op: ir.Operation):
    """What makes two constants equal (their block, type and value), or None for an op
    that is not a constant or one Python cannot read (complex: see _is_splat)."""
    if op.name != "stablehlo.constant":
        return None
    try:
        return op.block, str(op.results[0].type), op.attributes["value"]
    except TypeError:
        return None


def _repeated_constants(module: ir.Module) -> list:
    """Constants equal to an earlier constant of their block."""
    found, first = [], set()
    for i, op in enumerate(_ops(module)):
        key = _constant_key(op)
        if key is not None and key in first:
            found.append(i)
        elif key is not None:
            first.add(key)
    return found


def _merge_constants(module: ir.Module, keys: list) -> None:
    """The constants at `keys` replaced by the first equal constant of their block."""
    ops, first = _ops(module), {}
    for i, op in enumerate(ops):
        key = _constant_key(op)
        if key is not None and i not in keys:
            first.setdefault(key, op)
    for i in keys:
        ops[i].results[0].replace_all_uses_with(first[_constant_key(ops[i])].results[0])
        ops[i].erase()


def _set_constants(value):
    def apply(module: ir.Module, keys: list) -> None:
        ops = _ops(module)
        for key in keys:
            ops[key].attributes["value"] = _splat(value, ops[key].results[0].type)
    return apply


# -- simplify attributes --------------------------------------------------------------------

def _deletable(name: str) -> bool:
    return name in _OPTIONAL_ATTRIBUTES or "." in name


def _attributes(module: ir.Module) -> list:
    """(op index, attribute name) of attributes that may go; -1 is the module itself, -2
    main. Only names are read: reading a complex constant from Python ends the process."""
    found = [(-1, name) for name in module.operation.attributes if _deletable(name)]
    for i, op in enumerate(_ops(module)):
        if op.name != "stablehlo.constant":
            found += [(i, name) for name in op.attributes if _deletable(name)]
    if "res_attrs" in main_of(module, _WHERE).attributes:
        found.append((-2, "res_attrs"))
    return found


def _delete_attributes(module: ir.Module, keys: list) -> None:
    ops = _ops(module)
    for index, name in keys:
        op = module.operation if index == -1 else main_of(module, _WHERE) if index == -2 \
            else ops[index]
        del op.attributes[name]


# -- shrink shapes --------------------------------------------------------------------------

_TENSOR_DIMS = re.compile(r"tensor<((?:\d+x)+)")
_I64_ARRAY = re.compile(r"array<i64:([^>]*)>")


def _sizes(module: ir.Module) -> list:
    """The dimension sizes (> 1) of the module's types, largest first."""
    text = module.operation.get_asm(assume_verified=True)
    found = {int(d) for m in _TENSOR_DIMS.finditer(text) for d in m.group(1).split("x")[:-1]}
    return sorted((d for d in found if d > 1), reverse=True)


def _halve(module: ir.Module, size: int, variant: str) -> ir.Module:
    """A module with every dimension of `size` halved in its types ("types"), and in its
    integer array attributes too ("arrays": slice limits, window sizes, ...)."""
    def halved(numbers: str, sep: str) -> str:
        return sep.join(str(int(n) // 2) if n.strip() == str(size) else n
                        for n in numbers.split(sep))

    text = module.operation.get_asm(enable_debug_info=True, assume_verified=True)
    text = _TENSOR_DIMS.sub(lambda m: f"tensor<{halved(m.group(1), 'x')}", text)
    if variant == "arrays":
        text = _I64_ARRAY.sub(lambda m: f"array<i64:{halved(m.group(1), ',')}>", text)
    with mlir.collected_diagnostics():
        try:
            return ir.Module.parse(text, context=mlir.context())
        except ir.MLIRError:
            raise _Skip from None


# -- drop unused parameters -----------------------------------------------------------------

def _unused_parameters(module: ir.Module) -> list:
    return [i for i, a in enumerate(_main_block(module).arguments) if not list(a.uses)]


def _drop_parameters(module: ir.Module, keys: list) -> None:
    main = main_of(module, _WHERE)
    block = main.regions[0].blocks[0]
    if "arg_attrs" in main.attributes:
        old = list(ir.ArrayAttr(main.attributes["arg_attrs"]))
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [a for i, a in enumerate(old) if i not in keys])
    for i in sorted(keys, reverse=True):
        block.erase_argument(i)


# -- a user's script as the predicate -------------------------------------------------------

def script_interest(path, *, timeout: float | None = 60.0,
                    filename: str = "candidate.mlir") -> Callable[[Computation], bool]:
    """A predicate that runs the executable `path` on each candidate, with C-Reduce's
    convention: exit status 0 means the candidate is still interesting, any other status
    (a signal, a timeout after `timeout` seconds) that it is not. The candidate is
    written as StableHLO text to `filename` in a new temporary folder, which is the
    script's working folder, and the script gets its path as its one argument (as
    mlir-reduce passes it). mlir-reduce reads its scripts the other way round (a non-zero
    status is interesting); hlogen follows C-Reduce because 0 is what `grep -q`, `test`
    and most commands return when what they look for is there.

    The script runs in a process group of its own (a session), killed whole (SIGKILL)
    when the script exits, when its time is up, and when the caller is stopped (an
    exception such as KeyboardInterrupt): nothing it started outlives its candidate, whose
    folder is deleted; and the kernel kills the script when this process dies
    (hlogen.native.ending_with_parent). The predicate takes `timeout=` too: the limit of
    one call (the reducer's, which bounds a call by the search's --timeout)."""
    script = os.path.abspath(os.fspath(path))
    if not os.path.isfile(script) or not os.access(script, os.X_OK):
        raise InputError(f"{path}: the interestingness script must be an executable file")
    if os.sep in filename or not filename:
        raise InputError(f"script_interest: filename must be a file name, got {filename!r}")
    _check_runs(script, path)
    limit = timeout

    def interesting(computation: Computation, timeout: float | None = limit) -> bool:
        with tempfile.TemporaryDirectory(prefix="hlogen-reduce-") as folder:
            candidate = os.path.join(folder, filename)
            with open(candidate, "w") as f:
                f.write(computation.as_text())
            try:
                child = subprocess.Popen(native.ending_with_parent([script, candidate]),
                                         cwd=folder, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True)
            except OSError as e:  # (setpriv gone since)
                raise InputError(f"{path}: cannot run the interestingness script: "
                                 f"{e.strerror}") from None
            try:
                ended = _ends(child.pid, timeout)
            finally:
                # its group, before the script is reaped (its id cannot be taken again
                # until then): what it left running, or all of it at the time limit or
                # when this process is stopped
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, signal.SIGKILL)
                child.wait()
            code = child.returncode
            interesting.outcome = (
                f"exits with status {code}" if ended and code >= 0 else
                f"ends by {signal.Signals(-code).name}" if ended else
                f"is still running after {timeout:g} s (killed)")
            return ended and code == 0
    interesting.outcome = "was not run"  # what the script did with the last candidate
    return interesting


def _check_runs(script: str, path) -> None:
    """Refuses a script the kernel cannot run: a program (ELF) or a file whose #! line
    names an executable (it runs through a launcher that would only see it fail)."""
    with open(script, "rb") as f:
        head = f.read(512)
    if head.startswith(b"\x7fELF"):
        return
    words = head[2:].split(b"\n", 1)[0].split() if head.startswith(b"#!") else []
    interpreter = os.fsdecode(words[0]) if words else None
    if interpreter is None or not os.path.isfile(interpreter) or \
            not os.access(interpreter, os.X_OK):
        why = f"its #! line names {interpreter}, which is not an executable file" \
            if interpreter else "it is not a program and has no #! line"
        raise InputError(f"{path}: cannot run the interestingness script: {why}")


def _ends(pid: int, seconds: float | None) -> bool:
    """Whether the child `pid` ends within `seconds` (None: however long it takes),
    leaving it to be reaped."""
    deadline = None if seconds is None else time.monotonic() + seconds
    try:  # (a pidfd is readable once the process has ended)
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            ready, _, _ = select.select([fd], [], [], seconds)
            return bool(ready)
        finally:
            os.close(fd)
    pause = 0.001  # (no pidfd: Linux before 5.3) polled
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        if deadline is not None and time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, 0.05)
    return True
