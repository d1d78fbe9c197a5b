"""The Python forms of XLA's protos and enums that the removed xla_client took: objects
with the protos' field names, repeated fields as plain lists (`.extend`, `.append` and
assignment all work), and the helpers that made them (make_dot_dimension_numbers, ...).
The ops read them by field name, so any object with those fields does as well."""
from __future__ import annotations

import enum
import inspect
import math
import os

import numpy as np

from hlogen.errors import ShapeError
from hlogen.runtime._jaxlib import xla_client as _xc

# -- enums ---------------------------------------------------------------------------------
# Values are XLA's (xla_data.proto), so that code comparing them with numbers still works.


class FftType(enum.IntEnum):
    FFT = 0
    IFFT = 1
    RFFT = 2
    IRFFT = 3


class PaddingType(enum.Enum):
    VALID = 1
    SAME = 2


class Precision(enum.IntEnum):
    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2


class TriangularSolveOptions_Transpose(enum.IntEnum):  # the binding's name
    TRANSPOSE_INVALID = 0
    NO_TRANSPOSE = 1
    TRANSPOSE = 2
    ADJOINT = 3


class RandomAlgorithm(enum.IntEnum):
    RNG_DEFAULT = 0
    RNG_THREE_FRY = 1
    RNG_PHILOX = 2


class CustomCallSchedule(enum.IntEnum):
    SCHEDULE_NONE = 0
    SCHEDULE_LATEST = 1
    SCHEDULE_EARLIEST = 2


class CustomCallApiVersion(enum.IntEnum):
    API_VERSION_ORIGINAL = 1
    API_VERSION_STATUS_RETURNING = 2
    API_VERSION_STATUS_RETURNING_UNIFIED = 3
    API_VERSION_TYPED_FFI = 4


class ResultAccuracy_Mode(enum.IntEnum):  # the binding's name
    DEFAULT = 0
    HIGHEST = 1
    TOLERANCE = 2


class ChannelHandle_ChannelType(enum.IntEnum):  # the binding's name
    CHANNEL_TYPE_INVALID = 0
    DEVICE_TO_DEVICE = 1
    DEVICE_TO_HOST = 2
    HOST_TO_DEVICE = 3


def enum_value(enum_type, value, what: str):
    """`value` as a member of `enum_type`: a member, its number or its name."""
    try:
        if isinstance(value, str):
            return enum_type[value.upper()]
        return enum_type(int(value))
    except (KeyError, ValueError, TypeError):
        raise ShapeError(f"{what} must be one of {', '.join(m.name for m in enum_type)}, got "
                         f"{value!r}") from None


# -- proto-like objects --------------------------------------------------------------------

class _Proto:
    """Fields named by __slots__ with defaults from _DEFAULTS (lists are fresh per object)."""

    __slots__ = ()
    _DEFAULTS: dict = {}

    def __init__(self, **fields):
        for name in self.__slots__:
            default = self._DEFAULTS.get(name, [])
            setattr(self, name, fields.pop(name) if name in fields else
                    (list(default) if isinstance(default, list) else default))
        if fields:
            raise TypeError(f"{type(self).__name__} has no fields {sorted(fields)}; its fields "
                            f"are {', '.join(self.__slots__)}")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)


class PaddingConfigDimension(_Proto):
    __slots__ = ("edge_padding_low", "edge_padding_high", "interior_padding")
    _DEFAULTS = {"edge_padding_low": 0, "edge_padding_high": 0, "interior_padding": 0}


class PaddingConfig(_Proto):
    __slots__ = ("dimensions",)


class DotDimensionNumbers(_Proto):
    __slots__ = ("lhs_contracting_dimensions", "rhs_contracting_dimensions",
                 "lhs_batch_dimensions", "rhs_batch_dimensions")


class ConvolutionDimensionNumbers(_Proto):
    __slots__ = ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
                 "kernel_input_feature_dimension", "kernel_output_feature_dimension",
                 "kernel_spatial_dimensions", "output_batch_dimension",
                 "output_feature_dimension", "output_spatial_dimensions")
    _DEFAULTS = {"input_batch_dimension": 0, "input_feature_dimension": 0,
                 "kernel_input_feature_dimension": 0, "kernel_output_feature_dimension": 0,
                 "output_batch_dimension": 0, "output_feature_dimension": 0}


class GatherDimensionNumbers(_Proto):
    __slots__ = ("offset_dims", "collapsed_slice_dims", "start_index_map", "index_vector_dim",
                 "operand_batching_dims", "start_indices_batching_dims")
    _DEFAULTS = {"index_vector_dim": 0}


class ScatterDimensionNumbers(_Proto):
    __slots__ = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                 "index_vector_dim", "input_batching_dims", "scatter_indices_batching_dims")
    _DEFAULTS = {"index_vector_dim": 0}


