"""Collectives over replicas x partitions (issue 37 items 3-5): the spec's four modes of
replica groups on a real grid, XLA's mesh-axes groups, what XLA would abort on, GSPMD's
markers, xla_client's global device ids, StableHLO's run_parallel cases with partitions.

Expected values come from tests/spec_reference_collectives.py over the processes in
order r * P + p, with each mode's process groups written out here from the spec's
definitions (cross_replica, cross_partition, cross_replica_and_partition, flattened_ids).
"""
from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import pytest

import hlogen as hg
from hlogen import xla_client as xc
from hlogen.ops import collectives
from hlogen.runtime import grid

from tests import spec_reference_collectives as ref
from tests.helpers import hlogen_in

CORES = len(os.sched_getaffinity(0))
INTERPRET = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / \
    "stablehlo" / "tests" / "interpret"
if not INTERPRET.is_dir():  # a worktree under /work/wt
    INTERPRET = pathlib.Path("/work/shared/conformance/stablehlo/tests/interpret")


def program(op: str, attributes: str, result: str = "tensor<2xi64>") -> hg.Computation:
    """A per-process program of one collective of a tensor<2xi64> parameter."""
    region = ("({\n  ^bb0(%a: tensor<i64>, %b: tensor<i64>):\n"
              "    %s = stablehlo.add %a, %b : tensor<i64>\n"
              "    stablehlo.return %s : tensor<i64>\n  }) ") if op == "all_reduce" else ""
    return hg.load(f"""
func.func @main(%x: tensor<2xi64>) -> {result} {{
  %0 = "stablehlo.{op}"(%x) {region}{{{attributes}}} : (tensor<2xi64>) -> {result}
  return %0 : {result}
}}""")


def inputs(processes: int) -> list[np.ndarray]:
    return [np.array([10 * k + 1, 10 * k + 2], np.int64) for k in range(processes)]


def run(comp, backend, replicas, partitions):
    exe = grid.compile(comp, backend, replicas, partitions)
    return exe.run_replicated([[x] for x in inputs(replicas * partitions)])


CHANNEL = "channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>"

# (name, op, attributes, result type, grid (R, P), the process groups flattened
# (r * P + p) in the spec's order, written from the spec's definitions)
MODES = [
    # cross_replica: no channel; each group's replicas, once per partition
    ("cross_replica", "all_gather", "all_gather_dim = 0 : i64, replica_groups = "
     "dense<[[1, 0]]> : tensor<1x2xi64>", "tensor<4xi64>", (2, 2), [[2, 0], [3, 1]]),
    # cross_replica_and_partition: a channel, no global ids: the group's replicas on every
    # partition, partitions outer (the order XLA CPU does not keep: see below)
    ("cross_replica_and_partition", "all_reduce", f"{CHANNEL}, replica_groups = "
     "dense<[[0], [1]]> : tensor<2x1xi64>", "tensor<2xi64>", (2, 2), [[0, 1], [2, 3]]),
    # flattened_ids: a channel and use_global_device_ids: ids r * P + p
    ("flattened_ids", "all_gather", f"all_gather_dim = 0 : i64, {CHANNEL}, "
     "use_global_device_ids, replica_groups = dense<[[3, 0], [1, 2]]> : tensor<2x2xi64>",
     "tensor<4xi64>", (2, 2), [[3, 0], [1, 2]]),
    # cross_partition: all_to_all with a channel: each group's partitions, once per replica
    ("cross_partition", "all_to_all", f"split_dimension = 0 : i64, concat_dimension = 0 : i64, "
     f"split_count = 2 : i64, {CHANNEL}, replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>",
     "tensor<2xi64>", (2, 2), [[1, 0], [3, 2]]),
]


def expected(op, groups, processes):
    xs = inputs(processes)
    if op == "all_gather":
        return ref.all_gather(xs, 0, len(groups[0]), groups)
    if op == "all_reduce":
        return ref.all_reduce(xs, np.add, groups)
    return ref.all_to_all(xs, 0, 0, len(groups[0]), groups)


