"""Collectives on 2, 4 and 8 CPU replicas (and on the reference interpreter, where this
machine has a core per replica), compared with tests/spec_reference_collectives.py, an
independent numpy model written from the spec; the spec's examples as data; the rules'
errors; channel ops; replicated executables."""
from __future__ import annotations

import os

import numpy as np
import pytest

import hlogen as hg
from hlogen import ops
from tests import spec_reference_collectives as ref
from tests.helpers import same

CORES = len(os.sched_getaffinity(0))


def add(a, b):
    return ops.add(a, b)


def maximum(a, b):
    return ops.max(a, b)


def build(shapes, fn):
    b = hg.Builder("collective")
    params = [b.parameter(s, f"x{i}") for i, s in enumerate(shapes)]
    out = fn(*params)
    return b.build(*out) if isinstance(out, list) else b.build(out)


def run_replicated(comp, per_replica, backend="cpu"):
    exe = hg.compile(comp, backend=backend, num_replicas=len(per_replica))
    return exe.run_replicated([list(args) for args in per_replica])


def check(got, expected):
    assert len(got) == len(expected)
    for r, (g, e) in enumerate(zip(got, expected)):
        if isinstance(e, tuple):
            assert isinstance(g, tuple) and len(g) == len(e), (r, g)
            for gi, ei in zip(g, e):
                same(gi, ei)
        else:
            same(g, e)


def operands(n, shape, dtype=np.float32, seed=0):
    """Per-replica operands of small integers (sums are exact in any order)."""
    rng = np.random.default_rng(seed + n)
    return [rng.integers(-50, 50, shape).astype(dtype) for _ in range(n)]


def groups_of(n, k):
    """n replicas in groups of k, strided: {0, n/k, ...}, {1, ...}, ... ({0,2},{1,3} for 4, 2)."""
    stride = n // k
    return [[g + stride * i for i in range(k)] for g in range(stride)]


# -- every collective against the reference, on 2, 4 and 8 replicas ------------------------------

