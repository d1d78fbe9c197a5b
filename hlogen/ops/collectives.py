"""Collectives across replicas and channel ops.

AllReduce, CrossReplicaSum, AllGather, AllToAll, ReduceScatter, CollectivePermute,
ReplicaId; Send, Recv, Infeed (with the tokens StableHLO threads through them).

Replica groups are checked twice: here, when emitted, as a partition of the replica
ids they name (0..K-1, each once); and when compiled for N replicas
(`check_replicas`, from hlogen.preflight), against N: the groups must cover exactly
the N replicas (collective_broadcast's at most once each: the spec gives a replica in
no group zeros), and an empty list (every replica, one group) must agree with the
shard or split count. The shape rules are the `*_shape` functions.
"""
from __future__ import annotations

import builtins
import collections
import dataclasses
import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Builder, Op, same_builder, trace
from hlogen.errors import ShapeError
from hlogen.mlir import int_attr
from hlogen.ops._common import array_operand, check_dimension, int_list, same_element_type
from hlogen.ops.control import create_token
from hlogen.ops.elementwise import add
from hlogen.ops.tuples import leaves, tuple as make_tuple

# hlogen spells groups out replica by replica: a bound keeps a typo from allocating 2**63 ids
MAX_REPLICAS = 2**16

# -- replica groups ---------------------------------------------------------------------


def _parse_groups(op_name: str, groups, equal_sizes: bool) -> list[list[int]]:
    """`groups` as lists of replica ids: [] (None or empty: every replica, one group), or
    a partition of the ids 0..K-1 (each in exactly one group; groups of one size where the
    op needs it)."""
    if groups is None:
        return []
    try:
        if isinstance(groups, (str, bytes, Op)):
            raise TypeError
        result = [list(int_list(op_name, f"replica_groups[{i}]", g)) for i, g in enumerate(groups)]
    except TypeError:
        raise ShapeError(f"{op_name}: replica_groups must be a list of lists of replica ids, "
                         f"got {groups!r}") from None
    check_partition(op_name, result, None, equal_sizes)
    return result


def check_partition(op_name: str, groups: list[list[int]], num_replicas: int | None,
                    equal_sizes: bool, complete: bool = True) -> None:
    """The rule on non-empty replica groups: each replica (0..N-1; N = the number of ids
    named when `num_replicas` is None) in exactly one group (at most one where not
    `complete`), no group empty."""
    if not groups:
        return
    ids = [r for g in groups for r in g]
    n = len(ids) if num_replicas is None else num_replicas
    where = f"{op_name}: replica_groups={groups}"
    if any(not g for g in groups):
        raise ShapeError(f"{where} has an empty group; every group names at least one replica")
    repeated = sorted(r for r, times in collections.Counter(ids).items() if times > 1)
    if repeated:
        raise ShapeError(f"{where} names replica(s) {repeated} more than once: each replica "
                         f"is in {'exactly' if complete else 'at most'} one group")
    outside = sorted(r for r in ids if not 0 <= r < n)
    missing = sorted(set(range(n)) - set(ids)) if complete else []
    if outside or missing:
        count = (f"the {num_replicas} replicas" if num_replicas is not None
                 else f"the replicas 0..{n - 1} (as many ids as the groups hold)")
        raise ShapeError(f"{where} {'is not a partition of' if complete else 'names ids outside'} "
                         f"{count}: "
                         + "; ".join(filter(None, [outside and f"{outside} out of range",
                                                   missing and f"{missing} in no group"])))
    if equal_sizes and len({len(g) for g in groups}) > 1:
        raise ShapeError(f"{where}: {op_name}'s replica groups must all have the same size, "
                         f"got sizes {[len(g) for g in groups]}")


def groups_attr(groups: list[list[int]]) -> ir.Attribute:
    """StableHLO's 2-D replica_groups; groups of different sizes padded with -1 (as XLA's
    StableHLO conversion does; both backends read it so)."""
    width = max((len(g) for g in groups), default=0)
    array = np.array([g + [-1] * (width - len(g)) for g in groups], np.int64).reshape(
        len(groups), width)
    return ir.DenseIntElementsAttr.get(array, context=mlir.context())


