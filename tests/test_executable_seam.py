"""The executable seam (hlogen.runtime.executable): every backend's executable meets one
interface, each kind of backend compiles through one table, and nothing else branches on
a backend's kind."""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

import hlogen as hg
from hlogen import backends, ops, runtime
from hlogen.runtime.executable import Executable
from tests.helpers import BACKENDS, single_op

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_executable_meets_the_interface(backend):
    comp = single_op(lambda x: ops.add(x, x), hg.f32[3])
    exe = hg.compile(comp, backend=backend)
    assert isinstance(exe, Executable)
    assert exe.declaration is backends.get(backend) and exe.backend == backend
    assert exe.computation is comp and exe.num_replicas == 1 and exe.local_replicas == [0]
    assert exe.key[:2] == (comp.fingerprint, backend)
    np.testing.assert_array_equal(exe(np.ones(3, np.float32)), np.full(3, 2, np.float32))
    if backends.get(backend).compiles:
        assert exe.cache_outcome == "off" and len(exe.devices) == 1  # no disk cache given
        assert exe.refusal("optimized HLO") is None
    else:  # the interpreter has no disk cache to report on, and nothing compiled to give
        assert exe.cache_outcome is None and exe.devices == []
        assert exe.refusal("optimized HLO") == ("the reference interpreter compiles nothing: "
                                                "it gives no optimized HLO")


def test_every_kind_has_a_compiler():
    assert set(runtime.COMPILERS) == set(backends.Kind)
    for kind in backends.Kind:
        found = [b for b in backends.BACKENDS.values() if b.kind is kind]
        if not found:  # an extra not installed (IREE): absent, with why
            assert kind.value in backends.UNAVAILABLE
            continue
        module = runtime.compiler(found[0])
        assert callable(module.compile) and callable(module.available)


def test_only_the_table_branches_on_a_kind():
    # a kind is named where a backend is declared (kind=Kind.X) and in the table's rows;
    # behaviour that differs by kind is a field of the declaration or the executable's
    named = re.compile(r"\bKind\.(" + "|".join(k.name for k in backends.Kind) + r")\b")
    allowed = re.compile(r"kind=Kind\.\w+,|^\s*Kind\.\w+: \"hlogen\.runtime\.\w+\",$|"
                         r"^DEFAULT_KIND = Kind\.\w+ ")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for folder in ("hlogen", "hlogen_cli") for path in (ROOT / folder).rglob("*.py")
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if named.search(line) and not allowed.search(line)]
    assert found == [], "\n".join(found)