@pytest.mark.parametrize("name, op, attributes, result, shape, groups", MODES,
                         ids=[m[0] for m in MODES])
def test_each_mode_of_replica_groups_on_a_grid_of_replicas_and_partitions(
        name, op, attributes, result, shape, groups):
    comp = program(op, attributes, result)
    assert collectives.mode_of(next(o for o in hg.mlir.walk(comp.module)
                                    if o.name == f"stablehlo.{op}")) == name
    got = run(comp, "cpu", *shape)
    want = expected(op, groups, shape[0] * shape[1])
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w, err_msg=f"{name}: process {k} on XLA CPU")


GATHER = "all_gather_dim = 0 : i64, "
# (grid, mode, op, attributes, result, flattened process groups or pairs) on two processes
TWO_PROCESSES = [
    ((2, 1), "cross_replica", "all_gather", GATHER + "replica_groups = dense<[[1, 0]]> : "
     "tensor<1x2xi64>", "tensor<4xi64>", [[1, 0]]),
    ((2, 1), "cross_replica", "collective_permute", "source_target_pairs = dense<[[0, 1]]> : "
     "tensor<1x2xi64>", "tensor<2xi64>", [(0, 1)]),
    ((2, 1), "cross_replica_and_partition", "all_gather", GATHER + f"{CHANNEL}, replica_groups = "
     "dense<[[1, 0]]> : tensor<1x2xi64>", "tensor<4xi64>", [[1, 0]]),
    ((1, 2), "cross_replica_and_partition", "all_gather", GATHER + f"{CHANNEL}, replica_groups = "
     "dense<[[0]]> : tensor<1x1xi64>", "tensor<4xi64>", [[0, 1]]),
    ((1, 2), "cross_partition", "collective_permute", f"{CHANNEL}, source_target_pairs = "
     "dense<[[1, 0]]> : tensor<1x2xi64>", "tensor<2xi64>", [(1, 0)]),
    ((1, 2), "cross_partition", "all_to_all", "split_dimension = 0 : i64, concat_dimension = 0 : "
     f"i64, split_count = 2 : i64, {CHANNEL}, replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>",
     "tensor<2xi64>", [[1, 0]]),
    ((1, 2), "flattened_ids", "all_gather", GATHER + f"{CHANNEL}, use_global_device_ids, "
     "replica_groups = dense<[[1, 0]]> : tensor<1x2xi64>", "tensor<4xi64>", [[1, 0]]),
]


@pytest.mark.parametrize("shape, name, op, attributes, result, groups", TWO_PROCESSES,
                         ids=[f"{m[1]}-{m[2]}-{m[0][0]}x{m[0][1]}" for m in TWO_PROCESSES])
def test_the_interpreter_and_xla_agree_with_the_spec_on_two_processes(
        shape, name, op, attributes, result, groups):
    # grids of two processes: what this machine's cores hold (2 here)
    comp = program(op, attributes, result)
    want = ref.collective_permute(inputs(2), groups) if op == "collective_permute" else \
        expected(op, groups, 2)
    for backend in ("interpret", "cpu"):
        got = run(comp, backend, *shape)
        for k, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(g, w, err_msg=f"{name} {shape}: process {k} on "
                                                        f"{backend}")


def test_xla_cpu_gathers_cross_replica_and_partition_in_process_order():
    # the spec: partitions outer, the group's replicas inner (0, 2, 1, 3 on 2 x 2); XLA CPU
    # takes the processes in device order (hlogen/conformance/known_deviations.json)
    comp = program("all_gather", f"all_gather_dim = 0 : i64, {CHANNEL}, replica_groups = "
                   "dense<[[0, 1]]> : tensor<1x2xi64>", "tensor<8xi64>")
    got = run(comp, "cpu", 2, 2)
    xs = inputs(4)
    assert np.array_equal(got[0], np.concatenate([xs[0], xs[1], xs[2], xs[3]]))
    assert not np.array_equal(got[0], ref.all_gather(xs, 0, 4, [[0, 2, 1, 3]])[0])


