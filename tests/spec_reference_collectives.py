"""An independent numpy reference of XLA's collective operations, written from the specs alone.

Sources: the XLA operation semantics (spec/operation-semantics.zh.md: AllGather, AllReduce,
AllToAll, CollectivePermute, CrossReplicaSum, ReduceScatter, ReplicaId) and, for the order of
replicas inside a group, the StableHLO specification (openxla/stablehlo docs/spec.md:
all_gather, all_reduce, all_to_all, reduce_scatter, collective_permute, cross_replica).

Model: a replicated computation is a list `per_replica` indexed by replica id; replica i's
operand is per_replica[i]. Every function returns a list with one fresh result per replica.

Conventions and readings (where the spec leaves a choice):
  * replica_groups None or [] is one group of all replicas in order 0..N-1. Otherwise the
    groups must partition 0..N-1 ("contain as many elements as there are replicas"; StableHLO:
    "must have unique elements and cover all replica_ids").
  * AllReduce allows groups of unequal sizes (its spec states no size rule); AllGather,
    ReduceScatter and AllToAll need equal sizes (shard_count / split_count "is the size of each
    replica group"; ReduceScatter: "they must all be the same size").
  * The reduction is a left fold over the group's members in group order:
    reducer(...reducer(reducer(x[g0], x[g1]), x[g2])..., x[gk]). StableHLO says only "some
    binary tree whose in-order traversal" is the group order, so for a non-associative reducer
    (float addition) a backend may round differently: compare floats with a tolerance.
    The result is cast back to the operand's element type (shape and type are unchanged).
  * Tuples (Python tuples of arrays) are accepted where the spec allows a tuple operand:
    AllReduce / CrossReplicaSum and ReduceScatter ("a non-empty tuple of arrays"), and also
    AllGather (StableHLO's all_gather is variadic). AllToAll refuses them (its stated
    precondition: "the operand is not a tuple"); CollectivePermute takes "an n-dimensional
    array".
  * Every rule violation raises ValueError whose message names the rule.
"""
from __future__ import annotations

import operator

import numpy as np

__all__ = [
    "all_reduce", "cross_replica_sum", "all_gather", "all_to_all", "reduce_scatter",
    "collective_permute", "replica_id",
]


# -- validation helpers -----------------------------------------------------------------------

def _index(value, what):
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None


def _operands(per_replica, *, allow_tuple):
    """Returns (is_tuple, columns): columns[k][i] is element k of replica i's operand (a
    single column for an array operand). Every replica's operand must have the same shape
    and element type."""
    if len(per_replica) == 0:
        raise ValueError("there must be at least one replica")
    is_tuple = isinstance(per_replica[0], tuple)
    if is_tuple and not allow_tuple:
        raise ValueError("the operand must be an array, not a tuple")
    if any(isinstance(op, tuple) != is_tuple for op in per_replica):
        raise ValueError("operands differ across replicas: some are tuples, some arrays")
    rows = [tuple(np.asarray(e) for e in op) if is_tuple else (np.asarray(op),)
            for op in per_replica]
    if is_tuple and len(rows[0]) == 0:
        raise ValueError("a tuple operand must be non-empty")
    if any(len(row) != len(rows[0]) for row in rows):
        raise ValueError("operands differ across replicas: tuples of different lengths")
    columns = [list(col) for col in zip(*rows)]
    for k, col in enumerate(columns):
        for i, a in enumerate(col):
            if a.shape != col[0].shape or a.dtype != col[0].dtype:
                raise ValueError(
                    f"operands differ across replicas (same shape and element type required): "
                    f"element {k} is {col[0].dtype}{list(col[0].shape)} on replica 0 but "
                    f"{a.dtype}{list(a.shape)} on replica {i}")
    return is_tuple, columns


def _groups(replica_groups, num_replicas, *, equal_sizes):
    """The replica groups as lists of ints, validated as a partition of 0..N-1."""
    if replica_groups is None or len(replica_groups) == 0:
        return [list(range(num_replicas))]
    groups = [[_index(r, "a replica id in replica_groups") for r in g] for g in replica_groups]
    if any(len(g) == 0 for g in groups):
        raise ValueError("replica_groups: a replica group is empty")
    flat = [r for g in groups for r in g]
    bad = [r for r in flat if not 0 <= r < num_replicas]
    if bad:
        raise ValueError(f"replica_groups: replica ids {bad} are out of range [0, {num_replicas})")
    repeated = sorted({r for r in flat if flat.count(r) > 1})
    if repeated:
        raise ValueError(f"replica_groups: replica ids {repeated} appear more than once")
    missing = sorted(set(range(num_replicas)) - set(flat))
    if missing:
        raise ValueError(f"replica_groups must contain as many elements as there are replicas "
                         f"(a partition of 0..{num_replicas - 1}); missing {missing}")
    if equal_sizes and len({len(g) for g in groups}) > 1:
        raise ValueError(f"replica_groups must all be the same size, got sizes "
                         f"{[len(g) for g in groups]}")
    return groups


