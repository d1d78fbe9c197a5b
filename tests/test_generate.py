"""Random programs (hlogen.fuzz): well-typed by the spec (every module
verifies and its results have the types its signature says), accepted by the preflight
of both backends, run on PJRT CPU and on the reference interpreter; deterministic for a
seed, in this process and in another; within their bounds; and mutations of existing
modules, StableHLO's conformance files among them, that keep every type."""
from __future__ import annotations

import pathlib
import subprocess
import sys

import numpy as np
import pytest

import hlogen as hg
from hlogen import backends, mlir, passes, preflight
from hlogen.fuzz import MUTATIONS, generate, mutate
from tests.helpers import run_both

CONFORMANCE = pathlib.Path(__file__).resolve().parents[2] / "shared" / "conformance" / "stablehlo" \
    / "testdata"
if not CONFORMANCE.is_dir():  # a worktree under /work/wt
    CONFORMANCE = pathlib.Path("/work/shared/conformance/stablehlo/testdata")

# (options, seeds): the defaults on many seeds, and the edges of each bound
CONFIGURATIONS = [
    ({}, range(24)),
    ({"max_rank": 0}, range(3)),
    ({"max_rank": 1, "max_dim": 1}, range(3)),
    ({"max_rank": 4, "max_dim": 3, "depth": 3}, range(3)),
    ({"element_types": ("pred",)}, range(2)),
    ({"element_types": ("s4", "u4", "f8e4m3fn", "f8e5m2")}, range(3)),
    ({"element_types": ("c64", "f32")}, range(3)),
    ({"ops": 50, "element_types": ("c128", "f64", "s16", "u16", "u64")}, range(2)),
]


def _arguments(comp, seed):
    """Test scaffolding: values for each parameter (the comparison library makes XLA's)."""
    gen = np.random.default_rng(seed)
    args = []
    for shape in comp.parameter_shapes:
        kind = shape.element_type.kind
        values = gen.integers(0, 2, shape.dimensions) if kind == "pred" else \
            gen.integers(0, 5, shape.dimensions) if kind in ("signed", "unsigned") else \
            gen.uniform(-2, 2, shape.dimensions)
        args.append(np.asarray(values).astype(shape.dtype))
    return args


def _types(comp):
    """(rank, dims) of every value an op of the module makes."""
    return [mlir.shape_of_type(t) for op in mlir.walk(comp.module) for t in op.results.types
            if str(t).startswith("tensor<")]


@pytest.mark.parametrize("options,seeds", CONFIGURATIONS,
                         ids=[",".join(f"{k}={v}" for k, v in o.items()) or "defaults"
                              for o, _ in CONFIGURATIONS])
def test_programs_verify_pass_the_preflight_and_run_on_both_backends(options, seeds):
    for seed in seeds:
        comp = generate(seed, **options)
        where = f"generate({seed}, {options})"
        comp.module.operation.verify()
        preflight.check_module(comp.module, where)
        legal = passes.run(comp, "legalize")  # what every backend runs first
        preflight.check_backend(legal.module, backends.INTERPRET, where)
        preflight.check_backend(legal.module, backends.CPU, where)
        for results in run_both(comp, *_arguments(comp, seed)):
            results = results if isinstance(results, tuple) else (results,)
            assert [(r.shape, r.dtype) for r in results] == \
                [(s.dimensions, s.dtype) for s in comp.result_shapes], where


def test_the_same_seed_gives_the_same_program_here_and_in_another_process():
    texts = [generate(seed).as_text() for seed in range(5)]
    assert texts == [generate(seed).as_text() for seed in range(5)]
    assert len(set(texts)) == 5
    child = subprocess.run(
        [sys.executable, "-c", "from hlogen.fuzz import generate\n"
         "print('\\x00'.join(generate(s).as_text() for s in range(5)), end='')"],
        capture_output=True, text=True, check=True)
    assert child.stdout.split("\x00") == texts


@pytest.mark.parametrize("max_rank,max_dim", [(2, 4), (1, 1)])
def test_values_stay_within_the_bounds(max_rank, max_dim):
    for seed in range(10):
        shapes = _types(generate(seed, max_rank=max_rank, max_dim=max_dim))
        assert max(s.rank for s in shapes) <= max_rank, seed
        assert max(d for s in shapes for d in s.dimensions) <= max_dim, seed
    for seed in range(10):
        nested = [op.name for op in mlir.walk(generate(seed, depth=0).module)
                  if op.name in ("stablehlo.while", "stablehlo.if", "stablehlo.case",
                                 "stablehlo.map", "func.call")]
        assert nested == [], seed


