"""Programs in the style of the code that used jaxlib's removed XlaBuilder API, written
for these tests (none is copied): the "XLA in Python" notebook, IREE's test-data
generators, Alpa's sharding playground and mesh profiler, TensorFlow Federated's XLA
backend, autodidax's xla_call lowering. Each runs as its authors wrote for
`from jax.lib import xla_client`, with `import hlogen.xla_client as xla_client` instead
(but for what a comment says is refused); results are checked against numpy. The
example of docs/xla-client.md ("Porting xla_client code") runs as it is written, output
included."""
from __future__ import annotations

import contextlib
import io

import numpy as np

import hlogen as hg
import hlogen.xla_client as xla_client
from tests import docs


# -- the "XLA in Python" notebook ---------------------------------------------------------------

def test_xla_in_python_notebook():
    # Simple scalar computation
    c = xla_client.XlaBuilder("simple_scalar")
    param_shape = xla_client.Shape.array_shape(np.dtype(np.float32), ())
    x = xla_client.ops.Parameter(c, 0, param_shape)
    xla_client.ops.Sin(x)  # the root: the last op built
    computation = c.Build()
    cpu_backend = xla_client.get_local_backend("cpu")
    compiled_computation = cpu_backend.compile(computation)
    host_input = np.array(3.0, dtype=np.float32)
    device_input = cpu_backend.buffer_from_pyval(host_input)
    device_out = compiled_computation.execute([device_input, ])
    assert np.isclose(device_out[0].to_py(), np.sin(3.0))

    # Simple while loop: add one until ten
    in_shape = xla_client.Shape.array_shape(np.dtype(np.int32), ())
    c = xla_client.XlaBuilder("cond")
    const1 = xla_client.ops.Constant(c, np.int32(10))
    x = xla_client.ops.Parameter(c, 0, in_shape)
    xla_client.ops.Lt(x, const1)  # the root: the last op built
    cond_computation = c.Build()
    c = xla_client.XlaBuilder("body")
    const1 = xla_client.ops.Constant(c, np.int32(1))
    x = xla_client.ops.Parameter(c, 0, in_shape)
    xla_client.ops.Add(x, const1)  # the root: the last op built
    body_computation = c.Build()
    c = xla_client.XlaBuilder("while")
    x = xla_client.ops.Parameter(c, 0, in_shape)
    xla_client.ops.While(cond_computation, body_computation, x)
    while_computation = c.Build()
    compiled = cpu_backend.compile(while_computation)
    out = compiled.execute([cpu_backend.buffer_from_pyval(np.array(1, np.int32))])
    assert out[0].to_py() == 10

    # While loops with tuples: Newton's method for sqrt(2)
    Xsqr, guess, eps, maxit = 2.0, 1.0, 1e-6, 100
    tuple_shape = xla_client.Shape.tuple_shape([
        xla_client.Shape.array_shape(np.dtype(np.int32), ()),
        xla_client.Shape.array_shape(np.dtype(np.float32), ())])
    c = xla_client.XlaBuilder("cond")
    p = xla_client.ops.Parameter(c, 0, tuple_shape)
    it, g = xla_client.ops.GetTupleElement(p, 0), xla_client.ops.GetTupleElement(p, 1)
    residual = xla_client.ops.Abs(xla_client.ops.Sub(
        xla_client.ops.Mul(g, g), xla_client.ops.Constant(c, np.float32(Xsqr))))
    xla_client.ops.And(xla_client.ops.Lt(it, xla_client.ops.Constant(c, np.int32(maxit))),
                       xla_client.ops.Gt(residual, xla_client.ops.Constant(c, np.float32(eps))))
    cond_computation = c.Build()
    c = xla_client.XlaBuilder("body")
    p = xla_client.ops.Parameter(c, 0, tuple_shape)
    it, g = xla_client.ops.GetTupleElement(p, 0), xla_client.ops.GetTupleElement(p, 1)
    half = xla_client.ops.Constant(c, np.float32(0.5))
    new_g = xla_client.ops.Mul(half, xla_client.ops.Add(
        g, xla_client.ops.Div(xla_client.ops.Constant(c, np.float32(Xsqr)), g)))
    xla_client.ops.Tuple(c, [xla_client.ops.Add(it, xla_client.ops.Constant(c, np.int32(1))), new_g])
    body_computation = c.Build()
    c = xla_client.XlaBuilder("newton")
    init = xla_client.ops.Tuple(c, [xla_client.ops.Constant(c, np.int32(0)),
                                    xla_client.ops.Constant(c, np.float32(guess))])
    xla_client.ops.While(cond_computation, body_computation, init)
    iterations, root = xla_client.execute_with_python_values(
        cpu_backend.compile(c.Build()), [], cpu_backend)
    assert 0 < iterations < maxit and abs(root - np.sqrt(2)) < 1e-6

    # Symmetric eigenvalues by the naive QR algorithm, XLA's QR in the loop body
    Niter, N = 200, 4
    matrix_shape = xla_client.Shape.array_shape(np.dtype(np.float32), (N, N))
    c = xla_client.XlaBuilder("cond")
    p = xla_client.ops.Parameter(c, 0, xla_client.Shape.tuple_shape(
        [xla_client.Shape.array_shape(np.dtype(np.int32), ()), matrix_shape]))
    xla_client.ops.Lt(xla_client.ops.GetTupleElement(p, 0), xla_client.ops.Constant(c, np.int32(Niter)))
    cond_computation = c.Build()
    c = xla_client.XlaBuilder("body")
    p = xla_client.ops.Parameter(c, 0, xla_client.Shape.tuple_shape(
        [xla_client.Shape.array_shape(np.dtype(np.int32), ()), matrix_shape]))
    i, a = xla_client.ops.GetTupleElement(p, 0), xla_client.ops.GetTupleElement(p, 1)
    q, r = xla_client.ops.QR(a, True)
    xla_client.ops.Tuple(c, [xla_client.ops.Add(i, xla_client.ops.Constant(c, np.int32(1))),
                             xla_client.ops.Dot(r, q)])
    body_computation = c.Build()
    c = xla_client.XlaBuilder("eigenvalues")
    x = xla_client.ops.Parameter(c, 0, matrix_shape)
    loop = xla_client.ops.While(cond_computation, body_computation,
                                xla_client.ops.Tuple(c, [xla_client.ops.Constant(c, np.int32(0)), x]))
    xla_client.ops.GetTupleElement(loop, 1)
    compiled = cpu_backend.compile(c.Build())
    X = np.random.default_rng(0).standard_normal((N, N)).astype(np.float32)
    symmetric = X @ X.T
    (diagonal,) = xla_client.execute_with_python_values(compiled, [symmetric], cpu_backend)
    np.testing.assert_allclose(np.sort(np.diag(diagonal)), np.linalg.eigvalsh(symmetric), rtol=1e-4)


