"""Sharded (SPMD) modules: what a module says of its partitions, and its global program.

A module is sharded when it says so, in whichever form it came (jax's Shardy text, GSPMD
text, a serialized jax.export, bytecode, an HLO dump read back): `mhlo.num_partitions`
above 1, an `sdy.mesh` (Shardy: jax's default lowering), `mhlo.sharding` attributes that
tile over devices (GSPMD), or an export's `nr_devices` above 1 (whose module carries the
others). `of_module` reads that once; hlogen.runtime compiles such a module for its
partitions with XLA's SPMD partitioner, one device each (hlogen.runtime.pjrt).

The sharding annotations do not change what the program computes: `global_program` drops
them (the sdy mesh and shardings, `sdy.sharding_constraint`, GSPMD's `@Sharding` calls) and
gives the unpartitioned program, which runs on one device (`--one-device`) and on the
reference interpreter. A `shard_map` module (`sdy.manual_computation`, GSPMD's
`@SPMDFullToShardShape`) holds per-partition code and collectives between partitions:
it has no global program to drop annotations from.
"""
from __future__ import annotations

import dataclasses
import math
import re

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen.computation import Computation
from hlogen.errors import InputError, UnsupportedError

# argument, result and op attributes that say how a value is sharded
_VALUE_ATTRIBUTES = ("sdy.sharding", "mhlo.sharding", "sdy.sharding_origins")
# ops that only say how their operand is sharded: each is its operand
_MARKERS = ("sdy.sharding_constraint", "sdy.reshard")
_MARKER_TARGETS = ("Sharding",)  # GSPMD's with_sharding_constraint
# what makes a module's code per partition (jax's shard_map)
MANUAL_OPS = ("sdy.manual_computation",)
MANUAL_TARGETS = ("SPMDFullToShardShape", "SPMDShardToFullShape")
# GSPMD's custom calls, which XLA's partitioner reads (and ends the process on elsewhere)
GSPMD_MARKERS = frozenset(_MARKER_TARGETS + MANUAL_TARGETS)

_MESH_AXIS = re.compile(r'"[^"]*"\s*=\s*(\d+)')
_TILED = re.compile(r"devices=\[([\d,]+)\]")


@dataclasses.dataclass(frozen=True)
class Partitioning:
    """What a sharded module says: its partitions (one device each), its replicas, the form
    of its annotations ("Shardy", "GSPMD"), and whether it holds manual (per-partition) code."""
    num_partitions: int
    num_replicas: int
    form: str
    manual: bool

    def words(self, devices: str = "cpu") -> str:
        """The one line a run says: "1 replica x 8 partitions on 8 cpu devices"."""
        r, p = self.num_replicas, self.num_partitions
        return (f"{r} replica{'s' * (r != 1)} x {p} partition{'s' * (p != 1)} on "
                f"{r * p} {devices} device{'s' * (r * p != 1)}")


def mesh_devices(text: str) -> int:
    """The devices of an sdy mesh as printed (`<["data"=2, "model"=4]>`): 8."""
    return math.prod(int(n) for n in _MESH_AXIS.findall(text))


def sharding_devices(text: str) -> int | None:
    """The devices a GSPMD sharding string tiles over (`{devices=[8,1]<=[8]}`: 8; with
    last_tile_dim_replicate the replicas count too), or None (`{replicated}`, `{manual}`,
    `{maximal device=0}`: no count)."""
    found = _TILED.search(text)
    return math.prod(int(n) for n in found.group(1).split(",") if n) if found else None


def _int(attributes, name: str) -> int | None:
    if name in attributes:
        try:
            return ir.IntegerAttr(attributes[name]).value
        except ValueError:
            return None
    return None


# what the last modules read say (kept alive with them, so that `is` identifies them):
# every compile asks, before its cache of executables is looked at
@mlir.per_module(kept=4)
def of_module(module: ir.Module) -> Partitioning | None:
    """What `module` says of its partitions, or None where it runs on one device (no
    partition count above 1, no mesh, no sharding over devices)."""
    return _of_module(module)