class PrecisionConfig(_Proto):
    __slots__ = ("operand_precision",)
    Precision = Precision


class ResultAccuracy(_Proto):
    """The accuracy asked of Exp, Log, Tanh, ... (`ops.Exp(x, result_accuracy)`): `mode`
    DEFAULT, HIGHEST or TOLERANCE, and in TOLERANCE mode `atol`, `rtol`, `ulps`."""
    __slots__ = ("mode", "atol", "rtol", "ulps")
    _DEFAULTS = {"mode": ResultAccuracy_Mode.DEFAULT, "atol": 0.0, "rtol": 0.0, "ulps": 0}


class ReplicaGroup(_Proto):
    __slots__ = ("replica_ids",)


class ChannelHandle(_Proto):
    __slots__ = ("handle", "type")
    _DEFAULTS = {"handle": 0, "type": ChannelHandle_ChannelType.DEVICE_TO_DEVICE}
    ChannelType = ChannelHandle_ChannelType


class OpMetadata(_Proto):
    __slots__ = ("op_type", "op_name", "source_file", "source_line")

    def __init__(self, op_type="", op_name="", source_file="", source_line=0):
        super().__init__(op_type=op_type, op_name=op_name, source_file=source_file,
                         source_line=source_line)


def CurrentSourceInfoMetadata(op_type=None, op_name=None, skip_frames=1):
    """OpMetadata naming the caller's file and line (`skip_frames` up the stack)."""
    full_filename, lineno = inspect.stack()[skip_frames][1:3]
    return OpMetadata(op_type=op_type or "", op_name=op_name or "",
                      source_file=os.path.basename(full_filename), source_line=lineno)


class FrontendAttributes(dict):
    """XLA's frontend attributes: string keys and values (`attributes["key"] = "value"`)."""


class OpSharding(_Proto):
    """XLA's OpSharding, with mutable repeated fields; XlaBuilder.set_sharding takes it
    (or jaxlib's own OpSharding or HloSharding)."""

    __slots__ = ("type", "tile_assignment_dimensions", "tile_assignment_devices",
                 "tuple_shardings", "replicate_on_last_tile_dim", "last_tile_dims",
                 "iota_reshape_dims", "iota_transpose_perm")
    _DEFAULTS = {"type": _xc.OpSharding.Type.REPLICATED, "replicate_on_last_tile_dim": False}
    Type = _xc.OpSharding.Type

    def to_proto(self) -> "_xc.OpSharding":
        """jaxlib's OpSharding of the same fields."""
        proto = _xc.OpSharding()
        for name in self.__slots__:
            value = getattr(self, name)
            if name == "tuple_shardings":
                value = [as_op_sharding(s, "tuple_shardings").to_proto() for s in value]
            setattr(proto, name, list(value) if isinstance(value, (list, tuple)) else value)
        return proto

    @classmethod
    def from_proto(cls, proto) -> "OpSharding":
        sharding = cls()
        for name in cls.__slots__:
            value = getattr(proto, name)
            if name == "tuple_shardings":
                value = [cls.from_proto(s) for s in value]
            setattr(sharding, name, list(value) if isinstance(value, (list, tuple)) else value)
        return sharding

    def SerializeToString(self) -> bytes:  # the protobuf's name
        return self.to_proto().SerializeToString()

    def ParseFromString(self, data: bytes) -> None:  # the protobuf's name
        proto = _xc.OpSharding()
        proto.ParseFromString(data)
        parsed = OpSharding.from_proto(proto)
        for name in self.__slots__:
            setattr(self, name, getattr(parsed, name))

    def clone(self) -> "OpSharding":
        return OpSharding.from_proto(self.to_proto())


def as_op_sharding(value, what: str = "sharding") -> OpSharding:
    """An OpSharding of this module from ours, jaxlib's OpSharding or an HloSharding."""
    if isinstance(value, OpSharding):
        return value
    if isinstance(value, _xc.HloSharding):
        value = value.to_proto()
    if isinstance(value, _xc.OpSharding):
        return OpSharding.from_proto(value)
    raise ShapeError(f"{what} must be an xla_client.OpSharding (or HloSharding), got "
                     f"{type(value).__name__} {value!r}")


def sharding_text(value) -> str:
    """XLA's text of a sharding ("{devices=[2,1]0,1}"), as MLIR's mhlo.sharding holds it."""
    sharding = as_op_sharding(value)
    tiles = math.prod(sharding.tile_assignment_dimensions)
    if sharding.tile_assignment_devices and len(sharding.tile_assignment_devices) != tiles:
        raise ShapeError(f"sharding {sharding!r} is not a valid XLA sharding: "
                         f"tile_assignment_dimensions {sharding.tile_assignment_dimensions} make "
                         f"{tiles} tiles, tile_assignment_devices names "
                         f"{len(sharding.tile_assignment_devices)} devices")
    try:
        return str(_xc.HloSharding.from_proto(sharding.to_proto()))
    except Exception as e:  # jaxlib raises its own errors for bad protos
        raise ShapeError(f"sharding {value!r} is not a valid XLA sharding: {e}") from None