# -- IREE's test-data generators: HLO files written by one script, run by another --------------

def _generate(tmp_path):
    """A generator script: build, then write the HLO as text and as a serialized proto."""
    f32 = xla_client.dtype_to_etype(np.float32)

    def save(c, name):
        computation = c.build()
        (tmp_path / f"{name}.pb").write_bytes(computation.as_serialized_hlo_module_proto())
        (tmp_path / f"{name}.txt").write_text(computation.as_hlo_text())

    c = xla_client.XlaBuilder("mlp")
    x = xla_client.ops.Parameter(c, 0, xla_client.Shape.array_shape(f32, (2, 3)))
    w = xla_client.ops.Parameter(c, 1, xla_client.Shape.array_shape(f32, (3, 4)))
    b = xla_client.ops.Parameter(c, 2, xla_client.Shape.array_shape(f32, (4,)))
    h = xla_client.ops.Add(xla_client.ops.Dot(x, w), b, broadcast_dimensions=[1])
    xla_client.ops.Max(h, xla_client.ops.Constant(c, np.float32(0)))
    save(c, "mlp")

    c = xla_client.XlaBuilder("conv")
    image = xla_client.ops.Parameter(c, 0, xla_client.Shape.array_shape(f32, (1, 5, 5, 1)))
    kernel = xla_client.ops.Parameter(c, 1, xla_client.Shape.array_shape(f32, (3, 3, 1, 2)))
    numbers = xla_client.make_convolution_dimension_numbers(("NHWC", "HWIO", "NHWC"), 2)
    padding = xla_client.window_padding_type_to_pad_values(
        xla_client.PaddingType.SAME, (5, 5), (3, 3), (1, 1))
    xla_client.ops.ConvGeneralDilated(image, kernel, (1, 1), padding, (1, 1), (1, 1), numbers)
    save(c, "conv")


