"""hlogen.xla_client's XlaBuilder and XlaComputation behave as XLA's did: roots,
parameters by number, shapes, errors reported by build(), shardings, metadata, frontend
attributes and aliases carried into XLA's HLO module; the HLO text and the serialized
module round-trip through jaxlib (XLA's parser and converter) and run to the same values;
the proto-like helpers have mutable repeated fields."""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
import hlogen.xla_client as xc
from hlogen.xla_client import ops as xops

BACKEND = xc.get_local_backend("cpu")


def shape(dtype, *dims):
    return xc.Shape.array_shape(np.dtype(dtype), dims)


def execute(comp, *args):
    return xc.execute_with_python_values(BACKEND.compile(comp), args, BACKEND)


def test_the_root_is_the_last_op_unless_given():
    c = xc.XlaBuilder("roots")
    x = xops.Parameter(c, 0, shape(np.float32, 3))
    y = xops.Sin(x)
    xops.Cos(x)
    v = np.array([0.1, 0.2, 0.3], np.float32)
    np.testing.assert_allclose(execute(c.build(), v)[0], np.cos(v), rtol=1e-6)
    c = xc.XlaBuilder("roots")
    x = xops.Parameter(c, 0, shape(np.float32, 3))
    y = xops.Sin(x)
    xops.Cos(x)
    np.testing.assert_allclose(execute(c.Build(y), v)[0], np.sin(v), rtol=1e-6)
    c = xc.XlaBuilder("identity")
    xops.Parameter(c, 0, shape(np.float32, 3))
    np.testing.assert_array_equal(execute(c.build(), v)[0], v)
    with pytest.raises(hg.ShapeError, match="no op to be the root"):
        xc.XlaBuilder("empty").build()
    other = xc.XlaBuilder("other")
    with pytest.raises(hg.InputError, match="not an XlaOp of"):
        other.build(y)


def test_parameters_by_number_in_any_order():
    c = xc.XlaBuilder("numbers")
    n = xops.Parameter(c, 1, shape(np.int32), "n")
    x = xops.Parameter(c, 0, shape(np.float32, 2), "x")
    xops.Mul(x, xops.ConvertElementType(n, xc.PrimitiveType.F32))
    assert [str(s) for s in c.get_program_shape().parameter_shapes()] == ["f32[2]{0}", "s32[]"]
    comp = c.build()
    assert [s.dimensions() for s in comp.program_shape().parameter_shapes()] == [(2,), ()]
    np.testing.assert_array_equal(execute(comp, np.array([1, 2], np.float32), np.int32(3)),
                                  [np.array([3, 6], np.float32)])
    assert "n.1 = s32[] parameter(1)" in comp.as_hlo_text()
    c = xc.XlaBuilder("root_parameter")  # the root a parameter that moves to its place
    first = xops.Parameter(c, 1, shape(np.int32))
    xops.Parameter(c, 0, shape(np.float32, 2))
    comp = c.build(first)
    assert execute(comp, np.zeros(2, np.float32), np.int32(5)) == [5]
    assert "arg1.1 = s32[] parameter(1)" in comp.as_hlo_text()
    c = xc.XlaBuilder("gap")
    xops.Parameter(c, 1, shape(np.float32))
    with pytest.raises(hg.ShapeError, match=r"parameter numbers must be 0..N-1 \(missing \[0\]\)"):
        c.build()
    c = xc.XlaBuilder("twice")
    xops.Parameter(c, 0, shape(np.float32))
    xops.Parameter(c, 0, shape(np.float32))
    with pytest.raises(hg.ShapeError, match="parameter number 0 is already used"):
        c.build()


def test_build_starts_the_builder_over():
    """XlaBuilder's build() clears its ops and parameters: the same builder makes the
    next computation (XLA's own tests reuse one)."""
    c = xc.XlaBuilder("again")
    x = xops.Parameter(c, 0, shape(np.float32, 2))
    first = c.build(xops.Neg(x))
    y = xops.Parameter(c, 0, shape(np.int32, 3))
    xops.Mul(y, xops.Constant(c, np.int32(2)))
    second = c.build()
    np.testing.assert_array_equal(execute(first, np.array([1, -2], np.float32))[0], [-1, 2])
    np.testing.assert_array_equal(execute(second, np.arange(3, dtype=np.int32))[0], [0, 2, 4])
    assert [str(s) for s in second.program_shape().parameter_shapes()] == ["s32[3]{0}"]
    del first, second
    xops.Sin(x)  # an XlaOp of a computation built before, as XLA reports it: at build()
    with pytest.raises(hg.InputError, match="ops.Sin .*XlaOp of a computation .* already built"):
        c.build()
    c = xc.XlaBuilder("again")
    x = xops.Parameter(c, 0, shape(np.float32, 2))
    c.build()
    with pytest.raises(hg.InputError, match="already built"):
        c.build(xops.RemoveDynamicDimension(x, 0))  # the old op itself as the root


