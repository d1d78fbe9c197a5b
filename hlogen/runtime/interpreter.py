"""Running computations on the StableHLO reference interpreter (`eval_module`).

The interpreter is slow (about a microsecond per element operation) but exact:
it is the independent oracle PJRT results are compared with.
"""
from __future__ import annotations

import collections

import numpy as np
from jaxlib.mlir._mlir_libs import _stablehlo

from hlogen import mlir
from hlogen.computation import Computation
from hlogen.errors import ExecutionError
from hlogen.runtime.arrays import check_signature, flatten_arguments, leaf_shapes, structure_results
from hlogen.runtime.execution import Prepared, prepare

_prepared: collections.OrderedDict = collections.OrderedDict()
_PREPARED_KEPT = 64


class Interpreted:
    """The interpreter as an executable: same calling convention as a PJRT Executable."""

    backend = "interpret"

    def __init__(self, computation: Computation):
        check_signature(computation)
        self.computation = computation
        self._prepared = _prepare_cached(computation)
        self._params = leaf_shapes(computation.parameter_shapes)

    def __repr__(self) -> str:
        return f"<Executable {self.computation.signature()} on interpret>"

    def __call__(self, *args):
        arrays = flatten_arguments(self.computation, args)
        attrs = [mlir.dense_attr(a, s) for a, s in zip(arrays, self._params)]
        with mlir.collected_diagnostics() as messages:
            try:
                raw = _stablehlo.eval_module(self._prepared.computation.module, attrs)
            except Exception as e:
                detail = "\n".join(messages) or str(e)
                raise ExecutionError(f"{self.computation.name}: the reference interpreter "
                                     f"failed:\n{detail}") from None
        return structure_results(self.computation.result_shapes,
                                 self._prepared.read_results([np.array(r) for r in raw]))


def _prepare_cached(computation: Computation) -> Prepared:
    key = computation.fingerprint
    found = _prepared.get(key)
    if found is None:
        found = prepare(computation, for_interpreter=True)  # refuses what would abort it
        _prepared[key] = found
        while len(_prepared) > _PREPARED_KEPT:
            _prepared.popitem(last=False)
    return found