def test_iree_style_generated_files(tmp_path):
    _generate(tmp_path)
    backend = xla_client.get_local_backend()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    b = np.array([0.5, -0.5, 0, 1], np.float32)
    want = np.maximum(x @ w + b, 0)
    for path in ("mlp.pb", "mlp.txt"):
        data = (tmp_path / path).read_bytes()
        computation = (xla_client.XlaComputation(data) if path.endswith(".pb")
                       else hg.load(tmp_path / path))  # hlogen reads HLO files as they are
        (got,) = xla_client.execute_with_python_values(backend.compile(computation), [x, w, b],
                                                       backend)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    image = np.arange(25, dtype=np.float32).reshape(1, 5, 5, 1)
    kernel = np.ones((3, 3, 1, 2), np.float32)
    kernel[..., 1] = -1
    (got,) = xla_client.execute_with_python_values(
        backend.compile(xla_client.XlaComputation((tmp_path / "conv.pb").read_bytes())),
        [image, kernel], backend)
    padded = np.pad(image[0, :, :, 0], 1)
    sums = np.array([[padded[i:i + 3, j:j + 3].sum() for j in range(5)] for i in range(5)])
    np.testing.assert_allclose(got[0, :, :, 0], sums)
    np.testing.assert_allclose(got[0, :, :, 1], -sums)


# -- Alpa: the sharding playground and the mesh profiler ----------------------------------------

def test_alpa_style_spmd_matmul():
    def parameter(builder, num, shape, dtype):
        shape = xla_client.Shape.array_shape(np.dtype(dtype), shape)
        return xla_client.ops.Parameter(builder, num, shape)

    c = xla_client.XlaBuilder("shard")
    sharding = xla_client.OpSharding()
    sharding.type = sharding.type.OTHER
    sharding.tile_assignment_dimensions.extend([1, 2])  # columns split in two
    sharding.tile_assignment_devices.extend([0, 1])
    replicated = xla_client.OpSharding()
    replicated.type = replicated.type.REPLICATED
    c.set_sharding(replicated)
    x = parameter(c, 0, (4, 6), np.float32)
    c.set_sharding(sharding)
    y = parameter(c, 1, (6, 8), np.float32)
    z = xla_client.ops.Dot(x, y)
    c.clear_sharding()
    out = xla_client.ops.Tuple(c, [z])
    computation = c.build(out)

    backend = xla_client.get_local_backend("cpu")
    compile_options = xla_client.CompileOptions()
    build_options = compile_options.executable_build_options
    build_options.num_partitions = 2
    build_options.use_spmd_partitioning = True
    compile_options.device_assignment = xla_client.DeviceAssignment.create(
        np.arange(2).reshape((1, 2)))
    compiled = backend.compile(computation, compile_options)
    devices = compiled.local_devices()

    x_np = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    y_np = np.random.default_rng(2).standard_normal((6, 8)).astype(np.float32)
    x_bufs = [backend.buffer_from_pyval(x_np, d) for d in devices]
    y_bufs = [backend.buffer_from_pyval(y_np[:, 4 * i:4 * (i + 1)], d) for i, d in enumerate(devices)]
    (z_bufs,) = compiled.execute_sharded_on_local_devices([x_bufs, y_bufs])
    for d in devices:
        d.synchronize_all_activity()
    got = np.concatenate([b.to_py() for b in z_bufs], axis=1)
    np.testing.assert_allclose(got, x_np @ y_np, rtol=1e-5, atol=1e-5)