def test_shapes_program_shapes_and_constants():
    c = xc.XlaBuilder("shapes")
    x = xops.Parameter(c, 0, shape(np.float32, 2, 3))
    t = xops.Tuple(c, [x, xops.Constant(c, np.int8(1))])
    assert c.get_shape(x) == shape(np.float32, 2, 3)
    assert c.GetShape(t) == xc.Shape.tuple_shape([shape(np.float32, 2, 3), shape(np.int8)])
    program = c.get_program_shape()
    assert program.parameter_shapes() == [shape(np.float32, 2, 3)]
    assert program.result_shape() == c.get_shape(t)
    assert c.get_program_shape(x).result_shape() == c.get_shape(x)
    k = xops.Mul(xops.Constant(c, np.float32(2)), xops.Iota(c, xc.PrimitiveType.F32, 3))
    assert c.is_constant(k)
    assert not c.is_constant(xops.Add(x, xops.Constant(c, np.float32(1))))
    assert not c.is_constant(xops.RngUniform(xops.Constant(c, np.float32(0)),
                                             xops.Constant(c, np.float32(1)), shape(np.float32, 2)))
    chain = xops.Constant(c, np.float32(0))
    for _ in range(2000):  # a long chain of constants is constant (and no recursion limit)
        chain = xops.Add(chain, xops.Constant(c, np.float32(1)))
    assert c.is_constant(chain) and not c.is_constant(xops.Add(chain, x))
    f32 = shape(np.float32)

    def loop(body):  # While(x < 3, body) in a While's body: regions in regions
        cond = xc.XlaBuilder("cond")
        xops.Lt(xops.Parameter(cond, 0, f32), xops.Constant(cond, np.float32(3)))
        cond = cond.build()
        outer = xc.XlaBuilder("outer")
        xops.While(cond, body, xops.Parameter(outer, 0, f32))
        return xops.While(cond, outer.build(), xops.Constant(c, np.float32(0)))
    for random, constant in ((False, True), (True, False)):
        body = xc.XlaBuilder("body")
        one = xops.Constant(body, np.float32(1))
        step = xops.RngUniform(one, xops.Constant(body, np.float32(2)), f32) if random else one
        xops.Add(xops.Parameter(body, 0, f32), step)
        assert c.is_constant(loop(body.build())) == constant
    comp = c.build(t)
    assert comp.program_shape().result_shape() == program.result_shape()
    assert comp.name() == "shapes"


def test_errors_are_reported_where_xlabuilder_reported_them():
    """A bad op gives a failed XlaOp; what follows from it fails silently; build() and
    get_shape() raise the first error, naming the op, the user's line and the rule."""
    c = xc.XlaBuilder("bad")
    x = xops.Parameter(c, 0, shape(np.float32, 2))
    y = xops.Parameter(c, 1, shape(np.float32, 3))
    z = xops.Add(x, y)
    w = xops.Mul(z, x)
    assert repr(w) == "XlaOp(<failed>)"
    xops.Dot(x, x)
    message = r"XlaBuilder 'bad': ops.Add at .*test_xla_client_builder.py:\d+: add: cannot broadcast f32\[2\] and f32\[3\]"
    with pytest.raises(hg.ShapeError, match=message):
        c.build()
    with pytest.raises(hg.ShapeError, match=message):
        c.get_shape(x)
    with pytest.raises(TypeError):  # Python's own errors are immediate, as the binding's were
        xops.Add(x)
    c = xc.XlaBuilder("tokens")
    xops.AfterAll(c, [])
    with pytest.raises(hg.ShapeError, match="AfterAll requires at least one token"):
        c.build()
    c = xc.XlaBuilder("sub")
    xops.Reduce(c, [xops.Parameter(c, 0, shape(np.float32, 2))], [xops.Constant(c, np.float32(0))],
                "not a computation", [0])
    with pytest.raises(hg.ShapeError, match="ops.Reduce .*computation must be an XlaComputation"):
        c.build()


