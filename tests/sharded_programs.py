"""Sharded programs made by jax on 8 virtual CPU devices, and jax's own results on them
(the tests' producer: run as `python -m tests.sharded_programs DIR`, in a process of its
own, since the device count is set before jax's CPU backend starts); and hlogen's results
on them (`python -m tests.sharded_programs --hlogen DIR`, in a process of its own too).

For each program NAME, DIR holds NAME.shardy.mlir (jax's default lowering),
NAME.gspmd.mlir (jax_use_shardy_partitioner=False), NAME.jaxexport (jax.export's
serialized Exported), NAME.inputs.npz (arg0, arg1, ...: global arrays) and
NAME.expected.npz (result0, ...: what jax.jit gives on the same mesh); data_parallel also
as XLA's HLO text with shardings (NAME.hlo.txt) and MLIR bytecode (NAME.mlirbc).
"""
from __future__ import annotations

import os
import sys

DEVICES = 8


def programs():
    """name -> (function, in_specs, out_specs or None, global input shapes, mesh shape)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    def data_parallel(w, x):  # a batch split over "data", weights replicated
        return jnp.tanh(x @ w) * 2.0

    def tensor_parallel(x, w1, w2):  # a 2-D mesh: batch over "data", hidden over "model"
        return jax.nn.relu(x @ w1) @ w2

    def constrained(x):
        y = jnp.sin(x) * 3.0
        y = jax.lax.with_sharding_constraint(y, jax.sharding.NamedSharding(_mesh((8,), ("data",)),
                                                                          P(None, "data")))
        return y.T + 1.0

    def sharded_sum(x):  # a reduction over the sharded axis
        return jnp.sum(x, axis=0), jnp.max(x, axis=0)

    def shard_map_psum(x):
        def body(block):
            s = jax.lax.psum(jnp.sum(block, axis=0, keepdims=True), "data")
            g = jax.lax.all_gather(block * 2.0, "data", tiled=True)
            return block - s, g
        return jax.shard_map(body, mesh=_mesh((8,), ("data",)), in_specs=P("data"),
                             out_specs=(P("data"), P()), check_vma=False)(x)

    return {
        "data_parallel": (data_parallel, (P(), P("data")), None, [(16, 8), (64, 16)], ((8,), ("data",))),
        "tensor_parallel": (tensor_parallel, (P("data", None), P(None, "model"), P("model", None)),
                            P("data", None), [(8, 16), (16, 32), (32, 4)], ((2, 4), ("data", "model"))),
        "constrained": (constrained, (P("data"),), None, [(16, 24)], ((8,), ("data",))),
        "sharded_sum": (sharded_sum, (P("data"),), None, [(64, 6)], ((8,), ("data",))),
        "shard_map_psum": (shard_map_psum, (P("data"),), None, [(32, 4)], ((8,), ("data",))),
    }


def _mesh(shape, axes):
    import jax
    import numpy as np
    return jax.sharding.Mesh(np.array(jax.devices()[:int(np.prod(shape))]).reshape(shape), axes)


def make(directory: str) -> None:
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, (fn, in_specs, out_specs, shapes, (mesh_shape, axes)) in programs().items():
        mesh = _mesh(mesh_shape, axes)
        in_shardings = tuple(NamedSharding(mesh, s) for s in in_specs)
        out_shardings = None if out_specs is None else NamedSharding(mesh, out_specs)
        jitted = jax.jit(fn, in_shardings=in_shardings, out_shardings=out_shardings)
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        placed = [jax.device_put(a, s) for a, s in zip(args, in_shardings)]
        out = jitted(*placed)
        outs = out if isinstance(out, tuple) else (out,)
        np.savez(f"{directory}/{name}.inputs.npz", **{f"arg{i}": a for i, a in enumerate(args)})
        np.savez(f"{directory}/{name}.expected.npz",
                 **{f"result{i}": np.asarray(o) for i, o in enumerate(outs)})
        with open(f"{directory}/{name}.shardy.mlir", "w") as f:
            f.write(jitted.lower(*placed).as_text())
        exported = jax.export.export(jitted)(*placed)
        with open(f"{directory}/{name}.jaxexport", "wb") as f:
            f.write(exported.serialize())
        if name == "data_parallel":
            with open(f"{directory}/{name}.hlo.txt", "w") as f:
                f.write(jitted.lower(*placed).compiler_ir("hlo").as_hlo_text())
        jax.config.update("jax_use_shardy_partitioner", False)
        try:
            with open(f"{directory}/{name}.gspmd.mlir", "w") as f:
                f.write(jax.jit(fn, in_shardings=in_shardings, out_shardings=out_shardings)
                        .lower(*placed).as_text())
        finally:
            jax.config.update("jax_use_shardy_partitioner", True)


FORMS = ("shardy.mlir", "gspmd.mlir", "jaxexport")


def files(directory: str) -> list[tuple[str, str]]:
    """(program name, file) of every form made."""
    import glob
    found = [(name, f"{directory}/{name}.{form}") for name in programs_names()
             for form in FORMS]
    return found + [("data_parallel", f) for f in sorted(glob.glob(f"{directory}/data_parallel.*"))
                    if f.endswith((".hlo.txt", ".mlirbc"))]


def programs_names() -> list[str]:
    return ["data_parallel", "tensor_parallel", "constrained", "sharded_sum", "shard_map_psum"]


def run_hlogen(directory: str) -> None:
    """hlogen's results of every file on cpu (hg.compile, global numpy arrays in and out),
    in DIR/hlogen.npz ("FILE/resultI"), and how each ran in DIR/hlogen.json."""
    import json

    import numpy as np

    import hlogen as hg
    from hlogen import mlir
    with mlir.context():  # bytecode, as emit writes it
        text = open(f"{directory}/data_parallel.shardy.mlir").read()
        with open(f"{directory}/data_parallel.mlirbc", "wb") as f:
            f.write(hg.load(text).to_bytecode())
    saved, said = {}, {}
    for name, path in files(directory):
        given = np.load(f"{directory}/{name}.inputs.npz")
        exe = hg.compile(hg.load(path), "cpu")
        out = exe(*[given[f"arg{i}"] for i in range(len(given.files))])
        for i, result in enumerate(out if isinstance(out, tuple) else (out,)):
            saved[f"{path}/result{i}"] = result
        said[path] = {"how": exe.how_it_runs(), "inputs": [p.text for p in exe._in]}
    np.savez(f"{directory}/hlogen.npz", **saved)
    with open(f"{directory}/hlogen.json", "w") as f:
        json.dump(said, f)


if __name__ == "__main__":
    if sys.argv[1] == "--hlogen":
        run_hlogen(sys.argv[2])
    else:
        import jax
        jax.config.update("jax_num_cpu_devices", DEVICES)
        make(sys.argv[1])