@pytest.mark.parametrize("op, attributes, result, shape, message", [
    ("all_gather", "all_gather_dim = 0 : i64, replica_groups = dense<[[2, 0, 1]]> : "
     "tensor<1x3xi64>", "tensor<6xi64>", (2, 2),
     r"\[2\] out of range \(cross_replica: the groups name replica ids, 2 in 2 replica\(s\) "
     r"x 2 partition\(s\)\)"),
    ("all_to_all", f"split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 2 : "
     f"i64, {CHANNEL}, replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>",
     "tensor<2xi64>", (2, 2), r"\[2, 3\] out of range \(cross_partition: the groups name "
                              r"partition ids, 2 in"),
    ("all_gather", f"all_gather_dim = 0 : i64, {CHANNEL}, replica_groups = dense<[[0, 1]]> : "
     "tensor<1x2xi64>", "tensor<4xi64>", (2, 2),
     r"shard_count=2 .* must equal the size of each process group \(4: "
     r"cross_replica_and_partition groups \[\[0, 1\]\] on 2 replica\(s\) x 2 partition"),
    ("all_gather", f"all_gather_dim = 0 : i64, {CHANNEL}, use_global_device_ids, "
     "replica_groups = dense<[[0, 1], [2, 3], [4, 5]]> : tensor<3x2xi64>", "tensor<4xi64>",
     (2, 2), r"\[4, 5\] out of range \(flattened_ids: the groups name device"),
    ("all_gather", "all_gather_dim = 0 : i64, use_global_device_ids, replica_groups = "
     "dense<[[0, 1]]> : tensor<1x2xi64>", "tensor<4xi64>", (1, 2),
     "use_global_device_ids needs a channel_handle of handle > 0"),
])
def test_groups_that_do_not_fit_the_grid_are_refused_naming_the_mode(op, attributes, result,
                                                                     shape, message):
    comp = program(op, attributes, result)
    for backend in ("cpu", "interpret"):
        with pytest.raises(hg.ShapeError, match=message):
            grid.compile(comp, backend, *shape)


# -- XLA's mesh-axes groups ------------------------------------------------------------

MESH_AXES = """
module @m {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%x: tensor<2xi64>) -> tensor<2xi64> {
    %0 = "stablehlo.all_reduce"(%x) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>, replica_groups = #stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [#stablehlo.axis_ref<name = "AXES">]>, use_global_device_ids}> ({
    ^bb0(%a: tensor<i64>, %b: tensor<i64>):
      %s = stablehlo.add %a, %b : tensor<i64>
      stablehlo.return %s : tensor<i64>
    }) : (tensor<2xi64>) -> tensor<2xi64>
    return %0 : tensor<2xi64>
  }
}"""


@pytest.mark.parametrize("axes, groups", [
    ('a">', [[0, 2], [1, 3]]),                    # along a: b fixed
    ('b">', [[0, 1], [2, 3]]),                    # along b: a fixed
    ('b">, #stablehlo.axis_ref<name = "a">', [[0, 2, 1, 3]]),  # b outer, a inner
])
def test_mesh_axes_groups_are_expanded_and_run(axes, groups):
    comp = hg.load(MESH_AXES.replace('AXES">', axes))
    op = next(o for o in hg.mlir.walk(comp.module) if o.name == "stablehlo.all_reduce")
    assert collectives.mesh_groups(op) == groups
    got = run(comp, "cpu", 1, 4)
    for k, (g, w) in enumerate(zip(got, ref.all_reduce(inputs(4), np.add, groups))):
        np.testing.assert_array_equal(g, w, err_msg=f"process {k}")


def test_sub_axes_and_mesh_device_ids_expand():
    text = (MESH_AXES.replace('<["a"=2, "b"=2]>', '<["a"=4]>')
            .replace('name = "AXES">', 'name = "a", sub_axis_info = (1)2>'))
    op = next(o for o in hg.mlir.walk(hg.load(text).module) if o.name == "stablehlo.all_reduce")
    # "a":(1)2 is a's major factor of 2: devices 2 apart
    assert collectives.mesh_groups(op) == [[0, 2], [1, 3]]
    with pytest.raises(hg.ShapeError, match="name axis 'c'; mesh @mesh has a, b"):
        grid.compile(hg.load(MESH_AXES.replace('AXES">', 'c">')), "cpu", 1, 4)