def _counted_groups(op_name: str, groups, arg: str, count) -> tuple[list[list[int]], int]:
    """(groups, count) of an op whose `count` (shard_count, split_count) is the size of
    each group. Without groups, the count is the number of replicas: the groups emitted
    are [[0, ..., count-1]] (compiling for another number of replicas is then an error)."""
    groups = _parse_groups(op_name, groups, equal_sizes=True)
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or \
            not 1 <= count <= MAX_REPLICAS:
        raise ShapeError(f"{op_name}: {arg} must be a positive integer (at most {MAX_REPLICAS}: "
                         f"the number of replicas in a group), got {count!r}")
    count = int(count)
    if groups and len(groups[0]) != count:
        raise ShapeError(f"{op_name}: {arg}={count} must equal the size of each replica group "
                         f"({len(groups[0])} in {groups})")
    return groups or [list(range(count))], count


# -- channels ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ChannelHandle:
    """XLA's ChannelHandle: a channel id and its type (what a bare int means: device to
    device)."""
    handle: int
    type: str = "device_to_device"

    TYPES = {"device_to_device": 1, "device_to_host": 2, "host_to_device": 3}


def _channel(op_name: str, arg: str, value, required: bool):
    """(attribute or None, is_host_transfer) of a channel id or ChannelHandle."""
    if value is None and not required:
        return None, False
    handle = value if isinstance(value, ChannelHandle) else None
    if handle is None:
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ShapeError(f"{op_name}: {arg} must be an int or an ops.ChannelHandle, got "
                             f"{value!r}")
        handle = ChannelHandle(int(value))
    if handle.type not in ChannelHandle.TYPES:
        raise ShapeError(f"{op_name}: {arg} has type {handle.type!r}; the channel types are "
                         f"{', '.join(ChannelHandle.TYPES)}")
    if not 0 <= handle.handle < 2**63:
        raise ShapeError(f"{op_name}: {arg}={handle.handle} must be a non-negative 64-bit id")
    kind = ChannelHandle.TYPES[handle.type]
    with mlir.context():
        attr = stablehlo.ChannelHandle.get(handle.handle, kind)
    return attr, kind != 1


def _with_channel(attributes: dict, op_name: str, channel_id,
                  use_global_device_ids: bool = False) -> dict:
    """`attributes` with the channel handle and use_global_device_ids (the flattened_ids
    mode: groups of device ids, replica x partitions + partition; it needs a channel)."""
    attr, _ = _channel(op_name, "channel_id", channel_id, required=False)
    if attr is not None:
        attributes["channel_handle"] = attr
    if use_global_device_ids:
        if attr is None or stablehlo.ChannelHandle(attr).handle <= 0:
            raise ShapeError(f"{op_name}: use_global_device_ids=True needs a channel_id > 0 "
                             f"(the spec's flattened_ids mode), got channel_id={channel_id!r}")
        attributes["use_global_device_ids"] = ir.UnitAttr.get(context=mlir.context())
    return attributes


# -- operands: an array, a tuple-shaped Op, or a list of arrays ---------------------------------

def _leaves(op_name: str, operand):
    """(array Ops, rebuild): rebuild(result Ops) gives results of the operand's form."""
    if isinstance(operand, Op) and isinstance(operand.shape, T.TupleShape):
        elements = operand.shape.elements
        if not elements or any(not isinstance(e, T.Shape) for e in elements):
            raise ShapeError(f"{op_name}: a tuple operand must be a non-empty tuple of arrays, "
                             f"got {operand.shape}")
        return leaves([operand]), make_tuple
    if isinstance(operand, (builtins.tuple, list)):
        if not operand:
            raise ShapeError(f"{op_name}: operand must be an array Op or a non-empty list of "
                             f"them, got {operand!r}")
        for i, o in enumerate(operand):
            array_operand(op_name, f"operand[{i}]", o)
        same_builder(op_name, *operand)
        return list(operand), builtins.tuple
    array_operand(op_name, "operand", operand)
    return [operand], lambda results: results[0]


def _reducer(op_name: str, leaves: list[Op], computation):
    et = same_element_type(op_name, *[(f"operand[{i}]", o) for i, o in enumerate(leaves)])
    scalar = T.Shape(et, ())
    return trace(leaves[0].builder, op_name, "computation", computation, [scalar, scalar],
                 [scalar])


