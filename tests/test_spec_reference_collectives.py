"""tests/spec_reference_collectives.py against every example of the XLA operation semantics
(spec/operation-semantics.zh.md: AllGather, AllReduce, AllToAll, CollectivePermute,
CrossReplicaSum, ReduceScatter, ReplicaId), the StableHLO spec's examples, hand-computed cases
on 8 replicas, and each rule the reference enforces with ValueError."""
from __future__ import annotations

import numpy as np
import pytest

from tests import spec_reference_collectives as ref


def f32(*rows):
    return [np.array(r, np.float32) for r in rows]


def check(results, expected, dtype=None):
    """One result per replica, each equal in shape, element type and value."""
    assert len(results) == len(expected)
    for i, (got, want) in enumerate(zip(results, expected)):
        if isinstance(want, tuple):
            assert isinstance(got, tuple) and len(got) == len(want), (i, got)
            check(list(got), list(want))
            continue
        if dtype is not None:
            want = np.asarray(want, dtype)
        assert isinstance(want, np.ndarray), "give the expected element type"
        assert isinstance(got, np.ndarray), (i, type(got))
        assert got.dtype == want.dtype, (i, got.dtype, want.dtype)
        assert got.shape == want.shape, (i, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=f"replica {i}")


# -- the XLA spec's examples ------------------------------------------------------------------

def test_all_gather_xla_example():
    out = ref.all_gather(f32([1.0, 2.5], [3.0, 5.25]), all_gather_dim=0, shard_count=2)
    check(out, [[1.0, 2.5, 3.0, 5.25]] * 2, np.float32)


def test_all_reduce_xla_example():
    out = ref.all_reduce(f32([1.0, 2.5], [3.0, 5.25]), np.add)
    check(out, [[4.0, 7.75]] * 2, np.float32)


def test_cross_replica_sum_is_all_reduce_with_add():
    out = ref.cross_replica_sum(f32([1.0, 2.5], [3.0, 5.25]))
    check(out, [[4.0, 7.75]] * 2, np.float32)


def test_reduce_scatter_xla_example():
    out = ref.reduce_scatter(f32([1.0, 2.25], [3.0, 5.25]), np.add, scatter_dimension=0,
                             shard_count=2)
    check(out, [[4.0], [7.5]], np.float32)


X4 = f32([1.0, 10.0], [2.0, 20.0], [3.0, 30.0], [4.0, 40.0])


def test_all_reduce_xla_replica_groups_example():
    out = ref.all_reduce(X4, np.add, replica_groups=[[0, 2], [1, 3]])
    check(out, [[4.0, 40.0], [6.0, 60.0], [4.0, 40.0], [6.0, 60.0]], np.float32)


def test_all_gather_xla_replica_groups_example():
    out = ref.all_gather(X4, 0, 2, replica_groups=[[0, 2], [1, 3]])
    check(out, [[1, 10, 3, 30], [2, 20, 4, 40], [1, 10, 3, 30], [2, 20, 4, 40]], np.float32)


def test_all_gather_group_order_is_the_concatenation_order():
    out = ref.all_gather(X4, 0, 2, replica_groups=[[2, 0], [3, 1]])
    check(out, [[3, 30, 1, 10], [4, 40, 2, 20], [3, 30, 1, 10], [4, 40, 2, 20]], np.float32)


def test_all_to_all_xla_f32_4x16_example():
    operands = [np.arange(64, dtype=np.float32).reshape(4, 16) + 100 * c for c in range(4)]
    out = ref.all_to_all(operands, split_dimension=1, concat_dimension=0, split_count=4)
    # Core j: rows 4c..4c+3 are block j (columns 4j..4j+3) of core c's operand, c = 0..3.
    for j in range(4):
        assert out[j].shape == (16, 4) and out[j].dtype == np.float32
        for c in range(4):
            for r in range(4):
                for k in range(4):
                    assert out[j][4 * c + r, k] == operands[c][r, 4 * j + k]
    check(out[1][:5], [[4, 5, 6, 7], [20, 21, 22, 23], [36, 37, 38, 39], [52, 53, 54, 55],
                       [104, 105, 106, 107]], np.float32)