# -- the helpers ---------------------------------------------------------------------------

def make_padding_config(padding_config) -> PaddingConfig:
    """A PaddingConfig from (edge_padding_low, edge_padding_high, interior_padding)
    triples (a PaddingConfig passes through)."""
    if isinstance(padding_config, PaddingConfig):
        return padding_config
    config = PaddingConfig()
    for lo, hi, interior in padding_config:
        config.dimensions.append(PaddingConfigDimension(
            edge_padding_low=lo, edge_padding_high=hi, interior_padding=interior))
    return config


def make_dot_dimension_numbers(dimension_numbers) -> DotDimensionNumbers:
    """DotDimensionNumbers from ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))
    (a DotDimensionNumbers passes through)."""
    if not isinstance(dimension_numbers, (list, tuple)):
        return dimension_numbers
    (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dimension_numbers
    return DotDimensionNumbers(
        lhs_contracting_dimensions=list(lhs_contract), rhs_contracting_dimensions=list(rhs_contract),
        lhs_batch_dimensions=list(lhs_batch), rhs_batch_dimensions=list(rhs_batch))


def make_convolution_dimension_numbers(dimension_numbers, num_spatial_dimensions: int):
    """ConvolutionDimensionNumbers from None (XLA's fixed layout: batch, feature, spatial),
    a (lhs_spec, rhs_spec, out_spec) triple of layout strings such as ("NHWC", "HWIO",
    "NHWC"), spatial dimensions matched in the order rhs_spec names them, or a
    ConvolutionDimensionNumbers (passes through)."""
    if dimension_numbers is None:
        spatial = list(range(2, 2 + num_spatial_dimensions))
        return ConvolutionDimensionNumbers(
            input_batch_dimension=0, input_feature_dimension=1, input_spatial_dimensions=spatial,
            kernel_output_feature_dimension=0, kernel_input_feature_dimension=1,
            kernel_spatial_dimensions=list(spatial), output_batch_dimension=0,
            output_feature_dimension=1, output_spatial_dimensions=list(spatial))
    if not isinstance(dimension_numbers, tuple):
        return dimension_numbers
    lhs_spec, rhs_spec, out_spec = dimension_numbers

    def spatial(spec):
        return sorted((i for i, c in enumerate(spec) if c not in "NC"),
                      key=lambda i: rhs_spec.index(spec[i]))
    try:
        return ConvolutionDimensionNumbers(
            input_batch_dimension=lhs_spec.index("N"), input_feature_dimension=lhs_spec.index("C"),
            output_batch_dimension=out_spec.index("N"), output_feature_dimension=out_spec.index("C"),
            kernel_output_feature_dimension=rhs_spec.index("O"),
            kernel_input_feature_dimension=rhs_spec.index("I"),
            kernel_spatial_dimensions=[i for i, c in enumerate(rhs_spec) if c not in "IO"],
            input_spatial_dimensions=spatial(lhs_spec), output_spatial_dimensions=spatial(out_spec))
    except ValueError:
        raise ShapeError(f"make_convolution_dimension_numbers: {dimension_numbers!r} must be "
                         f"layout strings naming N and C (lhs, out), I and O (rhs), and the same "
                         f"spatial letters in each") from None


def make_replica_groups(replica_groups) -> list:
    """ReplicaGroups from lists of replica ids; None: every replica in one group ([])."""
    if replica_groups is None:
        return []
    return [ReplicaGroup(replica_ids=list(group)) for group in replica_groups]


def window_padding_type_to_pad_values(padding_type, lhs_dims, rhs_dims, window_strides):
    """(low, high) padding per spatial dimension for PaddingType.VALID or SAME (or their
    names): SAME gives ceil(lhs / stride) outputs, the odd padding element high."""
    if not isinstance(padding_type, (str, PaddingType)):
        raise TypeError(f"padding_type must be str or PaddingType, got {type(padding_type)}.")
    if isinstance(padding_type, str):
        if padding_type.upper() not in PaddingType.__members__:
            raise ValueError(f'Unknown padding type string: expected "VALID" or "SAME", got '
                             f'{padding_type}.')
        padding_type = PaddingType[padding_type.upper()]
    if padding_type == PaddingType.VALID:
        return [(0, 0)] * len(window_strides)
    out = np.ceil(np.true_divide(lhs_dims, window_strides)).astype(int)
    pads = [max((o - 1) * s + f - n, 0)
            for o, s, f, n in zip(out, window_strides, rhs_dims, lhs_dims)]
    return [(p // 2, p - p // 2) for p in pads]
