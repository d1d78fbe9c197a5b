"""Control flow and calls: While, Conditional, Call, CompositeCall, OptimizationBarrier,
AfterAll, CreateToken.

Values that several ops carry (a While state, a Conditional branch operand, an
OptimizationBarrier's operands) are an Op, or a Python tuple of Ops: a computation then
gets one parameter per element, and the op returns the same structure.
"""
from __future__ import annotations

import builtins

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Builder, Op, apply, build_computation, copy_function, same_builder, trace
from hlogen.computation import Computation
from hlogen.errors import HlogenError, ShapeError
from hlogen.ops import tuples

_PRED = T.Shape(T.pred, ())


def _structure(op_name: str, arg: str, value, allow_empty=False) -> tuple[list[Op], bool]:
    """(the Ops of `value`, whether it was a bare Op)."""
    if isinstance(value, Op):
        return [value], True
    if isinstance(value, (builtins.tuple, list)) and all(isinstance(v, Op) for v in value) and \
            (value or allow_empty):
        return list(value), False
    raise ShapeError(f"{op_name}: {arg} must be an Op or a tuple of Ops"
                     f"{' (possibly empty)' if allow_empty else ''}, got {value!r}")


def _shaped_like(single: bool, results: list[Op]):
    return results[0] if single else builtins.tuple(results)


def _describe(shapes) -> str:
    return "(" + ", ".join(map(str, shapes)) + ")"


# -- tuples through regions -------------------------------------------------------------------------
# stablehlo.while, if and case carry arrays and tokens, not tuples: tuple-shaped values
# travel as their leaves, and the user's computation sees them rebuilt.


# -- While ------------------------------------------------------------------------------------

def while_loop(condition, body, init):
    """While(condition, body, init): repeats `body` on the loop-carried value while
    `condition` (-> pred[]) holds. `init` is an Op (an array, a token or a tuple) or a
    tuple of Ops; both computations take one parameter per element, `body` returns the
    same shapes, and the result has init's structure."""
    values, single = _structure("while_loop", "init", init)
    builder = same_builder("while_loop", *values)
    shapes = [v.shape for v in values]
    leaves = tuples.leaves(values)
    leaf_shapes = [leaf.shape for leaf in leaves]
    if leaf_shapes != shapes:  # tuples among the values: the computations get them rebuilt
        def on_leaves_body(*params, builder):
            out = apply(builder, "while_loop", "body", body, tuples.rebuild(shapes, params, builder))
            if [o.shape for o in out] != shapes:
                raise ShapeError(f"while_loop: the body must return {_describe(shapes)}; it "
                                 f"returns {_describe([o.shape for o in out])}")
            return tuples.leaves(out)

        def on_leaves_condition(*params, builder):
            return apply(builder, "while_loop", "condition", condition,
                         tuples.rebuild(shapes, params, builder))
    else:
        on_leaves_condition, on_leaves_body = condition, body
    cond = trace(builder, "while_loop", "condition", on_leaves_condition, leaf_shapes, [_PRED])
    step = trace(builder, "while_loop", "body", on_leaves_body, leaf_shapes, leaf_shapes)
    results = builder.add_op_with_regions("stablehlo.while", leaf_shapes, leaves, {}, [cond, step])
    return _shaped_like(single, tuples.rebuild(shapes, results, builder))


# -- Conditional ------------------------------------------------------------------------------

