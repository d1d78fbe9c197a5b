"""Localisation of a divergence: the first op whose values differ between two backends
(`first_divergence`, a `FirstDivergence`), and the probes behind it (`probed`).

`first_divergence` re-runs a computation with every intermediate value of `main` (each
top-level op's results, in program order) as an extra output, on PJRT and on the
reference interpreter, and compares them in program order. Ops inside regions (loop
bodies, reducers) are covered by the op that holds the region.
"""
from __future__ import annotations

import dataclasses

import numpy as np
from jaxlib.mlir import ir

from hlogen import backends, mlir, passes, preflight, runtime
from hlogen import types as T
from hlogen.computation import Computation
from hlogen.differential.near import Tolerance, compare_arrays
from hlogen.errors import HlogenError

_SKIPPED = {"func.return", "stablehlo.constant"}  # constants are the same everywhere


@dataclasses.dataclass
class FirstDivergence:
    """Where two backends start to differ."""
    op: str                  # e.g. stablehlo.exponential
    location: str            # file:line:column of the op (or the source name)
    position: int            # its index among the top-level ops of main, in program order
    result: int              # which of its results differs
    operand_shapes: list     # hlogen shape strings
    result_shapes: list
    max_abs: float           # the largest absolute difference
    max_ulp: int             # the largest distance in units in the last place (floats)
    mismatches: int
    total: int
    example: str             # the first differing element: index, both values
    backend: str
    reference: str

    def __str__(self) -> str:
        operands = ", ".join(self.operand_shapes) or "none"
        results = ", ".join(self.result_shapes)
        ulp = f", {self.max_ulp} ULP" if self.max_ulp else ""
        return (f"first divergence at {self.location}: {self.op} (op {self.position} of @main, "
                f"result {self.result}): operands ({operands}) -> ({results}); "
                f"{self.mismatches} of {self.total} elements differ between {self.backend} and "
                f"{self.reference}, largest difference {self.max_abs:.6g}{ulp}; {self.example}")


def first_divergence(computation: Computation, inputs, backend: str = "cpu",
                     reference: str = backends.INTERPRET.name, max_ulp: int = 3,
                     rtol: float = 0.0) -> FirstDivergence | None:
    """The first op of `computation`'s main (in program order) whose values on `backend`
    and on `reference` differ, run on `inputs` (one array per parameter); None when every
    intermediate value agrees. Two floats differ when more than `max_ulp` units in the
    last place apart and more than `rtol` of the reference value (integers: any
    difference; hlogen.differential.near's rules `ulp` and Near): a rule that scales
    with each op's own values, so that the op where XLA CPU flushes a subnormal to zero
    is the one named (1e-39 and 0 are some 700000 ULP apart in f32), not the later op
    where the difference has grown past an absolute tolerance."""
    if not isinstance(computation, Computation):
        raise HlogenError(f"first_divergence takes a Computation, got {type(computation).__name__}")
    module, probes = probed(computation)
    if not probes:
        return None
    got = _run(module, inputs, backend)
    want = _run(module, inputs, reference)
    where = computation.source or computation.name
    # each op by its own values: more than max_ulp apart, and more than rtol relative
    rule, relative = Tolerance(ulp=max_ulp), Tolerance(0, rtol) if rtol else None
    for k, (op, index, position) in enumerate(probes):
        a, b = np.asarray(got[k]), np.asarray(want[k])
        found = compare_arrays(a, b, rule, also=relative, shown=1)
        if found.ok:
            continue
        first = found.first[0] if found.first else None
        example = (f"at {list(first.index)}: {backend} {first.actual.item()}, {reference} "
                   f"{first.expected.item()}" if first else found.problem)
        return FirstDivergence(
            op=op.name, location=preflight.located(op, where), position=position, result=index,
            operand_shapes=[_shape(v_.type) for v_ in op.operands],
            result_shapes=[_shape(r.type) for r in op.results],
            max_abs=found.max_abs_error, max_ulp=found.max_ulp, mismatches=found.differing,
            total=found.elements, example=example, backend=backend, reference=reference)
    return None


def _shape(t) -> str:
    try:
        return str(mlir.shape_of_type(t))
    except Exception:
        return str(t)


def _run(computation: Computation, inputs, backend: str) -> list:
    out = runtime.compile(computation, backend=backend)(*inputs)
    return list(out) if isinstance(out, tuple) else [out]


def probed(computation: Computation):
    """A legalized copy of `computation` whose main returns every top-level intermediate
    tensor (then its own results), and the probes: (op, result index, position)."""
    legal = passes.run(computation, "legalize")
    main = legal.main
    block = main.regions[0].blocks[0]
    probes, values = [], []
    for position, op in enumerate(block.operations):
        op = op.operation
        if op.name in _SKIPPED:
            continue
        for index, result in enumerate(op.results):
            if isinstance(_try_shape(result.type), T.Shape):
                probes.append((op, index, position))
                values.append(result)
    terminator = list(block.operations)[-1].operation
    originals = list(terminator.operands)
    with mlir.context(), ir.InsertionPoint(terminator), terminator.location:
        ir.Operation.create("func.return", operands=values + originals)
        terminator.erase()
        ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
        main.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(list(ftype.inputs), [v.type for v in values + originals]))
        if "res_attrs" in main.attributes:
            del main.attributes["res_attrs"]
    return Computation(legal.module, computation.source), probes


def _try_shape(t):
    try:
        return mlir.shape_of_type(t)
    except Exception:
        return None