def test_xla_partitioned_hlo_with_mesh_groups_runs():
    # XLA's partitioner writes these; converted to StableHLO, the preflight's cast of
    # replica_groups to dense groups died (an internal ValueError) before they were expanded
    comp = hg.load("""HloModule m, num_partitions=4

add {
  a = s64[] parameter(0)
  b = s64[] parameter(1)
  ROOT s = s64[] add(a, b)
}

ENTRY main {
  p = s64[2] parameter(0)
  ROOT r = s64[2] all-reduce(p), channel_id=1, replica_groups=mesh['x'=2,'y'=2] {'x'}, use_global_device_ids=true, to_apply=add
}
""")
    got = run(comp, "cpu", 1, 4)
    for k, (g, w) in enumerate(zip(got, ref.all_reduce(inputs(4), np.add, [[0, 2], [1, 3]]))):
        np.testing.assert_array_equal(g, w, err_msg=f"process {k}")


# -- what XLA would abort on, GSPMD's markers, global device ids --------------------------

PERMUTE_WITH_CHANNEL = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "stablehlo.collective_permute"(%x) {
    source_target_pairs = dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>,
    channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>
  } : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


def test_a_channel_collective_permute_on_one_partition_is_refused(tmp_path):
    # XLA CPU ends the process on it (SIGABRT, "Span::at failed bounds check"): by the
    # spec the channel makes the pairs partition ids, and there is one partition
    (tmp_path / "permute.mlir").write_text(PERMUTE_WITH_CHANNEL)
    done = hlogen_in(tmp_path, "run", "permute.mlir", "--replicas", "2", "--input", "4xf32=1")
    assert done.returncode == 2, done.stderr
    assert ("collective_permute: its channel_handle makes it cross_partition (the spec), so "
            "source_target_pairs=[[0, 1], [1, 0]] name partitions, and [1] are not among the 1 "
            "partition(s)") in done.stderr
    assert "Traceback" not in done.stderr
    # on 2 partitions it is what it says: partitions 0 and 1 swap
    got = grid.compile(hg.load(PERMUTE_WITH_CHANNEL), "cpu", 1, 2).run_replicated(
        [[np.full(4, 1, np.float32)], [np.full(4, 2, np.float32)]])
    assert [g.tolist() for g in got] == [[2] * 4, [1] * 4]


GSPMD = """
module @jit_f attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) -> (tensor<8x4xf32> {mhlo.sharding = "{devices=[2,1]<=[2]}"}) {
    %0 = stablehlo.multiply %x, %x : tensor<8x4xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %2 = stablehlo.custom_call @SPMDFullToShardShape(%1) {mhlo.sharding = "{manual}"} : (tensor<8x4xf32>) -> tensor<4x4xf32>
    %3 = stablehlo.negate %2 : tensor<4x4xf32>
    %4 = stablehlo.custom_call @Sharding(%3) {mhlo.sharding = "{manual}"} : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %5 = stablehlo.custom_call @SPMDShardToFullShape(%4) {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x4xf32>) -> tensor<8x4xf32>
    return %5 : tensor<8x4xf32>
  }
}"""


def test_gspmd_markers_pass_when_partitioning_is_on():
    # jax's GSPMD form of with_sharding_constraint and a shard_map body
    backend = xc.get_local_backend("cpu")
    options = xc.CompileOptions()
    options.num_partitions = 2
    options.executable_build_options.use_spmd_partitioning = True
    exe = backend.compile(GSPMD, options)
    devices = exe.local_devices()
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    (shards,) = exe.execute_sharded_on_local_devices(
        [[backend.buffer_from_pyval(x[4 * i:4 * i + 4], d) for i, d in enumerate(devices)]])
    np.testing.assert_array_equal(np.concatenate([s.to_py() for s in shards]), -(x * x))
    # compiled for one partition, the markers have no partitioner to read them
    with pytest.raises(hg.UnsupportedError, match="GSPMD's marker, which XLA's SPMD "
                                                  "partitioner handles"):
        backend.compile(GSPMD, xc.CompileOptions())
    with pytest.raises(hg.UnsupportedError, match="it needs an mhlo.sharding attribute"):
        backend.compile(GSPMD.replace(' {mhlo.sharding = "{manual}"} : (tensor<8x4xf32>)',
                                      " : (tensor<8x4xf32>)"), options)