def conditional(*args):
    """Conditional, in the spec's two forms (call both positionally):

    conditional(pred, true_operand, true_computation, false_operand, false_computation):
        runs true_computation(true_operand) if pred (a pred[] scalar), else the other;
    conditional(branch_index, branch_computations, branch_operands):
        runs branch_computations[branch_index](branch_operands[branch_index]); an s32
        index < 0 or >= N runs the last branch.
    A branch operand is an Op or a tuple of Ops (possibly empty: the computation then
    takes no parameters); every branch must return the same shapes. A computation
    without parameters that needs constants can take a keyword-only `builder` argument.
    """
    if len(args) == 5:
        pred, true_operand, true_computation, false_operand, false_computation = args
        selector, kind = pred, "pred"
        computations = [true_computation, false_computation]
        operands = [true_operand, false_operand]
        names = ["true_computation", "false_computation"]
    elif len(args) == 3:
        selector, computations, operands = args
        kind = "branch_index"
        if not isinstance(computations, (builtins.tuple, list)) or not computations:
            raise ShapeError(f"conditional: branch_computations must be a non-empty list, got "
                             f"{computations!r}")
        if not isinstance(operands, (builtins.tuple, list)) or len(operands) != len(computations):
            raise ShapeError(f"conditional: branch_operands must be a list of one operand per "
                             f"branch ({len(computations)}), got {operands!r}")
        names = [f"branch_computations[{i}]" for i in range(len(computations))]
    else:
        raise ShapeError(f"conditional takes (pred, true_operand, true_computation, false_operand, "
                         f"false_computation) or (branch_index, branch_computations, "
                         f"branch_operands), got {len(args)} arguments")
    wanted = _PRED if kind == "pred" else T.Shape(T.s32, ())
    if not isinstance(selector, Op) or selector.shape != wanted:
        raise ShapeError(f"conditional: {kind} must be a {wanted} Op, got "
                         f"{selector.shape if isinstance(selector, Op) else repr(selector)}")
    structures = [_structure("conditional", f"the operand of {n}", o, allow_empty=True)[0]
                  for n, o in zip(names, operands)]
    builder = same_builder("conditional", selector, *[v for s in structures for v in s])
    returned = {}  # branch name -> the shapes it returns, before tuples are taken apart

    def branch(name, computation):
        def leaves_of(*params, builder):
            out = apply(builder, "conditional", name, computation, params)
            returned[name] = [o.shape for o in out]
            return tuples.leaves(out)
        return leaves_of

    regions = [trace(builder, "conditional", name, branch(name, computation),
                     [v.shape for v in values], captured=values)
               for name, computation, values in zip(names, computations, structures)]
    results = returned[names[0]]
    for name in names[1:]:
        if returned[name] != results:
            raise ShapeError(f"conditional: {name} returns {_describe(returned[name])}, "
                             f"{names[0]} returns {_describe(results)}; every branch must "
                             f"return the same shapes")
    mlir_name = "stablehlo.if" if kind == "pred" else "stablehlo.case"
    outs = tuples.rebuild(results, builder.add_op_with_regions(
        mlir_name, regions[0].result_shapes, [selector], {}, regions), builder)
    return outs[0] if len(outs) == 1 else builtins.tuple(outs)


# -- Call, CompositeCall --------------------------------------------------------------------------

def _callee(op_name: str, what: str, computation, args):
    """`computation` as a Computation taking `args` (a callable is built into one)."""
    for i, a in enumerate(args):
        if not isinstance(a, Op):
            raise ShapeError(f"{op_name}: argument {i} must be an Op, got {type(a).__name__} {a!r}")
    if callable(computation) and not isinstance(computation, Computation):
        computation = build_computation(op_name, what, computation, [a.shape for a in args])
    if not isinstance(computation, Computation):
        raise ShapeError(f"{op_name}: {what} must be a Python callable or an hg.Computation, got "
                         f"{type(computation).__name__} {computation!r}")
    expected = computation.parameter_shapes
    got = [a.shape for a in args]
    if got != expected:
        raise ShapeError(f"{op_name}: {what} {computation.name!r} takes {_describe(expected)}, "
                         f"called with {_describe(got)}")
    return computation


def call(computation, *args):
    """Call(computation, args...): the results of `computation` on `args` (a func.call of a
    private copy of it). A computation with several results returns a tuple of Ops."""
    if not args:
        raise ShapeError("call: a call without arguments cannot tell which builder it belongs "
                         "to; give the computation a parameter")
    builder = same_builder("call", *args)
    computation = _callee("call", "computation", computation, args)
    symbol = copy_function(builder.module, computation)
    shapes = computation.result_shapes
    operation = builder.emit("func.call", [mlir.ir_type(s) for s in shapes], [a.value for a in args],
                             {"callee": ir.FlatSymbolRefAttr.get(symbol, context=mlir.context())})
    outs = [Op(builder, r, s) for r, s in zip(operation.results, shapes)]
    return outs[0] if len(outs) == 1 else builtins.tuple(outs)


def composite_call(decomposition, *inputs, name, composite_attributes=None, version=0):
    """CompositeCall: an op named `name` (with `composite_attributes` and `version`) whose
    meaning is `decomposition` applied to `inputs`; backends run the decomposition."""
    if not isinstance(name, str) or not name:
        raise ShapeError(f"composite_call: name must be a non-empty string, got {name!r}")
    if isinstance(version, bool) or not isinstance(version, int) or not 0 <= version < 2**31:
        raise ShapeError(f"composite_call: version={version!r} must be an integer in [0, 2**31)")
    if not inputs:
        raise ShapeError("composite_call: needs at least one input")
    builder = same_builder("composite_call", *inputs)
    decomposition = _callee("composite_call", "decomposition", decomposition, inputs)
    ctx = mlir.context()
    symbol = copy_function(builder.module, decomposition)
    shapes = decomposition.result_shapes
    operation = builder.emit("stablehlo.composite", [mlir.ir_type(s) for s in shapes],
                             [a.value for a in inputs], {
                                 "name": ir.StringAttr.get(name, context=ctx),
                                 "composite_attributes": _attributes(composite_attributes),
                                 "decomposition": ir.FlatSymbolRefAttr.get(symbol, context=ctx),
                                 "version": mlir.int_attr(version, 32)})
    outs = [Op(builder, r, s) for r, s in zip(operation.results, shapes)]
    return outs[0] if len(outs) == 1 else builtins.tuple(outs)