def _sharding(dims, devices):
    s = xc.OpSharding()
    s.type = xc.OpSharding.Type.OTHER
    s.tile_assignment_dimensions.extend(dims)
    s.tile_assignment_devices.extend(devices)
    return s


def test_shardings_metadata_frontend_attributes_and_aliases_reach_the_hlo():
    c = xc.XlaBuilder("annotated")
    c.set_sharding(_sharding([2, 1], [0, 1]))
    x = xops.Parameter(c, 0, shape(np.float32, 4, 2))
    c.clear_sharding()
    y = xops.Parameter(c, 1, shape(np.float32, 4, 2))
    c.set_op_metadata(xc.OpMetadata(op_type="Sin", op_name="model/sin", source_file="model.py",
                                    source_line=12))
    s = xops.Sin(x)
    c.clear_op_metadata()
    c.set_frontend_attributes({"_scheduling_group_id": "3"})
    a = xops.Add(s, y)
    c.clear_frontend_attributes()
    c.set_sharding(xc.HloSharding.replicate())  # jaxlib's own forms are taken too
    root = xops.Tuple(c, [a, xops.Neg(a)])
    c.clear_sharding()
    c.setup_alias([1], 1, [])
    comp = c.build(root)
    text = comp.as_hlo_text()
    assert "input_output_alias={ {1}: (1, {}, may-alias) }" in text
    assert re.search(r"arg0\.\d+ = f32\[4,2\]\{1,0\} parameter\(0\), sharding=\{devices=\[2,1\]0,1\}", text)
    assert re.search(r"parameter\(1\)\n", text)  # no sharding: it was cleared
    assert 'frontend_attributes={_scheduling_group_id="3"}' in text
    assert re.search(r"ROOT .* tuple\(.*sharding=\{\{replicated\}, \{replicated\}\}", text)
    full = comp.get_hlo_module().to_string()
    assert 'op_name="model/sin"' in full and '"model.py"' in full and "line=12" in full
    v = np.arange(8, dtype=np.float32).reshape(4, 2)
    got = execute(comp, v, v)
    np.testing.assert_allclose(got[0], np.sin(v) + v, rtol=1e-6)
    np.testing.assert_allclose(got[1], -(np.sin(v) + v), rtol=1e-6)
    with pytest.raises(hg.ShapeError, match="not a valid XLA sharding"):
        c2 = xc.XlaBuilder("s")
        c2.set_sharding(_sharding([2, 1], [0]))


def _program(c):
    """A computation with a while loop, a reduction, a sort and a tuple root."""
    f32 = shape(np.float32)
    add = xc.XlaBuilder("add")
    xops.Add(xops.Parameter(add, 0, f32), xops.Parameter(add, 1, f32))
    cond = xc.XlaBuilder("cond")
    state = xc.Shape.tuple_shape([shape(np.int32), shape(np.float32, 4)])
    p = xops.Parameter(cond, 0, state)
    xops.Lt(xops.GetTupleElement(p, 0), xops.Constant(cond, np.int32(3)))
    body = xc.XlaBuilder("body")
    p = xops.Parameter(body, 0, state)
    v = xops.GetTupleElement(p, 1)
    xops.Tuple(body, [xops.Add(xops.GetTupleElement(p, 0), xops.Constant(body, np.int32(1))),
                      xops.Mul(v, xops.Constant(body, np.float32(1.5)))])
    x = xops.Parameter(c, 0, shape(np.float32, 4))
    loop = xops.While(cond.build(), body.build(), xops.Tuple(c, [xops.Constant(c, np.int32(0)), x]))
    grown = xops.GetTupleElement(loop, 1)
    xops.Tuple(c, [xops.Reduce(c, [grown], [xops.Constant(c, np.float32(0))], add.build(), [0]),
                   xops.Sort(c, [grown])])


