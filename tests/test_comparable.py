"""The rewrites that make two compilers comparable (hlogen.rewrites.COMPARABLE,
hlogen.decompositions.LINEAR_ALGEBRA): each on small modules, run as they are and
rewritten on XLA CPU and the reference interpreter, against numpy or the spec's values
(XLA CPU's own answers where StableHLO leaves the result open), and rewritten twice to
the same module. They are for compilers that choose otherwise (IREE, issue 36): here
they must change no result."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import hlogen as hg
from hlogen import decompositions, mlir, ops, rewrites
from tests.helpers import BACKENDS, run


def _rewritten(comp, rules=rewrites.COMPARABLE):
    """`comp` with `rules` applied (how many were made, and the module as a Computation)."""
    copy = hg.load(comp.as_text())
    made = rewrites.rewrite_module(copy.module, rules)
    return made, hg.load(str(copy.module))


def _each_way(comp, *args, rules=rewrites.COMPARABLE):
    """The results of `comp` as it is and rewritten, on each backend: {(backend, how): ...}."""
    made, rewritten = _rewritten(comp, rules)
    assert made > 0
    again, _ = _rewritten(rewritten, rules)
    assert again == 0  # what a rewrite emitted is not rewritten again
    return {(backend, how): run(c, backend, *args) for backend in BACKENDS
            for how, c in (("plain", comp), ("rewritten", rewritten))}


def _ops(comp) -> list:
    return list(mlir.walk(comp.module))


# -- sort with is_stable = true --------------------------------------------------------------

def _order(n, is_stable=True, descending=False):
    b = hg.Builder("order")
    keys = b.parameter(hg.s32[n], "keys")
    before = ops.gt if descending else ops.lt
    _, order = ops.sort([keys, ops.iota(b, hg.s32[n], 0)], lambda p, q, i, j: before(p, q),
                        0, is_stable=is_stable)
    return b.build(order)


def test_a_stable_sort_breaks_ties_by_position():
    keys = np.array([1, 0, 1, 0, 1, 0, 1, 0], np.int32)
    comp = _order(8)
    found = _each_way(comp, keys)
    for got in found.values():
        np.testing.assert_array_equal(got, [1, 3, 5, 7, 0, 2, 4, 6])
    _, rewritten = _rewritten(comp)
    sorts = [op for op in _ops(rewritten) if op.name == "stablehlo.sort"]
    assert len(sorts) == 1 and len(sorts[0].operands) == 3  # keys, the iota, the index
    assert not ir_bool(sorts[0], "is_stable")


def ir_bool(op, name):
    from jaxlib.mlir import ir
    return ir.BoolAttr(op.attributes[name]).value


def test_the_rewritten_sort_is_stable_where_the_compilers_sort_is_not():
    # XLA CPU and the interpreter sort 64 elements unstably when is_stable is false (as
    # IREE does even when it is true): the rewritten module asks for no stability and
    # is stable all the same
    keys = (np.arange(64) % 2 == 0).astype(np.int32)
    stable = np.argsort(keys, kind="stable")
    for backend in BACKENDS:
        assert not np.array_equal(run(_order(64, is_stable=False), backend, keys), stable)
    _, rewritten = _rewritten(_order(64))
    for backend in BACKENDS:
        np.testing.assert_array_equal(run(rewritten, backend, keys), stable)


def test_a_stable_sort_of_several_operands_along_an_inner_dimension():
    b = hg.Builder("rows")
    x = b.parameter(hg.f32[6, 3], "x")
    tags = ops.iota(b, hg.s32[6, 3], 1)
    values, positions = ops.sort([x, tags], lambda p, q, i, j: ops.gt(p, q), 1, is_stable=True)
    comp = b.build(values, positions)
    x = np.random.default_rng(0).integers(0, 2, (6, 3)).astype(np.float32)
    want = np.argsort(-x, axis=1, kind="stable")
    for got_values, got_positions in _each_way(comp, x).values():
        np.testing.assert_array_equal(got_positions, want)
        np.testing.assert_array_equal(got_values, np.take_along_axis(x, want, 1))


_TOP_K = """func.func @main(%x: tensor<2x8xi32>) -> (tensor<2x3xi32>, tensor<2x3xi32>) {
  %v, %i = chlo.top_k(%x, k = 3) : tensor<2x8xi32> -> (tensor<2x3xi32>, tensor<2x3xi32>)
  return %v, %i : tensor<2x3xi32>, tensor<2x3xi32>
}"""


def test_top_k_returns_the_lowest_index_first_among_equal_values():
    x = np.array([[1, 5, 1, 5, 1, 5, 1, 5], [7, 7, 7, 7, 2, 9, 9, 2]], np.int32)
    found = _each_way(hg.load(_TOP_K), x)
    for values, indices in found.values():
        np.testing.assert_array_equal(values, [[5, 5, 5], [9, 9, 7]])
        np.testing.assert_array_equal(indices, [[1, 3, 5], [5, 6, 0]])
    _, rewritten = _rewritten(hg.load(_TOP_K))
    assert "chlo.top_k" not in mlir.op_names(rewritten.module)


# -- float -> integer convert ----------------------------------------------------------------

_ODD = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7, 200, -200, 70000, -0.5])
# XLA CPU's answers (jaxlib 0.10.2) for _ODD from f32, measured
_XLA = {
    "s2": [0, 1, -2, 1, -2, 1, -2, 1, -2, 1, 0],
    "s4": [0, 7, -8, 7, -8, 3, -3, 7, -8, 7, 0],
    "s8": [0, 127, -128, 127, -128, 3, -3, 127, -128, 127, 0],
    "s16": [0, 32767, -32768, 32767, -32768, 3, -3, 200, -200, 32767, 0],
    "s32": [0, 2**31 - 1, -2**31, 2**31 - 1, -2**31, 3, -3, 200, -200, 70000, 0],
    "s64": [0, 2**63 - 1, -2**63, 10**10, -10**10, 3, -3, 200, -200, 70000, 0],
    "u2": [0, 3, 0, 3, 0, 3, 0, 3, 0, 3, 0],
    "u4": [0, 15, 0, 15, 0, 3, 0, 15, 0, 15, 0],
    "u8": [0, 255, 0, 255, 0, 3, 0, 200, 0, 255, 0],
    "u16": [0, 65535, 0, 65535, 0, 3, 0, 200, 0, 65535, 0],
    "u32": [0, 2**32 - 1, 0, 2**32 - 1, 0, 3, 0, 200, 0, 70000, 0],
    "u64": [0, 2**64 - 1, 0, 10**10, 0, 3, 0, 200, 0, 70000, 0],
}


def _saturated(x: np.ndarray, target) -> list:
    """XLA's definition from numpy: NaN -> 0, truncated toward zero, saturated."""
    info = ml_dtypes.iinfo(target)
    wide = np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=np.inf, neginf=-np.inf)
    return [int(info.max) if v >= info.max else int(info.min) if v <= info.min else int(v)
            for v in np.trunc(wide)]


