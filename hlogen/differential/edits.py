"""The edits of a module that the reducer's strategies make (hlogen.differential.reduction):
each on a copy of the best module so far, and what every candidate must be (`valid`,
smaller by `size_of`).
"""
from __future__ import annotations

import functools
import re

import numpy as np
from jaxlib.mlir import ir

from hlogen import backends, mlir, preflight
from hlogen import types as T
from hlogen.computation import Computation, main_of
from hlogen.errors import HlogenError
from hlogen.runtime import interpret

# Ops that give a function or region its structure: not counted, never removed.
STRUCTURE = frozenset({"builtin.module", "func.func", "func.return", "stablehlo.return"})
# Ops kept without users: what they do is not their results.
EFFECTS = frozenset({"stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
                     "stablehlo.infeed"})
# Attributes an op verifies without, that are not what the op computes: deleted when the
# module stays interesting (and, as any name with a dot, other dialects' attributes)
OPTIONAL_ATTRIBUTES = frozenset({
    "precision_config", "algorithm", "indices_are_sorted", "unique_indices", "is_stable",
    "result_accuracy", "compare_type", "res_attrs", "backend_config", "operand_layouts",
    "result_layouts", "output_operand_aliases"})
WHERE = "<candidate>"


def ops_of(module: ir.Module) -> list:
    """Every op of every function, regions included, in order (pre-order)."""
    return [op for op in mlir.walk(module) if op.name not in STRUCTURE]


class Skip(Exception):
    """This candidate cannot be built (nothing to change, a value that cannot be replaced)."""


# -- the size of a module, and what every candidate must be ---------------------------------

def size_of(module: ir.Module, text: str) -> tuple:
    """What a candidate must make smaller: (functions, ops, elements of every result,
    constants other than splats of 0 and 1, constants other than splats of 0, characters
    of the text `text` of the module)."""
    ops = ops_of(module)
    elements, constants = 0, [0, 0]
    for op in ops:
        for t in op.results.types:
            if isinstance(t, ir.RankedTensorType) and t.has_static_shape:
                elements += int(np.prod(t.shape))
        if op.name == "stablehlo.constant":
            zero = is_splat(op, 0)
            constants[0] += not zero and not is_splat(op, 1)
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
        preflight.check_module(module, WHERE)
    except HlogenError:
        return False
    return True


def remove_dead_ops(module: ir.Module) -> None:
    """Erases ops whose results nothing uses (and that do nothing else), users first."""
    for op in reversed(mlir.walk(module)):  # an op's regions come after it: erased first
        if op.name in STRUCTURE or op.name in EFFECTS or not len(op.results):
            continue
        if op.name == "stablehlo.custom_call" and "has_side_effect" in op.attributes and \
                ir.BoolAttr(op.attributes["has_side_effect"]).value:
            continue
        if all(not list(r.uses) for r in op.results):
            op.erase()


def fix_signature(main: ir.Operation) -> None:
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


def main_block(module: ir.Module) -> ir.Block:
    return main_of(module, WHERE).regions[0].blocks[0]


def constant_op(attr, result_type) -> ir.Value:
    return ir.Operation.create("stablehlo.constant", results=[result_type],
                               attributes={"value": attr}).result


@functools.lru_cache(maxsize=4096)
def splat_attr(value, result_type) -> ir.Attribute | None:
    """A splat attribute of `value` for an array type; None for other types."""
    try:
        shape = mlir.shape_of_type(result_type)
    except HlogenError:
        return None
    if not isinstance(shape, T.Shape):
        return None
    return mlir.dense_attr(np.full(shape.dimensions, value, shape.dtype), shape)


# -- inline calls ---------------------------------------------------------------------------

def inline_calls(module: ir.Module) -> None:
    blocks = [op.block for op in mlir.walk(module) if op.name == "func.call"]
    if not blocks:
        raise Skip
    table = mlir.functions(module)
    for block in {id(b): b for b in blocks}.values():
        mlir.inline_calls(block, table)
    mlir.drop_unused_functions(module, main_of(module, WHERE))


# -- trim results ---------------------------------------------------------------------------

def results_of(module: ir.Module) -> list:
    return list(range(len(return_op(module).operands)))