def _dimension(dim, rank, what):
    dim = _index(dim, what)
    if not 0 <= dim < rank:
        raise ValueError(f"{what} {dim} is out of range [0, {rank})")
    return dim


def _count_matches_groups(count, groups, what):
    count = _index(count, what)
    if count <= 0:
        raise ValueError(f"{what} must be positive, got {count}")
    if count != len(groups[0]):
        raise ValueError(f"{what} ({count}) must equal the size of each replica group "
                         f"({len(groups[0])})")
    return count


def _divisible(shape, dim, count, what_dim, what_count):
    if shape[dim] % count:
        raise ValueError(f"the operand's size along {what_dim} ({shape[dim]}) must be divisible "
                         f"by {what_count} ({count})")


def _pack(is_tuple, per_element):
    """per_element[k][i] -> one result per replica (a tuple when the operand was a tuple)."""
    per_replica = list(zip(*per_element))
    return [tuple(r) if is_tuple else r[0] for r in per_replica]


# -- the operations -----------------------------------------------------------------------------

def _reduce_column(col, reducer, groups):
    out = [None] * len(col)
    for group in groups:
        acc = col[group[0]]
        for r in group[1:]:
            acc = reducer(acc, col[r])
        acc = np.asarray(acc).astype(col[0].dtype)
        for r in group:
            out[r] = acc.copy()
    return out


def all_reduce(per_replica, reducer, replica_groups=None):
    """AllReduce: "performs a custom computation across replicas".

    "The output shape is the same as the input shape"; "when operand is a tuple of arrays,
    the all-reduce is performed on each element of the tuple" and "if the input is a tuple,
    the output is a tuple too". "replica_groups is a list of replica groups between which the
    reduction is performed ... must either be empty (all replicas belong to a single group),
    or contain the same number of elements as the number of replicas", e.g. {0, 2}, {1, 3}
    reduces between replicas 0 and 2, and between 1 and 3. Every member of a group receives
    the group's reduction, folded left in group order (see the module docstring).
    """
    is_tuple, columns = _operands(per_replica, allow_tuple=True)
    groups = _groups(replica_groups, len(per_replica), equal_sizes=False)
    return _pack(is_tuple, [_reduce_column(col, reducer, groups) for col in columns])


def cross_replica_sum(per_replica, replica_groups=None):
    """CrossReplicaSum: "performs AllReduce with a summation computation"."""
    return all_reduce(per_replica, np.add, replica_groups)


def all_gather(per_replica, all_gather_dim, shard_count, replica_groups=None):
    """AllGather: "performs concatenation across replicas".

    "The order of the replicas in each group determines the order in which their inputs are
    located in the result." "shard_count is the size of each replica group." "The output
    shape is the input shape with the all_gather_dim made shard_count times larger", e.g.
    [1.0, 2.5] and [3.0, 5.25] on two replicas give [1.0, 2.5, 3.0, 5.25] on both.
    """
    is_tuple, columns = _operands(per_replica, allow_tuple=True)
    groups = _groups(replica_groups, len(per_replica), equal_sizes=True)
    shard_count = _count_matches_groups(shard_count, groups, "shard_count")
    results = []
    for col in columns:
        dim = _dimension(all_gather_dim, col[0].ndim, "all_gather_dim")
        out = [None] * len(col)
        for group in groups:
            gathered = np.concatenate([col[r] for r in group], axis=dim)
            for r in group:
                out[r] = gathered.copy()
        results.append(out)
    return _pack(is_tuple, results)


