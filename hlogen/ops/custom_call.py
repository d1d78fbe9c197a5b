"""CustomCall: a call of a native function registered with XLA (hlogen.runtime.custom_calls).

`opaque` reaches the target as XLA passes it: for the typed FFI (api_version=4, the
default) as attributes, which the handler binds by name and type (`.Attr<float>("scale")`);
for the legacy API versions 1-3 as the opaque byte string (version 3 receives it).
Operands and results are row-major arrays (explicit layouts, as jax emits them; others on
request) and tokens.
"""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Builder, Op, same_builder
from hlogen.errors import HlogenError, ShapeError
from hlogen.ops._common import flag, int_list

_OP = "custom_call"

TYPED_FFI = 4

API_VERSIONS = {
    1: "API_VERSION_ORIGINAL",
    2: "API_VERSION_STATUS_RETURNING",
    3: "API_VERSION_STATUS_RETURNING_UNIFIED",
    4: "API_VERSION_TYPED_FFI",
}

# Names XLA's compiler rewrites or interprets itself; with operands it does not expect,
# XLA CPU ends the process (checked with jaxlib 0.10.2: TopK, SliceToDynamic, Sharding,
# SPMDFullToShardShape, SPMDShardToFullShape and xla.sdy.* abort; __onednn$matmul
# dies of SIGILL).
RESERVED_TARGETS = frozenset({
    "TopK", "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
    "SPMDShardShapeToFull", "ShardBarrierFrom", "ShardBarrierTo", "InspectSharding",
    "PadToStatic", "SliceToDynamic", "MoveToHost", "MoveToDevice", "PinToDevice",
    "annotate_device_placement", "LayoutConstraint", "AllocateBuffer", "X64Combine",
    "X64SplitLow", "X64SplitHigh",
})
RESERVED_PREFIXES = ("xla.sdy.", "local_xla.sdy.", "__onednn$", "__cudnn$", "__cublas$",
                     "__cpu$", "__gpu$", "__op$", "__triton")


def reserved_reason(name: str) -> str | None:
    """Why custom-call target `name` is refused (a name XLA handles itself), or None."""
    if name in RESERVED_TARGETS or name.startswith(RESERVED_PREFIXES):
        return (f"{name!r} is a name XLA's compiler handles itself, not a registered target "
                f"(XLA CPU ends the process on several of these when the operands differ "
                f"from what it expects); give your target another name")
    return None


_MAX_ATTRIBUTE_NESTING = 32  # MLIR prints and XLA converts nested dictionaries recursively

# numpy dtypes XLA's FFI converts to handler attributes (xla/ffi/attribute_map.cc)
_ATTRIBUTE_DTYPES = frozenset(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float32, np.float64))


def custom_call(target_name, args, shape, *, builder=None, opaque=b"", has_side_effect=False,
                api_version=None, operand_layouts=None, result_layouts=None):
    """CustomCall(target_name, args, shape): calls target `target_name` on `args`.

    `args` is a list of Ops (arrays or tokens; with none, pass `builder=`). `shape` is
    the result: an array shape or `hg.token` for one Op, a tuple shape (or a Python
    tuple of shapes) for a tuple of Ops. `api_version` is the target's custom-call API
    (None: 4, the typed FFI; 1, 2, 3: the legacy forms, see hlogen.runtime.custom_calls).
    `opaque` is, for the typed FFI, a dict of attributes (Python int -> s64, float -> f64,
    bool, str, numpy scalars keep their type, 1-D arrays and lists, nested dicts) or
    the text of an MLIR dictionary (`"{scale = 2.0 : f32}"`, as in XLA's HLO); for the
    legacy versions, the bytes (or str) passed to the target. A call without results
    must have `has_side_effect=True`; with it, XLA neither removes nor merges the call.
    The target sees row-major arrays; `operand_layouts` and `result_layouts` (one XLA
    minor-to-major order per operand or result, None for row-major) ask XLA for others,
    e.g. (0, 1) for a column-major matrix, as jaxlib's LAPACK targets want them.
    """
    name = _target_name(target_name)
    version = _api_version(api_version)
    operands = _operands(args)
    owner = _builder(operands, builder)
    shapes, several = _result_shapes(shape)
    side_effect = flag(_OP, "has_side_effect", has_side_effect)
    if not shapes and not side_effect:
        raise ShapeError(f"{_OP}: {name!r} has no results, so it needs has_side_effect=True "
                         f"(XLA removes a call that has neither results nor side effects)")
    ctx = mlir.context()
    attributes = {
        "call_target_name": ir.StringAttr.get(name, context=ctx),
        "api_version": mlir.int_attr(version, 32),
        "has_side_effect": ir.BoolAttr.get(side_effect, context=ctx),
        "backend_config": _backend_config(opaque, version),
        # row-major unless asked otherwise: the native code indexes C-order arrays
        "operand_layouts": _layouts("operand_layouts", [o.shape for o in operands], operand_layouts),
        "result_layouts": _layouts("result_layouts", shapes, result_layouts),
    }
    results = owner.add_op_with_regions("stablehlo.custom_call", shapes, operands, attributes, ())
    return tuple(results) if several else results[0]