# -- shape rules ------------------------------------------------------------------------

def _scaled(shape: T.Shape, dim: int, size: int) -> T.Shape:
    dims = list(shape.dimensions)
    dims[dim] = size
    return T.Shape(shape.element_type, tuple(dims))


def _divisible(op_name: str, shape: T.Shape, dim: int, arg: str, count: int) -> None:
    if shape.dimensions[dim] % count:
        raise ShapeError(f"{op_name}: dimension {dim} of operand {shape} (size "
                         f"{shape.dimensions[dim]}) must be divisible by {arg}={count}")


def _nonzero(op_name: str, shape: T.Shape, dim: int, arg: str) -> None:
    if shape.dimensions[dim] == 0:
        raise ShapeError(f"{op_name}: {arg}={dim} is a dimension of size 0 in operand {shape}; "
                         f"StableHLO requires it to be non-empty")


def all_gather_shape(shape: T.Shape, all_gather_dim: int, shard_count: int) -> T.Shape:
    """The operand's shape with all_gather_dim shard_count times larger."""
    check_dimension("all_gather", "all_gather_dim", all_gather_dim, shape.rank)
    _nonzero("all_gather", shape, all_gather_dim, "all_gather_dim")
    return _scaled(shape, all_gather_dim, shape.dimensions[all_gather_dim] * shard_count)


