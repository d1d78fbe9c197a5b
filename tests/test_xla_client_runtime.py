"""The removed client idioms over jaxlib's current client: make_cpu_client and
get_local_backend, Client.compile of XlaComputations, MLIR and HLO text with
CompileOptions (device assignments as nested lists or arrays), buffer_from_pyval,
execute (a tuple root: one buffer per element), execute_with_python_values and its
replicated form, replicas with collectives (against tests/spec_reference_collectives.py)
and SPMD partitions on CPU devices, channel handles, devices."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
import hlogen.xla_client as xc
from hlogen.xla_client import ops as xops
from tests import spec_reference_collectives as cref

BACKEND = xc.make_cpu_client(num_devices=4)
F32 = np.dtype(np.float32)


def shape(dtype, *dims):
    return xc.Shape.array_shape(np.dtype(dtype), dims)


def scalar_add():
    c = xc.XlaBuilder("add")
    xops.Add(xops.Parameter(c, 0, shape(F32)), xops.Parameter(c, 1, shape(F32)))
    return c.build()


def pair():
    """(x, y) -> (x + y, x * y), a tuple root."""
    c = xc.XlaBuilder("pair")
    x, y = (xops.Parameter(c, i, shape(F32, 3)) for i in range(2))
    xops.Tuple(c, [xops.Add(x, y), xops.Mul(x, y)])
    return c.build()


def test_the_client_is_jaxs_cpu_backend():
    assert xc.get_local_backend("cpu") is BACKEND and xc.get_local_backend() is BACKEND
    assert BACKEND.platform == "cpu" and BACKEND.device_count() >= 4
    devices = BACKEND.local_devices()
    assert [d.id for d in devices] == list(range(len(devices))) and devices[0].platform == "cpu"
    assert devices == BACKEND.devices() and len({*devices}) == len(devices)
    # jaxlib's methods the client passes through give jaxlib's devices: the same devices
    memory = devices[1].addressable_memories()[0]
    assert devices[1] in memory.addressable_by_devices() and devices[0] not in \
        memory.addressable_by_devices()
    assert BACKEND.get_default_device_assignment(2) == devices[:2]
    assert BACKEND.get_default_device_assignment(2, 2) == [devices[:2], devices[2:4]]
    with pytest.raises(hg.InputError, match="need 4096 devices"):
        BACKEND.get_default_device_assignment(4096)
    assert xc.make_cpu_client(asynchronous=True) is BACKEND  # jax chose those options
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        xc.make_cpu_client(num_device=4)


def test_buffers():
    b = BACKEND.buffer_from_pyval(3.0)  # as numpy types a Python float: float64
    assert b.to_py().dtype == np.float64 and b.to_py() == 3.0
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    buf = BACKEND.buffer_from_pyval(a, device=BACKEND.local_devices()[1])
    assert buf.shape == (2, 3) and buf.dtype == np.int64 and buf.ndim == 2 and buf.size == 6
    assert buf.device() == BACKEND.local_devices()[1] and str(buf.xla_shape()) == "s64[2,3]{1,0}"
    np.testing.assert_array_equal(np.asarray(buf.block_until_ready()), a)
    buf.copy_to_host_async()  # the old Buffer's prefetch, then its clone: the same array
    clone = buf.clone()
    assert clone.unsafe_buffer_pointer() == buf.unsafe_buffer_pointer()
    np.testing.assert_array_equal(clone.to_py(), a)
    moved = buf.copy_to_device(BACKEND.local_devices()[2])
    assert moved.device().id == 2 and moved.on_device_size_in_bytes() == 48
    for semantics in xc.HostBufferSemantics.__members__.values():  # the old argument, taken
        copied = BACKEND.buffer_from_pyval(a, host_buffer_semantics=semantics)
        np.testing.assert_array_equal(copied.to_py(), a)
    big_endian = np.arange(3, dtype=">f4")
    np.testing.assert_array_equal(BACKEND.buffer_from_pyval(big_endian).to_py(), [0, 1, 2])
    buf.delete()
    assert buf.is_deleted()
    with pytest.raises(hg.InputError, match="no tuple buffers"):
        BACKEND.buffer_from_pyval((1, 2.5))


def _aligned(n):
    """An f32 array of n ones whose data is 128-byte aligned (what XLA CPU may alias)."""
    storage = np.empty(n + 32, np.float32)
    start = (-storage.ctypes.data % 128) // 4
    x = storage[start:start + n]
    x[:] = 1
    return x


def test_buffers_copy_a_numpy_array_unless_zero_copy_is_asked_for():
    during_call = xc.HostBufferSemantics.IMMUTABLE_ONLY_DURING_CALL
    for kwargs in ({"host_buffer_semantics": during_call}, {"force_copy": True},
                   {"host_buffer_semantics": xc.HostBufferSemantics.IMMUTABLE_UNTIL_TRANSFER_COMPLETES}):
        x = _aligned(1024)
        buf = BACKEND.buffer_from_pyval(x, **kwargs)
        x[:] = 5  # the caller's array is the caller's again once the call returns
        np.testing.assert_array_equal(buf.to_py(), np.ones(1024, np.float32))
        assert buf.unsafe_buffer_pointer() != x.ctypes.data
    # ZERO_COPY (the default, as XLA's): the buffer may be the array's own memory
    x = _aligned(1024)
    assert BACKEND.buffer_from_pyval(x).unsafe_buffer_pointer() == x.ctypes.data


def test_compile_and_execute():
    x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    exe = BACKEND.compile(pair())
    assert [d.id for d in exe.local_devices()] == [0]
    out = exe.execute([BACKEND.buffer_from_pyval(x), BACKEND.buffer_from_pyval(y)])
    assert len(out) == 2 and all(isinstance(b, xc.Buffer) for b in out)  # one per element
    np.testing.assert_array_equal(out[0].to_py(), x + y)
    np.testing.assert_array_equal(np.asarray(out[1]), x * y)
    got = exe.execute([x, [7, 8, 9]])  # host values are accepted too, of the parameter's type
    np.testing.assert_array_equal(got[1].to_py(), x * [7, 8, 9])
    with pytest.raises(hg.InputError, match="takes 2 argument"):
        exe.execute([BACKEND.buffer_from_pyval(x)])
    deleted = BACKEND.buffer_from_pyval(x)
    deleted.delete()
    with pytest.raises(xc.XlaRuntimeError, match="deleted"):
        exe.execute([deleted, BACKEND.buffer_from_pyval(y)])
    with pytest.raises(hg.InputError, match="expects f32"):
        exe.execute([BACKEND.buffer_from_pyval(x.astype(np.float64)), BACKEND.buffer_from_pyval(y)])
    assert exe.size_of_generated_code_in_bytes() >= 0 and exe.hlo_modules()
    assert exe.client is BACKEND


def test_compile_takes_every_form_of_a_computation():
    x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    comp = pair()
    for form in (comp, comp.computation, xc._xla.mlir.xla_computation_to_mlir_module(comp),
                 comp.computation.to_bytecode(), comp.as_hlo_text(), comp.hlo()):
        got = xc.execute_with_python_values(BACKEND.compile(form, xc.CompileOptions()), [x, y],
                                            BACKEND)
        np.testing.assert_array_equal(got[0], x + y)
        np.testing.assert_array_equal(got[1], x * y)
    with pytest.raises(hg.InputError, match="compile takes an XlaComputation"):
        BACKEND.compile(42)


def _replicated(comp, per_replica, assignment=None):
    options = xc.CompileOptions()
    options.num_replicas = len(per_replica)
    if assignment is not None:
        options.device_assignment = assignment
    exe = BACKEND.compile(comp, options)
    return exe, xc.execute_with_python_values_replicated(exe, per_replica, BACKEND)


def test_replicas_with_collectives():
    n = 4
    per_replica = [np.arange(8, dtype=np.float32).reshape(4, 2) + 10 * r for r in range(n)]
    inputs = [[x] for x in per_replica]
    groups = xc.make_replica_groups([[0, 2], [1, 3]])
    c = xc.XlaBuilder("collectives")
    x = xops.Parameter(c, 0, shape(F32, 4, 2))
    channel = BACKEND.create_channel_handle()
    xops.Tuple(c, [xops.AllReduce(x, scalar_add(), groups, channel), xops.CrossReplicaSum(x),
                   xops.AllGather(x, 1, 4), xops.ReduceScatter(x, scalar_add(), 0, 2, [[0, 1], [2, 3]]),
                   xops.AllToAll(x, 0, 1, 4), xops.CollectivePermute(x, [(0, 1), (1, 2), (2, 0)]),
                   xops.ReplicaId(c)])
    comp = c.build()
    for assignment in ([[3], [2], [1], [0]], np.arange(4).reshape(4, 1), None):
        exe, got = _replicated(comp, inputs, assignment)
        if assignment is not None:
            assert [d.id for d in exe.local_devices()] == [int(i) for i in np.ravel(assignment)]
        expected = list(zip(
            cref.all_reduce(per_replica, np.add, [[0, 2], [1, 3]]),
            cref.cross_replica_sum(per_replica), cref.all_gather(per_replica, 1, 4),
            cref.reduce_scatter(per_replica, np.add, 0, 2, [[0, 1], [2, 3]]),
            cref.all_to_all(per_replica, 0, 1, 4),
            cref.collective_permute(per_replica, [(0, 1), (1, 2), (2, 0)]), cref.replica_id(n)))
        for r in range(n):
            for g, e in zip(got[r], expected[r]):
                np.testing.assert_array_equal(g, e)


def test_device_assignments_and_their_errors():
    options = xc.CompileOptions()
    options.device_assignment = [[0, 1]]
    assert options.device_assignment.replica_count() == 1
    assert options.device_assignment.computation_count() == 2
    da = xc.DeviceAssignment.create([[0], [1]])
    assert da.replica_count() == 2
    with pytest.raises(hg.InputError, match="2-D array"):
        xc.DeviceAssignment.create([0, 1])
    options = xc.CompileOptions()
    options.num_replicas = 2
    options.device_assignment = [[0], [4096]]
    with pytest.raises(hg.InputError, match=r"names device\(s\) \[4096\]"):
        BACKEND.compile(pair(), options)
    exe = BACKEND.compile(scalar_add(), _two_replicas())
    with pytest.raises(hg.InputError, match="use execute_sharded_on_local_devices"):
        exe.execute([np.float32(1), np.float32(2)])
    with pytest.raises(hg.InputError, match="one value per local device"):
        exe.execute_sharded_on_local_devices([[np.float32(1)], [np.float32(2)]])


def _two_replicas():
    options = xc.CompileOptions()
    options.num_replicas = 2
    return options


def _row_sharding():
    s = xc.OpSharding()
    s.type = xc.OpSharding.Type.OTHER
    s.tile_assignment_dimensions.extend([2, 1])
    s.tile_assignment_devices.extend([0, 1])
    return s


def test_spmd_partitions():
    """A matrix product with its lhs and result split by rows over two partitions, which
    XLA's SPMD partitioner compiles; each device gets and returns its shard."""
    replicated = xc.OpSharding()
    replicated.type = xc.OpSharding.Type.REPLICATED
    c = xc.XlaBuilder("spmd")
    c.set_sharding(_row_sharding())
    a = xops.Parameter(c, 0, shape(F32, 4, 3))
    c.set_sharding(replicated)
    b = xops.Parameter(c, 1, shape(F32, 3, 2))
    c.set_sharding(_row_sharding())
    product = xops.Dot(a, b)
    c.clear_sharding()
    options = xc.CompileOptions()
    options.num_partitions = 2
    options.executable_build_options.use_spmd_partitioning = True
    options.device_assignment = np.array([[2, 3]])
    exe = BACKEND.compile(c.build(product), options)
    devices = exe.local_devices()
    assert [d.id for d in devices] == [2, 3]
    lhs = np.arange(12, dtype=np.float32).reshape(4, 3)
    rhs = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    args = [[BACKEND.buffer_from_pyval(lhs[:2], devices[0]), BACKEND.buffer_from_pyval(lhs[2:], devices[1])],
            [BACKEND.buffer_from_pyval(rhs, d) for d in devices]]
    (shards,) = exe.execute_sharded_on_local_devices(args)
    assert [s.device().id for s in shards] == [2, 3]
    np.testing.assert_array_equal(np.concatenate([s.to_py() for s in shards]), lhs @ rhs)