def test_alpa_style_mesh_profiling_of_all_reduce():
    backend = xla_client.get_local_backend("cpu")
    num_devices, size = 4, (16,)
    replica_groups = [[0, 1], [2, 3]]

    def op_all_reduce(builder, operand):
        shape = xla_client.Shape.array_shape(np.dtype(np.float32), ())
        sub = xla_client.XlaBuilder("add")
        xla_client.ops.Add(xla_client.ops.Parameter(sub, 0, shape),
                           xla_client.ops.Parameter(sub, 1, shape))
        replica_groups_protos = xla_client.make_replica_groups(replica_groups)
        channel_id = backend.create_channel_handle()
        # Alpa's profiler passes use_global_device_ids=True and compiles one replica of
        # SPMD partitions (tests/test_partitions.py); this is its form over replicas
        return xla_client.ops.AllReduce(operand, sub.build(), replica_groups_protos, channel_id,
                                        None, False)

    c = xla_client.XlaBuilder("profile_all_reduce")
    operand = xla_client.ops.Parameter(
        c, 0, xla_client.Shape.array_shape(np.dtype(np.float32), size))
    op_all_reduce(c, operand)
    compile_options = xla_client.CompileOptions()
    compile_options.num_replicas = num_devices
    compile_options.device_assignment = [[d] for d in range(num_devices)]
    compiled = backend.compile(c.build(), compile_options)
    devices = compiled.local_devices()
    device_inputs = [[backend.buffer_from_pyval(np.full(size, i + 1, np.float32), devices[i])
                      for i in range(num_devices)]]
    for _ in range(3):  # warm up, then time, as the profiler does
        outputs = compiled.execute_sharded_on_local_devices(device_inputs)
        for d in devices:
            d.synchronize_all_activity()
    sums = [o.to_py() for o in outputs[0]]
    for i, s in enumerate(sums):
        np.testing.assert_array_equal(s, np.full(size, 3 if i < 2 else 7, np.float32))


# -- TensorFlow Federated's XLA backend -------------------------------------------------------

def _serialized_computation():
    """What TFF's XLA serialization hands the executor: a serialized HloModuleProto of a
    computation of flat parameters with a tuple result."""
    builder = xla_client.XlaBuilder("tff_add_and_scale")
    a = xla_client.ops.Parameter(builder, 0, xla_client.shape_from_pyval(np.zeros(3, np.float32)))
    s = xla_client.ops.Parameter(builder, 1, xla_client.shape_from_pyval(np.float32(0)))
    xla_client.ops.Tuple(builder, [xla_client.ops.Mul(a, s),
                                   xla_client.ops.Reduce(builder, [a], [xla_client.ops.Constant(
                                       builder, np.float32(0))], _add(), [0])])
    return builder.build().as_serialized_hlo_module_proto()


def _add():
    c = xla_client.XlaBuilder("add")
    shape = xla_client.Shape.array_shape(np.dtype(np.float32), ())
    xla_client.ops.Add(xla_client.ops.Parameter(c, 0, shape), xla_client.ops.Parameter(c, 1, shape))
    return c.build()


def test_tff_style_executor():
    comp_pb = _serialized_computation()
    xla_comp = xla_client.XlaComputation(comp_pb)
    program_shape = xla_comp.program_shape()
    assert len(program_shape.parameter_shapes()) == 2 and program_shape.result_shape().is_tuple()
    backend = xla_client.get_local_backend(None)
    executable = backend.compile(xla_comp, xla_client.CompileOptions())
    args = [np.array([1, 2, 3], np.float32), np.float32(2)]
    arg_buffers = [backend.buffer_from_pyval(x) for x in args]
    result_buffers = executable.execute(arg_buffers)
    results = [x.to_py() for x in result_buffers]
    np.testing.assert_array_equal(results[0], [2, 4, 6])
    assert results[1] == 6


# -- autodidax: lowering a tiny jaxpr language with xla_call ----------------------------------

