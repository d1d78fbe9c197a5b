"""Indexing ops of the spec in real programs, as @hg.function definitions.

    hlogen run samples/indexing.py --function embedding_lookup \
        --input 4x3xf32=0,1,2,10,11,12,20,21,22,30,31,32 --input 5xs32=3,0,0,2,9
    hlogen run samples/indexing.py --function histogram --input 8xf32=0.5,1.5,1.7,3.2,-1,7.9,8,3.3
    hlogen run samples/indexing.py --function top_3 --input 2x5xf32=1,9,3,9,0,-1,-2,-3,-4,-5
"""
import hlogen as hg
from hlogen import ops


@hg.function
def embedding_lookup(table: hg.f32[4, 3], ids: hg.s32[5]):
    """Gather: row ids[i] of the table for each i; ids out of range are clamped (XLA)."""
    return ops.gather(table, ids, offset_dims=[1], collapsed_slice_dims=[0], start_index_map=[0],
                      index_vector_dim=1, slice_sizes=[1, 3])


@hg.function
def histogram(values: hg.f32[8]):
    """Scatter with add: counts of values in the bins [0,1), [1,2), ..., [3,4); values
    outside the bins fall on indices out of bounds, which Scatter skips."""
    bins = ops.convert_element_type(ops.floor(values), hg.s32)
    ones = ops.broadcast(values.builder.constant(1), [8])
    zeros = ops.broadcast(values.builder.constant(0), [4])
    return ops.scatter(zeros, bins, ones, ops.add, update_window_dims=[],
                       inserted_window_dims=[0], scatter_dims_to_operand_dims=[0],
                       index_vector_dim=1)


@hg.function
def top_3(scores: hg.f32[2, 5]):
    """TopK: the 3 largest scores of each row and their positions (ties: lower index first)."""
    return ops.top_k(scores, 3)