def _attributes(value) -> ir.Attribute:
    """composite_attributes: None, an MLIR dictionary as text ("{n = 1 : i32}"), or a dict
    of Python values (bool, int as i64, float as f64, str, numpy arrays, MLIR attributes)."""
    ctx = mlir.context()
    if value is None:
        return ir.DictAttr.get({}, context=ctx)
    if isinstance(value, str):
        try:
            parsed = mlir.parse_attribute(value, "composite_call: composite_attributes")
        except HlogenError as e:
            raise ShapeError(f"composite_call: composite_attributes {value!r} is not an MLIR "
                             f"attribute: {e}") from None
        if not isinstance(parsed, ir.DictAttr) and not ir.DictAttr.isinstance(parsed):
            raise ShapeError(f"composite_call: composite_attributes {value!r} must be a "
                             f"dictionary such as {{n = 1 : i32}}")
        return parsed
    if not isinstance(value, dict):
        raise ShapeError(f"composite_call: composite_attributes must be None, a dict or MLIR "
                         f"dictionary text, got {type(value).__name__}")
    return ir.DictAttr.get({k: _attribute(k, v) for k, v in value.items()}, context=ctx)


def _attribute(key, value) -> ir.Attribute:
    ctx = mlir.context()
    if not isinstance(key, str) or not key:
        raise ShapeError(f"composite_call: composite_attributes keys must be strings, got {key!r}")
    if isinstance(value, ir.Attribute):
        return value
    if isinstance(value, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(value), context=ctx)
    if isinstance(value, (int, np.integer)):
        if not -2**63 <= int(value) < 2**63:
            raise ShapeError(f"composite_call: composite_attributes[{key!r}]={value} does not fit "
                             f"64 bits")
        return mlir.int_attr(int(value))
    if isinstance(value, (float, np.floating)):
        return ir.FloatAttr.get_f64(float(value), context=ctx)
    if isinstance(value, str):
        return ir.StringAttr.get(value, context=ctx)
    if isinstance(value, np.ndarray):
        et = T.element_type(value.dtype)
        return mlir.dense_attr(value, T.Shape(et, value.shape))
    raise ShapeError(f"composite_call: composite_attributes[{key!r}] of type "
                     f"{type(value).__name__} has no MLIR attribute; use bool, int, float, str, "
                     f"a numpy array or an MLIR attribute")


# -- OptimizationBarrier, tokens --------------------------------------------------------------------

def optimization_barrier(operand):
    """OptimizationBarrier(operand): the operand (an Op or a tuple of Ops) unchanged, with
    every value computed before anything that uses the result."""
    values, single = _structure("optimization_barrier", "operand", operand)
    builder = same_builder("optimization_barrier", *values)
    # StableHLO's barrier takes arrays and tokens, not tuples: a tuple's leaves go through
    # it and the tuple is rebuilt of them
    leaves = tuples.leaves(values)
    operation = builder.emit("stablehlo.optimization_barrier",
                             [mlir.ir_type(v.shape) for v in leaves], [v.value for v in leaves])
    results = [Op(builder, r, v.shape) for r, v in zip(operation.results, leaves)]
    return _shaped_like(single, tuples.rebuild([v.shape for v in values], results, builder))


def after_all(tokens):
    """AfterAll(tokens): a token that follows every one of `tokens` (one or more)."""
    values = [tokens] if isinstance(tokens, Op) else list(tokens) if isinstance(
        tokens, (builtins.tuple, list)) else None
    if not values:
        raise ShapeError(f"after_all: tokens must be a non-empty list of token Ops, got {tokens!r}"
                         f" (create_token(builder) makes the first token)")
    for i, t in enumerate(values):
        if not isinstance(t, Op) or not isinstance(t.shape, T.TokenShape):
            raise ShapeError(f"after_all: tokens[{i}] must be a token, got "
                             f"{t.shape if isinstance(t, Op) else repr(t)}")
    builder = same_builder("after_all", *values)
    return builder.add_op("stablehlo.after_all", T.token, values)


def create_token(builder):
    """A new token (AfterAll of no tokens)."""
    if not isinstance(builder, Builder):
        raise ShapeError(f"create_token: builder must be a Builder, got {type(builder).__name__}")
    return builder.add_op("stablehlo.after_all", T.token, [])