def trim_results(module: ir.Module, keys: list) -> None:
    main = main_of(module, WHERE)
    values = list(return_op(module).operands)
    kept = [i for i in range(len(values)) if i not in keys]
    if not kept:
        raise Skip
    set_returned(module, [values[i] for i in kept])
    if "res_attrs" in main.attributes:
        old = list(ir.ArrayAttr(main.attributes["res_attrs"]))
        main.attributes["res_attrs"] = ir.ArrayAttr.get([old[i] for i in kept])


def return_op(module: ir.Module) -> ir.Operation:
    return list(main_block(module).operations)[-1]


def set_returned(module: ir.Module, values: list) -> None:
    """main returns `values` (its type follows: fix_signature)."""
    returned = return_op(module)
    with ir.InsertionPoint(returned), returned.location:
        ir.Operation.create("func.return", operands=values)
    returned.erase()


def returnable(module: ir.Module, key: int) -> list:
    """Each operand of the op that makes main's result `key` (in main's body), then all
    of them (None)."""
    op = mlir.defining_op(return_op(module).operands[key])
    if op is None or op.block != main_block(module):
        return []
    return list(range(len(op.operands))) + ([None] if len(op.operands) > 1 else [])


def return_operand(module: ir.Module, key: int, operand: int | None) -> None:
    """main returns, instead of its result `key`, operand `operand` of the op that made
    it (every operand, for None)."""
    values = list(return_op(module).operands)
    made = list(mlir.defining_op(values[key]).operands)
    values[key:key + 1] = made if operand is None else [made[operand]]
    set_returned(module, values)


# -- remove ops -----------------------------------------------------------------------------

# Ops whose regions are not edited: a reducer that is not associative and commutative, or
# a comparator that is not a strict weak order, leaves results to the implementation (a
# divergence that says nothing); a loop whose counter no longer counts runs forever. They
# go whole, or (a loop) once unrolled.
WHOLE = frozenset({"stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.scatter",
                    "stablehlo.select_and_scatter", "stablehlo.sort", "stablehlo.all_reduce",
                    "stablehlo.reduce_scatter", "stablehlo.while"})


def removable(module: ir.Module) -> list:
    """Ops other than constants (a constant goes with its last user, and standing for one
    with a parameter would lose what the module holds), outside WHOLE's regions."""
    return [i for i, op in enumerate(ops_of(module))
            if op.name != "stablehlo.constant" and not mlir.nested_in(op, WHOLE)]


def remove_ops(module: ir.Module, keys: list) -> None:
    """The ops at `keys` removed, later ones first, each result replaced by an operand of
    its type, else a new parameter of main (in main's body), else zeros."""
    ops = ops_of(module)
    main = main_block(module)
    for key in sorted(keys, reverse=True):
        op = ops[key]
        replacements = [replacement(op, r, main) for r in op.results]
        if any(r is None for r in replacements):
            continue  # (a tuple or a token made elsewhere) it stays
        for result, value in zip(op.results, replacements):
            result.replace_all_uses_with(value() if callable(value) else value)
        op.erase()


def bypasses(module: ir.Module, key: int) -> list:
    """Each operand of the op at `key` whose type is its (one) result's."""
    op = ops_of(module)[key]
    if len(op.results) != 1:
        return []
    return [i for i, v in enumerate(op.operands) if v.type == op.results[0].type]


def bypass_op(module: ir.Module, key: int, operand: int) -> None:
    op = ops_of(module)[key]
    op.results[0].replace_all_uses_with(op.operands[operand])
    op.erase()


def replacement(op: ir.Operation, result: ir.Value, main: ir.Block):
    """What stands for `result` once `op` is gone: a value, or a function making one."""
    for operand in op.operands:
        if operand.type == result.type:
            return operand
    if op.block == main:
        return lambda: main.add_argument(result.type, op.location)
    attr = splat_attr(0, result.type)
    if attr is None:
        return None

    def zeros():
        with ir.InsertionPoint(op), op.location:
            return constant_op(attr, result.type)
    return zeros


# -- simplify regions -----------------------------------------------------------------------

REGION_OPS = ("stablehlo.while", "stablehlo.if", "stablehlo.case")


def with_regions(module: ir.Module) -> list:
    return [i for i, op in enumerate(ops_of(module)) if op.name in REGION_OPS]


