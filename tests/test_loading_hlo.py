"""XLA's HLO in (hlogen.hlo): HLO text written by hand in XLA's syntax, HLO jax prints,
XLA's dumps (text and `*.hlo.pb`) written by a child process with XLA_FLAGS, bare
HloModuleProtos; each through the API (PJRT and, where its ops allow, the interpreter)
and the command line, compared with numpy or jax."""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import hlogen as hg

HLOGEN = str(pathlib.Path(sys.executable).with_name("hlogen"))
X = np.array([3.0, -1.0, 4.0, 1.5], np.float32)

# -- HLO written by hand -----------------------------------------------------------------

TUPLE_AND_REDUCE = """\
HloModule tuple_and_reduce, entry_computation_layout={(f32[4]{0}, s32[])->(f32[], f32[4])}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (values: f32[4], count: s32[]) -> (f32[], f32[4]) {
  %values = f32[4]{0} parameter(0)
  %count = s32[] parameter(1)
  %zero = f32[] constant(0)
  %total = f32[] reduce(f32[4]{0} %values, f32[] %zero), dimensions={0}, to_apply=%add
  %c = f32[] convert(%count)
  %b = f32[4] broadcast(%c), dimensions={}
  %scaled = f32[4] multiply(%values, %b)
  ROOT %t = (f32[], f32[4]) tuple(%total, %scaled)
}
"""

WHILE = """\
HloModule doubling

%cond (state: (s32[], f32[4])) -> pred[] {
  %state = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%state), index=0
  %n = s32[] constant(3)
  ROOT %less = pred[] compare(%i, %n), direction=LT
}

%body (state: (s32[], f32[4])) -> (s32[], f32[4]) {
  %state = (s32[], f32[4]) parameter(0)
  %i = s32[] get-tuple-element(%state), index=0
  %x = f32[4] get-tuple-element(%state), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %twice = f32[4] add(%x, %x)
  ROOT %out = (s32[], f32[4]) tuple(%next, %twice)
}

ENTRY %main (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  %zero = s32[] constant(0)
  %init = (s32[], f32[4]) tuple(%zero, %x)
  %loop = (s32[], f32[4]) while(%init), condition=%cond, body=%body
  ROOT %result = f32[4] get-tuple-element(%loop), index=1
}
"""

CONDITIONAL = """\
HloModule pick

%negate (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %n = f32[4] negate(%x)
}

%square (x: f32[4]) -> f32[4] {
  %x = f32[4] parameter(0)
  ROOT %s = f32[4] multiply(%x, %x)
}

ENTRY %main (flag: pred[], x: f32[4]) -> f32[4] {
  %flag = pred[] parameter(0)
  %x = f32[4] parameter(1)
  ROOT %r = f32[4] conditional(%flag, %x, %x), true_computation=%negate, false_computation=%square
}
"""

SORT = """\
HloModule sort_pairs

%less (a: f32[], b: f32[], i: s32[], j: s32[]) -> pred[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  %i = s32[] parameter(2)
  %j = s32[] parameter(3)
  ROOT %lt = pred[] compare(%a, %b), direction=LT
}

ENTRY %main (keys: f32[4], values: s32[4]) -> (f32[4], s32[4]) {
  %keys = f32[4] parameter(0)
  %values = s32[4] parameter(1)
  ROOT %sorted = (f32[4], s32[4]) sort(%keys, %values), dimensions={0}, to_apply=%less
}
"""

IDX = np.array([10, 20, 30, 40], np.int32)
HAND = {
    # name: (text, arguments, expected results, names)
    "tuple_and_reduce": (TUPLE_AND_REDUCE, [X, np.int32(3)], [X.sum(), X * 3],
                         ["values", "count"]),
    "while": (WHILE, [X], [X * 8], ["x"]),
    "conditional_true": (CONDITIONAL, [np.bool_(True), X], [-X], ["flag", "x"]),
    "conditional_false": (CONDITIONAL, [np.bool_(False), X], [X * X], ["flag", "x"]),
    "sort": (SORT, [X, IDX], [np.sort(X), IDX[np.argsort(X)]], ["keys", "values"]),
}