def test_all_to_all_xla_group_order_example():
    # Replica r holds [10r, 10r+1, 10r+2]; groups {1,2,3} and {4,5,0}: the replica at position
    # k of its group receives element k of every member, in the group's order.
    operands = [np.array([10 * r, 10 * r + 1, 10 * r + 2], np.int32) for r in range(6)]
    out = ref.all_to_all(operands, 0, 0, 3, replica_groups=[[1, 2, 3], [4, 5, 0]])
    check(out, [[42, 52, 2],     # replica 0: position 2 of {4, 5, 0}
                [10, 20, 30],    # replica 1: position 0 of {1, 2, 3}
                [11, 21, 31],
                [12, 22, 32],
                [40, 50, 0],     # replica 4: position 0 of {4, 5, 0}
                [41, 51, 1]], np.int32)


def test_all_reduce_tuple_operand():
    operands = [(np.array([1.0, -2.0], np.float32), np.array([[1], [7]], np.int32)),
                (np.array([3.0, -5.0], np.float32), np.array([[4], [2]], np.int32)),
                (np.array([2.0, -1.0], np.float32), np.array([[9], [0]], np.int32))]
    out = ref.all_reduce(operands, np.maximum)
    expected = (np.array([3.0, -1.0], np.float32), np.array([[9], [7]], np.int32))
    check(out, [expected] * 3)


def test_reduce_scatter_tuple_operand():
    operands = [(np.array([1, 2, 3, 4], np.int32), np.array([[1, 2], [3, 4]], np.float32)),
                (np.array([10, 20, 30, 40], np.int32), np.array([[5, 6], [7, 8]], np.float32))]
    out = ref.reduce_scatter(operands, np.add, 0, 2)
    check(out, [(np.array([11, 22], np.int32), np.array([[6, 8]], np.float32)),
                (np.array([33, 44], np.int32), np.array([[10, 12]], np.float32))])


def test_collective_permute_non_target_gets_zeros():
    operands = [np.array([[1, 2], [3, 4]], np.int32), np.array([[5, 6], [7, 8]], np.int32),
                np.array([[9, 10], [11, 12]], np.int32)]
    out = ref.collective_permute(operands, [(0, 1), (1, 2)])
    check(out, [[[0, 0], [0, 0]], [[1, 2], [3, 4]], [[5, 6], [7, 8]]], np.int32)


def test_replica_id():
    out = ref.replica_id(4)
    assert len(out) == 4
    for i, r in enumerate(out):
        assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.uint32
        assert int(r) == i


# -- the StableHLO spec's examples ----------------------------------------------------------------

def test_all_gather_stablehlo_example_dim_1():
    operands = [np.array([[1, 2], [3, 4]], np.int64), np.array([[5, 6], [7, 8]], np.int64)]
    out = ref.all_gather(operands, 1, 2, replica_groups=[[0, 1]])
    check(out, [[[1, 2, 5, 6], [3, 4, 7, 8]]] * 2, np.int64)


def test_all_to_all_stablehlo_example_and_reversed_group():
    operands = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int64),
                np.array([[9, 10, 11, 12], [13, 14, 15, 16]], np.int64)]
    out = ref.all_to_all(operands, 1, 0, 2, replica_groups=[[0, 1]])
    check(out, [[[1, 2], [5, 6], [9, 10], [13, 14]],
                [[3, 4], [7, 8], [11, 12], [15, 16]]], np.int64)
    # Group {1, 0}: replica 1 is at position 0, replica 0 at position 1; senders in order 1, 0.
    out = ref.all_to_all(operands, 1, 0, 2, replica_groups=[[1, 0]])
    check(out, [[[11, 12], [15, 16], [3, 4], [7, 8]],
                [[9, 10], [13, 14], [1, 2], [5, 6]]], np.int64)


