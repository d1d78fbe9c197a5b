"""Every public name of jaxlib 0.6.0's `xla_client` (jaxlib/xla/xla_client.py at jax
v0.6.0, its module-level names) exists in hlogen.xla_client: with its meaning where
hlogen has one, else raising hg.UnsupportedError that says why when used."""
from __future__ import annotations

import numpy as np
import pytest

import hlogen as hg
import hlogen.xla_client as xc
from hlogen.xla_client._jax_names import REFUSED

# jaxlib 0.6.0's xla_client, every public module-level name
JAXLIB_0_6_NAMES = """
ifrt_programs ops profiler mlir_api_version xla_platform_names logger make_cpu_client
DeviceTopology get_topology_for_devices make_tfrt_tpu_c_api_device_topology
make_c_api_device_topology pjrt_plugin_loaded load_pjrt_plugin_dynamically
load_pjrt_plugin_with_c_api pjrt_plugin_initialized initialize_pjrt_plugin make_c_api_client
make_tpu_client generate_pjrt_gpu_plugin_options OpMetadata CurrentSourceInfoMetadata
PrimitiveType XLA_ELEMENT_TYPE_TO_DTYPE DTYPE_TO_XLA_ELEMENT_TYPE dtype_to_etype Shape
ProgramShape ShapeIndex shape_from_pyval DeviceAssignment Device CompileOptions
HostBufferSemantics PaddingType window_padding_type_to_pad_values XlaBuilder XlaComputation
XlaOp FftType Client Memory Array ArrayImpl LoadedExecutable DeviceList OpSharding HloSharding
Sharding NamedSharding SingleDeviceSharding PmapSharding GSPMDSharding PjRtLayout
AutotuneCacheMode ResultAccuracyMode LoadedExecutable_execute
LoadedExecutable_execute_with_token CustomCallTargetTraits CustomCallHandler
register_custom_call_target register_custom_call_handler CustomTypeIdHandler
register_custom_type_id register_custom_type_id_handler register_custom_call_partitioner
encode_inspect_sharding_callback hlo_sharding_util register_custom_call_as_batch_partitionable
PaddingConfigDimension PaddingConfig make_padding_config DotDimensionNumbers
make_dot_dimension_numbers ConvolutionDimensionNumbers make_convolution_dimension_numbers
PrecisionConfig ResultAccuracy GatherDimensionNumbers ScatterDimensionNumbers ReplicaGroup
make_replica_groups Traceback Frame tracebacks heap_profile XlaRuntimeError
array_result_handler batched_copy_array_to_devices_with_sharding batched_device_put
reorder_shards batched_block_until_ready check_and_canonicalize_memory_kind Layout
custom_call_targets ArrayCopySemantics
""".split()


def test_every_public_name_of_jaxlib_0_6_exists_and_is_exported():
    assert len(JAXLIB_0_6_NAMES) == 95
    missing = [n for n in JAXLIB_0_6_NAMES if not hasattr(xc, n)]
    assert missing == []
    assert set(JAXLIB_0_6_NAMES) <= set(xc.__all__)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_name_without_a_meaning_here_says_why_when_used(name):
    value = getattr(xc, name)
    with pytest.raises(hg.UnsupportedError, match=f"xla_client.{name}: .+"):
        value()
    with pytest.raises(hg.UnsupportedError, match=f"xla_client.{name}: "):
        value.anything
    with pytest.raises(hg.UnsupportedError, match=f"xla_client.{name}: "):
        value >= 1
    assert f"xla_client.{name}: not available in hlogen: " in repr(value)


def test_results_come_back_as_array_impl_on_one_device():
    c = xc.XlaBuilder("neg")
    xc.ops.Neg(xc.ops.Parameter(c, 0, xc.shape_from_pyval(np.float32(2))))
    backend = xc.make_cpu_client()
    (result,) = backend.compile(c.build()).execute([backend.buffer_from_pyval(np.float32(2))])
    assert isinstance(result, xc.ArrayImpl) and isinstance(result, xc.Array)
    assert np.asarray(result) == -2
    # what the jax array has, as jaxlib 0.6's arrays had it
    assert isinstance(result.sharding, xc.SingleDeviceSharding)
    assert result.sharding.device_set == {backend.local_devices()[0]._device}
    assert result.is_fully_addressable
    assert xc.LoadedExecutable_execute is xc.LoadedExecutable.execute


def test_tracebacks_are_collected_inside_the_switch_only():
    def collect():
        return xc.Traceback.get_traceback()

    with xc.tracebacks(enabled=True):
        tb = collect()
        assert isinstance(tb, xc.Traceback)
        names = [f.function_name for f in tb.frames if isinstance(f, xc.Frame)]
        # jaxlib names frames by their qualified names (0.6: the bare name)
        assert any(n.endswith(".<locals>.collect") for n in names), names
    with xc.tracebacks(enabled=False):
        assert collect() is None


def test_shape_index_and_the_result_accuracy_enums():
    assert xc.ShapeIndex((1, 2)) == xc.ShapeIndex([1, 2]) != xc.ShapeIndex((2, 1))
    assert hash(xc.ShapeIndex((1, 2))) == hash(xc.ShapeIndex((1, 2)))
    assert repr(xc.ShapeIndex((0, 3))) == "{0,3}"
    a = xc.ResultAccuracy()
    assert (a.mode, a.atol, a.rtol, a.ulps) == (xc.ResultAccuracyMode.DEFAULT, 0.0, 0.0, 0)
    assert [m.name for m in xc.ResultAccuracyMode] == ["DEFAULT", "HIGHEST", "TOLERANCE"]
    assert xc.AutotuneCacheMode.READ != xc.AutotuneCacheMode.UPDATE
    assert xc.xla_platform_names == {"cpu": "Host", "gpu": "CUDA"}