def _results(out) -> list:
    return [np.asarray(r) for r in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("case", sorted(HAND))
@pytest.mark.parametrize("backend", ["cpu", "interpret"])
def test_hlo_written_by_hand_runs_on_both_backends(case, backend):
    text, args, expected, names = HAND[case]
    comp = hg.load(text)
    assert comp.parameter_names == names
    got = _results(hg.compile(comp, backend=backend)(*args))
    assert len(got) == len(expected)  # tuple results: one result per element
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_a_tuple_result_follows_the_calling_convention():
    comp = hg.load(TUPLE_AND_REDUCE)
    assert comp.result_shapes == [hg.f32[()], hg.f32[4]]
    assert comp.parameter_shapes == [hg.f32[4], hg.s32[()]]


def test_parameters_numbered_with_a_gap_are_refused_before_xla_parses_them():
    # XLA's HLO parser ends the process (CHECK failure) on this
    text = "HloModule m\nENTRY e {\n p = f32[2] parameter(1)\n ROOT a = f32[2] add(p, p)\n}\n"
    with pytest.raises(hg.InputError, match=r"numbered \[1\]; HLO numbers them 0..N-1"):
        hg.load(text)


def test_topk_of_the_smallest_is_refused_not_turned_into_the_largest():
    text = ("HloModule m\nENTRY e {\n p = f32[6] parameter(0)\n"
            " ROOT r = (f32[3], s32[3]) topk(p), k=3, largest=false\n}\n")
    with pytest.raises(hg.UnsupportedError, match="<text>:4: topk with largest=false"):
        hg.load(text)
    largest = hg.load(text.replace("largest=false", "largest=true"))
    got = hg.compile(largest)(np.array([3, 1, 4, 1, 5, 9], np.float32))
    np.testing.assert_array_equal(got[0], [9, 5, 4])
    np.testing.assert_array_equal(got[1], [5, 4, 2])


def test_hlo_that_xla_refuses_is_an_input_error():
    with pytest.raises(hg.InputError, match="<text>:4:18: .*Unknown opcode: frobnicate"):
        hg.load("HloModule m\nENTRY e {\n p = f32[2] parameter(0)\n"
                " ROOT a = f32[2] frobnicate(p)\n}\n")


# -- what jax prints and XLA dumps ---------------------------------------------------------

def mlp(params, x):
    h = jnp.tanh(x @ params["w1"])
    return jax.nn.softmax(h @ params["w2"]), jnp.sum(h)


def scan(x):
    return jax.lax.scan(lambda c, y: (c + y, c * y), 0.0, x)


def top3(x):
    return jax.lax.top_k(x, 3)


def inverse(a):
    return jnp.linalg.inv(a)


def cholesky(a):
    return jnp.linalg.cholesky(a @ a.T)


def seven(x):  # a tuple long enough for XLA's /*index=5*/ comments
    return tuple(x * i for i in range(7))


def swap(a, b):  # optimized, a module of copies XLA compiles again
    return b, a


def matmul(a, b):  # optimized, a module without fusion
    return a @ b


RNG = np.random.default_rng(0)
PARAMS = {"w1": RNG.standard_normal((3, 4)).astype(np.float32),
          "w2": RNG.standard_normal((4, 2)).astype(np.float32)}
XS = RNG.standard_normal((2, 3)).astype(np.float32)
MATRIX = (RNG.standard_normal((3, 3)) + 3 * np.eye(3)).astype(np.float32)
FUNCTIONS = {
    # name: (function, its flat arguments, whether the interpreter runs it)
    "mlp": (mlp, [PARAMS["w1"], PARAMS["w2"], XS], True),
    "scan": (scan, [np.arange(5, dtype=np.float32)], True),
    "top3": (top3, [np.array([3, 1, 4, 1, 5, 9], np.float32)], True),
    # LAPACK custom calls, of tuple results in HLO (several results once converted)
    "inverse": (inverse, [MATRIX], True),
    "cholesky": (cholesky, [MATRIX], True),
    "seven": (seven, [XS], True),
    "swap": (swap, [MATRIX, XS], True),
    "matmul": (matmul, [MATRIX, MATRIX], True),
}
# what neither backend runs of XLA's own optimized modules (XLA-internal custom calls)
NOT_RUN_OPTIMIZED = {"top3": "TopK"}
_STRUCTURED = {"mlp": lambda a: (dict(w1=a[0], w2=a[1]), a[2])}


def _jax_results(name):
    f, args, _ = FUNCTIONS[name]
    structured = _STRUCTURED.get(name, tuple)(args)
    out = jax.jit(f)(*structured)
    return [np.asarray(r) for r in jax.tree_util.tree_leaves(out)]


_DUMPER = """
import sys
sys.path.insert(0, {here!r})
import numpy as np, jax
import test_loading_hlo as t
for name, (f, args, _) in t.FUNCTIONS.items():
    jax.jit(f).lower(*t._STRUCTURED.get(name, tuple)(args)).compile()
"""


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    """XLA's dumps of FUNCTIONS, written by a child process (XLA_FLAGS=--xla_dump_to)."""
    where = tmp_path_factory.mktemp("xla_dump")
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={where} --xla_dump_hlo_as_text "
                                     f"--xla_dump_hlo_as_proto")
    subprocess.run([sys.executable, "-c", _DUMPER.format(here=str(pathlib.Path(__file__).parent))],
                   env=env, check=True, capture_output=True, timeout=300)
    return where