def test_xla_client_all_reduce_with_global_device_ids_on_two_partitions():
    # Alpa's mesh profiling: one replica of 2 SPMD partitions, the program manual
    backend = xc.get_local_backend("cpu")
    xops = xc.ops
    scalar = xc.Shape.array_shape(np.dtype(np.float32), ())
    add = xc.XlaBuilder("add")
    xops.Add(xops.Parameter(add, 0, scalar), xops.Parameter(add, 1, scalar))
    add = add.build()
    manual = xc.OpSharding()
    manual.type = manual.type.MANUAL
    c = xc.XlaBuilder("profile_all_reduce")
    c.set_sharding(manual)
    x = xops.Parameter(c, 0, xc.Shape.array_shape(np.dtype(np.float32), (4,)))
    total = xops.AllReduce(x, add, xc.make_replica_groups([[0, 1]]),
                           backend.create_channel_handle(), None, True)
    gathered = xops.AllGather(x, 0, 2, xc.make_replica_groups([[1, 0]]),
                              backend.create_channel_handle(), None, True)
    scattered = xops.ReduceScatter(x, add, 0, 2, xc.make_replica_groups([[0, 1]]),
                                   backend.create_channel_handle(), None, True)
    swapped = xops.CollectivePermute(x, [(0, 1), (1, 0)], backend.create_channel_handle())
    exchanged = xops.AllToAll(x, 0, 0, 2, xc.make_replica_groups([[0, 1]]),
                              channel_id=backend.create_channel_handle())
    comp = c.build(xops.Tuple(c, [total, gathered, scattered, swapped, exchanged]))
    c.clear_sharding()
    options = xc.CompileOptions()
    options.num_partitions = 2
    options.executable_build_options.use_spmd_partitioning = True
    options.device_assignment = np.arange(2).reshape(1, 2)
    exe = backend.compile(comp, options)
    devices = exe.local_devices()
    xs = [np.array([1.5, -2, 3, 0.25], np.float32), np.array([4, 8, -16, 0.5], np.float32)]
    outs = exe.execute_sharded_on_local_devices(
        [[backend.buffer_from_pyval(v, d) for v, d in zip(xs, devices)]])
    for p in range(2):
        np.testing.assert_array_equal(outs[0][p].to_py(), xs[0] + xs[1])
        np.testing.assert_array_equal(outs[1][p].to_py(), np.concatenate([xs[1], xs[0]]))
        np.testing.assert_array_equal(outs[2][p].to_py(), (xs[0] + xs[1])[2 * p:2 * p + 2])
        np.testing.assert_array_equal(outs[3][p].to_py(), xs[1 - p])  # partitions swapped
        np.testing.assert_array_equal(outs[4][p].to_py(), np.concatenate(
            [xs[0][2 * p:2 * p + 2], xs[1][2 * p:2 * p + 2]]))


# -- the interpreter's parallel runner and StableHLO's cases with partitions -----------------

def test_the_interpreter_refuses_processes_beyond_its_threads_only_where_one_waits():
    # its runner has one thread per core; a process at a collective holds its thread
    waits = program("all_gather", f"all_gather_dim = 0 : i64, {CHANNEL}, replica_groups = "
                    "dense<[[0]]> : tensor<1x1xi64>", f"tensor<{2 * (CORES + 1)}xi64>")
    with pytest.raises(hg.UnsupportedError, match=rf"1 replica\(s\) x {CORES + 1} partitions "
                                                  rf"needs {CORES + 1} cores"):
        grid.compile(waits, "interpret", 1, CORES + 1)
    # replica_id and partition_id wait for no one: any number of processes runs
    ids = hg.load("""func.func @main() -> (tensor<ui32>, tensor<ui32>) {
  %r = stablehlo.replica_id : tensor<ui32>
  %p = stablehlo.partition_id : tensor<ui32>
  return %r, %p : tensor<ui32>, tensor<ui32>
}""")
    got = grid.compile(ids, "interpret", 2, CORES + 1).run_replicated([[]] * (2 * (CORES + 1)))
    assert [(int(r), int(p)) for r, p in got] == [(r, p) for r in range(2)
                                                  for p in range(CORES + 1)]


