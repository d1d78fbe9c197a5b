"""Differential testing: finding why two backends disagree, as XLA's own tools do
(`run_hlo_module`, `hlo-translate`, `hlo-bisect`), without building XLA; and finding
more of it.

- `near`: XLA's comparison rule (`literal_comparison::Near`), the `ulp` (with `min_ulp`),
  `exact` and `bitwise` modes, and a report per result: hlogen's one array comparison
  (run, compare, bisect and StableHLO's checks judge through it);
- `allowed`: what the spec allows two evaluations to differ by (a sum or product in
  another order, the bits of a NaN, an FFT's bound): the one place that judges it;
- `inputs`: random inputs as run_hlo_module makes them (`MakeFakeArguments`), with the
  values that indices, init values and sort keys need;
- `comparison`: `compare`, one computation on a test and a reference side (a backend,
  its XLA options, the route through HLO), compared result by result, over iterations
  of random inputs; with a third side, which side is the odd one out;
- `origin`: `find_origin`, the op where a difference is born (given identical inputs,
  the test side's op alone differs) and the ops that only amplify it; `findings_of`, a
  comparison's findings (compare's report, --explain); `probed`;
- `hlo_passes`: the HLO passes XLA really runs on a module, from its log;
- `bisection`: `bisect`, the HLO pass (or stage) whose disabling removes a divergence;
- `isolated`: a computation run in a child process, for options that may end XLA's;
- `reduction`: `shrink`, the smallest module found that stays interesting (a
  divergence, an error, a script's verdict: `script_interest`, with C-Reduce's
  convention, exit status 0 = still interesting), by the edits of `edits`;
- `interests`: what keeps a module worth reducing, run in a child process (a divergence
  of `compare` of one class, a backend's error or crash, a script), the inputs that
  follow its parameters, and `reduce_module` (hg.reduce_module) over them (hlogen.fuzz,
  above, fuzzes with programs of its own generator);
- `reproduce`: the one renderer of the command lines that show a finding again.
XLA's options themselves are checked and typed by hlogen.runtime.xla_options (what
`hg.compile(..., xla_options=...)` takes).
"""
from hlogen.differential.bisection import (EVERY_PASS, STAGES, Verdict, bisect, options_disabling,
                                           search)
from hlogen.differential.comparison import (EXACT_MATH, HLO_ROUTE, MAJORITY, ODD_ONE_OUT,
                                            ONE_DEVICE, UNDECIDED, Comparison, Decision,
                                            Iteration, Side, ThreeWay, compare, leaf_names,
                                            majority, parse_route, run_on, three_way,
                                            through_hlo)
from hlogen.differential.hlo_passes import PassLog, parse_log, passes_that_ran
from hlogen.differential.inputs import Need, constraints, random_inputs, zero_inputs
from hlogen.differential.isolated import IsolatedRunner
from hlogen.differential.near import (Difference, ResultReport, Tolerance, compare_arrays,
                                      json_value, ulp_distance)
from hlogen.differential.interests import reduce_module
from hlogen.differential.reduction import Reduced, op_count, script_interest, shrink

__all__ = [
    "Tolerance", "compare_arrays", "ResultReport", "Difference", "ulp_distance", "json_value",
    "random_inputs", "zero_inputs", "constraints", "Need",
    "compare", "run_on", "through_hlo", "leaf_names", "Side", "Comparison", "Iteration", "HLO_ROUTE",
    "ONE_DEVICE", "parse_route", "ThreeWay", "three_way", "ODD_ONE_OUT", "UNDECIDED",
    "Decision", "majority", "EXACT_MATH", "MAJORITY",
    "passes_that_ran", "parse_log", "PassLog",
    "bisect", "search", "options_disabling", "Verdict", "STAGES", "EVERY_PASS",
    "IsolatedRunner",
    "shrink", "reduce_module", "script_interest", "Reduced", "op_count",
]
