"""The fuzzer behind `hlogen fuzz` (`hg.fuzz.run`): programs run on two backends until they
disagree, each disagreement reduced, named by its cause and kept once. One module per job:

- `loop`: the run (`run`): programs generated or taken from the corpus, each observed,
  each new signature reduced and saved (the module's docstring says what a finding is);
- `triage`: one program on both sides, and what differed named by its cause
  (`Triage`, `Signature`s; what the spec allows an op is hlogen.differential.allowed's);
- `findings`: a run's findings and their outputs (the reproducers, `summary.json`,
  `junit.xml`);
- `corpus`: modules of StableHLO files made runnable as the conformance runner makes them;
- `program`, `generators`, `regions`, `idioms`: random well-typed programs (`generate`);
- `mutation`: a small type-preserving change of a module (`mutate`).
"""
from hlogen.fuzz.findings import Finding, Fuzzed, Signature, junit
from hlogen.fuzz.generators import GENERATORS, IDIOMS, generate
from hlogen.fuzz.loop import LARGE_RANGE_SHARE, large_range_of, program_seed_of, run
from hlogen.fuzz.mutation import MUTATIONS, mutate
from hlogen.fuzz.program import DEFAULT_ELEMENT_TYPES

__all__ = ["run", "Fuzzed", "Finding", "Signature", "junit", "LARGE_RANGE_SHARE",
           "program_seed_of", "large_range_of", "generate", "mutate", "GENERATORS", "IDIOMS",
           "MUTATIONS", "DEFAULT_ELEMENT_TYPES"]
