"""Differential testing: finding why two backends disagree, as XLA's own tools do
(`run_hlo_module`, `hlo-translate`), without building XLA.

- `near`: XLA's comparison rule (`literal_comparison::Near`), `ulp` and `bitwise` modes,
  and a report per result;
- `inputs`: random inputs as run_hlo_module makes them (`MakeFakeArguments`), with the
  values that indices, init values and sort keys need;
- `compare`: one computation on a test and a reference side (a backend, its XLA options,
  the route through HLO), compared result by result, over iterations of random inputs;
- `hlo_passes`: the HLO passes XLA really runs on a module, from its log;
- `bisect`: the HLO pass (or stage) whose disabling removes a divergence;
- `isolated`: a computation run in a child process, for options that may end XLA's.
XLA's options themselves are checked and typed by hlogen.runtime.xla_options (what
`hg.compile(..., xla_options=...)` takes).
"""
from hlogen.differential.bisect import EVERY_PASS, STAGES, Verdict, bisect, options_disabling, search
from hlogen.differential.compare import (HLO_ROUTE, Comparison, Iteration, Side, compare, run_on,
                                         through_hlo)
from hlogen.differential.hlo_passes import PassLog, parse_log, passes_that_ran
from hlogen.differential.inputs import Need, constraints, random_inputs, zero_inputs
from hlogen.differential.isolated import IsolatedRunner
from hlogen.differential.near import (Difference, ResultReport, Tolerance, compare_arrays,
                                      json_value, ulp_distance)

__all__ = [
    "Tolerance", "compare_arrays", "ResultReport", "Difference", "ulp_distance", "json_value",
    "random_inputs", "zero_inputs", "constraints", "Need",
    "compare", "run_on", "through_hlo", "Side", "Comparison", "Iteration", "HLO_ROUTE",
    "passes_that_ran", "parse_log", "PassLog",
    "bisect", "search", "options_disabling", "Verdict", "STAGES", "EVERY_PASS",
    "IsolatedRunner",
]