def all_to_all(per_replica, split_dimension, concat_dimension, split_count,
               replica_groups=None):
    """AllToAll: "sends data from all cores to all cores", in two phases.

    "Scatter phase: on each core, the operand is split into split_count blocks along
    split_dimension, and the blocks are scattered to all cores, e.g. the i-th block is sent
    to the i-th core. Gather phase: each core concatenates the received blocks along
    concat_dimension." Within a group, "the i-th core" is the i-th member of the group, and
    the received blocks are concatenated in group order: for {{1,2,3},{4,5,0}}, replica 2
    (position 1) receives block 1 of replicas 1, 2, 3, in that order (StableHLO:
    scattered_parts@receiver = [split_parts@sender[receiver_index] for sender in group]).
    Preconditions: the operand's size along split_dimension is divisible by split_count;
    the operand is not a tuple; split_count equals the size of each group.
    """
    _, (col,) = _operands(per_replica, allow_tuple=False)
    groups = _groups(replica_groups, len(per_replica), equal_sizes=True)
    split_count = _count_matches_groups(split_count, groups, "split_count")
    rank = col[0].ndim
    split_dim = _dimension(split_dimension, rank, "split_dimension")
    concat_dim = _dimension(concat_dimension, rank, "concat_dimension")
    _divisible(col[0].shape, split_dim, split_count, "split_dimension", "split_count")
    blocks = [np.split(a, split_count, axis=split_dim) for a in col]
    out = [None] * len(col)
    for group in groups:
        for position, receiver in enumerate(group):
            out[receiver] = np.concatenate([blocks[sender][position] for sender in group],
                                           axis=concat_dim)
    return out


def reduce_scatter(per_replica, reducer, scatter_dimension, shard_count, replica_groups=None):
    """ReduceScatter: "effectively does an AllReduce and then scatters the result by
    splitting it into shard_count blocks along the scatter_dimension, and replica i in the
    replica group receives the i-th shard."

    "The order of replicas in each group determines the order in which the all-reduce result
    is scattered." "If there is more than one replica group, they must all be the same size."
    "shard_count must equal the size of each replica group." For a tuple operand the
    reduce-scatter is performed on each element. "The output shape is the input shape with
    the scatter_dimension made shard_count times smaller", e.g. [1.0, 2.25] and [3.0, 5.25]
    on two replicas give [4.0] on the first and [7.5] on the second.
    """
    is_tuple, columns = _operands(per_replica, allow_tuple=True)
    groups = _groups(replica_groups, len(per_replica), equal_sizes=True)
    shard_count = _count_matches_groups(shard_count, groups, "shard_count")
    results = []
    for col in columns:
        dim = _dimension(scatter_dimension, col[0].ndim, "scatter_dimension")
        _divisible(col[0].shape, dim, shard_count, "scatter_dimension", "shard_count")
        reduced = _reduce_column(col, reducer, groups)
        out = [None] * len(col)
        for group in groups:
            for position, r in enumerate(group):
                out[r] = np.split(reduced[r], shard_count, axis=dim)[position].copy()
        results.append(out)
    return _pack(is_tuple, results)


def collective_permute(per_replica, source_target_pairs):
    """CollectivePermute: "sends and receives data across replicas".

    "For each pair, the operand is sent from the source replica to the target replica."
    "No two pairs may have the same target replica id, and no two pairs may have the same
    source replica id. If a replica id is not a target in any pair, the output on that
    replica is a tensor of zeros with the same shape as the input." Replica ids lie in
    [0, N) (StableHLO C4).
    """
    _, (col,) = _operands(per_replica, allow_tuple=False)
    n = len(col)
    pairs = []
    for pair in source_target_pairs:
        if len(pair) != 2:
            raise ValueError(f"source_target_pairs: {pair!r} is not a (source, target) pair")
        pairs.append((_index(pair[0], "a source replica id"),
                      _index(pair[1], "a target replica id")))
    for s, t in pairs:
        if not (0 <= s < n and 0 <= t < n):
            raise ValueError(f"source_target_pairs: ({s}, {t}) names a replica out of range "
                             f"[0, {n})")
    sources, targets = [s for s, _ in pairs], [t for _, t in pairs]
    if len(set(sources)) != len(sources):
        raise ValueError("source_target_pairs: no two pairs may have the same source replica id")
    if len(set(targets)) != len(targets):
        raise ValueError("source_target_pairs: no two pairs may have the same target replica id")
    out = [np.zeros(a.shape, a.dtype) for a in col]
    for s, t in pairs:
        out[t] = col[s].copy()
    return out


def replica_id(num_replicas):
    """ReplicaId: "returns the unique ID (U32 scalar) of the replica" -- "an unsigned integer
    in the range [0, N), where N is the number of replicas"."""
    n = _index(num_replicas, "num_replicas")
    if n <= 0:
        raise ValueError("there must be at least one replica")
    return [np.array(i, dtype=np.uint32) for i in range(n)]