def test_check_runs_stablehlos_cases_with_partitions(tmp_path):
    files = [str(INTERPRET / f"{name}.mlir") for name in
             ("all_gather", "collective_broadcast", "collective_permute")]
    records = {}
    for backend in ("cpu", "interpret"):
        done = hlogen_in(tmp_path, "check", *files, "--backend", backend, "--json", "out.jsonl")
        assert done.returncode == 0, done.stdout + done.stderr  # nothing fails but the known
        records.update({(pathlib.Path(r["file"]).stem, r["module"], r["backend"]): r for r in
                        map(json.loads, (tmp_path / "out.jsonl").read_text().splitlines())})
    # all_gather #2 is 2 x 2: XLA CPU's process order, a known deviation with its reason
    known = records[("all_gather", 2, "cpu")]
    assert known["status"] == "known" and "process order" in known["known"], known
    # collective_permute #1 is 1 x 3 (cross_partition): XLA runs it {manual} on 3 devices
    assert records[("collective_permute", 1, "cpu")]["status"] == "pass"
    # XLA CPU has no collective_broadcast: refused with XLA's words
    for k in range(8):
        skipped = records[("collective_broadcast", k, "cpu")]
        assert skipped["status"] == "skipped" and "collective-broadcast" in skipped["message"]
    # the interpreter runs those its cores hold, and names the cores the others need
    for key in [("all_gather", 2), ("collective_permute", 1), ("collective_broadcast", 3)]:
        record = records[(*key, "interpret")]
        processes = 3 if key[0] == "collective_permute" else 4
        if processes <= CORES:
            assert record["status"] == "pass", record
        else:
            assert record["status"] == "skipped" and f"needs {processes} cores" in \
                record["message"], record


# -- shard_map modules per partition ------------------------------------------------------------

# jax (in a child process with 8 CPU devices: this one may have started jax with fewer)
# writes shard_map programs as Shardy text, with its own results on the same devices
SHARD_MAP = """
import sys
import jax
jax.config.update("jax_num_cpu_devices", 8)
import numpy as np
from jax import shard_map
from jax.sharding import Mesh, PartitionSpec as P

def f(a, b):
    return (jax.lax.psum(a, "y") * 2, jax.lax.all_gather(b, "y", tiled=True),
            jax.lax.ppermute(a, "y", [(0, 1), (1, 0)]), jax.lax.pmax(b, "y"))

a = np.arange(16, dtype=np.float32).reshape(4, 4) - 5
b = np.arange(4, dtype=np.float32) * 3
for rows in (1, 2, 4):
    mesh = Mesh(np.array(jax.devices()[:2 * rows]).reshape(rows, 2), ("x", "y"))
    g = jax.jit(shard_map(f, mesh=mesh, in_specs=(P("x", "y"), P("y")),
                          out_specs=(P("x"), P(), P("x", "y"), P()), check_vma=False))
    with open(f"{sys.argv[1]}/mesh{rows}x2.mlir", "w") as out:
        out.write(g.lower(a, b).as_text())
    with open(f"{sys.argv[1]}/mesh{rows}x2.jaxexport", "wb") as out:
        out.write(jax.export.export(g)(a, b).serialize())
    np.savez(f"{sys.argv[1]}/mesh{rows}x2.npz", a=a, b=b, *[np.asarray(r) for r in g(a, b)])
"""