# -- arguments ---------------------------------------------------------------------------

def _target_name(target_name) -> str:
    if not isinstance(target_name, str) or not target_name:
        raise ShapeError(f"{_OP}: target_name must be a non-empty string, got {target_name!r}")
    reason = reserved_reason(target_name)
    if reason is not None:
        raise ShapeError(f"{_OP}: target_name {reason}")
    return target_name


def _api_version(api_version) -> int:
    if api_version is None:
        return TYPED_FFI
    if isinstance(api_version, bool) or not isinstance(api_version, int) or \
            api_version not in API_VERSIONS:
        listed = ", ".join(f"{v} ({n})" for v, n in API_VERSIONS.items())
        raise ShapeError(f"{_OP}: api_version must be one of {listed} or None (4), got "
                         f"{api_version!r}")
    return int(api_version)


def _operands(args) -> list:
    items = [args] if isinstance(args, Op) else (
        list(args) if isinstance(args, (list, tuple)) else None)
    if items is None:
        raise ShapeError(f"{_OP}: args must be a list of Ops, got {type(args).__name__} {args!r}")
    for i, a in enumerate(items):
        if not isinstance(a, Op):
            raise ShapeError(f"{_OP}: args[{i}] must be an Op, got {type(a).__name__} {a!r}")
        if isinstance(a.shape, T.TupleShape):
            raise ShapeError(f"{_OP}: args[{i}] is a tuple {a.shape}; a custom call takes arrays "
                             f"and tokens: pass the elements (ops.get_tuple_element)")
    return items


def _builder(operands, builder) -> Builder:
    if builder is not None and not isinstance(builder, Builder):
        raise ShapeError(f"{_OP}: builder must be a Builder, got {type(builder).__name__} "
                         f"{builder!r}")
    if not operands:
        if builder is None:
            raise ShapeError(f"{_OP}: a call without args needs builder=")
        return builder
    owner = same_builder(_OP, *operands)
    if builder is not None and builder is not owner:
        raise ShapeError(f"{_OP}: args belong to {owner!r}, not to builder={builder!r}")
    return owner


def _result_shapes(shape) -> tuple[list, bool]:
    """The result shapes and whether the results form a tuple of Ops."""
    if isinstance(shape, (T.Shape, T.TokenShape)):
        return [shape], False
    if isinstance(shape, T.TupleShape):
        elements = shape.elements
    elif isinstance(shape, (list, tuple)) and all(
            isinstance(s, (T.Shape, T.TokenShape, T.TupleShape)) for s in shape):
        elements = tuple(shape)
    else:
        raise ShapeError(f"{_OP}: shape must be an array shape such as hg.f32[2, 3], hg.token, "
                         f"or a tuple of them (hg.tuple_shape(...)), got {shape!r}")
    for i, s in enumerate(elements):
        if isinstance(s, T.TupleShape):
            raise ShapeError(f"{_OP}: shape element {i} is a tuple {s}; results are arrays and "
                             f"tokens (nested tuples are not results XLA's FFI can write)")
    return list(elements), True


_layout_cache: dict = {}


def _layouts(arg: str, shapes, given) -> ir.Attribute:
    """XLA's minor-to-major order of each of `shapes`: `given` ones (None: row-major)."""
    if given is None:
        given = [None] * len(shapes)
    elif isinstance(given, (str, bytes)) or not isinstance(given, (list, tuple)) or \
            len(given) != len(shapes):
        raise ShapeError(f"{_OP}: {arg} must give one layout (or None) per "
                         f"{arg.split('_')[0]} ({len(shapes)}), got {given!r}")
    layouts = []
    for i, (s, layout) in enumerate(zip(shapes, given)):
        rank = s.rank if isinstance(s, T.Shape) else 0  # a token has no dimensions
        order = tuple(range(rank - 1, -1, -1)) if layout is None else \
            int_list(_OP, f"{arg}[{i}]", layout)
        if sorted(order) != list(range(rank)):
            raise ShapeError(f"{_OP}: {arg}[{i}]={list(order)} must order the {rank} dimensions "
                             f"of {s}, minor to major (a permutation of 0..{rank - 1})")
        found = _layout_cache.get(order)
        if found is None:
            ctx = mlir.context()
            found = _layout_cache[order] = ir.DenseElementsAttr.get(
                np.array(order, dtype=np.int64), type=ir.IndexType.get(context=ctx), context=ctx)
        layouts.append(found)
    return ir.ArrayAttr.get(layouts, context=mlir.context())


# -- backend_config ----------------------------------------------------------------------