def test_reduce_scatter_stablehlo_example():
    operands = [np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.int64),
                np.array([[9, 10, 11, 12], [13, 14, 15, 16]], np.int64)]
    out = ref.reduce_scatter(operands, np.add, 1, 2, replica_groups=[[0, 1]])
    check(out, [[[10, 12], [18, 20]], [[14, 16], [22, 24]]], np.int64)


# -- hand-computed cases ------------------------------------------------------------------------

def test_all_reduce_folds_in_group_order():
    # A non-commutative reducer shows the order: group {2, 0, 1} folds ((x2 . x0) . x1).
    operands = [np.array(r, np.int64) for r in range(3)]
    out = ref.all_reduce(operands, lambda a, b: a * 10 + b, replica_groups=[[2, 0, 1]])
    check(out, [201, 201, 201], np.int64)


def test_all_reduce_keeps_element_type():
    operands = [np.array([200, 1], np.uint8), np.array([100, 2], np.uint8)]
    check(ref.all_reduce(operands, np.add), [[44, 3]] * 2, np.uint8)
    operands = [np.array([True, False]), np.array([False, False])]
    check(ref.all_reduce(operands, np.logical_or), [[True, False]] * 2, np.bool_)


def test_all_reduce_allows_groups_of_unequal_sizes():
    operands = [np.array([r], np.int32) for r in range(5)]
    out = ref.all_reduce(operands, np.add, replica_groups=[[0, 1, 2], [3, 4]])
    check(out, [[3], [3], [3], [7], [7]], np.int32)


def test_results_are_fresh_arrays():
    operands = f32([1.0], [2.0])
    out = ref.all_reduce(operands, np.add)
    out[0][0] = 99.0
    check(out, [[99.0], [3.0]], np.float32)
    check(operands, [[1.0], [2.0]], np.float32)


def test_all_reduce_8_replicas_max_groups_of_4():
    operands = [np.array([r, -r, (r * 3) % 8], np.int32) for r in range(8)]
    out = ref.all_reduce(operands, np.maximum, replica_groups=[[0, 1, 2, 3], [4, 5, 6, 7]])
    # (3r) % 8 for r = 0..3 is 0 3 6 1, for r = 4..7 is 4 7 2 5.
    check(out, [[3, 0, 6]] * 4 + [[7, -4, 7]] * 4, np.int32)


def test_reduce_scatter_8_replicas_scatter_order_follows_group_order():
    # x_r = r + 10 * [0, 1, 2, 3]. Group {0,1,2,3} sums to [6, 46, 86, 126];
    # group {7,6,5,4} sums to [22, 62, 102, 142]; position k receives element k.
    operands = [r + 10 * np.arange(4, dtype=np.int32) for r in range(8)]
    out = ref.reduce_scatter(operands, np.add, 0, 4, replica_groups=[[7, 6, 5, 4], [0, 1, 2, 3]])
    check(out, [[6], [46], [86], [126], [142], [102], [62], [22]], np.int32)


def test_all_gather_8_replicas_strided_groups_dim_1():
    operands = [np.array([[r], [-r]], np.int16) for r in range(8)]
    out = ref.all_gather(operands, 1, 2, replica_groups=[[0, 4], [1, 5], [2, 6], [3, 7]])
    expected = [[[g, g + 4], [-g, -g - 4]] for g in [0, 1, 2, 3]]
    check(out, expected + expected, np.int16)


def test_all_to_all_8_replicas_is_a_transpose():
    operands = [8 * r + np.arange(8, dtype=np.int32) for r in range(8)]
    out = ref.all_to_all(operands, 0, 0, 8)
    check(out, [j + 8 * np.arange(8) for j in range(8)], np.int32)


