"""Helpers every op family uses: operand checks, attributes, broadcast emission."""
from __future__ import annotations

import numpy as np

from hlogen import types as T
from hlogen.builder import Op, same_builder
from hlogen.errors import ShapeError
from hlogen.mlir import i64_array

# Kind sets the op tables use, named as the spec names the types.
PRED, SIGNED, UNSIGNED, FLOAT, COMPLEX = T.PRED, T.SIGNED, T.UNSIGNED, T.FLOAT, T.COMPLEX
INTEGER = frozenset({SIGNED, UNSIGNED})
FLOATING = frozenset({FLOAT, COMPLEX})
ARITHMETIC = INTEGER | FLOATING
LOGICAL = INTEGER | {PRED}
ANY = ARITHMETIC | {PRED}

_KIND_WORDS = {PRED: "pred", SIGNED: "signed integer", UNSIGNED: "unsigned integer",
               FLOAT: "floating-point", COMPLEX: "complex"}


def describe_kinds(kinds) -> str:
    return ", ".join(_KIND_WORDS[k] for k in (PRED, SIGNED, UNSIGNED, FLOAT, COMPLEX) if k in kinds)


def array_operand(op_name: str, arg: str, operand) -> T.Shape:
    """The array shape of `operand`; tuples and tokens are rejected with the op's name."""
    if not isinstance(operand, Op):
        raise ShapeError(f"{op_name}: {arg} must be an Op, got {type(operand).__name__} {operand!r}")
    if not isinstance(operand.shape, T.Shape):
        raise ShapeError(f"{op_name}: {arg} must be an array, got {operand.shape}")
    return operand.shape


def check_kind(op_name: str, arg: str, operand: Op, kinds) -> T.ElementType:
    et = array_operand(op_name, arg, operand).element_type
    if et.kind not in kinds:
        raise ShapeError(f"{op_name}: {arg} has element type {et.name} ({operand.shape}); "
                         f"{op_name} takes {describe_kinds(kinds)} types")
    return et


def as_operands(op_name: str, *values) -> list[Op]:
    """Ops from `values`, where Python numbers become scalar constants of the element
    type of the first Op among them (XLA: a number takes the other operand's type)."""
    like = next((v for v in values if isinstance(v, Op)), None)
    if like is None:
        raise ShapeError(f"{op_name}: at least one operand must be an Op, got "
                         f"{', '.join(type(v).__name__ for v in values)}")
    et = array_operand(op_name, "operand", like).element_type
    result = [v if isinstance(v, Op) else _scalar(op_name, like.builder, v, et) for v in values]
    same_builder(op_name, *result)
    return result


def _scalar(op_name, builder, value, et) -> Op:
    if not isinstance(value, (bool, int, float, complex)) and not (
            hasattr(value, "dtype") and getattr(value, "shape", None) == ()):
        raise ShapeError(f"{op_name}: operand must be an Op or a Python number, "
                         f"got {type(value).__name__} {value!r}")
    array = T.as_array(value, et, what=f"{op_name}: a number operand")
    return builder.constant(array)


def same_element_type(op_name: str, *named) -> T.ElementType:
    """The element type shared by the named operands ((name, Op) pairs)."""
    ets = {o.shape.element_type for _, o in named}
    if len(ets) > 1:
        listed = ", ".join(f"{n}={o.shape}" for n, o in named)
        raise ShapeError(f"{op_name}: operands must have the same element type, got {listed}")
    return ets.pop()


def check_dimension(op_name: str, arg: str, value, rank: int) -> int:
    if not isinstance(value, (bool, int)) and type(value).__name__.startswith(("int", "uint")):
        value = int(value)  # numpy integers
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < rank:
        raise ShapeError(f"{op_name}: {arg}={value!r} must be a dimension number in [0, {rank})")
    return value


_ONLY_INT = frozenset({int})


def int_list(op_name: str, arg: str, values) -> tuple[int, ...]:
    if type(values) in (tuple, list) and _ONLY_INT.issuperset(map(type, values)) and \
            -2**63 <= min(values, default=0) and max(values, default=0) < 2**63:
        return tuple(values)  # the common case, on the hot path of emission
    try:
        if isinstance(values, (Op, str, bytes)):  # an Op is not a list of its elements
            raise TypeError
        result = tuple(values)
    except TypeError:
        raise ShapeError(f"{op_name}: {arg} must be a sequence of integers, got {values!r}") from None
    for v in result:
        if isinstance(v, bool) or not isinstance(v, int) and not hasattr(v, "__index__"):
            raise ShapeError(f"{op_name}: {arg} must be a sequence of integers, got {values!r}")
    result = tuple(int(v) for v in result)
    if any(not -2**63 <= v < 2**63 for v in result):  # MLIR's attributes hold 64-bit integers
        raise ShapeError(f"{op_name}: {arg}={list(result)} must hold 64-bit integers")
    return result


def sizes(op_name: str, arg: str, values) -> tuple[int, ...]:
    """Array dimension sizes: non-negative integers."""
    result = int_list(op_name, arg, values)
    if any(v < 0 for v in result):
        raise ShapeError(f"{op_name}: {arg}={list(result)} must be non-negative sizes")
    return result


def flag(op_name: str, arg: str, value) -> bool:
    """A boolean attribute: True or False (numpy booleans too), nothing else."""
    if not isinstance(value, (bool, np.bool_)):
        raise ShapeError(f"{op_name}: {arg} must be True or False, got {value!r}")
    return bool(value)


def dimension_list(op_name: str, arg: str, values, shape) -> tuple[int, ...]:
    """Dimension numbers of `shape`: each in [0, rank), none repeated."""
    dims = int_list(op_name, arg, values)
    for d in dims:
        if not 0 <= d < shape.rank:
            raise ShapeError(f"{op_name}: {arg}={list(dims)} has {d}, which is not a dimension "
                             f"of {shape} (rank {shape.rank})")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"{op_name}: {arg}={list(dims)} repeats a dimension (operand {shape})")
    return dims


def as_operand_list(op_name: str, arg: str, values) -> list[Op]:
    """The operands of a variadic op (sort, scatter, reduce...): a bare Op or a non-empty
    list or tuple of array Ops (the op returns a bare Op for a bare one)."""
    items = [values] if isinstance(values, Op) else (
        list(values) if isinstance(values, (list, tuple)) else None)
    if not items:
        raise ShapeError(f"{op_name}: {arg} must be an Op or a non-empty list of Ops, got "
                         f"{values!r}")
    for i, v in enumerate(items):
        array_operand(op_name, f"{arg}[{i}]", v)
    return items


# -- attributes -------------------------------------------------------------------------

# -- emission ---------------------------------------------------------------------------

def broadcast_in_dim(operand: Op, dimensions, mapping) -> Op:
    """Emits stablehlo.broadcast_in_dim of `operand` to `dimensions` (no checks: callers did)."""
    shape = T.Shape(operand.shape.element_type, tuple(dimensions))
    return operand.builder.add_op("stablehlo.broadcast_in_dim", shape, [operand],
                                  {"broadcast_dimensions": i64_array(mapping)})


def full_like(like: Op, value) -> Op:
    """An array of `like`'s shape filled with `value`."""
    scalar = like.builder.constant(T.as_array(value, like.shape.element_type))
    return broadcast_in_dim(scalar, like.shape.dimensions, ())