def reduce_scatter_shape(shape: T.Shape, scatter_dimension: int, shard_count: int) -> T.Shape:
    """The operand's shape with scatter_dimension shard_count times smaller."""
    check_dimension("reduce_scatter", "scatter_dimension", scatter_dimension, shape.rank)
    _nonzero("reduce_scatter", shape, scatter_dimension, "scatter_dimension")
    _divisible("reduce_scatter", shape, scatter_dimension, "shard_count", shard_count)
    return _scaled(shape, scatter_dimension, shape.dimensions[scatter_dimension] // shard_count)


def all_to_all_shape(shape: T.Shape, split_dimension: int, concat_dimension: int,
                     split_count: int) -> T.Shape:
    """split_dimension split_count times smaller, then concat_dimension that many times larger."""
    check_dimension("all_to_all", "split_dimension", split_dimension, shape.rank)
    check_dimension("all_to_all", "concat_dimension", concat_dimension, shape.rank)
    _divisible("all_to_all", shape, split_dimension, "split_count", split_count)
    split = _scaled(shape, split_dimension, shape.dimensions[split_dimension] // split_count)
    return _scaled(split, concat_dimension, split.dimensions[concat_dimension] * split_count)


# -- the collectives --------------------------------------------------------------------

def all_reduce(operand, computation, replica_groups=None, channel_id=None,
               use_global_device_ids=False):
    """AllReduce: every replica of a group gets `computation` (T, T -> T) folded over the
    group's operands. `operand` is an array, a tuple-shaped Op or a list of arrays (of one
    element type): each element is reduced, and the result has the operand's form.
    `replica_groups` None or []: every replica, one group. With a channel_id, the groups
    name replicas and every partition joins (cross_replica_and_partition); with
    use_global_device_ids too, they name devices (flattened_ids)."""
    leaves, rebuild = _leaves("all_reduce", operand)
    groups = _parse_groups("all_reduce", replica_groups, equal_sizes=False)
    attributes = _with_channel({"replica_groups": groups_attr(groups)}, "all_reduce", channel_id,
                               use_global_device_ids)
    region = _reducer("all_reduce", leaves, computation)
    return rebuild(leaves[0].builder.add_op_with_regions(
        "stablehlo.all_reduce", [o.shape for o in leaves], leaves, attributes, [region]))


def cross_replica_sum(operand, replica_groups=None):
    """CrossReplicaSum: AllReduce with a sum."""
    return all_reduce(operand, lambda x, y: add(x, y), replica_groups)


def all_gather(operand, all_gather_dim, shard_count, replica_groups=None, channel_id=None,
               use_global_device_ids=False):
    """AllGather: the operands of a group's replicas concatenated along all_gather_dim, in
    the group's order; shard_count is the size of each group (the number of replicas when
    replica_groups is empty)."""
    shape = array_operand("all_gather", "operand", operand)
    groups, count = _counted_groups("all_gather", replica_groups, "shard_count", shard_count)
    result = all_gather_shape(shape, all_gather_dim, count)
    attributes = _with_channel({"all_gather_dim": int_attr(all_gather_dim),
                                "replica_groups": groups_attr(groups)}, "all_gather", channel_id,
                               use_global_device_ids)
    (out,) = operand.builder.add_op_with_regions("stablehlo.all_gather", [result], [operand],
                                                 attributes, [])
    return out


def all_to_all(operand, split_dimension, concat_dimension, split_count, replica_groups=None,
               channel_id=None):
    """AllToAll: each replica splits its operand along split_dimension into split_count
    blocks and sends block i to the i-th replica of its group, which concatenates the
    blocks it receives along concat_dimension in the group's order. With a channel_id the
    groups name partitions (cross_partition)."""
    shape = array_operand("all_to_all", "operand", operand)
    groups, count = _counted_groups("all_to_all", replica_groups, "split_count", split_count)
    result = all_to_all_shape(shape, split_dimension, concat_dimension, count)
    attributes = {"split_dimension": int_attr(split_dimension),
                  "concat_dimension": int_attr(concat_dimension),
                  "split_count": int_attr(count), "replica_groups": groups_attr(groups)}
    _with_channel(attributes, "all_to_all", channel_id)
    (out,) = operand.builder.add_op_with_regions("stablehlo.all_to_all", [result], [operand],
                                                 attributes, [])
    return out


def reduce_scatter(operand, computation, scatter_dimension, shard_count, replica_groups=None,
                   channel_id=None, use_global_device_ids=False):
    """ReduceScatter: AllReduce, then the result split along scatter_dimension into
    shard_count blocks, the i-th replica of each group getting block i. A tuple (or list)
    operand is reduce-scattered element by element."""
    leaves, rebuild = _leaves("reduce_scatter", operand)
    groups, count = _counted_groups("reduce_scatter", replica_groups, "shard_count", shard_count)
    shapes = [reduce_scatter_shape(leaf.shape, scatter_dimension, count) for leaf in leaves]
    attributes = _with_channel({"scatter_dimension": int_attr(scatter_dimension),
                                "replica_groups": groups_attr(groups)}, "reduce_scatter",
                               channel_id, use_global_device_ids)
    # stablehlo.reduce_scatter takes one operand: one op per element
    return rebuild([leaf.builder.add_op_with_regions(
        "stablehlo.reduce_scatter", [shape], [leaf], attributes,
        [_reducer("reduce_scatter", [leaf], computation)])[0]
        for leaf, shape in zip(leaves, shapes)])


def check_pairs(pairs: list[tuple[int, int]], num_replicas: int | None) -> None:
    """CollectivePermute's rule: no two pairs with the same source or the same target;
    with `num_replicas`, every id in [0, num_replicas)."""
    for i, name in ((0, "source"), (1, "target")):
        ids = [p[i] for p in pairs]
        repeated = sorted({r for r in ids if ids.count(r) > 1})
        if repeated:
            raise ShapeError(f"collective_permute: source_target_pairs={[list(p) for p in pairs]} "
                             f"has {name} replica(s) {repeated} in more than one pair: no two "
                             f"pairs may have the same {name}")
    bad = sorted({r for p in pairs for r in p
                  if r < 0 or (num_replicas is not None and r >= num_replicas)})
    if bad:
        limit = f"[0, {num_replicas})" if num_replicas is not None else "non-negative"
        raise ShapeError(f"collective_permute: source_target_pairs={[list(p) for p in pairs]} "
                         f"names replica(s) {bad}; replica ids are {limit}")


def collective_permute(operand, source_target_pairs, channel_id=None):
    """CollectivePermute: for each (source, target) pair, the target replica gets the
    source replica's operand; replicas that are no target get zeros. With a channel_id the
    pairs name partitions (cross_partition)."""
    shape = array_operand("collective_permute", "operand", operand)
    try:
        pairs = [builtins.tuple(int_list("collective_permute", "source_target_pairs", p))
                 for p in source_target_pairs]
    except TypeError:
        pairs = None
    if pairs is None or isinstance(source_target_pairs, (str, bytes)) or \
            any(len(p) != 2 for p in pairs):
        raise ShapeError(f"collective_permute: source_target_pairs must be a list of "
                         f"(source, target) replica id pairs, got {source_target_pairs!r}")
    check_pairs(pairs, None)
    array = np.array(pairs, np.int64).reshape(len(pairs), 2)
    return operand.builder.add_op("stablehlo.collective_permute", shape, [operand], _with_channel({
        "source_target_pairs": ir.DenseIntElementsAttr.get(array, context=mlir.context())},
        "collective_permute", channel_id))


def replica_id(builder):
    """ReplicaId: the replica's id, a u32 scalar in [0, N)."""
    _check_builder("replica_id", builder)
    return builder.add_op("stablehlo.replica_id", T.Shape(T.u32, ()), [])


# -- channel ops ------------------------------------------------------------------------

def _check_builder(op_name: str, builder) -> None:
    if not isinstance(builder, Builder):
        raise ShapeError(f"{op_name}: builder must be a Builder, got {type(builder).__name__}")


def _data_shape(op_name: str, shape):
    """An array or tuple-of-arrays shape: the data a channel carries."""
    if isinstance(shape, T.Shape):
        return [shape]
    if isinstance(shape, T.TupleShape) and shape.elements and \
            all(isinstance(e, T.Shape) for e in shape.elements):
        return list(shape.elements)
    raise ShapeError(f"{op_name}: shape must be an array shape (e.g. hg.f32[4]) or a tuple of "
                     f"them, got {shape!r}")


def _received(builder, op_name: str, shape, leaves: list[Op]):
    return leaves[0] if isinstance(shape, T.Shape) else make_tuple(leaves, builder=builder)


def infeed(builder, shape, config=""):
    """Infeed: one value of `shape` read from the device's infeed queue (after a new
    token). Returns the data."""
    _check_builder("infeed", builder)
    leaves = _data_shape("infeed", shape)
    if not isinstance(config, str):
        raise ShapeError(f"infeed: config must be a string, got {config!r}")
    token = create_token(builder)
    results = builder.add_op_with_regions(
        "stablehlo.infeed", leaves + [T.token], [token],
        {"infeed_config": ir.StringAttr.get(config, context=mlir.context())}, [])
    return _received(builder, "infeed", shape, results[:-1])


def send(operand, channel_handle):
    """Send: `operand` sent on the channel (after a new token). Returns the token that
    follows the send."""
    array_operand("send", "operand", operand)
    attr, host = _channel("send", "channel_handle", channel_handle, required=True)
    token = create_token(operand.builder)
    with mlir.context():
        attributes = {"channel_handle": attr, "is_host_transfer": ir.BoolAttr.get(host)}
    return operand.builder.add_op("stablehlo.send", T.token, [operand, token], attributes)


def recv(builder, shape, channel_handle):
    """Recv: a value of `shape` received on the channel from the Send of the same channel
    (after a new token). Returns the data."""
    _check_builder("recv", builder)
    leaves = _data_shape("recv", shape)
    attr, host = _channel("recv", "channel_handle", channel_handle, required=True)
    token = create_token(builder)
    with mlir.context():
        attributes = {"channel_handle": attr, "is_host_transfer": ir.BoolAttr.get(host)}
    results = builder.add_op_with_regions("stablehlo.recv", leaves + [T.token], [token],
                                          attributes, [])
    return _received(builder, "recv", shape, results[:-1])


# -- checks against the replicas x partitions grid at compile time -------------------------

def _dense(op, name) -> list[list[int]]:
    attr = ir.DenseIntElementsAttr(op.attributes[name])
    rows, cols = ir.RankedTensorType(attr.type).shape
    values = list(attr)
    return [values[r * cols:(r + 1) * cols] for r in range(rows)]


def pairs_of(op: ir.Operation) -> list[tuple[int, int]]:
    """The (source, target) pairs of a stablehlo.collective_permute."""
    return [builtins.tuple(p) for p in _dense(op, "source_target_pairs")]


def _dims(value) -> tuple:
    return builtins.tuple(ir.RankedTensorType(value.type).shape)


def _group_count(op) -> int | None:
    """The process group size an op's shapes imply (None where they do not fix one)."""
    name = op.name
    if name == "stablehlo.all_gather":
        dim = ir.IntegerAttr(op.attributes["all_gather_dim"]).value
        return _dims(op.results[0])[dim] // max(_dims(op.operands[0])[dim], 1)
    if name == "stablehlo.reduce_scatter":
        dim = ir.IntegerAttr(op.attributes["scatter_dimension"]).value
        return _dims(op.operands[0])[dim] // max(_dims(op.results[0])[dim], 1)
    if name == "stablehlo.all_to_all":
        return ir.IntegerAttr(op.attributes["split_count"]).value
    return None


_EQUAL_SIZES = {"stablehlo.all_gather", "stablehlo.all_to_all", "stablehlo.reduce_scatter"}
# the spec gives a replica in no group zeros (collective_broadcast's "otherwise")
_PARTIAL = {"stablehlo.collective_broadcast"}
OPS = _EQUAL_SIZES | {"stablehlo.all_reduce", "stablehlo.collective_permute",
                      "stablehlo.collective_broadcast", "stablehlo.replica_id",
                      "stablehlo.partition_id"}

# -- the spec's four ways of making process groups ("Collective ops" in StableHLO's spec) --

CROSS_REPLICA = "cross_replica"
CROSS_PARTITION = "cross_partition"
CROSS_REPLICA_AND_PARTITION = "cross_replica_and_partition"
FLATTENED_IDS = "flattened_ids"
# the ops whose channel makes them cross_replica_and_partition (flattened_ids with
# use_global_device_ids); the others' channel makes them cross_partition
_GLOBAL_IDS = ("stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.reduce_scatter")


def partitions_of(op: ir.Operation) -> int:
    """The mhlo.num_partitions of `op`'s module (hlogen.runtime.execution.prepare sets it
    from the partitions compiled for; 1 where absent)."""
    while op.parent is not None:
        op = op.parent
    attrs = op.attributes
    return ir.IntegerAttr(attrs["mhlo.num_partitions"]).value \
        if "mhlo.num_partitions" in attrs else 1


def has_channel(op: ir.Operation) -> bool:
    """A channel_handle of handle > 0 (the spec's `channel_id > 0`)."""
    if "channel_handle" not in op.attributes:
        return False
    return stablehlo.ChannelHandle(op.attributes["channel_handle"]).handle > 0


def mode_of(op: ir.Operation) -> str:
    """How `op` (a collective) makes its process groups, by the spec: from its channel
    handle and use_global_device_ids."""
    channel = has_channel(op)
    if op.name in _GLOBAL_IDS:
        if "use_global_device_ids" in op.attributes:
            return FLATTENED_IDS
        return CROSS_REPLICA_AND_PARTITION if channel else CROSS_REPLICA
    return CROSS_PARTITION if channel else CROSS_REPLICA


def id_count(mode: str, num_replicas: int, num_partitions: int) -> int:
    """How many ids the groups of `mode` name: replicas, partitions, or both (flattened)."""
    return {CROSS_REPLICA: num_replicas, CROSS_PARTITION: num_partitions,
            CROSS_REPLICA_AND_PARTITION: num_replicas,
            FLATTENED_IDS: num_replicas * num_partitions}[mode]


def _ids_word(mode: str) -> str:
    return {CROSS_PARTITION: "partition", FLATTENED_IDS: "device (replica x partitions + "
            "partition)"}.get(mode, "replica")


def process_groups(mode: str, groups: list[list[int]], num_replicas: int,
                   num_partitions: int) -> list[list[tuple[int, int]]]:
    """The spec's process groups, (replica_id, partition_id) in the spec's order, of
    `groups` (the op's replica_groups, or [] for every id in one group) in `mode`."""
    groups = groups or [list(range(id_count(mode, num_replicas, num_partitions)))]
    replicas, partitions = range(num_replicas), range(num_partitions)
    if mode == CROSS_REPLICA:
        return [[(r, p) for r in g] for g in groups for p in partitions]
    if mode == CROSS_PARTITION:
        return [[(r, p) for p in g] for g in groups for r in replicas]
    if mode == CROSS_REPLICA_AND_PARTITION:
        return [[(r, p) for p in partitions for r in g] for g in groups]
    return [[divmod(i, num_partitions) for i in g] for g in groups]


# -- replica_group_mesh_axes: groups named by axes of an sdy.mesh (XLA's partitioner) --------

_MESH_AXES = "#stablehlo.replica_group_mesh_axes"
_AXIS_REF = re.compile(r'axis_ref<name = "([^"]+)"(?:, sub_axis_info = \((\d+)\)(\d+))?>')
_MESH_AXIS = re.compile(r'"([^"]+)"=(\d+)')


def is_mesh_axes(attr: ir.Attribute) -> bool:
    return str(attr).startswith(_MESH_AXES)


def _mesh(op: ir.Operation, name: str, where: str) -> tuple[list, list[int] | None]:
    """([(axis, size)], device_ids or None) of the sdy.mesh @name of op's module."""
    module = op
    while module.parent is not None:
        module = module.parent
    for candidate in module.regions[0].blocks[0].operations:
        candidate = candidate.operation
        if candidate.name == "sdy.mesh" and mlir.symbol_name(candidate) == name:
            text = str(candidate.attributes["mesh"])
            axes = [(a, int(n)) for a, n in _MESH_AXIS.findall(text.split("device_ids")[0])]
            ids = re.search(r"device_ids=\[([\d, ]*)\]", text)
            return axes, ([int(i) for i in ids.group(1).split(",")] if ids else None)
    raise ShapeError(f"{where}: replica_groups name mesh @{name}, which this module does not "
                     f"declare (an sdy.mesh @{name} at the top level)")


def mesh_groups(op: ir.Operation) -> list[list[int]]:
    """The groups of `#stablehlo.replica_group_mesh_axes<mesh = @m, axes = [...]>`: for
    each position on the axes not named, the devices along the named axes (in their
    order, sub-axes `"x":(pre)size` being a factor of their axis), as XLA's mesh-axes
    replica groups; device ids are the mesh's (row-major positions without device_ids)."""
    text = str(op.attributes["replica_groups"])
    where = op.name.split(".")[-1]
    name = re.search(r"mesh = @([\w.$-]+)", text)
    refs = _AXIS_REF.findall(text)
    if name is None or (not refs and "axes = []" not in text):
        raise ShapeError(f"{where}: cannot read replica_groups {text}")
    axes, device_ids = _mesh(op, name.group(1), where)
    sizes = dict(axes)
    # every axis as factors, major to minor: [pre, size, rest] where a sub-axis names it
    factors: list[tuple[str, int, int]] = []  # (axis, pre_size, size)
    for axis, size in axes:
        cuts = sorted({(int(pre), int(n)) for a, pre, n in refs if a == axis and pre})
        at = 1
        for pre, n in cuts:
            if pre != at or size % (pre * n):
                raise ShapeError(f"{where}: replica_groups {text}: sub-axis \"{axis}\":({pre}){n} "
                                 f"does not divide axis {axis}={size} after {at}")
            factors.append((axis, pre, n))
            at = pre * n
        if at == 1 and not cuts:
            factors.append((axis, 1, size))
        elif size // at > 1:
            factors.append((axis, at, size // at))
    named = []
    for axis, pre, n in refs:
        if axis not in sizes:
            raise ShapeError(f"{where}: replica_groups {text} name axis {axis!r}; mesh "
                             f"@{name.group(1)} has {', '.join(sizes) or 'none'}")
        key = (axis, int(pre), int(n)) if pre else (axis, 1, sizes[axis])
        named.append(factors.index(key) if key in factors else
                     [i for i, f in enumerate(factors) if f[0] == axis][0])
    shape = [n for _, _, n in factors]
    ids = np.arange(int(np.prod(shape, dtype=np.int64))) if device_ids is None \
        else np.array(device_ids)
    others = [i for i in range(len(factors)) if i not in named]
    grid = ids.reshape(shape).transpose(others + named)
    size = int(np.prod([shape[i] for i in named], dtype=np.int64))
    return grid.reshape(-1, size).tolist()


def groups_of(op: ir.Operation) -> list[list[int]]:
    """An op's replica_groups as lists of ids: dense groups without their -1 padding, or
    mesh-axes groups expanded ([]: every id, one group)."""
    if is_mesh_axes(op.attributes["replica_groups"]):
        return mesh_groups(op)
    # groups of different sizes are padded with -1 in StableHLO's 2-D attribute
    return [[r for r in g if r != -1] for g in _dense(op, "replica_groups")]


def expand_mesh_groups(module: ir.Module) -> None:
    """Every replica_group_mesh_axes of `module` made dense groups (what the interpreter
    and hlogen's rewrites read)."""
    with mlir.context():
        for op in mlir.walk(module):
            if "replica_groups" in op.attributes and is_mesh_axes(op.attributes["replica_groups"]):
                op.attributes["replica_groups"] = groups_attr(mesh_groups(op))


def check_replicas(op: ir.Operation, num_replicas: int, num_partitions: int = 1) -> str | None:
    """Why collective `op` cannot run on `num_replicas` x `num_partitions` processes, or
    None: its groups (or pairs) checked against the ids of its mode (the spec's
    cross_replica, cross_partition, cross_replica_and_partition or flattened_ids)."""
    name = op.name
    short = name.split(".")[-1]
    if name in ("stablehlo.replica_id", "stablehlo.partition_id"):
        return None
    try:
        mode = mode_of(op)
        n = id_count(mode, num_replicas, num_partitions)
        grid = f"{num_replicas} replica(s) x {num_partitions} partition(s)"
        if mode == FLATTENED_IDS and not has_channel(op):
            raise ShapeError(f"{short}: use_global_device_ids needs a channel_handle of "
                             f"handle > 0 (the spec's constraint)")
        if name == "stablehlo.collective_permute":
            pairs = pairs_of(op)
            bad = sorted({r for p in pairs for r in p if not 0 <= r < n})
            if bad and mode == CROSS_PARTITION:
                # XLA CPU ends the process here ("Span::at failed bounds check")
                raise ShapeError(f"{short}: its channel_handle makes it {mode} (the spec), so "
                                 f"source_target_pairs={[list(p) for p in pairs]} name "
                                 f"partitions, and {bad} are not among the {num_partitions} "
                                 f"partition(s) of {grid}: drop the channel_handle to permute "
                                 f"replicas, or compile for more partitions")
            check_pairs(pairs, n)
            return None
        if "replica_groups" not in op.attributes:
            return None
        groups = groups_of(op)
        count = _group_count(op)
        what = "split_count" if short == "all_to_all" else "shard_count"
        ids = _ids_word(mode)
        # on replicas alone, the words of replicas; else the mode and the grid
        plain = num_partitions == 1 and ids == "replica"
        if count is not None and groups == [list(range(count))] and count != n \
                and (mode != CROSS_REPLICA_AND_PARTITION or num_partitions == 1):
            # the group an op without replica_groups was emitted with
            fits = f"{n} replicas" if plain else f"the {n} {ids}s of {grid} ({mode})"
            raise ShapeError(f"{short}: {what}={count} in the one group {groups} (what "
                             f"replica_groups None gives) does not fit {fits}: compile for "
                             f"{count}, or name replica groups that cover all {n}")
        try:
            check_partition(short, groups, n, name in _EQUAL_SIZES,
                            complete=name not in _PARTIAL)
        except ShapeError as e:
            if plain:
                raise
            raise ShapeError(f"{e} ({mode}: the groups name {ids} ids, {n} in {grid})") from None
        size = len(process_groups(mode, groups, num_replicas, num_partitions)[0])
        if count is not None and count != size:
            given = "" if short == "all_to_all" else " (from the result and operand dimensions)"
            if plain:
                raise ShapeError(f"{short}: {what}={count}{given} must equal the size of each "
                                 f"replica group ({size}: " + (
                                     f"{groups})" if groups else
                                     f"replica_groups is empty, so every replica of the "
                                     f"{num_replicas})"))
            raise ShapeError(f"{short}: {what}={count}{given} must equal the size of each "
                             f"process group ({size}: {mode} groups "
                             + (f"{groups}" if groups else "[] (every id)") + f" on {grid})")
    except ShapeError as e:
        return str(e)
    return None
