"""A collective: the all-reduce (sum) of f32[1M] (1,048,576 elements) over 4 CPU replicas,
numpy in and numpy out per replica, in one process: hlogen's replicated executable
(`run_replicated`) vs the same collective through jax (`jax.shard_map` of `jax.lax.psum`
over a mesh of the same 4 CPU devices, jit-compiled). Target: hlogen no slower than jax
by more than 5% (ratio <= 1.05).

Both sides do the same work per call: each replica's numpy array goes to its own device
(hlogen: its ReplicatedPlacement; jax: one batched `jax.device_put` of the 4 arrays to
the 4 devices, joined with `jax.make_array_from_single_device_arrays`), one execution of
an XLA all-reduce over the 4 devices, and each replica's result comes back as a numpy
array. numpy's large arrays are 16-byte aligned, and jax's CPU client copies those on the
way in (~1.3 ms of a call here); arrays at 64-byte-aligned addresses it takes without a
copy: the table has both, the same data on both sides. A second table splits each side's
call into its parts (`--no-parts` skips it).

    .venv/bin/python benchmarks/collectives.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import hlogen as hg
from hlogen import ops
from hlogen.runtime import _jaxlib
from _timing import interleaved_medians, print_table

N = 1 << 20
REPLICAS = 4


def _both(n: int):
    """hlogen's executable and jax's function for the all-reduce of f32[n] over REPLICAS
    devices (the same devices), and jax's two steps: put the inputs, run and read."""
    b = hg.Builder("all_reduce_sum")
    x = b.parameter(hg.f32[n], "x")
    exe = hg.compile(b.build(ops.all_reduce(x, lambda a, c: ops.add(a, c))),
                     num_replicas=REPLICAS)
    devices = exe.devices
    mesh = Mesh(np.array(devices), ("replica",))
    sharding = NamedSharding(mesh, PartitionSpec("replica"))
    jax_psum = jax.jit(jax.shard_map(lambda v: jax.lax.psum(v, "replica"), mesh=mesh,
                                     in_specs=PartitionSpec("replica"),
                                     out_specs=PartitionSpec("replica")))

    def jax_put(arrays):
        shards = jax.device_put(arrays, devices)
        return jax.make_array_from_single_device_arrays((REPLICAS * n,), sharding, shards)

    def jax_run(arrays):
        out = jax_psum(jax_put(arrays))
        return [np.asarray(s.data) for s in sorted(out.addressable_shards,
                                                    key=lambda s: s.index[0].start or 0)]
    return exe, jax_psum, jax_put, jax_run


def _inputs(n: int) -> list:
    rng = np.random.default_rng(0)
    return [rng.standard_normal(n).astype(np.float32) for _ in range(REPLICAS)]


def main(parts: bool = True):
    # hlogen first: it starts the CPU backend with enough devices for the replicas
    exe, jax_psum, jax_put, jax_run = _both(N)
    xs = _inputs(N)
    # the same data at 64-byte-aligned addresses, which the CPU client takes without a copy
    aligned = [_aligned_copy(a) for a in xs]
    want = np.sum(np.stack(xs).astype(np.float64), axis=0)
    for arrays in (xs, aligned):
        got_h, got_j = exe.run_replicated([[a] for a in arrays]), jax_run(arrays)
        for h, j in zip(got_h, got_j):
            np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(j, want, rtol=1e-5, atol=1e-5)

    medians = {}
    for label, arrays in (("", xs), (", 64-byte-aligned inputs", aligned)):
        per_replica = [[a] for a in arrays]  # each pair alternates on its own
        medians.update(interleaved_medians({
            f"hlogen run_replicated{label}": lambda: exe.run_replicated(per_replica),
            f"jax.jit(shard_map(psum)){label}": lambda: jax_run(arrays)}, repeats=101, inner=5))
    print_table(f"collectives: all-reduce (sum) of f32[{N}] over {REPLICAS} CPU replicas, "
                f"numpy in and out per replica", medians)
    h, j, ha, ja = medians.values()
    print(f"\nhlogen / jax: {h / j:.3f}x (target <= 1.05x); with 64-byte-aligned inputs "
          f"(no copy on the way in, on either side): {ha / ja:.3f}x")
    if parts:
        print()
        _parts(exe, xs, jax_psum, jax_put)
        print()
        _fixed_costs()


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    buffer = np.empty(a.nbytes + 64, np.uint8)
    start = -buffer.ctypes.data % 64
    out = buffer[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def _parts(exe, xs, jax_psum, jax_put):
    """Each side's call split into its parts (each part timed on its own, waiting for the
    device where it hands back a jax array, so that it does not hide in the next part)."""
    from hlogen.runtime.arrays import flatten_arguments

    h_in = [p.put(xs) for p in exe._in]
    h_out = _jaxlib.execute_replicated(exe._loaded, h_in)
    j_in = jax_put(xs)
    j_out = jax_psum(j_in)
    j_shards = [s.data for s in j_out.addressable_shards]

    def block(arrays):
        for a in arrays:
            a.block_until_ready()

    medians = interleaved_medians({
        "hlogen: check and flatten the arguments":
            lambda: [flatten_arguments(exe.computation, [a]) for a in xs],
        "hlogen: device puts (ReplicatedPlacement.put)":
            lambda: block([p.put(xs) for p in exe._in]),
        "hlogen: execute_sharded + disassemble":
            lambda: block(_jaxlib.execute_replicated(exe._loaded, h_in)[0]),
        "hlogen: np.asarray of the 4 results": lambda: [np.asarray(a) for a in h_out[0]],
        "jax: device_put + make_array_from_single_device_arrays": lambda: block([jax_put(xs)]),
        "jax: jitted call": lambda: block([jax_psum(j_in)]),
        "jax: addressable_shards + np.asarray":
            lambda: [np.asarray(s.data) for s in j_out.addressable_shards],
        "jax: np.asarray of the 4 shards": lambda: [np.asarray(a) for a in j_shards],
    }, repeats=51, inner=5)
    print_table("collectives: the parts of one call", medians, label="part")


def _fixed_costs():
    """The same on f32[8]: what a call costs besides moving and reducing the data."""
    exe, _, _, jax_run = _both(8)
    xs = _inputs(8)
    per_replica = [[a] for a in xs]
    medians = interleaved_medians({"hlogen run_replicated": lambda: exe.run_replicated(per_replica),
                                   "jax.jit(shard_map(psum))": lambda: jax_run(xs)},
                                  repeats=51, inner=20)
    print_table("collectives: the same all-reduce on f32[8] (fixed costs)", medians)
    h, j = medians.values()
    print(f"\nhlogen / jax on f32[8]: {h / j:.3f}x")


if __name__ == "__main__":
    main(parts="--no-parts" not in sys.argv[1:])