# name: (operand shapes(n), op(params, n), reference(per_replica operands, n))
CASES = {
    "all_reduce sum": (
        lambda n: [hg.f32[3, 5]],
        lambda x, n: ops.all_reduce(x, add),
        lambda xs, n: ref.all_reduce(xs, np.add)),
    "all_reduce max, groups": (
        lambda n: [hg.s32[7]],
        lambda x, n: ops.all_reduce(x, maximum, replica_groups=groups_of(n, 2), channel_id=5),
        lambda xs, n: ref.all_reduce(xs, np.maximum, groups_of(n, 2))),
    "all_reduce tuple": (
        lambda n: [hg.f32[4], hg.f32[2, 2]],
        lambda x, y, n: ops.all_reduce(ops.tuple([x, y]), add),
        lambda xs, ys, n: ref.all_reduce(list(zip(xs, ys)), np.add)),
    "all_reduce list": (
        lambda n: [hg.f32[4], hg.f32[3]],
        lambda x, y, n: list(ops.all_reduce([x, y], add)),
        lambda xs, ys, n: ref.all_reduce(list(zip(xs, ys)), np.add)),
    "cross_replica_sum, groups": (
        lambda n: [hg.s32[2, 3]],
        lambda x, n: ops.cross_replica_sum(x, replica_groups=groups_of(n, n // 2)),
        lambda xs, n: ref.cross_replica_sum(xs, groups_of(n, n // 2))),
    "all_gather dim 0": (
        lambda n: [hg.f32[2, 3]],
        lambda x, n: ops.all_gather(x, 0, n),
        lambda xs, n: ref.all_gather(xs, 0, n)),
    "all_gather dim 1, groups": (
        lambda n: [hg.f32[2, 3]],
        lambda x, n: ops.all_gather(x, 1, 2, replica_groups=groups_of(n, 2), channel_id=2),
        lambda xs, n: ref.all_gather(xs, 1, 2, groups_of(n, 2))),
    "all_to_all": (
        lambda n: [hg.f32[2, 4 * n]],
        lambda x, n: ops.all_to_all(x, 1, 0, n),
        lambda xs, n: ref.all_to_all(xs, 1, 0, n)),
    "all_to_all groups, same dims": (
        lambda n: [hg.s32[4, 3]],
        lambda x, n: ops.all_to_all(x, 0, 0, 2, replica_groups=groups_of(n, 2)),
        lambda xs, n: ref.all_to_all(xs, 0, 0, 2, groups_of(n, 2))),
    "reduce_scatter": (
        lambda n: [hg.f32[2 * n, 3]],
        lambda x, n: ops.reduce_scatter(x, add, 0, n),
        lambda xs, n: ref.reduce_scatter(xs, np.add, 0, n)),
    "reduce_scatter tuple, groups": (
        lambda n: [hg.f32[3, 4], hg.f32[2]],
        lambda x, y, n: ops.reduce_scatter(ops.tuple([x, y]), add, 0, 1,
                                           replica_groups=[[r] for r in range(n)]),
        lambda xs, ys, n: ref.reduce_scatter(list(zip(xs, ys)), np.add, 0, 1,
                                             [[r] for r in range(n)])),
    "collective_permute ring": (
        lambda n: [hg.f32[3]],
        lambda x, n: ops.collective_permute(x, [(r, (r + 1) % n) for r in range(n)]),
        lambda xs, n: ref.collective_permute(xs, [(r, (r + 1) % n) for r in range(n)])),
    "collective_permute, replicas no target get zeros": (
        lambda n: [hg.s32[2, 2]],
        lambda x, n: ops.collective_permute(x, [(n - 1, 0), (0, 1)]),
        lambda xs, n: ref.collective_permute(xs, [(n - 1, 0), (0, 1)])),
    "a chain: all_reduce, all_gather, all_to_all, permute": (
        # the interpreter's runner once mixed the data of consecutive collectives
        lambda n: [hg.s32[n]],
        lambda x, n: ops.collective_permute(
            ops.all_to_all(ops.all_gather(ops.all_reduce(x, add), 0, n), 0, 0, n),
            [(r, n - 1 - r) for r in range(n)]),
        lambda xs, n: ref.collective_permute(
            ref.all_to_all(ref.all_gather(ref.all_reduce(xs, np.add), 0, n), 0, 0, n),
            [(r, n - 1 - r) for r in range(n)])),
    "replica_id": (
        lambda n: [hg.f32[1]],
        lambda x, n: ops.replica_id(x.builder),
        lambda xs, n: ref.replica_id(n)),
}


def _case(name, n):
    shapes_of, op, reference = CASES[name]
    shapes = shapes_of(n)
    comp = build(shapes, lambda *p: op(*p, n))
    per_param = [operands(n, s.dimensions, s.dtype, seed=i) for i, s in enumerate(shapes)]
    per_replica = list(zip(*per_param))
    return comp, per_replica, reference(*per_param, n)


@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("name", list(CASES))
def test_collective_on_cpu_replicas(name, n):
    comp, per_replica, expected = _case(name, n)
    check(run_replicated(comp, per_replica), expected)


@pytest.mark.skipif(CORES < 2, reason="the interpreter runs one replica per core")
@pytest.mark.parametrize("name", list(CASES))
def test_collective_on_the_interpreter(name):
    n = 4 if CORES >= 4 else 2
    comp, per_replica, expected = _case(name, n)
    check(run_replicated(comp, per_replica, backend="interpret"), expected)


# -- the spec's examples, as data ---------------------------------------------------------------

def _one_op(shape, fn, per_replica, backend="cpu"):
    return run_replicated(build([shape], fn), [[np.asarray(a, shape.dtype)] for a in per_replica],
                          backend)


@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_spec_examples_on_two_replicas(backend):
    x = [[1.0, 2.5], [3.0, 5.25]]
    check(_one_op(hg.f32[2], lambda p: ops.all_gather(p, 0, 2), x, backend),
          [np.array([1.0, 2.5, 3.0, 5.25], np.float32)] * 2)
    check(_one_op(hg.f32[2], lambda p: ops.all_reduce(p, add), x, backend),
          [np.array([4.0, 7.75], np.float32)] * 2)
    check(_one_op(hg.f32[2], lambda p: ops.cross_replica_sum(p), x, backend),
          [np.array([4.0, 7.75], np.float32)] * 2)
    check(_one_op(hg.f32[2], lambda p: ops.reduce_scatter(p, add, 0, 2),
                  [[1.0, 2.25], [3.0, 5.25]], backend),
          [np.array([4.0], np.float32), np.array([7.5], np.float32)])


def test_spec_replica_groups_0_2_and_1_3():
    x = [[1.0], [10.0], [100.0], [1000.0]]
    check(_one_op(hg.f32[1], lambda p: ops.all_reduce(p, add, [[0, 2], [1, 3]]), x),
          [np.array([v], np.float32) for v in (101.0, 1010.0, 101.0, 1010.0)])
    check(_one_op(hg.f32[1], lambda p: ops.all_gather(p, 0, 2, [[0, 2], [1, 3]]), x),
          [np.array(v, np.float32) for v in ([1, 100], [10, 1000], [1, 100], [10, 1000])])


def test_spec_all_to_all_f32_4x16_to_16x4():
    per_replica = [np.arange(64, dtype=np.float32).reshape(4, 16) + 1000 * r for r in range(4)]
    comp = build([hg.f32[4, 16]], lambda x: ops.all_to_all(x, 1, 0, 4))
    assert comp.result_shapes == [hg.f32[16, 4]]
    got = run_replicated(comp, [[a] for a in per_replica])
    # core j: block j (columns 4j..4j+3) of each core's operand, cores in order 0-3
    for j in range(4):
        same(got[j], np.concatenate([a[:, 4 * j:4 * j + 4] for a in per_replica], axis=0))
    check(got, ref.all_to_all(per_replica, 1, 0, 4))


def test_spec_all_to_all_groups_in_their_order():
    groups = [[1, 2, 3], [4, 5, 0]]
    per_replica = [np.arange(3, dtype=np.int32) + 10 * r for r in range(6)]
    got = _one_op(hg.s32[3], lambda p: ops.all_to_all(p, 0, 0, 3, groups), per_replica)
    check(got, ref.all_to_all(per_replica, 0, 0, 3, groups))
    same(got[1], [10, 20, 30])  # replica 1 is first in {1, 2, 3}: block 0 of 1, 2, 3 in order


# -- the rules --------------------------------------------------------------------------------------

def _emits(fn, shape=hg.f32[4, 4]):
    b = hg.Builder("bad")
    return fn(b.parameter(shape, "x"))


@pytest.mark.parametrize("fn, message", [
    (lambda x: ops.all_reduce(x, add, [[0, 1], [1, 2]]), r"replica\(s\) \[1\] more than once"),
    (lambda x: ops.all_reduce(x, add, [[0, 3]]), r"not a partition of the replicas 0..1 .*: \[3\] out of range; \[1\] in no group"),
    (lambda x: ops.all_reduce(x, add, [[0], []]), "empty group"),
    (lambda x: ops.all_reduce(x, add, "01"), "list of lists of replica ids"),
    (lambda x: ops.all_gather(x, 0, 2, [[0, 1], [2]]), "must all have the same size"),
    (lambda x: ops.all_gather(ops.slice(x, [0, 0], [0, 4]), 0, 2),
     "all_gather_dim=0 is a dimension of size 0"),
    (lambda x: ops.all_gather(x, 0, 3, [[0, 1], [2, 3]]), r"shard_count=3 must equal the size of each replica group \(2"),
    (lambda x: ops.all_gather(x, 2, 2), r"all_gather_dim=2 must be a dimension number in \[0, 2\)"),
    (lambda x: ops.all_gather(x, 0, 0), "shard_count must be a positive integer"),
    (lambda x: ops.reduce_scatter(x, add, 0, 3), r"size 4\) must be divisible by shard_count=3"),
    (lambda x: ops.all_to_all(x, 1, 0, 3), r"size 4\) must be divisible by split_count=3"),
    (lambda x: ops.collective_permute(x, [(0, 1), (0, 2)]), r"source replica\(s\) \[0\] in more than one pair"),
    (lambda x: ops.collective_permute(x, [(0, 2), (1, 2)]), r"target replica\(s\) \[2\] in more than one pair"),
    (lambda x: ops.collective_permute(x, [(0, -1)]), "replica ids are non-negative"),
    (lambda x: ops.collective_permute(x, [(0, 1, 2)]), r"list of \(source, target\) replica id pairs"),
    (lambda x: ops.all_reduce(ops.tuple([x, ops.convert_element_type(x, hg.s32)]), add),
     "operands must have the same element type"),
    (lambda x: ops.all_reduce(x, lambda a, b: ops.convert_element_type(a, hg.s32)), "computation"),
    (lambda x: ops.send(x, "one"), "channel_handle must be an int or an ops.ChannelHandle"),
    (lambda x: ops.recv(x.builder, hg.f32[2], ops.ChannelHandle(1, "sideways")), "channel types are"),
])
def test_bad_arguments_name_the_rule(fn, message):
    with pytest.raises(hg.ShapeError, match=message):
        _emits(fn)


@pytest.mark.parametrize("fn, replicas, message", [
    (lambda x: ops.all_reduce(x, add, [[0, 1]]), 4, r"not a partition of the 4 replicas: \[2, 3\] in no group"),
    (lambda x: ops.all_gather(x, 0, 4), 2, r"shard_count=4 in the one group \[\[0, 1, 2, 3\]\] "
                                          r"\(what replica_groups None gives\) does not fit 2 "
                                          r"replicas: compile for 4"),
    (lambda x: ops.collective_permute(x, [(0, 3)]), 2, r"names replica\(s\) \[3\]; replica ids are \[0, 2\)"),
])
def test_groups_that_do_not_fit_the_replica_count(fn, replicas, message):
    b = hg.Builder("bad")
    comp = b.build(fn(b.parameter(hg.f32[4], "x")))
    for backend in ("cpu", "interpret"):
        with pytest.raises(hg.ShapeError, match=message + r".*compiled for"):
            hg.compile(comp, backend=backend, num_replicas=replicas)


def test_loaded_module_shard_count_must_match_empty_groups():
    comp = hg.load("""func.func @main(%a: tensor<2xf32>) -> tensor<6xf32> {
      %r = "stablehlo.all_gather"(%a) {all_gather_dim = 0 : i64,
            replica_groups = dense<> : tensor<0x0xi64>} : (tensor<2xf32>) -> tensor<6xf32>
      return %r : tensor<6xf32>
    }""")
    with pytest.raises(hg.ShapeError, match=r"shard_count=3 \(from the result and operand "
                                            r"dimensions\) must equal the size of each replica "
                                            r"group \(4: replica_groups is empty"):
        hg.compile(comp, num_replicas=4)
    got = run_replicated(comp, [[np.full(2, r, np.float32)] for r in range(3)])
    same(got[2], np.repeat(np.arange(3, dtype=np.float32), 2))


def test_all_to_all_without_groups_in_text_is_an_input_error_not_a_crash():
    # StableHLO's verifier divides by the number of groups (SIGFPE) when there are none
    with pytest.raises(hg.InputError, match=r"<text>:2:\d+: all_to_all has no replica groups"):
        hg.load("""func.func @main(%a: tensor<4x16xf32>) -> tensor<16x4xf32> {
          %r = "stablehlo.all_to_all"(%a) {split_dimension = 1 : i64, concat_dimension = 0 : i64,
                split_count = 4 : i64, replica_groups = dense<> : tensor<0x0xi64>}
                : (tensor<4x16xf32>) -> tensor<16x4xf32>
          return %r : tensor<16x4xf32>
        }""")


def test_a_tuple_all_reduce_with_a_channel_runs_on_the_interpreter_only():
    comp = build([hg.f32[4], hg.f32[3]], lambda x, y: list(ops.all_reduce([x, y], add, channel_id=1)))
    with pytest.raises(hg.UnsupportedError, match="XLA CPU fails to compile an all-reduce of "
                                                  "several operands that has a channel id"):
        hg.compile(comp, num_replicas=2)
    xs, ys = operands(2, (4,)), operands(2, (3,), seed=1)
    check(run_replicated(comp, list(zip(xs, ys)), "interpret"),
          ref.all_reduce(list(zip(xs, ys)), np.add))


def test_all_reduce_groups_of_different_sizes():
    # the spec sets no size rule for AllReduce: StableHLO's 2-D attribute pads them with -1
    comp = build([hg.f32[2]], lambda x: ops.all_reduce(x, add, [[0], [1, 2]]))
    assert "[0, -1], [1, 2]" in comp.as_text()
    xs = operands(3, (2,))
    check(run_replicated(comp, [[a] for a in xs]), ref.all_reduce(xs, np.add, [[0], [1, 2]]))


@pytest.mark.parametrize("fn, message", [
    # the runner meets a collective's processes by channel: a second execution of the same
    # op mixes its data with the first's (wrong, varying results)
    (lambda x: ops.while_loop(lambda i, v: ops.lt(i, 2),
                              lambda i, v: (ops.add(i, 1), ops.all_reduce(v, add)),
                              (x.builder.constant(np.int32(0)), x))[1],
     "stablehlo.all_reduce here: it runs more than once"),
    (lambda x: ops.collective_permute(x, [(0, 0), (1, 1)]),
     "stablehlo.collective_permute here: a replica that sends to itself"),
])
def test_what_the_interpreters_runner_cannot_do_is_refused(fn, message):
    comp = build([hg.f32[2]], fn)
    with pytest.raises(hg.UnsupportedError, match=r"reference interpreter cannot run " + message):
        hg.compile(comp, backend="interpret", num_replicas=2)
    xs = operands(2, (2,))
    assert len(run_replicated(comp, [[a] for a in xs])) == 2  # XLA runs it


# -- replicated executables ---------------------------------------------------------------------

def _sum_comp():
    return build([hg.f32[4]], lambda x: ops.cross_replica_sum(x))


def test_a_replicated_executable_is_called_with_run_replicated():
    exe = hg.compile(_sum_comp(), num_replicas=2)
    assert exe.num_replicas == 2 and exe.local_replicas == [0, 1] and "x 2 replicas" in repr(exe)
    with pytest.raises(hg.HlogenError, match=r"compiled for 2 replicas: call \.run_replicated"):
        exe(np.zeros(4, np.float32))
    with pytest.raises(hg.InputError, match=r"runs 2 replica\(s\): pass one list of arguments per replica, got 3"):
        exe.run_replicated([[np.zeros(4, np.float32)]] * 3)
    with pytest.raises(hg.InputError, match="one list of arguments per replica"):
        exe.run_replicated(np.zeros((2, 4), np.float32))
    with pytest.raises(hg.InputError, match=r"parameter 'x0' of collective expects f32\[4\]"):
        exe.run_replicated([[np.zeros(4, np.float32)], [np.zeros(3, np.float32)]])


def test_replicated_executables_are_cached_per_replica_count():
    comp = _sum_comp()
    two, four = hg.compile(comp, num_replicas=2), hg.compile(comp, num_replicas=4)
    assert two is hg.compile(comp, num_replicas=2) and two is not four
    assert hg.compile(comp) is not two
    from hlogen.runtime import _jaxlib
    assert _jaxlib.compile_options_key(two.devices) != _jaxlib.compile_options_key(four.devices)
    # one replica: a plain call, or run_replicated with one list
    one = hg.compile(comp)
    same(one(np.ones(4, np.float32)), np.ones(4, np.float32))
    same(one.run_replicated([[np.ones(4, np.float32)]])[0], np.ones(4, np.float32))


def test_replica_counts_above_the_devices_available():
    with pytest.raises(hg.HlogenError, match=r"num_replicas=4096 needs 4096 cpu devices; \d+ are "
                                            r"available .*HLOGEN_CPU_DEVICES=4096"):
        hg.compile(_sum_comp(), num_replicas=4096)
    with pytest.raises(hg.HlogenError, match="num_replicas must be a positive int"):
        hg.compile(_sum_comp(), num_replicas=0)


def test_the_interpreter_refuses_more_replicas_than_cores():
    with pytest.raises(hg.UnsupportedError, match=r"one thread per core .*num_replicas=\d+ needs"):
        hg.compile(_sum_comp(), backend="interpret", num_replicas=CORES + 1)


def test_64_bit_and_unsigned_operands_keep_their_types():
    comp = build([hg.u64[2], hg.f64[2]], lambda x, y: [ops.all_reduce(x, add),
                                                        ops.all_gather(y, 0, 2)])
    xs = [np.array([2**63, 1], np.uint64), np.array([5, 2**40], np.uint64)]
    ys = [np.array([1e300, 2.0], np.float64), np.array([-1.5, 1e-300], np.float64)]
    for backend in ("cpu", "interpret"):
        got = run_replicated(comp, list(zip(xs, ys)), backend)
        check([g[0] for g in got], ref.all_reduce(xs, np.add))
        check([g[1] for g in got], ref.all_gather(ys, 0, 2))


# -- channel ops: emitted and verified; refused where the backend cannot run them -----------------

def test_channel_ops_are_emitted_and_refused_where_they_cannot_run():
    b = hg.Builder("channels")
    x = b.parameter(hg.f32[4], "x")
    token = ops.send(x, 7)
    assert token.shape == hg.token
    received = ops.recv(b, hg.f32[4], ops.ChannelHandle(7, "device_to_device"))
    comp = b.build(ops.add(received, x))
    text = comp.as_text()
    assert "stablehlo.send" in text and "stablehlo.recv" in text and "handle = 7" in text
    with pytest.raises(hg.UnsupportedError, match=r"cpu backend cannot compile it: UNIMPLEMENTED: "
                                                  r"HLO opcode `send` is not supported by XLA:CPU"):
        hg.compile(comp, num_replicas=2)
    with pytest.raises(hg.UnsupportedError, match="reference interpreter cannot run stablehlo.send"):
        hg.compile(comp, backend="interpret")


def test_infeed_is_emitted_and_refused_on_both_backends():
    b = hg.Builder("feed")
    data = ops.infeed(b, hg.tuple_shape(hg.f32[2], hg.s32[()]), config="cfg")
    assert data.shape == hg.tuple_shape(hg.f32[2], hg.s32[()])
    comp = b.build(ops.get_tuple_element(data, 0))
    assert 'infeed_config = "cfg"' in comp.as_text()
    with pytest.raises(hg.UnsupportedError, match="XLA \\(PJRT\\) cannot run stablehlo.infeed: "
                                                  "jaxlib's PJRT client has no way to fill"):
        hg.compile(comp)
    with pytest.raises(hg.UnsupportedError, match="reference interpreter cannot run stablehlo.infeed"):
        hg.compile(comp, backend="interpret")


def test_a_bad_cpu_device_count_in_the_environment(monkeypatch):
    from hlogen.runtime import pjrt
    monkeypatch.setenv("HLOGEN_CPU_DEVICES", "eight")
    with pytest.raises(hg.HlogenError, match="HLOGEN_CPU_DEVICES must be a number of devices"):
        pjrt.cpu_devices_wanted()
    monkeypatch.setenv("HLOGEN_CPU_DEVICES", "3")
    assert pjrt.cpu_devices_wanted(2) == 3 and pjrt.cpu_devices_wanted(5) == 5


def test_the_cpu_backend_starts_with_enough_devices_in_a_fresh_process():
    import subprocess
    import sys
    script = """
import numpy as np, hlogen as hg, jax
from hlogen import ops
b = hg.Builder("s"); x = b.parameter(hg.f32[1], "x")
comp = b.build(ops.cross_replica_sum(x))
exe = hg.compile(comp, num_replicas=12)  # above the default 8: the backend starts with 12
print(len(jax.devices()), exe.run_replicated([[np.ones(1, np.float32)]] * 12)[11][0])
try:
    hg.compile(comp, num_replicas=16)
except hg.HlogenError as e:
    print(str(e).split(":")[0])
"""
    env = dict(os.environ, HLOGEN_CPU_DEVICES="")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["12 12.0", "num_replicas=16 needs 16 cpu devices; 12 are available (replica count above the devices available)"]
    # a count the user chose through XLA_FLAGS is respected
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=3"
    done = subprocess.run([sys.executable, "-c", "import hlogen as hg, jax\n"
                           "from hlogen.runtime import pjrt\npjrt.client('cpu')\n"
                           "print(len(jax.devices()))"],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.stdout.strip() == "3", done.stderr


# -- collective_broadcast (loaded modules: hlogen has no builder op for it) ----------------------

BROADCAST = """func.func @main(%operand : tensor<1x2xi64>) -> tensor<1x2xi64> {
  %result = "stablehlo.collective_broadcast"(%operand) {
    replica_groups = dense<GROUPS> : tensor<SHAPExi64>,
    channel_handle = #stablehlo.channel_handle<handle = 0, type = 0>
  } : (tensor<1x2xi64>) -> tensor<1x2xi64>
  return %result : tensor<1x2xi64>
}"""


def _broadcast_module(groups):
    shape = f"{len(groups)}x{len(groups[0])}"
    return hg.load(BROADCAST.replace("GROUPS", str(groups)).replace("SHAPE", shape))


def _broadcast_by_the_spec(groups, per_replica):
    """StableHLO's spec: a replica in group g gets the operand of g's first replica; a
    replica in no group gets zeros."""
    first = {r: g[0] for g in groups for r in g}
    return [per_replica[first[r]] if r in first else np.zeros_like(per_replica[r])
            for r in range(len(per_replica))]


@pytest.mark.skipif(CORES < 2, reason="the interpreter runs one replica per core")
@pytest.mark.parametrize("groups", [[[1]], [[0]], [[1, 0]], [[0], [1]]])
def test_collective_broadcast_leaves_replicas_in_no_group_zeros(groups):
    per_replica = [np.array([[1 + 2 * r, 2 + 2 * r]], np.int64) for r in range(2)]
    got = run_replicated(_broadcast_module(groups), [[x] for x in per_replica], "interpret")
    check(got, _broadcast_by_the_spec(groups, per_replica))


def test_collective_broadcast_rules_and_xla_cpu():
    with pytest.raises(hg.ShapeError, match=r"collective_broadcast: replica_groups=\[\[2\]\] "
                                            r"names ids outside the 2 replicas: \[2\] out of range"):
        hg.compile(_broadcast_module([[2]]), backend="interpret", num_replicas=2)
    # XLA CPU has no CollectiveBroadcast, whatever the groups: refused when compiled
    for groups in ([[1]], [[1, 0]]):
        with pytest.raises(hg.UnsupportedError, match="collective-broadcast"):
            hg.compile(_broadcast_module(groups), backend="cpu", num_replicas=2)
