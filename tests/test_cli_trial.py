"""The smaller things issue 24's trial met, each with the installed `hlogen` run as a
subprocess, as a user runs it: what the trial saw is checked absent, and what it should
say present. Values are checked against numpy or jax."""
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
from jaxlib.mlir._mlir_libs import _stablehlo

import hlogen as hg
from hlogen.runtime import pjrt

ROOT = pathlib.Path(__file__).resolve().parent.parent
HLOGEN = pathlib.Path(sys.executable).with_name("hlogen")
SAMPLES = ROOT / "samples"
PRODUCT = """func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.multiply %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}
"""


@pytest.fixture(autouse=True, scope="module")
def _hlogen_starts_the_cpu_backend():
    """jax.jit below would start the CPU backend with jax's one device; started by hlogen
    first, it has hlogen's (the replica tests of other files, run later, need them)."""
    pjrt.client("cpu")


def hlogen(*args, cwd=None, env=None):
    return subprocess.run([str(HLOGEN), *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=env)


@pytest.fixture
def product(tmp_path):
    (tmp_path / "product.mlir").write_text(PRODUCT)
    return tmp_path / "product.mlir"


def test_samples_list_is_the_listing():
    listed = hlogen("samples", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout == hlogen("samples").stdout and "mlp.mlp" in listed.stdout


def twice_then_sum(x, w):
    return jnp.sum(jnp.tanh(x @ w) * 2, axis=1)


def test_graph_and_opt_read_what_compile_as_text_prints(tmp_path):
    x, w = np.arange(6, dtype=np.float32).reshape(2, 3) / 6, np.eye(3, dtype=np.float32)
    path = tmp_path / "optimized.txt"  # fusions, layouts: no compile needed to read it
    path.write_text(jax.jit(twice_then_sum).lower(x, w).compile().as_text())
    drawn = hlogen("graph", path, "-o", tmp_path / "g.dot")
    assert drawn.returncode == 0 and "g.dot: jit_twice_then_sum:" in drawn.stdout, drawn.stderr
    converted = hlogen("opt", path, "-o", tmp_path / "o.mlir")
    assert converted.returncode == 0, converted.stderr
    comp = hg.load(tmp_path / "o.mlir")
    for backend in ("cpu", "interpret"):
        np.testing.assert_allclose(hg.compile(comp, backend=backend)(x, w),
                                   jax.jit(twice_then_sum)(x, w), rtol=1e-6)


PRINTS = '''import os
import hlogen as hg

print("printed while imported")


@hg.function
def double(x: hg.f32[2]):
    print("printed while traced")
    os.write(1, b"written to descriptor 1\\n")
    return x + x
'''


def test_emit_to_stdout_keeps_the_user_s_prints_off_it(tmp_path):
    (tmp_path / "prints.py").write_text(PRINTS)
    emitted = hlogen("emit", "prints.py", "-o", "-", cwd=tmp_path)
    assert emitted.returncode == 0, emitted.stderr
    assert hg.load(emitted.stdout).signature() == "double(x: f32[2]) -> (f32[2])"  # all of it
    for said in ("printed while imported", "printed while traced", "written to descriptor 1"):
        assert said in emitted.stderr


def chained_products(x, y, z):
    return (x @ y) @ z


def test_cost_labels_say_xla_sums_each_figure_over_instructions(tmp_path):
    f32 = jax.ShapeDtypeStruct
    shapes = [f32((2, 3), jnp.float32), f32((3, 5), jnp.float32), f32((5, 7), jnp.float32)]
    (tmp_path / "chain.mlir").write_text(jax.jit(chained_products).lower(*shapes).as_text())
    cost = hlogen("compile", tmp_path / "chain.mlir", "--cost")
    assert cost.returncode == 0, cost.stderr
    lines = cost.stdout.splitlines()
    # operand 0 of the two dots: x (2x3) and x @ y (2x5), 4 bytes each element; not x alone
    assert "bytes accessed by operand 0 of each instruction, summed: 64" in lines
    assert "bytes accessed by operand 1 of each instruction, summed: 200" in lines  # y, z
    assert "bytes accessed by the output of each instruction, summed: 96" in lines
    assert not any(", operand" in line for line in lines)


RNG = """func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %a = stablehlo.constant dense<0.0> : tensor<f32>
  %b = stablehlo.constant dense<1.0> : tensor<f32>
  %s = stablehlo.constant dense<3> : tensor<1xi64>
  %r = stablehlo.rng %a, %b, %s, distribution = UNIFORM : (tensor<f32>, tensor<f32>, tensor<1xi64>) -> tensor<3xf32>
  %y = stablehlo.add %x, %r : tensor<3xf32>
  return %y : tensor<3xf32>
}
"""


def test_check_interpret_of_what_the_interpreter_cannot_run_still_prints_pjrt_s_results(tmp_path):
    (tmp_path / "rng.mlir").write_text(RNG)
    run = hlogen("run", tmp_path / "rng.mlir", "--input", "3xf32=10", "--check-interpret")
    assert run.returncode == 2, run.stderr
    assert run.stdout.startswith("result[0]: f32[3]\n[10.")  # 10 + uniform in [0, 1)
    assert "--check-interpret compared nothing:" in run.stderr
    assert "the reference interpreter cannot run stablehlo.rng" in run.stderr


def test_devices_says_the_cpu_devices_are_virtual():
    shown = hlogen("devices")
    assert shown.returncode == 0, shown.stderr
    cores = len(os.sched_getaffinity(0))
    assert shown.stdout.startswith("cpu: 8 virtual devices (ids 0-7")
    assert f"share this machine's {cores} core" in shown.stdout
    assert "cpu: cpu (id 1" not in shown.stdout


def _completions(words: str, env=None) -> list[str]:
    env = dict(env or os.environ, _HLOGEN_COMPLETE="bash_complete", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    done = subprocess.run([str(HLOGEN)], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_completion_of_sample_names_function_names_and_files(product):
    assert _completions("hlogen samples show mlp") == ["plain,mlp.mlp"]
    assert "plain,elementwise.shifts" in _completions("hlogen samples run elem")
    # --function: the @hg.function definitions of a .py file (read, not run), or a
    # module's public functions; an option given before it changes nothing
    assert _completions("hlogen run samples/elementwise.py --backend cpu --function to") == \
        ["plain,total_order"]
    assert _completions(f"hlogen compile {product} --function ") == ["plain,main"]
    assert _completions("hlogen emit samples/mlp.py -o ") == ["file,"]


def multiply(x, y):
    return x * y


def test_a_multi_platform_export_s_platform_index_is_named(tmp_path):
    args = (np.ones(3, np.float32), np.ones(3, np.float32))
    exported = jax.export.export(jax.jit(multiply), platforms=("cpu", "cuda"))(*args)
    (tmp_path / "both.mlir").write_text(exported.mlir_module())
    missing = hlogen("run", tmp_path / "both.mlir", "--input", "3xf32=1,2,3", "--input", "3xf32=2")
    assert missing.returncode == 2
    assert "parameter 0 'arg0' (s32[]) is jax's platform index" in missing.stderr
    assert "e.g. --input s32=0" in missing.stderr
    ran = hlogen("run", tmp_path / "both.mlir", "--input", "s32=0", "--input", "3xf32=1,2,3",
                 "--input", "3xf32=2")
    assert ran.returncode == 0 and "[2. 4. 6.]" in ran.stdout, ran.stderr


def test_a_difference_from_expected_zeros_is_no_relative_zero(product):
    run = hlogen("run", product, "--input", "4xf32=1,2,3,4", "--input", "4xf32=1",
                 "--expected-output", "4xf32=0")
    assert run.returncode == 1
    assert "4 of 4 elements differ (XLA's Near, abs 1e-06 and rel 1e-05); largest errors: abs 4, rel inf" in run.stdout


def test_a_literal_of_another_type_is_named_as_such(product):
    run = hlogen("run", product, "--input", "2x3xbf16=1", "--input", "4xf32=1")
    assert run.returncode == 2
    assert "expects f32[4] (float32 elements), got a bfloat16 array of shape (2, 3)" in run.stderr
    assert "raw 2-byte data" not in run.stderr


def test_check_quiet_counts_the_failures_it_does_not_list(tmp_path):
    (tmp_path / "wrong.mlir").write_text(textwrap.dedent("""\
        // RUN: stablehlo-translate --interpret %s
        func.func @main() -> tensor<2xf32> {
          %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<2xf32>
          %1 = stablehlo.constant dense<[1.0, 3.0]> : tensor<2xf32>
          stablehlo.custom_call @check.expect_eq(%0, %1) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
          return %0 : tensor<2xf32>
        }
        """))
    checked = hlogen("check", tmp_path, "-q", "--backend", "interpret")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert "failures: 1 (not listed here: see --json or --junit)" in checked.stdout
    assert "... and 1 more" not in checked.stdout


def test_an_old_target_version_is_an_error_without_mlir_s_raw_diagnostic():
    emitted = hlogen("emit", SAMPLES / "mlp.py", "-o", "-", "--format", "portable",
                     "--target-version", "0.0.1")
    assert emitted.returncode == 2 and emitted.stdout == ""
    oldest, newest = _stablehlo.get_minimum_version(), _stablehlo.get_current_version()
    assert emitted.stderr == ("error: to_portable: cannot serialize for StableHLO 0.0.1 (this "
                              f"jaxlib writes {oldest} to {newest}): target version 0.0.1 is "
                              f"less than minimum supported {oldest}\n")


def test_a_truncated_hlo_proto_is_called_truncated(tmp_path):
    proto = jax.jit(multiply).lower(np.ones(3, np.float32), np.ones(3, np.float32)) \
        .compiler_ir("hlo").as_serialized_hlo_module_proto()
    (tmp_path / "cut.hlo.pb").write_bytes(proto[:len(proto) // 2])
    run = hlogen("run", tmp_path / "cut.hlo.pb", "--input", "3xf32=1", "--input", "3xf32=1")
    assert run.returncode == 2
    assert "it begins as XLA's HLO protos (.hlo.pb) do, but it ends inside a field " \
           "(truncated)" in run.stderr
    assert "UTF-8" not in run.stderr


def test_a_text_file_named_npy_is_not_called_pickled(product):
    (product.parent / "x.npy").write_text("1 2 3 4\n")
    run = hlogen("run", product, "--input", "@x.npy", "--input", "4xf32=1", cwd=product.parent)
    assert run.returncode == 2
    assert "not a numpy file" in run.stderr and "b'1 2 3 4\\n'" in run.stderr
    assert "pickled" not in run.stderr


def test_the_messages_speak_english(tmp_path):
    wrong = hlogen("run", SAMPLES / "elementwise.py", "--function", "integer_division",
                   "--input", "5xs32=1", "--input", "4xs32=1")
    assert "got an int32 array of shape (5,)" in wrong.stderr, wrong.stderr
    scalar = hlogen("run", SAMPLES / "elementwise.py", "--function", "clamp_and_select",
                    "--input", "5xf32=1", "--input", "f32=1,2", "--input", "f32=3")
    assert "--input 'f32=1,2': f32[] holds 1 value, got 2" in scalar.stderr, scalar.stderr
