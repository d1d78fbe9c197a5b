"""A shard_map (manual) module run per partition: its body on the mesh's devices.

jax lowers `shard_map` to `sdy.manual_computation`: a body that each device runs on its
own shard, its collectives naming devices. hlogen runs such a module on a backend by
expanding the manual computation, not through XLA's partitioner, so that the
interpreter stays an oracle independent of XLA's SPMD pipeline:
- the body becomes the per-process program (`per_partition`), run on 1 replica x N
  partitions, N the mesh's devices (hlogen.runtime.grid: the interpreter's parallel
  runner, or PJRT with every value {manual});
- each global argument is cut by the manual computation's in_shardings (device d's
  slice from its position on the mesh), and each result put together by its
  out_shardings; devices that hold the same slice (an axis the sharding does not name)
  must agree, as the spec of a replicated value says.
What it takes: a main that is one manual computation over every mesh axis, on main's
arguments, whose results main returns. Anything else is an UnsupportedError naming it.
"""
from __future__ import annotations

import dataclasses
import re

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen.computation import Computation
from hlogen.errors import ExecutionError, UnsupportedError

MANUAL_COMPUTATION = "sdy.manual_computation"
_SHARDING = re.compile(r"<@([\w.$-]+), \[((?:\{[^}]*\}(?:, )?)*)\](?:, replicated=\{[^}]*\})?>")
_AXIS = re.compile(r'"([^"]+)"(:\(\d+\)\d+)?')


@dataclasses.dataclass
class Mesh:
    axes: list          # [(name, size)], major to minor
    device_ids: list    # device of each mesh position, row-major

    def position(self, device: int) -> dict:
        """{axis: index} of `device` on the mesh."""
        flat = self.device_ids.index(device)
        sizes = [n for _, n in self.axes]
        return dict(zip([a for a, _ in self.axes], np.unravel_index(flat, sizes)))


@dataclasses.dataclass
class ManualModule:
    """A shard_map module split into what runs per device and how values are cut."""
    program: Computation   # the body, as each device's main
    mesh: Mesh
    arguments: list        # per body argument: (main's argument index, [axes per dim])
    results: list          # per main result: (body result index, [axes per dim])


def is_manual(module: ir.Module) -> bool:
    return any(op.name == MANUAL_COMPUTATION for op in mlir.walk(module))


def split(computation: Computation) -> ManualModule:
    """The per-device program and shardings of a shard_map module (see the docstring)."""
    where = computation.source or computation.name
    with mlir.context():
        module = ir.Module.parse(computation.module.operation.get_asm(enable_debug_info=True))
        main = mlir.functions(module)["main"]
        block = main.regions[0].blocks[0]
        mlir.inline_calls(block, mlir.functions(module))  # a jax.export's main calls its body
        ops = [op.operation for op in block.operations]
        manual = [op for op in ops if op.name == MANUAL_COMPUTATION]
        if len(manual) != 1 or len(ops) != 2:
            raise UnsupportedError(
                f"{where}: hlogen runs a shard_map module per partition when its main is one "
                f"{MANUAL_COMPUTATION} and a return; this main has "
                f"{', '.join(sorted({o.name for o in ops[:-1]}))}")
        op = manual[0]
        mesh = _mesh(module, op, where)
        manual_axes = set(_AXIS.findall(str(op.attributes["manual_axes"]))) if \
            "manual_axes" in op.attributes else set()
        missing = [a for a, _ in mesh.axes if (a, "") not in manual_axes]
        if missing:
            raise UnsupportedError(f"{where}: {MANUAL_COMPUTATION} is manual over "
                                   f"{sorted(a for a, _ in manual_axes)} but not over mesh "
                                   f"axes {missing}: hlogen expands fully manual computations")
        arg_index = {a: i for i, a in enumerate(block.arguments)}
        in_specs = _shardings(op, "in_shardings", where)
        arguments = []
        for k, value in enumerate(op.operands):
            if value not in arg_index:
                raise UnsupportedError(f"{where}: operand {k} of {MANUAL_COMPUTATION} is not an "
                                       f"argument of main")
            arguments.append((arg_index[value], in_specs[k]))
        out_specs = _shardings(op, "out_shardings", where)
        returned = list(ops[-1].operands)
        results = []
        for j, value in enumerate(returned):
            if mlir.defining_op(value) != op:
                raise UnsupportedError(f"{where}: result {j} of main is not a result of "
                                       f"{MANUAL_COMPUTATION}")
            number = ir.OpResult(value).result_number
            results.append((number, out_specs[number]))
        program = _body_as_main(module, main, op)
    return ManualModule(Computation(program, where), mesh, arguments, results)