def _of_module(module: ir.Module) -> Partitioning | None:
    with mlir.context():
        attributes = module.operation.attributes
        declared = _int(attributes, "mhlo.num_partitions")
        replicas = _int(attributes, "mhlo.num_replicas") or 1
        meshes, tiles, manual, form = [], [], False, None
        for op in module.body.operations:
            op = op.operation
            if op.name == "sdy.mesh":
                meshes.append(mesh_devices(str(op.attributes["mesh"])))
                form = "Shardy"
        for op in mlir.walk(module):
            if op.name in MANUAL_OPS or (op.name == "stablehlo.custom_call" and
                                         mlir.call_target(op) in MANUAL_TARGETS):
                manual = True
            if "mhlo.sharding" in op.attributes:
                tiles.append(sharding_devices(ir.StringAttr(op.attributes["mhlo.sharding"]).value))
            if op.name == "func.func":
                for key in ("arg_attrs", "res_attrs"):
                    if key in op.attributes:
                        for entry in ir.ArrayAttr(op.attributes[key]):
                            entry = ir.DictAttr(entry)
                            if "mhlo.sharding" in entry:
                                tiles.append(sharding_devices(
                                    ir.StringAttr(entry["mhlo.sharding"]).value))
    tiles = [n for n in tiles if n]
    if tiles and form is None:
        form = "GSPMD"
    count = max([declared or 1, *meshes, *tiles])
    if count <= 1 and not manual:
        return None
    # a mesh or tile counts replicas x partitions; the partitions are what is left
    partitions = declared if declared and declared > 1 else max(1, count // replicas)
    return Partitioning(partitions, replicas, form or "GSPMD", manual)


def partitions_to_compile(module: ir.Module, asked: int | None, where: str) -> Partitioning | None:
    """How `module` is compiled: as it says, or with `asked` partitions (`--partitions N`,
    `num_partitions=N`), which must agree with what it says; None for one device."""
    found = of_module(module)
    if asked is None or (found is not None and asked == found.num_partitions):
        return found
    if found is None:
        if asked == 1:
            return None
        raise InputError(f"{where}: {asked} partitions asked, but the module has no sharding "
                         f"(no mhlo.num_partitions, sdy.mesh or mhlo.sharding): there is "
                         f"nothing to partition")
    raise InputError(f"{where}: {asked} partition(s) asked; the module is partitioned "
                     f"{found.num_partitions} ways ({found.form} mesh or shardings; XLA "
                     f"compiles it for those only){_ONE_DEVICE if asked == 1 else ''}")


_ONE_DEVICE = ("; its global program on one device is --one-device (hg.global_program in "
               "Python)")


def global_program(computation: Computation, for_what: str = "one device") -> Computation:
    """`computation` with its sharding annotations dropped: the program the partitions
    compute together, for one device (`computation` itself where it has none).
    UnsupportedError for a shard_map module, whose code is per partition."""
    found = of_module(computation.module)
    if found is None:
        return computation
    where = computation.source or computation.name
    if found.manual:
        raise UnsupportedError(
            f"{where}: a shard_map (manual) module: its body is the code of each of its "
            f"{found.num_partitions} partitions, with collectives between them, and there is "
            f"no global program to run on {for_what} (dropping the annotations drops the "
            f"partitions); run it partitioned on XLA (hlogen run, without --one-device)")
    copy = computation.clone()
    module = copy.module
    with mlir.context():
        for op in list(mlir.walk(module)):
            if op.name in _MARKERS or (op.name == "stablehlo.custom_call" and
                                        mlir.call_target(op) in _MARKER_TARGETS):
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()
                continue
            for name in _VALUE_ATTRIBUTES:
                if name in op.attributes:
                    del op.attributes[name]
            if op.name == "func.func":
                _drop_from_signature(op)
        for op in list(module.body.operations):
            if op.operation.name == "sdy.mesh":
                op.operation.erase()
        attributes = module.operation.attributes
        attributes["mhlo.num_partitions"] = mlir.int_attr(1, 32)
    left = sorted({op.name for op in mlir.walk(module) if op.name.startswith("sdy.")})
    if left:
        raise UnsupportedError(f"{where}: Shardy's {', '.join(left)}: hlogen drops sharding "
                               f"annotations and constraints only, and runs this module "
                               f"partitioned on XLA")
    return Computation(module, computation.source)


def _drop_from_signature(func_op) -> None:
    for key in ("arg_attrs", "res_attrs"):
        if key not in func_op.attributes:
            continue
        kept = []
        for entry in ir.ArrayAttr(func_op.attributes[key]):
            entry = ir.DictAttr(entry)
            kept.append(ir.DictAttr.get({entry[i].name: entry[i].attr for i in range(len(entry))
                                         if entry[i].name not in _VALUE_ATTRIBUTES}))
        func_op.attributes[key] = ir.ArrayAttr.get(kept)


def unsharded(module: ir.Module) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """Per parameter and per result of `main`: whether the module gives it no sharding
    (XLA then chooses one, as for jax's unspecified shardings)."""
    with mlir.context():
        main = mlir.functions(module)["main"]
        ftype = mlir.function_type(main)
        found = []
        for key, count in (("arg_attrs", len(ftype.inputs)), ("res_attrs", len(ftype.results))):
            entries = list(ir.ArrayAttr(main.attributes[key])) if key in main.attributes else []
            found.append(tuple(
                i >= len(entries) or not any(name in ir.DictAttr(entries[i])
                                             for name in ("sdy.sharding", "mhlo.sharding"))
                for i in range(count)))
    return found[0], found[1]


def carry_annotations(source, target, arguments: dict, results: dict) -> None:
    """Copies the sharding attributes of function `source`'s arguments and results to
    `target`'s: `arguments` and `results` map source positions to target positions (a
    wrapper around a sharded main, such as hlogen.exports', is partitioned as main is)."""
    for key, moves in (("arg_attrs", arguments), ("res_attrs", results)):
        if key not in source.attributes:
            continue
        given = [ir.DictAttr(e) for e in ir.ArrayAttr(source.attributes[key])]
        count = len(ir.FunctionType(ir.TypeAttr(target.attributes["function_type"]).value)
                    .inputs if key == "arg_attrs" else
                    ir.FunctionType(ir.TypeAttr(target.attributes["function_type"]).value)
                    .results)
        have = ([ir.DictAttr(e) for e in ir.ArrayAttr(target.attributes[key])]
                if key in target.attributes else [ir.DictAttr.get({})] * count)
        entries = [{have[i][j].name: have[i][j].attr for j in range(len(have[i]))}
                   for i in range(count)]
        found = False
        for s, t in moves.items():
            for name in ("sdy.sharding", "mhlo.sharding"):
                if s < len(given) and name in given[s]:
                    entries[t][name] = given[s][name]
                    found = True
        if found:
            target.attributes[key] = ir.ArrayAttr.get([ir.DictAttr.get(e) for e in entries])


def _annotated(module: ir.Module) -> bool:
    """Whether `module` carries any sharding annotation (replicated or manual included)."""
    parameters, results = unsharded(module)
    return not all(parameters + results) or any(
        name in op.attributes for op in mlir.walk(module) for name in ("mhlo.sharding", "sdy.sharding"))


def as_asked(computation: Computation, partitions: int | None = None,
             one_device: bool = False) -> Computation:
    """`computation` as the command line asks (`--partitions N`, `--one-device`): its
    global program; or with N partitions, checked against what it says, written in the
    module where it says no count (shardings that are all replicated or manual)."""
    where = computation.source or computation.name
    if one_device:
        if partitions not in (None, 1):
            raise InputError(f"--partitions {partitions} and --one-device: the one-device run "
                             f"has no partitions; give one of them")
        return global_program(computation)
    if partitions is None:
        return computation
    try:
        found = partitions_to_compile(computation.module, partitions, where)
    except InputError:
        if of_module(computation.module) is not None or not _annotated(computation.module):
            raise
        found = None  # shardings without a count: the count supplied
    if found is not None or partitions == 1:
        return computation
    copy = computation.clone()
    with mlir.context():
        copy.module.operation.attributes["mhlo.num_partitions"] = mlir.int_attr(partitions, 32)
    return Computation(copy.module, computation.source)