def test_all_to_all_8_replicas_two_groups_split_1_concat_0():
    operands = [np.array([[10 * r, 10 * r + 1, 10 * r + 2, 10 * r + 3]], np.float32)
                for r in range(8)]
    out = ref.all_to_all(operands, 1, 0, 4, replica_groups=[[0, 2, 4, 6], [1, 3, 5, 7]])
    assert all(o.shape == (4, 1) for o in out)
    check([out[4], out[7], out[0], out[3]],
          [[[2], [22], [42], [62]],      # replica 4: position 2 of {0, 2, 4, 6}
           [[13], [33], [53], [73]],     # replica 7: position 3 of {1, 3, 5, 7}
           [[0], [20], [40], [60]],
           [[11], [31], [51], [71]]], np.float32)


def test_collective_permute_8_replicas_cycle_and_partial():
    operands = [np.full((2,), r, np.float32) for r in range(8)]
    out = ref.collective_permute(operands, [(r, (r + 1) % 8) for r in range(8)])
    check(out, [[(r - 1) % 8] * 2 for r in range(8)], np.float32)
    out = ref.collective_permute(operands, [(3, 3), (7, 0), (0, 5)])
    check(out, [[7, 7], [0, 0], [0, 0], [3, 3], [0, 0], [0, 0], [0, 0], [0, 0]], np.float32)


# -- the rules, each a ValueError -----------------------------------------------------------------

OPS4 = [np.arange(4, dtype=np.float32) + r for r in range(4)]

ALL_GROUPED = {
    "all_reduce": lambda g: ref.all_reduce(OPS4, np.add, replica_groups=g),
    "cross_replica_sum": lambda g: ref.cross_replica_sum(OPS4, replica_groups=g),
    "all_gather": lambda g: ref.all_gather(OPS4, 0, 2, replica_groups=g),
    "all_to_all": lambda g: ref.all_to_all(OPS4, 0, 0, 2, replica_groups=g),
    "reduce_scatter": lambda g: ref.reduce_scatter(OPS4, np.add, 0, 2, replica_groups=g),
}


@pytest.mark.parametrize("op", sorted(ALL_GROUPED))
@pytest.mark.parametrize("groups, rule", [
    ([[0, 1], [2]], "missing"),
    ([[0, 1], [1, 2, 3]], "more than once"),
    ([[0, 1], [2, 2], [3]], "more than once"),
    ([[0, 1], [2, 4]], "out of range"),
    ([[0, 1], [-1, 2, 3]], "out of range"),
    ([[0, 1, 2, 3], []], "empty"),
])
def test_replica_groups_must_partition_the_replicas(op, groups, rule):
    with pytest.raises(ValueError, match=rule):
        ALL_GROUPED[op](groups)


@pytest.mark.parametrize("call", [
    lambda: ref.all_gather(OPS4, 0, 2, replica_groups=[[0, 1, 2], [3]]),
    lambda: ref.all_to_all(OPS4, 0, 0, 2, replica_groups=[[0], [1, 2, 3]]),
    lambda: ref.reduce_scatter(OPS4, np.add, 0, 2, replica_groups=[[0, 1, 2], [3]]),
])
def test_groups_of_unequal_sizes(call):
    with pytest.raises(ValueError, match="same size"):
        call()


@pytest.mark.parametrize("call, name", [
    (lambda: ref.all_gather(OPS4, 0, 4, replica_groups=[[0, 1], [2, 3]]), "shard_count"),
    (lambda: ref.all_gather(OPS4, 0, 3), "shard_count"),
    (lambda: ref.reduce_scatter(OPS4, np.add, 0, 2), "shard_count"),
    (lambda: ref.reduce_scatter(OPS4, np.add, 0, 4, replica_groups=[[0, 2], [1, 3]]),
     "shard_count"),
    (lambda: ref.all_to_all(OPS4, 0, 0, 2), "split_count"),
    (lambda: ref.all_to_all(OPS4, 0, 0, 4, replica_groups=[[0, 1], [2, 3]]), "split_count"),
])
def test_count_must_equal_the_group_size(call, name):
    with pytest.raises(ValueError, match=f"{name}.*size of each replica group"):
        call()


