"""Every op of hlogen.ops with its signature, for editors and grep (several are made from
the tables of hlogen/ops/elementwise.py); tests/test_ops_index.py checks it against the
functions."""
from hlogen.ops.collectives import ChannelHandle as ChannelHandle


def abs(operand):
    """Abs(operand): applied to each element of operand."""


def add(lhs, rhs, broadcast_dimensions=()):
    """Add(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def after_all(tokens):
    """AfterAll(tokens): a token that follows every one of `tokens` (one or more)."""


def all_gather(
        operand, all_gather_dim, shard_count, replica_groups=None, channel_id=None,
        use_global_device_ids=False):
    """AllGather: the operands of a group's replicas concatenated along all_gather_dim, in
    the group's order; shard_count is the size of each group (the number of replicas when
    replica_groups is empty)."""


def all_reduce(
        operand, computation, replica_groups=None, channel_id=None, use_global_device_ids=False):
    """AllReduce: every replica of a group gets `computation` (T, T -> T) folded over the
    group's operands. `operand` is an array, a tuple-shaped Op or a list of arrays (of one
    element type): each element is reduced, and the result has the operand's form.
    `replica_groups` None or []: every replica, one group. With a channel_id, the groups
    name replicas and every partition joins (cross_replica_and_partition); with
    use_global_device_ids too, they name devices (flattened_ids)."""


def all_to_all(
        operand, split_dimension, concat_dimension, split_count, replica_groups=None,
        channel_id=None):
    """AllToAll: each replica splits its operand along split_dimension into split_count
    blocks and sends block i to the i-th replica of its group, which concatenates the blocks
    it receives along concat_dimension in the group's order. With a channel_id the groups
    name partitions (cross_partition)."""


def and_(lhs, rhs, broadcast_dimensions=()):
    """And(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def atan2(lhs, rhs, broadcast_dimensions=()):
    """Atan2(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def batch_norm_grad(operand, scale, mean, variance, grad_output, epsilon, feature_index):
    """BatchNormGrad: (grad_operand, grad_scale, grad_offset), the gradients of
    BatchNormTraining's output with respect to its operand, scale and offset."""


def batch_norm_inference(operand, scale, offset, mean, variance, epsilon, feature_index):
    """BatchNormInference: scale * (x - mean) / sqrt(variance + epsilon) + offset, with the
    given mean and variance per feature."""


def batch_norm_training(operand, scale, offset, epsilon, feature_index):
    """BatchNormTraining: (output, batch_mean, batch_var), where mean and variance are taken
    over every dimension but feature_index and output = scale * (x - mean) / sqrt(var +
    epsilon) + offset."""


def bitcast_convert_type(operand, new_element_type):
    """BitcastConvertType: reinterprets the bits of each element as `new_element_type`."""


def broadcast(operand, broadcast_sizes):
    """Broadcast: adds dimensions `broadcast_sizes` on the left (major side) of operand."""


def broadcast_in_dim(operand, out_dim_size, broadcast_dimensions):
    """BroadcastInDim: operand dimension i becomes output dimension broadcast_dimensions[i]
    (its size must be 1 or the output's); the other output dimensions replicate it."""


def call(computation, *args):
    """Call(computation, args...): the results of `computation` on `args` (a func.call of a
    private copy of it). A computation with several results returns a tuple of Ops."""


def cbrt(operand, result_accuracy=None):
    """Cbrt(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def ceil(operand):
    """Ceil(operand): applied to each element of operand."""


def cholesky(a, lower=True):
    """Cholesky(a, lower): the lower (or upper) triangular factor of each symmetric
    (Hermitian) positive-definite matrix of `a`, reading only that triangle of `a`. The
    other triangle of the result is zero; for an input that is not positive definite the
    values are whatever XLA computes (the spec leaves them to the implementation)."""


def clamp(min, operand, max):
    """Clamp(min, operand, max) = min(max(operand, min), max), element-wise."""


def clz(operand):
    """Clz(operand): applied to each element of operand."""


def collapse(operand, dimensions):
    """Collapse(operand, dimensions): the consecutive, in-order `dimensions` merged into
    one."""


def collective_permute(operand, source_target_pairs, channel_id=None):
    """CollectivePermute: for each (source, target) pair, the target replica gets the source
    replica's operand; replicas that are no target get zeros. With a channel_id the pairs
    name partitions (cross_partition)."""


def complex(lhs, rhs, broadcast_dimensions=()):
    """Complex(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def composite_call(decomposition, *inputs, name, composite_attributes=None, version=0):
    """CompositeCall: an op named `name` (with `composite_attributes` and `version`) whose
    meaning is `decomposition` applied to `inputs`; backends run the decomposition."""


def concatenate(operands, dimension):
    """Concatenate(operands, dimension): the operands joined along `dimension`, in order."""


def conditional(*args):
    """Conditional, in the spec's two forms (call both positionally):"""


def conv(lhs, rhs, window_strides, padding, feature_group_count=1, batch_group_count=1):
    """Conv: conv_general_dilated in XLA's fixed layout with "SAME" or "VALID" padding."""


def conv_general_dilated(
        lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
        dimension_numbers=None, feature_group_count=1, batch_group_count=1):
    """The general convolution: `rhs` (the kernel) slides over the lhs-dilated, padded
    `lhs`, with `window_strides` and `rhs_dilation`; `padding` "SAME", "VALID" or [(low,
    high), ...] (negative removes). `feature_group_count` splits the input features into
    groups convolved separately (depthwise when it equals them), `batch_group_count` the
    batch."""


def conv_with_general_padding(
        lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation, feature_group_count=1,
        batch_group_count=1):
    """ConvWithGeneralPadding: conv_general_dilated in XLA's fixed layout with explicit
    (low, high) padding per spatial dimension and lhs/rhs dilations."""


def convert_element_type(operand, new_element_type):
    """ConvertElementType: an element-wise static_cast to `new_element_type`."""


def cos(operand, result_accuracy=None):
    """Cos(operand, result_accuracy=None): applied to each element of operand, as accurately
    as `result_accuracy` (an hg.ResultAccuracy) asks."""


def create_token(builder):
    """A new token (AfterAll of no tokens)."""


def cross_replica_sum(operand, replica_groups=None):
    """CrossReplicaSum: AllReduce with a sum."""


def custom_call(
        target_name, args, shape, *, builder=None, opaque=b'', has_side_effect=False,
        api_version=None, operand_layouts=None, result_layouts=None):
    """CustomCall(target_name, args, shape): calls target `target_name` on `args`."""


def div(lhs, rhs, broadcast_dimensions=()):
    """Div(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def dot(lhs, rhs, precision_config=None, preferred_element_type=None):
    """Dot, by the spec's table: vector [n] . vector [n] -> scalar; matrix [m x k] . vector
    [k] -> vector [m]; matrix [m x k] . matrix [k x n] -> matrix [m x n]."""


def dot_general(
        lhs, rhs, dimension_numbers, precision_config=None, preferred_element_type=None):
    """DotGeneral: sums of products over the contracting dimensions, for each index of the
    batch dimensions; the result has the batch, then lhs free, then rhs free dimensions.
    `dimension_numbers` is an hg.DotDimensionNumbers or a dict of its fields."""


def dynamic_slice(operand, start_indices, size_indices):
    """DynamicSlice(operand, start_indices, size_indices): the slice of sizes `size_indices`
    starting at runtime indices, each clamped to [0, dimension size - slice size]."""


def dynamic_update_slice(operand, update, start_indices):
    """DynamicUpdateSlice(operand, update, start_indices): operand with `update` written at
    runtime indices, each clamped to [0, dimension size - update size]."""


def eq(lhs, rhs, broadcast_dimensions=()):
    """Eq(lhs, rhs, broadcast_dimensions) -> pred array; IEEE 754 comparison for floats."""


def eq_total_order(lhs, rhs, broadcast_dimensions=()):
    """EqTotalOrder(lhs, rhs, broadcast_dimensions) -> pred array; the total order -NaN <
    -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""


def erf(operand, result_accuracy=None):
    """Erf(operand, result_accuracy=None): applied to each element of operand, as accurately
    as `result_accuracy` (an hg.ResultAccuracy) asks."""


def exp(operand, result_accuracy=None):
    """Exp(operand, result_accuracy=None): applied to each element of operand, as accurately
    as `result_accuracy` (an hg.ResultAccuracy) asks."""


def expm1(operand, result_accuracy=None):
    """Expm1(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def fft(operand, fft_type, fft_length):
    """Fft(operand, fft_type, fft_length): the forward or inverse, complex or real discrete
    Fourier transform over the len(fft_length) innermost dimensions."""


def floor(operand):
    """Floor(operand): applied to each element of operand."""


def gather(
        operand, start_indices, *, offset_dims, collapsed_slice_dims, start_index_map,
        index_vector_dim, slice_sizes, indices_are_sorted=False,
        operand_batching_dims=(), start_indices_batching_dims=()):
    """Gather: one slice of sizes `slice_sizes` of operand per index vector of start_indices
    (the vectors run along index_vector_dim; start_index_map says which operand dimension
    each component starts). Starts are clamped so that the slice fits, as in DynamicSlice.
    The result has the indices' other dimensions as batch dimensions and the slice's (less
    collapsed_slice_dims and operand_batching_dims) at offset_dims."""


def ge(lhs, rhs, broadcast_dimensions=()):
    """Ge(lhs, rhs, broadcast_dimensions) -> pred array; IEEE 754 comparison for floats."""


def ge_total_order(lhs, rhs, broadcast_dimensions=()):
    """GeTotalOrder(lhs, rhs, broadcast_dimensions) -> pred array; the total order -NaN <
    -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""


def get_dimension_size(operand, dimension):
    """GetDimensionSize(operand, dimension): the size of `dimension` as an s32 scalar."""


def get_tuple_element(tuple_data, index):
    """GetTupleElement(tuple_data, index): element `index` (a constant) of a tuple."""


def gt(lhs, rhs, broadcast_dimensions=()):
    """Gt(lhs, rhs, broadcast_dimensions) -> pred array; IEEE 754 comparison for floats."""


def gt_total_order(lhs, rhs, broadcast_dimensions=()):
    """GtTotalOrder(lhs, rhs, broadcast_dimensions) -> pred array; the total order -NaN <
    -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""


def imag(operand):
    """Imag(operand): applied to each element of operand."""


def infeed(builder, shape, config=''):
    """Infeed: one value of `shape` read from the device's infeed queue (after a new token).
    Returns the data."""


def iota(builder, shape, iota_dimension):
    """Iota(shape, iota_dimension): values 0, 1, 2, ... along `iota_dimension`."""


def is_finite(operand):
    """IsFinite(operand): applied to each element of operand."""


def le(lhs, rhs, broadcast_dimensions=()):
    """Le(lhs, rhs, broadcast_dimensions) -> pred array; IEEE 754 comparison for floats."""


def le_total_order(lhs, rhs, broadcast_dimensions=()):
    """LeTotalOrder(lhs, rhs, broadcast_dimensions) -> pred array; the total order -NaN <
    -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""


def log(operand, result_accuracy=None):
    """Log(operand, result_accuracy=None): applied to each element of operand, as accurately
    as `result_accuracy` (an hg.ResultAccuracy) asks."""


def log1p(operand, result_accuracy=None):
    """Log1p(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def logistic(operand, result_accuracy=None):
    """Logistic(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def lt(lhs, rhs, broadcast_dimensions=()):
    """Lt(lhs, rhs, broadcast_dimensions) -> pred array; IEEE 754 comparison for floats."""


def lt_total_order(lhs, rhs, broadcast_dimensions=()):
    """LtTotalOrder(lhs, rhs, broadcast_dimensions) -> pred array; the total order -NaN <
    -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""


def map(operands, computation, dimensions=None):
    """Map(operands, computation): `computation` of N scalars applied at every index of the
    N operands (of equal dimensions); its scalar result type is the result's element type.
    `dimensions`, if given, must be every dimension in order (as XLA requires)."""


def max(lhs, rhs, broadcast_dimensions=()):
    """Max(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def min(lhs, rhs, broadcast_dimensions=()):
    """Min(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def mul(lhs, rhs, broadcast_dimensions=()):
    """Mul(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def ne(lhs, rhs, broadcast_dimensions=()):
    """Ne(lhs, rhs, broadcast_dimensions) -> pred array; IEEE 754 comparison for floats."""


def ne_total_order(lhs, rhs, broadcast_dimensions=()):
    """NeTotalOrder(lhs, rhs, broadcast_dimensions) -> pred array; the total order -NaN <
    -Inf < -finite < -0 < +0 < +finite < +Inf < +NaN."""


def neg(operand):
    """Neg(operand): applied to each element of operand."""


def not_(operand):
    """Not(operand): applied to each element of operand."""


def optimization_barrier(operand):
    """OptimizationBarrier(operand): the operand (an Op or a tuple of Ops) unchanged, with
    every value computed before anything that uses the result."""


def or_(lhs, rhs, broadcast_dimensions=()):
    """Or(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def pad(operand, padding_value, padding_config):
    """Pad(operand, padding_value, padding_config): `interior` copies of padding_value
    between the elements of each dimension, then `low` before and `high` after (negative:
    removed). padding_value is a scalar Op of the operand's element type, or a Python
    number."""


def population_count(operand):
    """PopulationCount(operand): applied to each element of operand."""


def pow(lhs, rhs, broadcast_dimensions=()):
    """Pow(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def real(operand):
    """Real(operand): applied to each element of operand."""


def recv(builder, shape, channel_handle):
    """Recv: a value of `shape` received on the channel from the Send of the same channel
    (after a new token). Returns the data."""


def reduce(operands, init_values, computation, dimensions):
    """Reduce(operands, init_values, computation, dimensions): `computation` folds the
    elements along `dimensions` (unordered) into each init value; the other dimensions stay,
    in order. With N operands the computation takes the N running values, then the N input
    values, and returns N values."""


def reduce_precision(operand, exponent_bits, mantissa_bits):
    """ReducePrecision: rounds to a float format with the given exponent and mantissa bits
    (round to nearest even), overflowing to +-Inf, and back; NaN stays NaN. Call with
    keywords."""


def reduce_scatter(
        operand, computation, scatter_dimension, shard_count, replica_groups=None,
        channel_id=None, use_global_device_ids=False):
    """ReduceScatter: AllReduce, then the result split along scatter_dimension into
    shard_count blocks, the i-th replica of each group getting block i. A tuple (or list)
    operand is reduce-scattered element by element."""


def reduce_window(
        operands, init_values, computation, window_dimensions, window_strides=None,
        padding='VALID', base_dilations=None, window_dilations=None):
    """ReduceWindow: Reduce over each window of the (padded, dilated) operands; padding
    elements take the init value. `padding` is "SAME", "VALID" or [(low, high), ...]."""


def rem(lhs, rhs, broadcast_dimensions=()):
    """Rem(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def replica_id(builder):
    """ReplicaId: the replica's id, a u32 scalar in [0, N)."""


def reshape(operand, new_sizes):
    """Reshape(operand, new_sizes): the elements of operand in row-major order, in an array
    of dimensions `new_sizes` (the spec's `dimensions`); () makes a scalar of a one-element
    array, and a scalar reshapes to any one-element shape."""


def rev(operand, dimensions):
    """Rev(operand, dimensions): the order of elements reversed along each of `dimensions`."""


def rng_bit_generator(algorithm, initial_state, shape):
    """RngBitGenerator(algorithm, initial_state, shape) -> (new_state, data)."""


def rng_normal(mu, sigma, shape):
    """RngNormal(mu, sigma, shape): numbers drawn from N(mu, sigma), of `shape` (floats)."""


def rng_uniform(a, b, shape):
    """RngUniform(a, b, shape): numbers uniformly distributed in [a, b), of `shape`."""


def round(operand):
    """Round(operand): applied to each element of operand."""


def round_nearest_even(operand):
    """RoundNearestEven(operand): applied to each element of operand."""


def rsqrt(operand, result_accuracy=None):
    """Rsqrt(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def scatter(
        operands, scatter_indices, updates, update_computation, *, update_window_dims,
        inserted_window_dims, scatter_dims_to_operand_dims, index_vector_dim,
        indices_are_sorted=False, unique_indices=False, input_batching_dims=(),
        scatter_indices_batching_dims=()):
    """Scatter: the operands with each update window combined into them by
    `update_computation` at the position an index vector of scatter_indices gives."""


def select(pred, on_true, on_false):
    """Select(pred, on_true, on_false): elements of on_true where pred is true, else
    on_false."""


def select_and_scatter(
        operand, select, window_dimensions, window_strides, padding, source, init_value, scatter):
    """SelectAndScatter: in each window of operand, `select` (T, T -> pred) picks one
    element; the source value of that window is combined by `scatter` (T, T -> T) into the
    result (init_value elsewhere) at the picked position. Overlapping windows accumulate."""


def send(operand, channel_handle):
    """Send: `operand` sent on the channel (after a new token). Returns the token that
    follows the send."""


def set_dimension_size(operand, size, dimension):
    """SetDimensionSize(operand, size, dimension): marks `dimension` as dynamic, of runtime
    size `size` (an s32 scalar Op), bounded by its static size."""


def shift_left(lhs, rhs, broadcast_dimensions=()):
    """ShiftLeft(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def shift_right_arithmetic(lhs, rhs, broadcast_dimensions=()):
    """ShiftRightArithmetic(lhs, rhs, broadcast_dimensions): element-wise, with XLA
    broadcasting."""


def shift_right_logical(lhs, rhs, broadcast_dimensions=()):
    """ShiftRightLogical(lhs, rhs, broadcast_dimensions): element-wise, with XLA
    broadcasting."""


def sign(operand):
    """Sign(operand): applied to each element of operand."""


def sin(operand, result_accuracy=None):
    """Sin(operand, result_accuracy=None): applied to each element of operand, as accurately
    as `result_accuracy` (an hg.ResultAccuracy) asks."""


def slice(operand, start_indices, limit_indices, strides=None):
    """Slice(operand, start_indices, limit_indices, strides): the sub-array start <= i <
    limit (limit exclusive) taking every stride-th element; strides=None means 1."""


def slice_in_dim(operand, start_index, limit_index, stride, dimno):
    """SliceInDim: Slice along dimension `dimno` only; the other dimensions are kept whole."""


def sort(operands, comparator=None, dimension=-1, is_stable=False):
    """Sort(operands, comparator, dimension, is_stable): sorts along `dimension` (negative
    counts from the end), permuting every operand alike."""


def sqrt(operand, result_accuracy=None):
    """Sqrt(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def sub(lhs, rhs, broadcast_dimensions=()):
    """Sub(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""


def tan(operand, result_accuracy=None):
    """Tan(operand, result_accuracy=None): applied to each element of operand, as accurately
    as `result_accuracy` (an hg.ResultAccuracy) asks."""


def tanh(operand, result_accuracy=None):
    """Tanh(operand, result_accuracy=None): applied to each element of operand, as
    accurately as `result_accuracy` (an hg.ResultAccuracy) asks."""


def top_k(operand, k, largest=True):
    """TopK(operand, k, largest): the k largest (or smallest) elements along the last
    dimension, in order, and their s32 indices; equal values keep index order. Floats order
    as -NaN < -Inf < ... < +Inf < +NaN."""


def transpose(operand, permutation):
    """Transpose(operand, permutation): result dimension i is operand dimension
    permutation[i]."""


def triangular_solve(a, b, left_side, lower, unit_diagonal, transpose_a):
    """TriangularSolve: x with op(a) @ x = b (left_side) or x @ op(a) = b, for triangular a
    (only its `lower` or upper triangle is read; its diagonal taken as ones when
    `unit_diagonal`); op(a) is a, its transpose or its adjoint per `transpose_a`
    ("NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"). Leading dimensions are batch dimensions."""


def tuple(elements, builder=None):
    """Tuple(elements): one value holding `elements` (Ops); `builder` only for the empty
    tuple."""


def while_loop(condition, body, init):
    """While(condition, body, init): repeats `body` on the loop-carried value while
    `condition` (-> pred[]) holds. `init` is an Op (an array, a token or a tuple) or a tuple
    of Ops; both computations take one parameter per element, `body` returns the same
    shapes, and the result has init's structure."""


def xor(lhs, rhs, broadcast_dimensions=()):
    """Xor(lhs, rhs, broadcast_dimensions): element-wise, with XLA broadcasting."""