def test_hlo_text_and_protos_round_trip_through_jaxlib():
    c = xc.XlaBuilder("program")
    _program(c)
    comp = c.build()
    v = np.array([3, -1, 2, 0.5], np.float32)
    want = [np.float32((v * 3.375).sum()), np.sort(v * 3.375)]
    for got in (execute(comp, v),
                execute(xc.XlaComputation(comp.as_serialized_hlo_module_proto()), v),
                execute(hg.load(comp.as_hlo_text()), v),  # XLA's HLO parser, then the converter
                hg.compile(hg.load(comp.as_hlo_text()))(v)):
        np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
        np.testing.assert_array_equal(got[1], want[1])
    again = xc.XlaComputation(comp.as_serialized_hlo_module_proto())
    assert str(again.program_shape()) == str(comp.program_shape())
    assert again.as_hlo_text() == comp.as_hlo_text()
    assert again.computation.result_shapes == comp.computation.result_shapes
    module = comp.get_hlo_module()
    assert module.name == "program" and "while" in module.to_string()
    assert comp.as_hlo_module().to_string() == module.to_string()
    assert isinstance(comp.hash(), int) and "digraph" in comp.as_hlo_dot_graph()
    with pytest.raises(hg.InputError, match="not a serialized HloModuleProto"):
        xc.XlaComputation(b"garbage")


def test_mlir_text_in_and_out():
    """The converter functions code reached through `xla_client._xla.mlir`."""
    c = xc.XlaBuilder("program")
    _program(c)
    text = xc._xla.mlir.xla_computation_to_mlir_module(c.build())
    assert text.startswith("module @program")
    comp = xc._xla.mlir.mlir_module_to_xla_computation(text, return_tuple=True)
    assert comp.program_shape().result_shape().is_tuple()
    v = np.ones(4, np.float32)
    np.testing.assert_allclose(execute(comp, v)[0], np.float32(13.5))
    with pytest.raises(hg.InputError, match="use_tuple_args"):
        xc._xla.mlir.mlir_module_to_xla_computation(text, use_tuple_args=True)


# -- the helpers -----------------------------------------------------------------------------------

def test_repeated_fields_are_mutable():
    s = xc.OpSharding()
    s.type = xc.OpSharding.Type.OTHER
    s.tile_assignment_dimensions.extend([2, 2])
    s.tile_assignment_dimensions[1] = 1
    s.tile_assignment_devices = [1, 0]
    s.tile_assignment_devices.append(5)
    s.tile_assignment_devices.pop()
    assert s.tile_assignment_dimensions == [2, 1] and s.tile_assignment_devices == [1, 0]
    again = xc.OpSharding()
    again.ParseFromString(s.SerializeToString())
    assert again == s and s.clone() == s and s.clone() is not s
    assert str(xc.HloSharding.from_proto(s.to_proto())) == "{devices=[2,1]1,0}"
    t = xc.OpSharding()
    t.type = xc.OpSharding.Type.TUPLE
    t.tuple_shardings = [s, xc.OpSharding()]
    assert str(xc.HloSharding.from_proto(t.to_proto())) == "{{devices=[2,1]1,0}, {replicated}}"
    numbers = xc.DotDimensionNumbers()
    numbers.lhs_contracting_dimensions.append(1)
    numbers.rhs_contracting_dimensions.extend([0])
    assert numbers == xc.make_dot_dimension_numbers((([1], [0]), ([], [])))
    assert xc.DotDimensionNumbers().lhs_batch_dimensions is not xc.DotDimensionNumbers().lhs_batch_dimensions
    with pytest.raises(TypeError, match="has no fields"):
        xc.GatherDimensionNumbers(offset_dim=[1])


