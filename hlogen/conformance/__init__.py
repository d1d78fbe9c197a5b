"""The conformance runner behind `hlogen check` (see docs/conformance.md, "Conformance in CI").

- files: conformance file formats (RUN lines, split modules, the check dialect);
- module: a module made runnable (checks -> results, constants -> parameters);
- judge: StableHLO's judging rules; runner: one module on one backend;
- worker, pool: worker processes that may die; check: a whole run;
- known (+ known_deviations.json): known deviations as data; report: summary, JUnit, JSON;
"""
from hlogen.conformance.check import run