def test_every_kind_of_op_is_made():
    names = {op.name for seed in range(60) for op in mlir.walk(generate(seed).module)}
    wanted = {"stablehlo.while", "stablehlo.case", "stablehlo.if", "stablehlo.map", "func.call",
              "stablehlo.reduce", "stablehlo.reduce_window", "stablehlo.select_and_scatter",
              "stablehlo.sort", "stablehlo.scatter", "stablehlo.gather", "stablehlo.dot_general",
              "stablehlo.convolution", "stablehlo.dynamic_slice",
              "stablehlo.dynamic_update_slice", "stablehlo.slice", "stablehlo.pad",
              "stablehlo.concatenate", "stablehlo.transpose", "stablehlo.reshape",
              "stablehlo.broadcast_in_dim", "stablehlo.convert", "stablehlo.bitcast_convert",
              "stablehlo.compare", "stablehlo.select", "stablehlo.clamp", "stablehlo.iota",
              "stablehlo.reverse", "stablehlo.reduce_precision", "stablehlo.rng_bit_generator",
              "stablehlo.triangular_solve", "stablehlo.cholesky",
              "stablehlo.optimization_barrier"}
    assert wanted <= names, sorted(wanted - names)


def test_bad_options_are_refused():
    with pytest.raises(hg.UnsupportedError, match="f6e2m3fn cannot run on both backends"):
        generate(0, element_types=("f32", "f6e2m3fn"))
    with pytest.raises(hg.UnsupportedError, match="s2: XLA CPU sorts and concatenates"):
        generate(0, element_types=("s2",))
    with pytest.raises(hg.ShapeError):
        generate(0, element_types=("f33",))
    with pytest.raises(hg.HlogenError, match="ops must be an int >= 1"):
        generate(0, ops=0)
    with pytest.raises(hg.HlogenError, match="seed must be an int"):
        generate("0")


def test_a_loop_in_a_map_is_refused_on_pjrt():
    """What the generator found: XLA CPU ends the process (a CHECK) compiling a while loop
    inside a map's computation. The preflight refuses it; the interpreter runs it."""
    b = hg.Builder("loop_in_map")
    x = b.parameter(hg.f32[3], "x")

    def doubled_twice(v):
        return hg.ops.while_loop(lambda i, w: hg.ops.lt(i, 2), lambda i, w: (i + 1, w + w),
                                 (v.builder.constant(np.int32(0)), v))[1]

    comp = b.build(hg.ops.map([x], doubled_twice))
    with pytest.raises(hg.UnsupportedError, match="while loop inside a map's computation"):
        hg.compile(comp)
    np.testing.assert_array_equal(hg.interpret(comp, np.array([1, -2, 3], np.float32)),
                                  [4, -8, 12])


# -- mutate -----------------------------------------------------------------------------------

def _differences(a: str, b: str) -> list:
    return [(x, y) for x, y in zip(a.splitlines(), b.splitlines()) if x != y]


def test_mutations_keep_types_and_change_something():
    comp = generate(2)  # (a program with an op of each kind a mutation changes)
    kinds = set()
    for seed in range(12):
        mutated = mutate(comp, seed)
        assert mutated.signature() == comp.signature()
        assert mutated.as_text() != comp.as_text()
        assert mutated.as_text() == mutate(comp, seed).as_text()  # deterministic
        mutated.module.operation.verify()
        for results in run_both(mutated, *_arguments(mutated, seed)):
            results = results if isinstance(results, tuple) else (results,)
            assert [r.shape for r in results] == [s.dimensions for s in comp.result_shapes]
        kinds.update(_kind(comp.as_text(), mutated.as_text()))
    assert kinds == set(MUTATIONS), kinds


def _kind(before: str, after: str) -> set:
    """Which mutation turned `before` into `after`, read from the text."""
    if after.count("\n") > before.count("\n"):
        return {"insert"}
    changed = _differences(before, after)
    if any("stablehlo.constant" in x for x, _ in changed):
        return {"constant"}
    if any("stablehlo.compare" in x and x.split()[3] != y.split()[3] for x, y in changed):
        return {"direction"}
    return {"swap"}