def test_channels_devices_and_refusals():
    first, second = BACKEND.create_channel_handle(), BACKEND.create_channel_handle()
    assert second.handle > first.handle and first.type == xc.ChannelHandle_ChannelType.DEVICE_TO_DEVICE
    assert BACKEND.create_device_to_host_channel_handle().type == \
        xc.ChannelHandle_ChannelType.DEVICE_TO_HOST
    device = BACKEND.local_devices()[0]
    out = BACKEND.compile(pair()).execute([np.ones(3, np.float32)] * 2)
    device.synchronize_all_activity()  # nothing left in flight on the device
    np.testing.assert_array_equal(out[0].to_py(), [2, 2, 2])
    with pytest.raises(hg.UnsupportedError, match="no infeed queue"):
        device.transfer_to_infeed(np.ones(2))
    with pytest.raises(hg.UnsupportedError, match="no outfeed"):
        device.transfer_from_outfeed(shape(F32, 2))
    with pytest.raises(hg.UnsupportedError, match="host_callbacks"):
        BACKEND.compile(pair(), xc.CompileOptions(), [object()])


def test_compile_failures_are_xla_runtime_errors():
    c = xc.XlaBuilder("unknown_target")
    xops.CustomCall(c, b"nobody_registered_this", [xops.Parameter(c, 0, shape(F32, 2))], shape(F32, 2))
    with pytest.raises(xc.XlaRuntimeError, match="nobody_registered_this") as caught:
        BACKEND.compile(c.build())
    assert isinstance(caught.value, hg.ExecutionError)


