"""hlogen.xla_client: the Python XlaBuilder API that jaxlib removed in April 2025, back.

    import hlogen.xla_client as xla_client   # instead of `from jax.lib import xla_client`

    c = xla_client.XlaBuilder("sin")
    x = xla_client.ops.Parameter(c, 0, xla_client.Shape.array_shape(np.dtype(np.float32), ()))
    xla_client.ops.Sin(x)
    backend = xla_client.get_local_backend("cpu")
    compiled = backend.compile(c.build())
    compiled.execute([backend.buffer_from_pyval(np.float32(3))])[0].to_py()

What jaxlib 0.4-0.6's `xla_client` offered for building and running computations:
XlaBuilder and `ops` (every op of XlaBuilder's Python binding, over hlogen.ops),
XlaComputation (HLO text and protos by XLA's converter), the shape, dimension-number,
padding, precision, result-accuracy and sharding helpers, and the client idioms over
jaxlib's current PJRT client. docs/xla-client.md ("Porting xla_client code") lists what
differs. Every other public name of jaxlib 0.6's xla_client is here too: ArrayImpl (and
Array) is the Buffer results come back as; Traceback, Frame, the shardings and layouts
are jaxlib's own; ShapeIndex is XLA's; the rest (plugins, topologies, jax's dispatch
helpers) exist and raise hg.UnsupportedError saying why when used (_jax_names).
"""
import logging
from types import SimpleNamespace

import ml_dtypes

from hlogen.xla_client import ops
from hlogen.xla_client._builder import (XlaBuilder, XlaComputation, XlaOp,
                                        mlir_module_to_xla_computation,
                                        xla_computation_to_mlir_module)
from hlogen.xla_client._protos import (ChannelHandle, ChannelHandle_ChannelType,
                                       ConvolutionDimensionNumbers, CurrentSourceInfoMetadata,
                                       DotDimensionNumbers, FftType, FrontendAttributes,
                                       GatherDimensionNumbers, OpMetadata, OpSharding,
                                       PaddingConfig, PaddingConfigDimension, PaddingType,
                                       PrecisionConfig, ReplicaGroup, ResultAccuracy,
                                       ResultAccuracy_Mode, ScatterDimensionNumbers,
                                       make_convolution_dimension_numbers,
                                       make_dot_dimension_numbers, make_padding_config,
                                       make_replica_groups, window_padding_type_to_pad_values)
from hlogen.xla_client._runtime import (Buffer, Client, CompileOptions, Device, DeviceAssignment,
                                        ExecutableBuildOptions, LoadedExecutable,
                                        XlaRuntimeError, buffer_to_dlpack_managed_tensor,
                                        dlpack_managed_tensor_to_buffer,
                                        execute_with_python_values,
                                        execute_with_python_values_replicated,
                                        get_local_backend, hlo_module_cost_analysis,
                                        make_cpu_client)
from hlogen.xla_client._types import (DTYPE_TO_XLA_ELEMENT_TYPE, XLA_ELEMENT_TYPE_TO_DTYPE,
                                      PrimitiveType, ProgramShape, Shape, dtype_to_etype,
                                      shape_from_pyval)
from hlogen.xla_client._jax_names import (REFUSED, ArrayCopySemantics, AutotuneCacheMode,
                                          CustomCallTargetTraits, DeviceList, Frame,
                                          custom_call_targets,
                                          GSPMDSharding, Layout, Memory, NamedSharding,
                                          PjRtLayout, Refused, ShapeIndex, Sharding,
                                          SingleDeviceSharding, Traceback, tracebacks)
from hlogen.runtime import _jaxlib
from hlogen.runtime._jaxlib import xla_client as _jaxlib_xla_client