def test_dimension_number_and_padding_helpers():
    n = xc.make_convolution_dimension_numbers(("NHWC", "HWIO", "NHWC"), 2)
    assert (n.input_batch_dimension, n.input_feature_dimension, n.input_spatial_dimensions) == (0, 3, [1, 2])
    assert (n.kernel_input_feature_dimension, n.kernel_output_feature_dimension,
            n.kernel_spatial_dimensions) == (2, 3, [0, 1])
    assert (n.output_batch_dimension, n.output_feature_dimension) == (0, 3)
    fixed = xc.make_convolution_dimension_numbers(None, 1)
    assert (fixed.input_spatial_dimensions, fixed.kernel_output_feature_dimension) == ([2], 0)
    assert xc.make_convolution_dimension_numbers(n, 2) is n
    with pytest.raises(hg.ShapeError, match="layout strings"):
        xc.make_convolution_dimension_numbers(("NHW", "HWIO", "NHWC"), 2)
    config = xc.make_padding_config([(1, 2, 0), (0, 0, 3)])
    assert [(d.edge_padding_low, d.edge_padding_high, d.interior_padding)
            for d in config.dimensions] == [(1, 2, 0), (0, 0, 3)]
    assert xc.make_padding_config(config) is config
    # SAME: ceil(10 / 3) = 4 outputs need (4 - 1) * 3 + 4 - 10 = 3 padding, the odd one high
    assert xc.window_padding_type_to_pad_values("SAME", [10, 5], [4, 1], [3, 1]) == [(1, 2), (0, 0)]
    assert xc.window_padding_type_to_pad_values(xc.PaddingType.VALID, [10], [4], [3]) == [(0, 0)]
    with pytest.raises(ValueError, match="Unknown padding type"):
        xc.window_padding_type_to_pad_values("FULL", [10], [4], [3])
    groups = xc.make_replica_groups([[0, 2], [1, 3]])
    assert [g.replica_ids for g in groups] == [[0, 2], [1, 3]] and xc.make_replica_groups(None) == []


def test_element_types_and_shapes():
    assert xc.dtype_to_etype(np.float32) == xc.PrimitiveType.F32
    assert xc.dtype_to_etype(np.dtype("bool")) == xc.PrimitiveType.PRED
    assert xc.dtype_to_etype(xc.bfloat16) == xc.PrimitiveType.BF16
    # the removed module's names of ml_dtypes' types (old test code imports them)
    for name, etype in (("float8_e4m3fn", "F8E4M3FN"), ("float8_e4m3fnuz", "F8E4M3FNUZ"),
                        ("float8_e4m3b11fnuz", "F8E4M3B11FNUZ"), ("float8_e5m2", "F8E5M2"),
                        ("float8_e5m2fnuz", "F8E5M2FNUZ")):
        assert getattr(xc, name) is getattr(ml_dtypes, name)
        assert xc.dtype_to_etype(getattr(xc, name)) == getattr(xc.PrimitiveType, etype)
    assert xc.XLA_ELEMENT_TYPE_TO_DTYPE[xc.PrimitiveType.S8] == np.dtype(np.int8)
    assert xc.XLA_ELEMENT_TYPE_TO_DTYPE[xc.PrimitiveType.TUPLE] == np.dtype(object)
    assert xc.DTYPE_TO_XLA_ELEMENT_TYPE["complex128"] == xc.PrimitiveType.C128
    with pytest.raises(hg.ShapeError, match="not a dtype of an XLA element type"):
        xc.dtype_to_etype(object)
    s = xc.shape_from_pyval((np.zeros((2, 3), np.float32), (np.int8(1), np.zeros(4, np.uint16))))
    assert s.is_tuple() and str(s) == "(f32[2,3]{1,0}, (s8[], u16[4]{0}))"
    column_major = xc.shape_from_pyval(np.zeros((2, 3), np.float32), (0, 1))  # minor to major
    assert str(column_major) == "f32[2,3]{0,1}" and column_major.layout().minor_to_major() == (0, 1)
    with pytest.raises(hg.ShapeError, match="layout"):
        xc.shape_from_pyval(np.zeros((2, 3), np.float32), (0,))
    with pytest.raises(hg.UnsupportedError, match="tuple"):
        xc.shape_from_pyval((np.float32(1),), ())
    assert xc.Shape.array_shape(xc.PrimitiveType.F32, (2,)) == shape(np.float32, 2)


def test_type_names_are_there_for_annotations():
    for name in ("XlaOp", "XlaBuilder", "XlaComputation", "Shape", "ProgramShape", "PrimitiveType",
                 "Client", "Device", "Buffer", "LoadedExecutable", "Executable", "CompileOptions",
                 "ExecutableBuildOptions", "DeviceAssignment", "OpSharding", "HloSharding",
                 "FftType", "PrecisionConfig", "PaddingConfig", "PaddingType", "OpMetadata",
                 "ConvolutionDimensionNumbers", "DotDimensionNumbers", "GatherDimensionNumbers",
                 "ScatterDimensionNumbers", "ReplicaGroup", "ChannelHandle", "XlaRuntimeError",
                 "HostBufferSemantics"):
        assert isinstance(getattr(xc, name), type), name
    assert xc._xla.XlaBuilder is xc.XlaBuilder and xc._xla.ops is xops