def test_execute_sharded_dlpack_and_cost_analysis_as_jaxlib_0_6_had_them():
    exe = BACKEND.compile(pair())
    x, y = np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)
    results = exe.execute_sharded([[BACKEND.buffer_from_pyval(x)], BACKEND.buffer_from_pyval(y)])
    (total, product) = results.disassemble_into_single_device_arrays()
    assert isinstance(total[0], xc.ArrayImpl) and len(total) == len(product) == 1
    np.testing.assert_array_equal(np.asarray(total[0]), x + y)
    np.testing.assert_array_equal(np.asarray(product[0]), x * y)
    # the token of an execution is its completion
    token = exe.execute_sharded([[x], [y]], with_tokens=True).consume_token()
    assert token.block_until_ready() is None and token.get_token(0).block_until_ready() is None
    results, token = xc.LoadedExecutable_execute_with_token(exe, [x, y])
    token.block_until_ready()
    np.testing.assert_array_equal(results[1].to_py(), x * y)
    with pytest.raises(xc.XlaRuntimeError, match="UNIMPLEMENTED"):  # the CPU has no stream
        BACKEND.local_devices()[0].get_stream_for_external_ready_events()
    # DLPack: a capsule of the buffer's memory, and a buffer of a capsule (once only)
    buf = BACKEND.buffer_from_pyval(np.arange(6, dtype=np.int32).reshape(2, 3))
    capsule = xc._xla.buffer_to_dlpack_managed_tensor(buf)
    assert type(capsule).__name__ == "PyCapsule"
    back = xc._xla.dlpack_managed_tensor_to_buffer(capsule, BACKEND.local_devices()[0], None)
    assert isinstance(back, xc.ArrayImpl)
    np.testing.assert_array_equal(back.to_py(), np.arange(6).reshape(2, 3))
    with pytest.raises(RuntimeError, match="consumed at most once"):
        xc._xla.dlpack_managed_tensor_to_buffer(capsule, BACKEND, None)  # the old form
    again = xc._xla.dlpack_managed_tensor_to_buffer(xc._xla.buffer_to_dlpack_managed_tensor(buf),
                                                    BACKEND, None)
    np.testing.assert_array_equal(np.asarray(again), np.arange(6).reshape(2, 3))
    # XLA's cost analysis of the HLO module: a multiply and an add of 3 elements each
    analysis = xc._xla.hlo_module_cost_analysis(BACKEND, pair().as_hlo_module())
    assert analysis["flops"] == 6.0


def test_live_buffers_are_the_clients_own_newest_first():
    made = [BACKEND.buffer_from_pyval(np.float32(i)) for i in range(3)]
    assert BACKEND.live_buffers()[:3] == made[::-1]  # Buffers compare by identity
    made[1].delete()
    assert BACKEND.live_buffers()[:2] == [made[2], made[0]]
    assert made[1] not in BACKEND.live_buffers()
    dropped = id(made.pop())
    assert all(id(b) != dropped for b in BACKEND.live_buffers())
    # XLA's registry of custom-call targets, as jaxlib 0.6 read it
    assert isinstance(xc.custom_call_targets("Host"), dict)