def _convert(source: str, target: str, n: int):
    b = hg.Builder("convert")
    return b.build(ops.convert_element_type(b.parameter(hg.Shape(hg.element_type(source), (n,)),
                                                        "x"), target))


@pytest.mark.parametrize("target", sorted(_XLA))
def test_float_to_integer_is_xlas_on_every_integer_type(target):
    x = _ODD.astype(np.float32)
    assert _saturated(x, hg.element_type(target).dtype) == _XLA[target]
    for got in _each_way(_convert("f32", target, len(x)), x).values():
        assert np.asarray(got).astype(object).tolist() == _XLA[target]


@pytest.mark.parametrize("source", ["f16", "bf16", "f64", "f8e4m3fn", "f8e5m2"])
@pytest.mark.parametrize("target", ["s8", "u8", "s32", "u64"])
def test_float_to_integer_from_other_floats(source, target):
    dtype = hg.element_type(source).dtype
    with np.errstate(over="ignore", invalid="ignore"):
        x = _ODD.astype(dtype)
    want = _saturated(x, hg.element_type(target).dtype)
    for got in _each_way(_convert(source, target, len(x)), x).values():
        assert np.asarray(got).astype(object).tolist() == want


def test_only_values_in_range_reach_the_convert():
    _, rewritten = _rewritten(_convert("f32", "s8", 4))
    (convert,) = [op for op in _ops(rewritten) if op.name == "stablehlo.convert"]
    assert mlir.defining_op(convert.operands[0], "stablehlo.select") is not None