def region_variants(module: ir.Module, key: int) -> list:
    """("never",): a while loop's results are its operands; ("once",): its body runs once
    on them; ("branch", i): an if's or a case's region i runs."""
    op = ops_of(module)[key]
    if op.name == "stablehlo.while":
        return [("never",), ("once",)]
    return [("branch", i) for i in range(len(op.regions))]


def simplify_region(module: ir.Module, key: int, variant: tuple) -> None:
    op = ops_of(module)[key]
    if variant == ("never",):
        values = list(op.operands)
    else:
        region = op.regions[1 if variant == ("once",) else variant[1]]
        values = inline_region(op, region.blocks[0], list(op.operands))
    for result, value in zip(op.results, values):
        result.replace_all_uses_with(value)
    op.erase()


def inline_region(op: ir.Operation, block: ir.Block, arguments: list) -> list:
    """The ops of `block` moved before `op`, its arguments replaced by `arguments`;
    returns the values its terminator returned."""
    for argument, value in zip(block.arguments, arguments):
        argument.replace_all_uses_with(value)
    body = list(block.operations)
    for inner in body[:-1]:
        inner.move_before(op)
    return list(body[-1].operands)


# -- fold and simplify constants ------------------------------------------------------------

def foldable(module: ir.Module) -> list:
    """Ops of constants alone that the interpreter runs: StableHLO ops that are not
    constants themselves, with no regions and array results."""
    found = []
    for i, op in enumerate(ops_of(module)):
        if op.name == "stablehlo.constant" or op.name in EFFECTS or len(op.regions) or \
                not len(op.operands) or not op.name.startswith("stablehlo.") or \
                backends.INTERPRET.refusal(op):
            continue
        defining = [mlir.defining_op(v) for v in op.operands]
        if all(d is not None and d.name == "stablehlo.constant" for d in defining) and \
                all(isinstance(t, ir.RankedTensorType) for t in op.results.types):
            found.append(i)
    return found


def new_main(inputs: list, outputs: list) -> tuple[ir.Module, ir.Block]:
    """A new module with an empty `main` of these parameter and result types, and the
    block to fill (its arguments the parameters; a func.return still to add)."""
    module = ir.Module.create()
    with ir.InsertionPoint(module.body):
        function = ir.Operation.create(
            "func.func", regions=1, attributes={
                "sym_name": ir.StringAttr.get("main"),
                "function_type": ir.TypeAttr.get(ir.FunctionType.get(inputs, outputs))})
    return module, function.regions[0].blocks.append(*inputs)


def op_alone(op: ir.Operation, parameters: bool = False) -> ir.Module:
    """A module whose main returns what `op` computes from its operands: copies of their
    constants, or (`parameters`) main's parameters, one per operand."""
    inputs = [v.type for v in op.operands] if parameters else []
    module, block = new_main(inputs, list(op.results.types))
    with ir.InsertionPoint(block):
        operands = list(block.arguments) if parameters else \
            [mlir.defining_op(v).clone().result for v in op.operands]
        copy = op.clone()
        for i, value in enumerate(operands):
            copy.operands[i] = value
        ir.Operation.create("func.return", operands=list(copy.results))
    return module


def folded_value(alone: ir.Module, op: ir.Operation) -> list | None:
    """Attributes of the values `op`'s module computes (None when the interpreter cannot)."""
    try:
        values = interpret(Computation(alone))
    except HlogenError:
        return None
    values = values if isinstance(values, tuple) else (values,)
    return [mlir.dense_attr(v, mlir.shape_of_type(t)) for v, t in zip(values, op.results.types)]


def is_splat(op: ir.Operation, value) -> bool:
    """Whether the constant `op` holds `value` everywhere (False where Python cannot read
    its attribute: complex constants)."""
    try:
        return op.attributes["value"] == splat_attr(value, op.results[0].type)
    except TypeError:  # "Can't cast unknown element type": complex numbers
        return False


def constants_not(value):
    """Constants whose value is not a splat of `value`, outside WHOLE's regions."""
    def changes(module: ir.Module) -> list:
        return [i for i, op in enumerate(ops_of(module)) if op.name == "stablehlo.constant"
                and not mlir.nested_in(op, WHOLE) and not is_splat(op, value)]
    return changes


