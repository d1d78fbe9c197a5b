"""Differential testing: random programs to run on two backends, and a reducer that
shrinks a module while it stays interesting (a divergence, an error, a script's verdict).

- `generate(seed, ...)`: a random well-typed StableHLO program from hlogen's op library;
  `mutate(computation, seed)`: a small type-preserving change of a module
  (hlogen.differential.generate);
- `reduce(module, interesting, ...)`: the smallest module found that stays interesting;
  `script_interest(path)`: a user's test script as the predicate, with C-Reduce's
  convention (exit status 0: still interesting) (hlogen.differential.reduce).
"""
from hlogen.differential.generate import generate, mutate
from hlogen.differential.reduce import Progress, Reduced, op_count, reduce, script_interest

__all__ = ["generate", "mutate", "reduce", "script_interest", "Reduced", "Progress", "op_count"]