# -- scatter out of bounds -------------------------------------------------------------------

def _scatter_1d(update):
    b = hg.Builder("scatter")
    operand = b.parameter(hg.f32[8], "operand")
    indices = b.parameter(hg.s32[4, 1], "indices")
    updates = b.parameter(hg.f32[4], "updates")
    return b.build(ops.scatter(operand, indices, updates, update, update_window_dims=(),
                               inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                               index_vector_dim=1, unique_indices=True))


@pytest.mark.parametrize("name,update", [
    ("add", lambda old, new: ops.add(old, new)),
    ("replace", lambda old, new: new),  # no identity to mask a skipped update with
    ("2 old - new", lambda old, new: ops.sub(ops.add(old, old), new))])
def test_scatter_skips_the_updates_out_of_bounds(name, update):
    operand = np.arange(8, dtype=np.float32)
    indices = np.array([[-1], [8], [100000], [2]], np.int32)
    updates = np.array([10, 20, 30, 40], np.float32)
    want = operand.copy()
    want[2] = {"add": 2 + 40, "replace": 40, "2 old - new": 4 - 40}[name]  # the spec: only 2
    comp = _scatter_1d(update)
    for got in _each_way(comp, operand, indices, updates).values():
        np.testing.assert_array_equal(got, want)
    _, rewritten = _rewritten(comp)
    (scatter,) = [op for op in _ops(rewritten) if op.name == "stablehlo.scatter"]
    # the compiler sees an operand one window larger, and indices that are not unique
    assert mlir.shape_of_type(scatter.operands[0].type).dimensions == (9,)
    assert not ir_bool(scatter, "unique_indices")


def _rows():
    b = hg.Builder("rows")
    operand = b.parameter(hg.f32[8, 64], "operand")
    indices = b.parameter(hg.s32[2, 1], "indices")
    updates = b.parameter(hg.f32[2, 64], "updates")
    return b.build(ops.scatter(operand, indices, updates, ops.add, update_window_dims=(1,),
                               inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,),
                               index_vector_dim=1))


# rows -1, 100000, 8 (each skipped), then row 2
_ROWS_ARGS = (np.zeros((8, 64), np.float32),
              [np.array([[k], [2]], np.int32) for k in (-1, 100000, 8)],
              np.ones((2, 64), np.float32))


_ROWS_WANT = np.zeros((8, 64), np.float32)
_ROWS_WANT[2] = 1


def test_scatter_skips_rows_out_of_bounds():
    operand, indices, updates = _ROWS_ARGS
    for at in indices:
        for got in _each_way(_rows(), operand, at, updates).values():
            np.testing.assert_array_equal(got, _ROWS_WANT)


def test_scatter_skips_a_window_that_does_not_fit_whole():
    b = hg.Builder("windows")
    operand = b.parameter(hg.s32[4, 4], "operand")
    indices = b.parameter(hg.u32[3, 2], "indices")
    updates = b.parameter(hg.s32[3, 2, 2], "updates")
    comp = b.build(ops.scatter(operand, indices, updates, lambda old, new: ops.mul(old, new),
                               update_window_dims=(1, 2), inserted_window_dims=(),
                               scatter_dims_to_operand_dims=(0, 1), index_vector_dim=1))
    x = np.arange(16, dtype=np.int32).reshape(4, 4)
    starts = np.array([[3, 0], [1, 2], [0, 2**31]], np.uint32)  # only [1, 2] fits
    u = np.full((3, 2, 2), -1, np.int32)
    want = x.copy()
    want[1:3, 2:4] *= -1
    for got in _each_way(comp, x, starts, u).values():
        np.testing.assert_array_equal(got, want)


# -- linear algebra, for compilers that refuse it --------------------------------------------

def _solve():
    """cholesky then triangular_solve (f64), its arguments and numpy's answer."""
    b = hg.Builder("solve")
    a = b.parameter(hg.f64[3, 3], "a")
    rhs = b.parameter(hg.f64[3, 2], "rhs")
    factor = ops.cholesky(a, lower=True)
    comp = b.build(ops.triangular_solve(factor, rhs, True, True, False, "NO_TRANSPOSE"))
    m = np.random.default_rng(1).normal(size=(3, 3))
    spd, rhs_value = m @ m.T + 3 * np.eye(3), np.arange(6.0).reshape(3, 2)
    return comp, spd, rhs_value, np.linalg.solve(np.linalg.cholesky(spd), rhs_value)


