"""An all-reduce across replicas, as an @hg.function: every replica gets the sum of
every replica's x (AllReduce with an add computation).

    hlogen run samples/allreduce.py --replicas 4 --input "4x8xf32=[1 ...][...]"
        (a leading replica dimension: replica r gets row r; or --input 8xf32=... per replica)
    hlogen run samples/allreduce.py --replicas 2 --num-processes 2 --process-id 0 \
        --coordinator localhost:12345 --input 2x8xf32=...   (and --process-id 1 beside it)
"""
import hlogen as hg
from hlogen import ops


@hg.function
def sum_over_replicas(x: hg.f32[8]):
    """AllReduce(x, add) over every replica: each replica gets the sum of all."""
    return ops.all_reduce(x, ops.add)