# names the removed module had for the same things
HloSharding = _jaxlib_xla_client.HloSharding
HostBufferSemantics = _jaxlib_xla_client.HostBufferSemantics  # buffer_from_pyval's argument
OpSharding_Type = OpSharding.Type
PrecisionConfig_Precision = PrecisionConfig.Precision
Executable = LoadedExecutable
bfloat16 = ml_dtypes.bfloat16
float8_e4m3fn = ml_dtypes.float8_e4m3fn
float8_e4m3fnuz = ml_dtypes.float8_e4m3fnuz
float8_e4m3b11fnuz = ml_dtypes.float8_e4m3b11fnuz
float8_e5m2 = ml_dtypes.float8_e5m2
float8_e5m2fnuz = ml_dtypes.float8_e5m2fnuz
ResultAccuracyMode = ResultAccuracy_Mode
ArrayImpl = Array = Buffer  # what execute returns: an array on one device
LoadedExecutable_execute = LoadedExecutable.execute
LoadedExecutable_execute_with_token = LoadedExecutable.execute_with_token
xla_platform_names = {"cpu": "Host", "gpu": "CUDA"}
logger = logging.getLogger(__name__)
for _name, _why in REFUSED.items():
    globals()[_name] = Refused(_name, _why)

# `xla_client._xla` was the extension module; code reached the builder through it
# (autodidax: `xe = xc._xla; xops = xc._xla.ops`)
_xla = SimpleNamespace(
    XlaBuilder=XlaBuilder, XlaComputation=XlaComputation, XlaOp=XlaOp, ops=ops,
    PrimitiveType=PrimitiveType, Shape=Shape, ProgramShape=ProgramShape, Client=Client,
    Device=Device, CompileOptions=CompileOptions, DeviceAssignment=DeviceAssignment,
    OpSharding=OpSharding, HloSharding=HloSharding, XlaRuntimeError=XlaRuntimeError,
    ResultAccuracy=ResultAccuracy, ResultAccuracy_Mode=ResultAccuracy_Mode,
    buffer_to_dlpack_managed_tensor=buffer_to_dlpack_managed_tensor,
    dlpack_managed_tensor_to_buffer=dlpack_managed_tensor_to_buffer,
    hlo_module_cost_analysis=hlo_module_cost_analysis,
    mlir=SimpleNamespace(xla_computation_to_mlir_module=xla_computation_to_mlir_module,
                         mlir_module_to_xla_computation=mlir_module_to_xla_computation,
                         hlo_to_stablehlo=_jaxlib.hlo_to_stablehlo))

__all__ = [
    "ops", "XlaBuilder", "XlaComputation", "XlaOp", "Shape", "ProgramShape", "PrimitiveType",
    "XLA_ELEMENT_TYPE_TO_DTYPE", "DTYPE_TO_XLA_ELEMENT_TYPE", "dtype_to_etype", "shape_from_pyval",
    "ChannelHandle", "ChannelHandle_ChannelType", "ConvolutionDimensionNumbers",
    "CurrentSourceInfoMetadata", "DotDimensionNumbers", "FftType", "FrontendAttributes",
    "GatherDimensionNumbers", "OpMetadata", "OpSharding", "OpSharding_Type", "PaddingConfig",
    "PaddingConfigDimension", "PaddingType", "PrecisionConfig", "PrecisionConfig_Precision",
    "ReplicaGroup", "ScatterDimensionNumbers", "HloSharding", "HostBufferSemantics",
    "make_convolution_dimension_numbers", "make_dot_dimension_numbers", "make_padding_config",
    "make_replica_groups",
    "window_padding_type_to_pad_values", "Buffer", "Client", "CompileOptions", "Device",
    "DeviceAssignment", "ExecutableBuildOptions", "Executable", "LoadedExecutable",
    "XlaRuntimeError", "execute_with_python_values", "execute_with_python_values_replicated",
    "get_local_backend", "make_cpu_client", "bfloat16", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e4m3b11fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "ResultAccuracy", "ResultAccuracyMode", "ArrayImpl", "Array", "ShapeIndex", "Traceback",
    "Frame", "tracebacks", "PjRtLayout", "Layout", "AutotuneCacheMode", "DeviceList", "Memory",
    "Sharding", "NamedSharding", "SingleDeviceSharding", "GSPMDSharding", "ArrayCopySemantics",
    "CustomCallTargetTraits", "LoadedExecutable_execute", "LoadedExecutable_execute_with_token",
    "xla_platform_names", "logger", "custom_call_targets",
    *REFUSED,
]
