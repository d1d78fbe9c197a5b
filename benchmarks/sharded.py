"""Sharded programs (issue 37): a data-parallel jax program on 8 virtual CPU devices called
from numpy to numpy through hlogen (its Shardy text, partitioned as it says) and through
jax.jit on the same mesh, in one process. Target: hlogen at most 1.10x jax.jit.

And hlogen's cut of global arrays into shards (by the sharding XLA compiled with) and
putting results back together (replicated copies compared byte for byte): target at
least 1 GB/s each. The array is not aligned to 64 bytes (numpy's large arrays are at 16),
so the cut of the replicated one counts hlogen's one aligned copy that the 8 CPU devices
then alias; the comparison reads all 8 copies. A call with a replicated 64 MiB weight
shows the same cut on the path calls take (jax's fast path; jax.jit copies it 8 times).
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import jax

jax.config.update("jax_num_cpu_devices", 8)  # before jax's CPU backend starts

import jax.numpy as jnp  # (the imports after the device count: they may start jax)
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import hlogen as hg
from hlogen.runtime import _jaxlib
from _timing import interleaved_medians, machine

DEVICES = 8


def data_parallel(w, x):
    return jnp.tanh(x @ w) * 2.0


def first_block(w, x):  # a replicated weight of which the program reads a corner
    return x @ w[:x.shape[1], :8]


def unaligned(array: np.ndarray) -> np.ndarray:
    """A copy of `array` whose data starts 16 bytes past a multiple of 64 (as numpy's
    large arrays do, from malloc): one PJRT's CPU client copies rather than aliases."""
    raw = np.empty(array.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + 16
    out = raw[start:start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def calls(batch: int, width: int, mesh, program=data_parallel, rows: int | None = None):
    """(hlogen's call, jax.jit's call), both numpy -> numpy, checked bit for bit."""
    shardings = (NamedSharding(mesh, P()), NamedSharding(mesh, P("data")))
    jitted = jax.jit(program, in_shardings=shardings)
    rng = np.random.default_rng(0)
    w = unaligned(rng.standard_normal((rows or width, rows or width)).astype(np.float32))
    x = rng.standard_normal((batch, width)).astype(np.float32)
    exe = hg.compile(hg.load(jitted.lower(w, x).as_text()), "cpu")
    assert exe.how_it_runs() == "sharded: 1 replica x 8 partitions on 8 cpu devices"
    assert exe(w, x).tobytes() == np.asarray(jitted(w, x)).tobytes()
    return (lambda: exe(w, x)), (lambda: np.asarray(jitted(w, x)))


def throughput(placement, array, repeats: int = 7) -> tuple[float, float]:
    """Bytes per second of cutting `array` into shards and of putting them back."""
    on_devices = placement.put(array)
    jax.block_until_ready(on_devices)
    medians = interleaved_medians({
        "cut": lambda: jax.block_until_ready(placement.put(array)),
        "put back": lambda: placement.get(on_devices),
    }, repeats=repeats)
    assert placement.get(on_devices)[0].tobytes() == array.tobytes()
    return array.nbytes / medians["cut"], array.nbytes / medians["put back"]


def main():
    devices = jax.devices()[:DEVICES]
    mesh = Mesh(np.array(devices), ("data",))
    rows = []
    for batch, width, inner in ((64, 16, 300), (4096, 256, 20)):
        ours, theirs = calls(batch, width, mesh)
        medians = interleaved_medians({"hlogen": ours, "jax.jit": theirs}, repeats=15, inner=inner)
        rows.append((f"x f32[{batch},{width}] over 8 devices, w f32[{width},{width}] replicated",
                     medians["hlogen"], medians["jax.jit"]))
    ours, theirs = calls(64, 256, mesh, first_block, rows=4096)
    medians = interleaved_medians({"hlogen": ours, "jax.jit": theirs}, repeats=9)
    rows.append(("x f32[64,256] over 8 devices, w f32[4096,4096] (64 MiB) replicated, "
                 "x @ w[:256, :8]", medians["hlogen"], medians["jax.jit"]))
    print(f"## Sharded programs (issue 37; {machine()})\n")
    print("| call, numpy -> numpy | hlogen | jax.jit | hlogen / jax.jit |")
    print("| --- | --- | --- | --- |")
    for name, h, j in rows:
        print(f"| {name} | {h * 1e6:.1f} us | {j * 1e6:.1f} us | {h / j:.2f}x |")

    array = unaligned(np.random.default_rng(1).standard_normal((4096, 4096)).astype(np.float32))
    sharding_of = {"split over 8 devices {devices=[8,1]<=[8]}": "{devices=[8,1]<=[8]}",
                   "replicated on 8 devices (7 copies compared)": "{replicated}"}
    print("\n| f32[4096,4096] (64 MiB), global bytes per second | cut into shards | "
          "put back together |")
    print("| --- | --- | --- |")
    for name, text in sharding_of.items():
        proto = _jaxlib.xla_client.HloSharding.from_string(text).to_proto()
        placement = _jaxlib.ShardedPlacement(array.shape, array.dtype, devices, proto)
        cut, back = throughput(placement, array)
        print(f"| {name} | {cut / 1e9:.2f} GB/s | {back / 1e9:.2f} GB/s |")
    print(f"\n(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")


if __name__ == "__main__":
    main()