@pytest.mark.parametrize("name", ["add_float32_20_20_float32_20_20.mlir", "sort_float64_5_7.mlir",
                                  "select_and_scatter_add_float32_1_2_2_float32_2_4_6.mlir"])
def test_mutated_conformance_files_still_run(name):
    from hlogen.conformance.module import load_case  # the runner makes them runnable
    path = CONFORMANCE / name
    if not path.exists():
        pytest.skip(f"{path} is not there")
    comp = hg.load(path)
    for seed in range(3):
        mutated = mutate(comp, seed)
        assert mutated.signature() == comp.signature()
        case = load_case(mutated.as_text(), name, lift_constants=False)
        for results in run_both(case.computation):
            assert len(results) == len(case.computation.result_shapes)


def test_a_module_without_anything_to_mutate_is_refused():
    comp = hg.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                   "  return %x : tensor<2xf32>\n}")
    with pytest.raises(hg.HlogenError, match="no op a mutation applies to"):
        mutate(comp, 0)


# -- the dictionary of idioms ---------------------------------------------------------------

# idiom -> its ops (constants and broadcasts aside), and its value on x by the spec (numpy)
IDIOM_VALUES = {
    "log(exp(x))": (["exponential", "log"], lambda x: x),
    "exp(log(x))": (["log", "exponential"], lambda x: x),
    "-(-x)": (["negate", "negate"], lambda x: x),
    "sqrt(x * x)": (["multiply", "sqrt"], np.abs),
    "x ** 2": (["power"], np.square),
    "(x * c) / c": (["multiply", "divide"], lambda x: x),
    # what the code means: x rounded to an integer (f32's 1.5 * 2**23 added, subtracted)
    "(x + c) - c": (["add", "subtract"], np.rint),
    "exp(a) / exp(b)": (["exponential", "exponential", "divide"], None),
    "x - x": (["subtract"], np.zeros_like),
    "x / x": (["divide"], np.ones_like),
    "max(x, x)": (["maximum"], lambda x: x),
    "select(p, x, x)": (["select"], lambda x: x),
    "transpose(transpose(x))": (["transpose", "transpose"], lambda x: x),
    "reshape(reshape(x))": (["reshape", "reshape"], lambda x: x),
    "convert(convert(x))": (["convert", "convert"], lambda x: x),  # (f32 to f32 and back)
}


def test_each_idiom_is_the_composition_it_names():
    """Each entry of the dictionary of idioms, made on a value x of the program (f32
    values in [0.5, 2]), emits the ops it names and computes, interpreted, what the
    spec says (XLA CPU may rewrite: that is what the idioms are for)."""
    import random  # (the generator's own source of choices)
    from hlogen.builder import Builder
    from hlogen.fuzz.idioms import IDIOMS
    from hlogen.fuzz.program import NoFit, Program, checked_options
    assert [g.name for g in IDIOMS] == list(IDIOM_VALUES)
    options = checked_options(20, 2, 4, ("f32",), 0)
    x = np.linspace(0.5, 2, 12, dtype=np.float32).reshape(3, 4)
    for g in IDIOMS:
        for seed in range(20):  # until its choices fit, on x (not a new constant)
            b = Builder("idiom")
            program = Program(random.Random(seed), options, b, 0, top=False,
                               values=[b.parameter(hg.f32[3, 4], "x")])
            try:
                comp = b.build(*g.make(program))
            except NoFit:
                continue
            if list(comp.main.regions[0].blocks[0].arguments[0].uses) and \
                    comp.result_shapes == [hg.f32[3, 4]]:
                break
        names = [op.name.removeprefix("stablehlo.") for op in mlir.walk(comp.module)
                 if op.name.startswith("stablehlo.") and op.name not in
                 ("stablehlo.constant", "stablehlo.broadcast_in_dim")]
        ops, value = IDIOM_VALUES[g.name]
        assert names == ops, (g.name, comp.as_text())
        got = hg.interpret(comp, x)
        if value is not None:
            np.testing.assert_allclose(got.reshape(x.shape), value(x), rtol=1e-6,
                                       err_msg=g.name)
        hg.compile(comp)(x)  # (and runs on XLA CPU)