def _backend_config(opaque, version: int) -> ir.Attribute:
    ctx = mlir.context()
    if isinstance(opaque, (bytearray, memoryview)):
        opaque = bytes(opaque)
    if version != TYPED_FFI:
        if isinstance(opaque, dict):
            raise ShapeError(f"{_OP}: opaque: a dict of attributes needs the typed FFI "
                             f"(api_version=4); api_version={version} "
                             f"({API_VERSIONS[version]}) passes bytes or a str")
        if not isinstance(opaque, (bytes, str)):
            raise ShapeError(f"{_OP}: opaque must be bytes or a str for api_version={version}, "
                             f"got {type(opaque).__name__} {opaque!r}")
        return ir.StringAttr.get(opaque, context=ctx)
    if isinstance(opaque, dict):
        return _dictionary(opaque, "opaque", 0)
    if isinstance(opaque, (bytes, str)):
        return _parse_dictionary(opaque) if opaque else ir.DictAttr.get({}, context=ctx)
    raise ShapeError(f"{_OP}: opaque must be a dict of attributes or the text of an MLIR "
                     f"dictionary for the typed FFI (api_version=4), got "
                     f"{type(opaque).__name__} {opaque!r}")


def _parse_dictionary(text) -> ir.Attribute:
    """An MLIR dictionary attribute from its text, as XLA reads a typed FFI backend_config."""
    what = f"{_OP}: opaque {text!r}"
    try:
        attr = mlir.parse_attribute(text, "opaque")
    except HlogenError as e:
        raise ShapeError(f"{what} is not an MLIR dictionary attribute such as "
                         f"\"{{scale = 2.0 : f32}}\" (the typed FFI reads opaque as one): "
                         f"{e}") from None
    if not isinstance(attr, ir.DictAttr):
        raise ShapeError(f"{what} is an MLIR attribute but not a dictionary: the typed FFI "
                         f"(api_version=4) reads named attributes, such as "
                         f"\"{{scale = 2.0 : f32}}\"")
    return attr


def _dictionary(values: dict, where: str, depth: int) -> ir.Attribute:
    if depth > _MAX_ATTRIBUTE_NESTING:
        raise ShapeError(f"{_OP}: {where}: dictionaries nest deeper than "
                         f"{_MAX_ATTRIBUTE_NESTING} levels")
    converted = {}
    for key, value in values.items():
        if not isinstance(key, str) or not key:
            raise ShapeError(f"{_OP}: {where}: attribute names must be non-empty strings, got "
                             f"{key!r}")
        converted[key] = _attribute(value, f"{where}[{key!r}]", depth)
    return ir.DictAttr.get(converted, context=mlir.context())


def _attribute(value, where: str, depth: int) -> ir.Attribute:
    """One typed-FFI attribute: the types XLA converts for handlers, typed as jax types them."""
    ctx = mlir.context()
    if isinstance(value, (bool, np.bool_)):
        return ir.BoolAttr.get(bool(value), context=ctx)
    if isinstance(value, int):
        if not -2**63 <= value < 2**63:
            raise ShapeError(f"{_OP}: {where}={value} does not fit in 64 bits (Python ints "
                             f"are s64 attributes; pass a numpy scalar for another type)")
        return _scalar(np.int64(value))
    if isinstance(value, float):
        return _scalar(np.float64(value))
    if isinstance(value, (str, bytes)):
        return ir.StringAttr.get(value, context=ctx)
    if isinstance(value, dict):
        return _dictionary(value, where, depth + 1)
    if isinstance(value, (np.generic, list, tuple, np.ndarray)):
        array = _attribute_array(value, where)
        if array.ndim == 0:
            return _scalar(array)
        if array.ndim != 1:
            raise ShapeError(f"{_OP}: {where} has shape {array.shape}; array attributes are "
                             f"1-D (the FFI passes them as spans)")
        return mlir.dense_attr(array, T.Shape(T.element_type(array.dtype), array.shape))
    raise ShapeError(f"{_OP}: {where}={value!r}: a typed-FFI attribute is a bool, int, float, "
                     f"str, numpy scalar, 1-D array or list of numbers, or a dict of them")


def _attribute_array(value, where: str) -> np.ndarray:
    if isinstance(value, (list, tuple)):
        kinds = {bool if isinstance(v, (bool, np.bool_)) else int if isinstance(v, int)
                 else float if isinstance(v, float) else None for v in value}
        if None in kinds or bool in kinds:
            raise ShapeError(f"{_OP}: {where}={value!r}: a list attribute holds Python ints "
                             f"(s64) or floats (f64) only; pass a numpy array for other types")
        try:
            array = np.array(value, np.float64 if float in kinds else np.int64)
        except OverflowError:
            raise ShapeError(f"{_OP}: {where}={value!r} holds an int that does not fit in 64 "
                             f"bits") from None
    else:
        array = np.asarray(value)
    if array.dtype not in _ATTRIBUTE_DTYPES:
        raise ShapeError(f"{_OP}: {where} has dtype {array.dtype}; XLA's FFI takes attributes "
                         f"of 8- to 64-bit integers, float32 and float64 (and bool scalars)")
    return array


def _scalar(value: np.ndarray) -> ir.Attribute:
    ctx = mlir.context()
    et = mlir.element_ir_type(T.element_type(value.dtype))
    if value.dtype.kind == "f":
        return (ir.FloatAttr.get_f32 if value.dtype.itemsize == 4 else ir.FloatAttr.get_f64)(
            float(value), context=ctx)
    return ir.IntegerAttr.get(et, int(value))