def _mesh(module: ir.Module, op, where: str) -> Mesh:
    specs = re.findall(r"<@([\w.$-]+),", str(op.attributes["in_shardings"]) +
                       str(op.attributes["out_shardings"]))
    name = specs[0] if specs else None
    for candidate in module.body.operations:
        candidate = candidate.operation
        if candidate.name == "sdy.mesh" and (name is None or mlir.symbol_name(candidate) == name):
            text = str(candidate.attributes["mesh"])
            axes = [(a, int(n)) for a, n in re.findall(r'"([^"]+)"=(\d+)',
                                                       text.split("device_ids")[0])]
            count = int(np.prod([n for _, n in axes], dtype=np.int64))
            ids = re.search(r"device_ids=\[([\d, ]*)\]", text)
            return Mesh(axes, [int(i) for i in ids.group(1).split(",")] if ids
                        else list(range(count)))
    raise UnsupportedError(f"{where}: {MANUAL_COMPUTATION} names mesh @{name}, which the module "
                           f"does not declare")


def _shardings(op, name: str, where: str) -> list:
    """Per value, the mesh axes of each dimension (major to minor)."""
    text = str(op.attributes[name])
    found = []
    for _, dims in _SHARDING.findall(text):
        per_dim = []
        for dim in re.findall(r"\{([^}]*)\}", dims):
            axes = _AXIS.findall(dim)
            if any(sub for _, sub in axes):
                raise UnsupportedError(f"{where}: {name} {text} shards by a sub-axis: hlogen "
                                       f"cuts values by whole mesh axes")
            per_dim.append([a for a, _ in axes])
        found.append(per_dim)
    return found


def _body_as_main(module: ir.Module, main, op) -> ir.Module:
    """`module` whose main is the manual computation's body (its arguments the shards)."""
    body = op.regions[0].blocks[0]
    terminator = [o.operation for o in body.operations][-1]
    inputs = [a.type for a in body.arguments]
    outputs = [v.type for v in terminator.operands]
    ftype = ir.FunctionType.get(inputs, outputs)
    with ir.InsertionPoint(main), main.location:
        func = ir.Operation.create("func.func", regions=1, attributes={
            "sym_name": ir.StringAttr.get("main"), "function_type": ir.TypeAttr.get(ftype)})
    func.move_before(main)
    block = func.regions[0].blocks.append(*inputs, arg_locs=[op.location] * len(inputs))
    for old, new in zip(body.arguments, block.arguments):
        old.replace_all_uses_with(new)
    for inner in [o.operation for o in body.operations][:-1]:
        block.append(inner)
    with ir.InsertionPoint(block), terminator.location:
        ir.Operation.create("func.return", operands=list(terminator.operands))
    main.erase()
    for top in [o.operation for o in module.body.operations]:
        if top.name.startswith("sdy."):
            top.erase()
    mlir.drop_unused_functions(module, func)
    return module


def _slices(shape: tuple, spec: list, mesh: Mesh, device: int) -> tuple:
    """Device `device`'s slice of a global value of `shape` sharded as `spec`."""
    where = mesh.position(device)
    sizes = dict(mesh.axes)
    index = []
    for d, n in enumerate(shape):
        axes = spec[d] if d < len(spec) else []
        count, at = 1, 0
        for a in axes:  # major to minor
            at = at * sizes[a] + int(where[a])
            count *= sizes[a]
        if n % count:
            raise UnsupportedError(f"dimension {d} of size {n} is sharded {count} ways by "
                                   f"{axes}: hlogen cuts even shards")
        step = n // count
        index.append(slice(at * step, (at + 1) * step))
    return tuple(index)


def execute(found: ManualModule, exe, arguments: list, name: str) -> list:
    """`found`'s global results on global `arguments`, its program run by `exe` (a grid
    executable of it on 1 x the mesh's devices)."""
    mesh = found.mesh
    devices = len(mesh.device_ids)
    per_device = [[np.ascontiguousarray(np.asarray(arguments[i])[
        _slices(np.shape(arguments[i]), spec, mesh, d)]) for i, spec in found.arguments]
        for d in range(devices)]
    outputs = exe.run_replicated(per_device)
    outputs = [o if isinstance(o, tuple) else (o,) for o in outputs]
    results = []
    for j, (number, spec) in enumerate(found.results):
        local = [np.asarray(outputs[d][number]) for d in range(devices)]
        shape = list(local[0].shape)
        for d, axes in enumerate(spec):
            shape[d] *= int(np.prod([dict(mesh.axes)[a] for a in axes], dtype=np.int64))
        result = np.empty(shape, local[0].dtype)
        seen: dict = {}
        for d in range(devices):
            index = _slices(tuple(shape), spec, mesh, d)
            key = tuple((s.start, s.stop) for s in index)
            if key in seen:
                if local[d].tobytes() != local[seen[key]].tobytes():
                    raise ExecutionError(
                        f"{name}: result {j} is replicated over the mesh axes its "
                        f"out_sharding does not name, but devices {seen[key]} and {d} hold "
                        f"different values for it on {exe.backend}")
                continue
            seen[key] = d
            result[index] = local[d]
        results.append(result)
    return results


__all__ = ["ManualModule", "Mesh", "execute", "is_manual", "split"]