def _dumped(dumps, name, suffix):
    (found,) = dumps.glob(f"module_*.jit_{name}.{suffix}")
    return found


@pytest.mark.parametrize("suffix", ["before_optimizations.txt", "before_optimizations.hlo.pb"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_xla_dumps_before_optimizations_run_as_jax_ran_them(dumps, name, suffix):
    path = _dumped(dumps, name, suffix)
    comp = hg.load(path)
    _, args, interpretable = FUNCTIONS[name]
    expected = _jax_results(name)
    for backend in ["cpu", "interpret"] if interpretable else ["cpu"]:
        got = _results(hg.compile(comp, backend=backend)(*args))
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


def test_dumps_carry_the_sections_and_comments_hlogen_reads(dumps):
    text = _dumped(dumps, "seven", "before_optimizations.txt").read_text()
    assert "\nFileNames\n" in text and "\nStackFrames\n" in text and "/*index=5*/" in text


def test_dump_parameters_keep_jax_s_names(dumps):
    comp = hg.load(_dumped(dumps, "mlp", "before_optimizations.txt"))
    assert comp.parameter_names == ["params['w1']", "params['w2']", "x"]
    # and in the text hlogen writes of it
    assert hg.load(comp.as_text()).parameter_names == ["params['w1']", "params['w2']", "x"]


def test_topk_becomes_stablehlo(dumps):
    comp = hg.load(_dumped(dumps, "top3", "before_optimizations.txt"))
    text = comp.as_text()
    assert "mhlo." not in text.replace("mhlo.num_", "").replace("mhlo.cross_program", "") \
        .replace("mhlo.input_output", "").replace("mhlo.is_dynamic", "") \
        .replace("mhlo.use_auto", "")
    assert "stablehlo.sort" in text or "chlo.top_k" in text


@pytest.mark.parametrize("suffix", ["cpu_after_optimizations.txt", "cpu_after_optimizations.hlo.pb"])
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_optimized_dumps_run_as_jax_ran_them_or_are_refused_with_the_reason(dumps, name, suffix):
    # fusions read as calls, bitcasts (column-major ones in inverse) as transposes and
    # reshapes: both backends give jax's results
    comp = hg.load(_dumped(dumps, name, suffix))
    if name in NOT_RUN_OPTIMIZED:
        with pytest.raises(hg.UnsupportedError, match=f"{NOT_RUN_OPTIMIZED[name]}.*optimized HLO"):
            hg.compile(comp)
        return
    _, args, _ = FUNCTIONS[name]
    for backend in ("cpu", "interpret"):
        for g, e in zip(_results(hg.compile(comp, backend=backend)(*args)), _jax_results(name)):
            np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


# a bitcast reads its operand's bytes in its result's layout
BITCASTS = """\
HloModule bitcasts, is_scheduled=true

ENTRY %main (a: f32[2,3]) -> (f32[3,2], f32[6], s32[6], f32[3,2]) {
  %a = f32[2,3]{1,0} parameter(0)
  %t = f32[3,2]{0,1} bitcast(%a)
  %flat = f32[6]{0} bitcast(f32[3,2]{0,1} %t)
  %bits = s32[6]{0} bitcast(%flat)
  %same = f32[3,2]{1,0} bitcast(%a)
  ROOT %out = (f32[3,2]{0,1}, f32[6]{0}, s32[6]{0}, f32[3,2]{1,0}) tuple(%t, %flat, %bits, %same)
}
"""


def test_bitcasts_read_bytes_in_the_layouts_they_name():
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    comp = hg.load(BITCASTS)
    for backend in ("cpu", "interpret"):
        t, flat, bits, same = _results(hg.compile(comp, backend=backend)(a))
        np.testing.assert_array_equal(t, a.T)  # column-major 3x2: a's bytes
        np.testing.assert_array_equal(flat, a.reshape(-1))
        np.testing.assert_array_equal(bits, a.reshape(-1).view(np.int32))
        np.testing.assert_array_equal(same, a.reshape(3, 2))
    # one of another size: refused, at its line
    other_size = BITCASTS.replace("%same = f32[3,2]{1,0} bitcast(%a)",
                                  "%same = f32[4]{0} bitcast(%a)")
    with pytest.raises(hg.UnsupportedError, match=r":8: bitcast of f32\[2,3\]\{1,0\} to f32\[4\]"):
        hg.load(other_size)


def test_a_bare_hlo_module_proto_from_jax():
    lowered = jax.jit(mlp).lower(PARAMS, XS)
    proto = lowered.compiler_ir("hlo").as_serialized_hlo_module_proto()
    comp = hg.load(proto)
    got = _results(hg.compile(comp)(PARAMS["w1"], PARAMS["w2"], XS))
    for g, e in zip(got, _jax_results("mlp")):
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=1e-6)


# -- the command line ----------------------------------------------------------------------

def cli(*args, cwd=None):
    return subprocess.run([HLOGEN, *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


def test_cli_runs_a_dump_and_checks_it_on_the_interpreter(dumps, tmp_path):
    path = _dumped(dumps, "mlp", "before_optimizations.hlo.pb")
    np.savez(tmp_path / "in.npz", x=XS, **{"params['w1']": PARAMS["w1"],
                                          "params['w2']": PARAMS["w2"]})
    out = tmp_path / "out.npz"
    run = cli("run", path, "--input", tmp_path / "in.npz", "--check-interpret",
              "--output", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as saved:
        for i, e in enumerate(_jax_results("mlp")):
            np.testing.assert_allclose(saved[f"result_{i}"], e, rtol=2e-5, atol=1e-6)


def test_cli_runs_hand_written_hlo_text(tmp_path):
    (tmp_path / "sort.hlo").write_text(SORT)
    run = cli("run", tmp_path / "sort.hlo", "--input", "4xf32=3,-1,4,1.5",
              "--input", "4xs32=10,20,30,40", "--check-interpret")
    assert run.returncode == 0, run.stderr
    assert "[-1.   1.5  3.   4. ]" in run.stdout and "[20 40 10 30]" in run.stdout


def test_cli_converts_hlo_to_stablehlo_text(dumps, tmp_path):
    out = tmp_path / "scan.mlir"
    run = cli("opt", _dumped(dumps, "scan", "before_optimizations.txt"), "-o", out)
    assert run.returncode == 0, run.stderr
    comp = hg.load(out)
    assert "stablehlo.while" in comp.as_text() and comp.parameter_names == ["x"]
    got = _results(hg.compile(comp)(np.arange(5, dtype=np.float32)))
    for g, e in zip(got, _jax_results("scan")):
        np.testing.assert_allclose(g, e)


def test_cli_runs_an_optimized_dump_and_checks_it_on_the_interpreter(dumps, tmp_path):
    np.savez(tmp_path / "in.npz", x=XS, **{"params['w1']": PARAMS["w1"],
                                          "params['w2']": PARAMS["w2"]})
    out = tmp_path / "out.npz"
    run = cli("run", _dumped(dumps, "mlp", "cpu_after_optimizations.txt"), "--input",
              tmp_path / "in.npz", "--check-interpret", "--output", out)
    assert run.returncode == 0, run.stderr
    with np.load(out) as saved:
        for i, e in enumerate(_jax_results("mlp")):
            np.testing.assert_allclose(saved[f"result_{i}"], e, rtol=2e-5, atol=1e-6)


def test_cli_reads_an_optimized_dump_it_cannot_run(dumps, tmp_path):
    path = _dumped(dumps, "top3", "cpu_after_optimizations.txt")
    run = cli("run", path, "--input", "6xf32=3,1,4,1,5,9")
    assert run.returncode == 2 and "'TopK'" in run.stderr and "optimized HLO" in run.stderr
    # what needs no compile reads it: opt converts it, graph draws it
    assert cli("opt", path, "-o", tmp_path / "top3.mlir").returncode == 0
    assert "stablehlo.custom_call @TopK" in (tmp_path / "top3.mlir").read_text()
    drawn = cli("graph", path, "-o", tmp_path / "top3.dot")
    assert drawn.returncode == 0, drawn.stderr
    assert "custom_call" in (tmp_path / "top3.dot").read_text()


def test_cli_reports_an_hlo_text_that_kills_xla_s_parser(tmp_path):
    # numbered from 1: XLA's parser aborts the process; hlogen refuses it first
    (tmp_path / "gap.hlo").write_text(textwrap.dedent("""\
        HloModule m
        ENTRY e {
          p = f32[2] parameter(1)
          ROOT a = f32[2] add(p, p)
        }
        """))
    run = cli("run", tmp_path / "gap.hlo", "--input", "2xf32=1,2")
    assert run.returncode == 2 and "numbered [1]" in run.stderr, run.stderr


# HLO that XLA's parser ends the process on (a CHECK of its shape rules), which no rule
# of hlogen's knows: read in a child process, it is an error
RESHAPE_TO_ANOTHER_SIZE = textwrap.dedent("""\
    HloModule m
    ENTRY e {
      p = f32[2] parameter(0)
      ROOT r = f32[3] reshape(p)
    }
    """)


def test_isolated_loading_turns_xla_s_abort_into_an_error():
    with pytest.raises(hg.InputError, match=r"ended the process on it \(SIGABRT\): Check failed"):
        hg.load(RESHAPE_TO_ANOTHER_SIZE, isolated=True)
    # what a child reads well is the same module
    assert hg.load(SORT, isolated=True).as_text() == hg.load(SORT).as_text()
    with pytest.raises(hg.InputError, match="numbered"):  # hlogen's refusals come back as they are
        hg.load("HloModule m\nENTRY e {\n p = f32[2] parameter(1)\n ROOT a = f32[2] add(p, p)\n}\n",
                isolated=True)


def test_a_child_imports_hlogen_s_numpy_whatever_folder_it_starts_in(tmp_path, monkeypatch):
    # `-c` puts the current folder first on sys.path: a numpy.py there must not be imported
    (tmp_path / "numpy.py").write_text("raise SystemExit('the numpy.py of the current folder')\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(hg.InputError, match=r"ended the process on it \(SIGABRT\): Check failed"):
        hg.load(RESHAPE_TO_ANOTHER_SIZE, isolated=True)


def test_a_converted_module_that_does_not_verify_says_why():
    bad_slice = "HloModule m\nENTRY e {\n p = f32[2] parameter(0)\n" \
                " ROOT r = f32[2] slice(p), slice={[0:5]}\n}\n"
    with pytest.raises(hg.InputError, match="does not verify: (?s:.*)limit index 5 is larger"):
        hg.load(bad_slice)


@pytest.mark.parametrize("command", [["run", "--input", "2xf32=1,2"], ["opt"], ["compile"]])
def test_cli_reports_hlo_that_ends_xla_s_parser(tmp_path, command):
    (tmp_path / "reshape.hlo").write_text(RESHAPE_TO_ANOTHER_SIZE)
    run = cli(command[0], tmp_path / "reshape.hlo", *command[1:])
    assert run.returncode in (1, 2), run.stderr  # an exit status, not a signal
    assert "SIGABRT" in run.stderr and "reshape.hlo" in run.stderr


def test_lapack_calls_of_hlo_become_calls_of_several_results(dumps):
    # HLO gives a custom call of several results one tuple; the interpreter cannot take one
    text = hg.load(_dumped(dumps, "inverse", "before_optimizations.txt")).as_text()
    calls = [line for line in text.splitlines() if "lapack_sgetrf_ffi" in line]
    assert calls and not any("-> tuple<" in line for line in calls)


def test_a_lapack_call_of_one_tuple_result_is_refused_on_the_interpreter():
    # HLO's form kept in StableHLO text: the interpreter would end the process on it
    comp = hg.load(textwrap.dedent("""
        func.func @main(%a: tensor<3x3xf32>) -> tensor<3x3xf32> {
          %t = stablehlo.custom_call @lapack_sgetrf_ffi(%a) {api_version = 4 : i32,
              backend_config = {}} : (tensor<3x3xf32>) -> tuple<tensor<3x3xf32>, tensor<3xi32>, tensor<i32>>
          %0 = stablehlo.get_tuple_element %t[0] : (tuple<tensor<3x3xf32>, tensor<3xi32>, tensor<i32>>) -> tensor<3x3xf32>
          return %0 : tensor<3x3xf32>
        }"""))
    with pytest.raises(hg.UnsupportedError, match="not of one tuple result"):
        hg.interpret(comp, MATRIX)
