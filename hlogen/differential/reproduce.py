"""The one renderer of the command lines that show a finding again: `hlogen compare`
(bisect's diverging and fixed runs, a reduced divergence, a fuzz finding) and `hlogen run`
(a reduced error or crash of one side). Every command that prints one renders it here."""
from __future__ import annotations

import shlex

from hlogen.differential.comparison import HLO_ROUTE, ONE_DEVICE, Side
from hlogen.differential.near import Tolerance
from hlogen.runtime import xla_options as options_of


def command_line(command: str, module: str, *, test: Side | None = None,
                 reference: Side | None = None, test_options: tuple | None = None,
                 backend: Side | None = None, function: str | None = None,
                 inputs: list = (), tolerance: Tolerance | None = None) -> str:
    """`hlogen COMMAND MODULE` with the words that say what to run it on: `backend` (one
    side, `hlogen run`: --backend and its options as --xla-flag) or `test` and
    `reference` (--test, --reference, each side's options as --test-flag and
    --reference-flag; `test_options` in place of the test side's own), then `inputs` (the
    input options' words) and the `tolerance` where it is not the default."""
    words = ["hlogen", command, module]
    if function:
        words += ["--function", function]
    if backend is not None:
        words += ["--backend", backend.backend, *_flags("--xla-flag", backend.xla_options)]
    for flag, side in (("--test", test), ("--reference", reference)):
        if side is not None:
            words += [flag, route(side)]
    if test is not None:
        own = test.xla_options if test_options is None else test_options
        words += _flags("--test-flag", own)
    if reference is not None:
        words += _flags("--reference-flag", reference.xla_options)
    words += list(inputs)
    if tolerance is not None:
        words += tolerance_words(tolerance)
    return shlex.join(words)


def route(side: Side) -> str:
    """A side as --test and --reference name it: its backend, after `hlo:` when the
    module goes through XLA's HLO, before `:one-device` for a global program."""
    return (HLO_ROUTE if side.through_hlo else "") + side.backend + \
        (ONE_DEVICE if side.one_device else "")


def tolerance_words(t: Tolerance) -> list:
    """--bitwise, --ulp N, or the --abs and --rel that are not the default."""
    if t.bitwise:
        return ["--bitwise"]
    if t.ulp is not None:
        return ["--ulp", str(t.ulp)]
    default = Tolerance()
    return [w for name, value, usual in (("--abs", t.abs, default.abs), ("--rel", t.rel, default.rel))
            if value != usual for w in (name, f"{value:g}")]


def _flags(flag: str, options) -> list:
    return [w for option in options for w in (flag, options_of.text((option,)))]