def test_autodidax_style_lowering():
    xc = xla_client
    xe = xc._xla
    xops = xc._xla.ops
    backend = xc.get_local_backend(None)  # autodidax: xb.get_backend(None), this same client

    def _xla_shape(dtype, shape):
        return xc.Shape.array_shape(xc.dtype_to_etype(dtype), shape)

    def direct_translation(op, c, in_avals, in_vals):
        del c, in_avals
        return [op(*in_vals)]

    def reduce_sum_translation(c, in_avals, in_vals, *, axis):
        (x_aval,), (x,) = in_avals, in_vals
        zero = xops.ConstantLiteral(c, np.array(0, x_aval[0]))
        subc = xe.XlaBuilder("add")
        shape = _xla_shape(x_aval[0], ())
        xops.Add(xops.Parameter(subc, 0, shape), xops.Parameter(subc, 1, shape))
        return [xops.Reduce(c, [x], [zero], subc.build(), axis)]

    def broadcast_translation(c, in_avals, in_vals, *, shape, axes):
        (x,) = in_vals
        dims_complement = [i for i in range(len(shape)) if i not in axes]
        return [xops.BroadcastInDim(x, shape, dims_complement)]

    xla_translations = {
        "add": lambda c, a, v: direct_translation(xops.Add, c, a, v),
        "mul": lambda c, a, v: direct_translation(xops.Mul, c, a, v),
        "neg": lambda c, a, v: direct_translation(xops.Neg, c, a, v),
        "sin": lambda c, a, v: direct_translation(xops.Sin, c, a, v),
        "cos": lambda c, a, v: direct_translation(xops.Cos, c, a, v),
        "greater": lambda c, a, v: direct_translation(xops.Gt, c, a, v),
        "reduce_sum": reduce_sum_translation, "broadcast": broadcast_translation,
    }

    # a jaxpr: (in_avals, equations (primitive, in_vars, out_var, params), out_vars)
    in_avals = [(np.dtype(np.float32), (3,)), (np.dtype(np.float32), (2, 3))]
    eqns = [("sin", ["x"], "a", {}), ("broadcast", ["a"], "b", {"shape": (2, 3), "axes": (0,)}),
            ("mul", ["b", "y"], "c", {}), ("reduce_sum", ["c"], "d", {"axis": (1,)}),
            ("neg", ["d"], "e", {}), ("greater", ["d", "e"], "f", {})]

    def jaxpr_subcomp(c, env, avals):
        for prim, ins, out, params in eqns:
            in_vals = [env[v] for v in ins]
            (env[out],) = xla_translations[prim](c, [avals.get(v) for v in ins], in_vals, **params)
            avals[out] = avals.get(ins[0])
        return [env["e"], env["f"]]

    def xla_callable():
        c = xe.XlaBuilder("xla_call")
        xla_params = [xops.Parameter(c, i, _xla_shape(*a)) for i, a in enumerate(in_avals)]
        outs = jaxpr_subcomp(c, dict(zip("xy", xla_params)), dict(zip("xy", in_avals)))
        out = xops.Tuple(c, outs)
        compiled = backend.compile(xc._xla.mlir.xla_computation_to_mlir_module(c.build(out)))
        return lambda *args: execute_compiled(compiled, *args)

    def execute_compiled(compiled, *args):
        input_bufs = [backend.buffer_from_pyval(x) for x in args]
        out_bufs = compiled.execute(input_bufs)
        return [np.asarray(buf) for buf in out_bufs]

    x = np.array([0.1, 0.2, 0.3], np.float32)
    y = np.array([[1, 2, 3], [-1, -2, -3]], np.float32)
    e, f = xla_callable()(x, y)
    d = (np.sin(x)[None, :] * y).sum(1)
    np.testing.assert_allclose(e, -d, rtol=1e-6)
    np.testing.assert_array_equal(f, d > -d)


def test_the_readme_example_prints_what_the_readme_says():
    code, expected = (docs.blocks("docs/xla-client.md", kind)[0] for kind in ("python", "text"))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/xla-client.md", "exec"), {"__name__": "readme"})
    assert out.getvalue() == expected