def constant_key(op: ir.Operation):
    """What makes two constants equal (their block, type and value), or None for an op
    that is not a constant or one Python cannot read (complex: see is_splat)."""
    if op.name != "stablehlo.constant":
        return None
    try:
        return op.block, str(op.results[0].type), op.attributes["value"]
    except TypeError:
        return None


def repeated_constants(module: ir.Module) -> list:
    """Constants equal to an earlier constant of their block."""
    found, first = [], set()
    for i, op in enumerate(ops_of(module)):
        key = constant_key(op)
        if key is not None and key in first:
            found.append(i)
        elif key is not None:
            first.add(key)
    return found


def merge_constants(module: ir.Module, keys: list) -> None:
    """The constants at `keys` replaced by the first equal constant of their block."""
    ops, first = ops_of(module), {}
    for i, op in enumerate(ops):
        key = constant_key(op)
        if key is not None and i not in keys:
            first.setdefault(key, op)
    for i in keys:
        ops[i].results[0].replace_all_uses_with(first[constant_key(ops[i])].results[0])
        ops[i].erase()


def set_constants(value):
    def apply(module: ir.Module, keys: list) -> None:
        ops = ops_of(module)
        for key in keys:
            ops[key].attributes["value"] = splat_attr(value, ops[key].results[0].type)
    return apply


# -- simplify attributes --------------------------------------------------------------------

def deletable(name: str) -> bool:
    return name in OPTIONAL_ATTRIBUTES or "." in name


def attributes_of(module: ir.Module) -> list:
    """(op index, attribute name) of attributes that may go; -1 is the module itself, -2
    main. Only names are read: reading a complex constant from Python ends the process."""
    found = [(-1, name) for name in module.operation.attributes if deletable(name)]
    for i, op in enumerate(ops_of(module)):
        if op.name != "stablehlo.constant":
            found += [(i, name) for name in op.attributes if deletable(name)]
    if "res_attrs" in main_of(module, WHERE).attributes:
        found.append((-2, "res_attrs"))
    return found


def delete_attributes(module: ir.Module, keys: list) -> None:
    ops = ops_of(module)
    for index, name in keys:
        op = module.operation if index == -1 else main_of(module, WHERE) if index == -2 \
            else ops[index]
        del op.attributes[name]


# -- shrink shapes --------------------------------------------------------------------------

TENSOR_DIMS = re.compile(r"tensor<((?:\d+x)+)")
_I64_ARRAY = re.compile(r"array<i64:([^>]*)>")


def dimension_sizes(module: ir.Module) -> list:
    """The dimension sizes (> 1) of the module's types, largest first."""
    text = module.operation.get_asm(assume_verified=True)
    found = {int(d) for m in TENSOR_DIMS.finditer(text) for d in m.group(1).split("x")[:-1]}
    return sorted((d for d in found if d > 1), reverse=True)


def halve(module: ir.Module, size: int, variant: str) -> ir.Module:
    """A module with every dimension of `size` halved in its types ("types"), and in its
    integer array attributes too ("arrays": slice limits, window sizes, ...)."""
    def halved(numbers: str, sep: str) -> str:
        return sep.join(str(int(n) // 2) if n.strip() == str(size) else n
                        for n in numbers.split(sep))

    text = module.operation.get_asm(enable_debug_info=True, assume_verified=True)
    text = TENSOR_DIMS.sub(lambda m: f"tensor<{halved(m.group(1), 'x')}", text)
    if variant == "arrays":
        text = _I64_ARRAY.sub(lambda m: f"array<i64:{halved(m.group(1), ',')}>", text)
    with mlir.collected_diagnostics():
        try:
            return ir.Module.parse(text, context=mlir.context())
        except ir.MLIRError:
            raise Skip from None


# -- drop unused parameters -----------------------------------------------------------------

def unused_parameters(module: ir.Module) -> list:
    return [i for i, a in enumerate(main_block(module).arguments) if not list(a.uses)]


def drop_parameters(module: ir.Module, keys: list) -> None:
    main = main_of(module, WHERE)
    block = main.regions[0].blocks[0]
    if "arg_attrs" in main.attributes:
        old = list(ir.ArrayAttr(main.attributes["arg_attrs"]))
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(
            [a for i, a in enumerate(old) if i not in keys])
    for i in sorted(keys, reverse=True):
        block.erase_argument(i)