def test_dimension_must_be_divisible_by_the_count():
    ops = [np.zeros((3, 4), np.float32) for _ in range(2)]
    with pytest.raises(ValueError, match="divisible by shard_count"):
        ref.reduce_scatter(ops, np.add, 0, 2)
    with pytest.raises(ValueError, match="divisible by split_count"):
        ref.all_to_all(ops, 0, 1, 2)
    ops = [np.zeros((4, 3), np.float32) for _ in range(4)]
    with pytest.raises(ValueError, match="divisible by split_count"):
        ref.all_to_all(ops, 1, 0, 4)


def test_dimension_must_be_in_range():
    ops = [np.zeros((2, 2), np.float32) for _ in range(2)]
    with pytest.raises(ValueError, match="all_gather_dim"):
        ref.all_gather(ops, 2, 2)
    with pytest.raises(ValueError, match="scatter_dimension"):
        ref.reduce_scatter(ops, np.add, -1, 2)
    with pytest.raises(ValueError, match="concat_dimension"):
        ref.all_to_all(ops, 0, 2, 2)


@pytest.mark.parametrize("pairs, rule", [
    ([(0, 1), (0, 2)], "same source"),
    ([(0, 1), (2, 1)], "same target"),
    ([(0, 1), (1, 3)], "out of range"),
    ([(-1, 0)], "out of range"),
    ([(0, 1, 2)], "pair"),
])
def test_collective_permute_pairs(pairs, rule):
    ops = [np.zeros(2, np.int32) for _ in range(3)]
    with pytest.raises(ValueError, match=rule):
        ref.collective_permute(ops, pairs)


@pytest.mark.parametrize("operands", [
    [np.zeros(2, np.float32), np.zeros(3, np.float32)],
    [np.zeros(2, np.float32), np.zeros((2, 1), np.float32)],
    [np.zeros(2, np.float32), np.zeros(2, np.float64)],
    [(np.zeros(2, np.float32),), (np.zeros(2, np.int32),)],
])
@pytest.mark.parametrize("op", [
    lambda ops: ref.all_reduce(ops, np.add),
    lambda ops: ref.all_gather(ops, 0, 2),
    lambda ops: ref.reduce_scatter(ops, np.add, 0, 2),
])
def test_operands_must_agree_across_replicas(operands, op):
    with pytest.raises(ValueError, match="differ across replicas"):
        op(operands)


@pytest.mark.parametrize("op", [
    lambda ops: ref.all_to_all(ops, 0, 0, 2),
    lambda ops: ref.collective_permute(ops, [(0, 1)]),
])
def test_array_only_operands_must_agree_across_replicas(op):
    with pytest.raises(ValueError, match="differ across replicas"):
        op([np.zeros(2, np.float32), np.zeros(2, np.int32)])


def test_tuple_rules():
    with pytest.raises(ValueError, match="not a tuple"):
        ref.all_to_all([(np.zeros(2),), (np.zeros(2),)], 0, 0, 2)
    with pytest.raises(ValueError, match="non-empty"):
        ref.all_reduce([(), ()], np.add)
    with pytest.raises(ValueError, match="tuples of different lengths"):
        ref.all_reduce([(np.zeros(2),), (np.zeros(2), np.zeros(2))], np.add)
    with pytest.raises(ValueError, match="some are tuples"):
        ref.all_reduce([(np.zeros(2),), np.zeros(2)], np.add)


def test_at_least_one_replica():
    with pytest.raises(ValueError, match="at least one replica"):
        ref.all_reduce([], np.add)
    with pytest.raises(ValueError, match="at least one replica"):
        ref.replica_id(0)
