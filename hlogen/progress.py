"""Where long work is: the one progress value the library's long searches report (the
reducer's `shrink` and `reduce_module`, a fuzz run, the conformance runner's records as
`hlogen check` counts them), and what the command line's line draws
(hlogen_cli.progress.Line.show): a `phase`, a `note` in words, and for counted work
`done` of `total`. The fields of one kind of work are None in the others'."""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Progress:
    phase: str                      # what is going on: "reducing", "fuzzing", "checking"
    note: str = ""                  # in words, after the time it has taken
    seconds: float = 0.0            # since the work began
    done: int | None = None         # counted work: `done` of `total`
    total: int | None = None
    # the reducer's search, after each candidate the predicate judged
    strategy: str | None = None
    op_count: int | None = None     # of the best module so far
    tried: int | None = None        # candidates the predicate judged
    accepted: int | None = None     # of them, still interesting (and so the new best)
    # a fuzz run, after each program and at each step of a reduction
    programs: int | None = None
    findings: int | None = None
    new: int | None = None
    reducing: str | None = None     # the signature being reduced (as the program shows it)
    reduced_ops: int | None = None


def reducing(strategy: str, op_count: int, tried: int, accepted: int,
             seconds: float) -> Progress:
    """The reducer's search, after a candidate."""
    return Progress("reducing", f"{op_count} ops, {tried} candidates ({accepted} accepted): "
                                f"{strategy}", seconds, strategy=strategy, op_count=op_count,
                    tried=tried, accepted=accepted)


def fuzzing(programs: int, findings: int, new: int, seconds: float,
            reducing: str | None = None, reduced_ops: int | None = None) -> Progress:
    """A fuzz run, after a program or at a step of a finding's reduction."""
    found = f"{programs} programs, {findings} signatures ({new} new)"
    note = found if reducing is None else f"{found}; reducing {reducing}: {reduced_ops} ops"
    return Progress("fuzzing", note, seconds, programs=programs, findings=findings, new=new,
                    reducing=reducing, reduced_ops=reduced_ops)