def test_cholesky_and_triangular_solve_written_with_other_ops():
    comp, spd, rhs_value, want = _solve()
    made, rewritten = _rewritten(comp, decompositions.LINEAR_ALGEBRA)
    assert made == 2
    assert not {"stablehlo.cholesky", "stablehlo.triangular_solve"} & \
        set(mlir.op_names(rewritten.module))
    for backend in BACKENDS:
        np.testing.assert_allclose(run(rewritten, backend, spd, rhs_value), want, rtol=1e-10)
    np.testing.assert_allclose(run(comp, "cpu", spd, rhs_value), want, rtol=1e-10)


def test_the_lists_are_separate_from_what_every_backend_gets():
    # XLA and the interpreter compute these results already: only a compiler that needs
    # them (IREE) lists them, after XLA_SEMANTICS
    for backend in ("cpu", "interpret"):
        listed = set(map(id, hg.backends.get(backend).rewrites))
        assert not listed & set(map(id, rewrites.COMPARABLE))


# -- on IREE, where it is installed: what the rewrites are for --------------------------------

def _as_written():
    """IREE without COMPARABLE: what it computes as the module is written (a backend of its
    own name, so that its executables are its own)."""
    import dataclasses
    found = hg.backends.get("iree")
    return dataclasses.replace(found, name="iree[as written]", rewrites=tuple(
        r for r in found.rewrites if all(r is not c for c in rewrites.COMPARABLE)))


@pytest.fixture
def iree():
    pytest.importorskip("iree.runtime")
    pytest.importorskip("iree.compiler")
    assert "iree" in hg.backends.names()
    return "iree"


def test_iree_sorts_stably_rewritten(iree):
    keys = np.array([1, 0, 1, 0, 1, 0, 1, 0], np.int32)
    np.testing.assert_array_equal(run(_order(8), iree, keys), [1, 3, 5, 7, 0, 2, 4, 6])
    x = np.array([[1, 5, 1, 5, 1, 5, 1, 5], [7, 7, 7, 7, 2, 9, 9, 2]], np.int32)
    values, indices = run(hg.load(_TOP_K), iree, x)
    np.testing.assert_array_equal(indices, [[1, 3, 5], [5, 6, 0]])
    # IREE 3.13's own sort: not stable
    assert not np.array_equal(run(_order(8), _as_written(), keys), [1, 3, 5, 7, 0, 2, 4, 6])


def test_iree_converts_as_xla_rewritten(iree):
    x = _ODD.astype(np.float32)
    for target in ("s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"):
        got = run(_convert("f32", target, len(x)), iree, x)
        assert np.asarray(got).astype(object).tolist() == _XLA[target], target
    # IREE's own: INT_MIN for NaN
    got = run(_convert("f32", "s32", len(x)), _as_written(), x)
    assert np.asarray(got).astype(object).tolist() != _XLA["s32"]


def test_iree_skips_the_scatter_updates_out_of_bounds_rewritten(iree):
    operand, indices, updates = _ROWS_ARGS
    for at in indices:
        np.testing.assert_array_equal(run(_rows(), iree, operand, at, updates), _ROWS_WANT)
    # as written (XLA_SEMANTICS sends the rows to index 8, just past the end), IREE
    # writes out of bounds: its runtime ends its process (SIGSEGV, SIGABRT), or on a lucky
    # heap goes on (and a later run ends it)
    ended = []
    try:
        for at in indices:
            try:
                run(_rows(), _as_written(), operand, at, updates)
            except hg.ExecutionError as e:
                ended.append(str(e))
    finally:  # a worker the write did not end has a corrupted heap: the next tests get a new one
        from hlogen.runtime import iree as iree_runtime
        iree_runtime._worker()._worker.kill()
    assert any("ended its worker process by SIG" in e for e in ended), ended


def test_iree_solves_with_the_interpreters_linear_algebra(iree):
    # IREE refuses cholesky and triangular_solve: its declaration lists LINEAR_ALGEBRA
    comp, spd, rhs_value, want = _solve()
    np.testing.assert_allclose(run(comp, iree, spd, rhs_value), want, rtol=1e-10)