@pytest.fixture(scope="module")
def shard_map_programs(tmp_path_factory):
    import subprocess
    import sys
    folder = tmp_path_factory.mktemp("shard_map")
    done = subprocess.run([sys.executable, "-c", SHARD_MAP, str(folder)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return folder


def test_a_shard_map_module_runs_per_partition_bit_for_bit_with_jax(shard_map_programs):
    from hlogen.runtime import manual
    for rows, form in [(1, "mlir"), (1, "jaxexport"), (2, "mlir"), (4, "jaxexport")]:
        comp = hg.load(shard_map_programs / f"mesh{rows}x2.{form}")
        saved = np.load(shard_map_programs / f"mesh{rows}x2.npz")
        want = [saved[f"arr_{k}"] for k in range(4)]
        split = manual.split(comp)
        assert [n for _, n in split.mesh.axes] == [rows, 2]
        assert not any(o.name.startswith("sdy.") for o in hg.mlir.walk(split.program.module))
        for backend in ("cpu", "interpret"):
            if backend == "interpret" and 2 * rows > CORES:
                with pytest.raises(hg.UnsupportedError, match=f"needs {2 * rows} cores"):
                    grid.run_manual(comp, [saved["a"], saved["b"]], backend)
                continue
            got = grid.run_manual(comp, [saved["a"], saved["b"]], backend)
            for k, (g, w) in enumerate(zip(got, want)):
                assert g.dtype == w.dtype and g.tobytes() == w.tobytes(), \
                    f"mesh {rows}x2 ({form}), result {k} on {backend}: {g} != {w}"


def test_what_a_shard_map_expansion_does_not_take_is_refused(shard_map_programs):
    from hlogen.runtime import manual
    text = (shard_map_programs / "mesh1x2.mlir").read_text()
    partial = text.replace('manual_axes={"x", "y"}', 'manual_axes={"y"}')
    with pytest.raises(hg.UnsupportedError, match=r"not over mesh axes \['x'\]: hlogen expands "
                                                  r"fully manual computations"):
        manual.split(hg.load(partial))
    with pytest.raises(hg.UnsupportedError, match="its main is one sdy.manual_computation"):
        manual.split(program("all_gather", "all_gather_dim = 0 : i64, replica_groups = "
                             "dense<[[0]]> : tensor<1x1xi64>"))


def test_the_console_sessions_of_the_page(tmp_path, monkeypatch):
    from tests.test_cli_readme import run_section
    assert len(run_section("docs/replicas.md", "What XLA would abort on", tmp_path / "a",
                           monkeypatch)) == 1
    assert len(run_section("docs/replicas.md", "StableHLO's cases with partitions",
                           tmp_path / "b", monkeypatch)) == 1


def test_partition_id_on_replicas_alone_is_zero_on_the_interpreter():
    # the interpreter runs replicas as partitions of one replica: partition_id is computed
    # from the process's flattened id (it gave the replica's id)
    comp = hg.load("""func.func @main() -> (tensor<ui32>, tensor<ui32>) {
  %p = stablehlo.partition_id : tensor<ui32>
  %r = stablehlo.replica_id : tensor<ui32>
  return %p, %r : tensor<ui32>, tensor<ui32>
}""")
    for backend in ("interpret", "cpu"):
        got = hg.compile(comp, backend=backend, num_replicas=2).run_replicated([[], []])
        assert [(int(p), int(r)) for p, r in got] == [(0, 0), (0, 1)], backend


def test_run_checks_a_shard_map_module_against_the_interpreter_per_partition(shard_map_programs):
    # XLA runs it partitioned (hlogen.sharding), the interpreter runs its body per partition
    saved = np.load(shard_map_programs / "mesh1x2.npz")
    np.savez(shard_map_programs / "in.npz", arg0=saved["a"], arg1=saved["b"])
    done = hlogen_in(shard_map_programs, "run", "mesh1x2.mlir", "--input", "in.npz",
                     "--check-interpret")
    assert done.returncode == 0, done.stderr
    assert ("interpret: the shard_map body on each of 2 partitions, in the interpreter's "
            "parallel runner") in done.stderr
    for k, n in enumerate([8, 4, 16, 2]):
        assert f"result[{k}]: cpu vs interpret: all {n} elements match" in done.stdout
