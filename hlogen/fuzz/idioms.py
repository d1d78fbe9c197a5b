"""The dictionary of idioms: small compositions real code holds and compilers rewrite
(log of exp, sqrt of a square, x - x, a transpose transposed back, ...), each a
generator of low weight."""
from __future__ import annotations

import functools

import ml_dtypes

from hlogen import ops
from hlogen import types as T
from hlogen.fuzz.program import Generator, NoFit, Program, permutation, reshaped
from hlogen.ops._common import ARITHMETIC, FLOAT, INTEGER

# -- idioms: compositions compilers rewrite --------------------------------------------------
# A dictionary of idioms, as fuzzers keep one (AFL's and libFuzzer's dictionaries hold
# tokens; this one compositions): small compositions real programs hold and compilers'
# algebraic simplifiers know, built from the same op library and shape rules on values of
# the program, each a GENERATORS entry of low weight. None names a bug: the spec defines
# each composition's value, and a rewrite keeps it only where the operands are not extreme
# (large, tiny, infinite, between integers), so the inputs must reach there too (the
# fuzzer draws some programs' inputs over the whole exponent range: hlogen.fuzz.loop).

def _composed(first, then, kinds, p: Program):
    """then(first(x)): log of exp, exp of log, a negation negated."""
    return [then(first(p.array(kinds)))]


def _square_root_of_square(p: Program):
    x = p.array({FLOAT})
    return [ops.sqrt(ops.mul(x, x))]


def _squared(p: Program):
    x = p.array({FLOAT})
    return [ops.pow(x, p.constant(T.Shape(x.dtype, ()), 2))]


def _scaled_back(p: Program):
    """(x * c) / c."""
    x = p.array(INTEGER | {FLOAT})
    c = p.constant(T.Shape(x.dtype, ()), p.rng.choice([3, 10, 100]))
    return [ops.div(ops.mul(x, c), c)]


def _shifted_back(p: Program):
    """(x + c) - c, c the constant of code that rounds to an integer so: 1.5 * 2**(the
    type's mantissa bits)."""
    x = p.array({FLOAT})
    c = p.constant(T.Shape(x.dtype, ()), 1.5 * 2.0 ** ml_dtypes.finfo(x.dtype.dtype).nmant)
    return [ops.sub(ops.add(x, c), c)]


def _exponentials_divided(p: Program):
    """exp(a) / exp(b)."""
    a = p.array({FLOAT})
    return [ops.div(ops.exp(a), ops.exp(p.like(a.shape)))]


def _with_itself(name, kinds, p: Program):
    """x - x, x / x, max(x, x)."""
    x = p.array(kinds)
    return [getattr(ops, name)(x, x)]


def _selected_either_way(p: Program):
    x = p.array()
    pred = p.like(T.Shape(T.pred, x.shape.dimensions if p.rng.random() < 0.7 else ()))
    return [ops.select(pred, x, x)]


def _transposed_back(p: Program):
    x = p.array(low_rank=2)
    perm = permutation(p, x.shape.rank)
    if perm == sorted(perm):  # (no transpose: the library emits none)
        perm.reverse()
    return [ops.transpose(ops.transpose(x, perm), [perm.index(i) for i in range(len(perm))])]


def _reshaped_back(p: Program):
    x = p.array(low_rank=1)
    dims = reshaped(p, x)
    if tuple(dims) == x.shape.dimensions:  # (no reshape: the library emits none)
        raise NoFit
    return [ops.reshape(ops.reshape(x, dims), list(x.shape.dimensions))]


def _converted_back(p: Program):
    x = p.array()
    return [ops.convert_element_type(ops.convert_element_type(x, p.element_type()), x.dtype)]


_IDIOM_WEIGHT = 0.15  # each: about one program in ten holds a given idiom (20 ops)
IDIOMS: list[Generator] = [Generator(name, make, _IDIOM_WEIGHT, kinds and frozenset(kinds))
                           for name, make, kinds in [
    ("log(exp(x))", functools.partial(_composed, ops.exp, ops.log, {FLOAT}), {FLOAT}),
    ("exp(log(x))", functools.partial(_composed, ops.log, ops.exp, {FLOAT}), {FLOAT}),
    ("-(-x)", functools.partial(_composed, ops.neg, ops.neg, {FLOAT}), {FLOAT}),
    ("sqrt(x * x)", _square_root_of_square, {FLOAT}),
    ("x ** 2", _squared, {FLOAT}),
    ("(x * c) / c", _scaled_back, INTEGER | {FLOAT}),
    ("(x + c) - c", _shifted_back, {FLOAT}),
    ("exp(a) / exp(b)", _exponentials_divided, {FLOAT}),
    ("x - x", functools.partial(_with_itself, "sub", ARITHMETIC), ARITHMETIC),
    ("x / x", functools.partial(_with_itself, "div", INTEGER | {FLOAT}), INTEGER | {FLOAT}),
    ("max(x, x)", functools.partial(_with_itself, "max", INTEGER | {FLOAT}), INTEGER | {FLOAT}),
    ("select(p, x, x)", _selected_either_way, None),
    ("transpose(transpose(x))", _transposed_back, None),
    ("reshape(reshape(x))", _reshaped_back, None),
    ("convert(convert(x))", _converted_back, None),
]]

