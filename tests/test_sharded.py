"""Sharded programs (hlogen.sharding): jax's, made on 8 virtual CPU devices by
tests/sharded_programs.py in a process of its own (the device count is set before jax's
CPU backend starts), run by hlogen in processes of their own: partitioned on XLA bit for
bit with jax's own results on the same devices, in every form; on the interpreter as
their global program, agreeing by XLA's rule; against their global program on one device
(compare's cpu:one-device side), and bisected there."""
from __future__ import annotations

import contextlib
import io
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import hlogen as hg
from hlogen import sharding
from hlogen.errors import InputError, UnsupportedError
from tests import sharded_programs
from tests.helpers import hlogen_in

ROOT = pathlib.Path(__file__).resolve().parent.parent

SHARDED = "cpu: sharded: 1 replica x 8 partitions on 8 cpu devices"


def _python(*args, cwd=ROOT):
    done = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """The programs and jax's results, then hlogen's results of every form on cpu."""
    folder = tmp_path_factory.mktemp("sharded")
    _python("-m", "tests.sharded_programs", str(folder))
    _python("-m", "tests.sharded_programs", "--hlogen", str(folder))
    return folder


def test_every_form_runs_partitioned_bit_for_bit_with_jax(made):
    got = np.load(made / "hlogen.npz")
    said = json.loads((made / "hlogen.json").read_text())
    paths = [path for _, path in sharded_programs.files(str(made))]
    assert len(paths) == 17 and set(said) == set(paths)  # 5 programs x 3 forms, HLO, bytecode
    for name, path in sharded_programs.files(str(made)):
        expected = np.load(made / f"{name}.expected.npz")
        for i in range(len(expected.files)):
            ours, jax_s = got[f"{path}/result{i}"], expected[f"result{i}"]
            assert ours.dtype == jax_s.dtype and ours.shape == jax_s.shape, path
            assert ours.tobytes() == jax_s.tobytes(), f"{path} result {i}"
        assert said[path]["how"] == SHARDED.removeprefix("cpu: "), path
    # the inputs were cut as XLA compiled them: the batch over "data", the weights whole
    assert said[str(made / "data_parallel.gspmd.mlir")]["inputs"] == \
        ["{replicated}", "{devices=[8,1]<=[8]}"]
    assert said[str(made / "tensor_parallel.jaxexport")]["inputs"][0] == \
        "{devices=[2,1,4]<=[8] last_tile_dim_replicate}"


def test_what_each_form_says_of_its_partitions(made):
    forms = [path for name, path in sharded_programs.files(str(made))
             if name == "data_parallel" or "shard_map" in name]
    for path in forms:
        found = sharding.of_module(hg.load(path).module)
        assert found is not None and found.num_partitions == 8 and found.num_replicas == 1, path
        assert found.manual == ("shard_map" in path), path
        assert found.form == ("GSPMD" if path.endswith(("gspmd.mlir", "hlo.txt")) else "Shardy")
    assert sharding.of_module(hg.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                                      "  return %x : tensor<2xf32>\n}").module) is None


def test_the_global_program_drops_the_annotations_and_refuses_shard_map(made):
    for form in sharded_programs.FORMS:
        text = hg.global_program(hg.load(made / f"constrained.{form}")).as_text()
        assert "sdy" not in text and "mhlo.sharding" not in text and "@Sharding" not in text
        assert "mhlo.num_partitions = 1" in text
        with pytest.raises(UnsupportedError, match="a shard_map \\(manual\\) module"):
            hg.global_program(hg.load(made / f"shard_map_psum.{form}"))


def test_the_partition_count_is_checked_against_the_module(made):
    comp = hg.load(made / "data_parallel.shardy.mlir")
    with pytest.raises(InputError, match="4 partition\\(s\\) asked; the module is partitioned 8 "
                                         "ways"):
        sharding.as_asked(comp, 4)
    with pytest.raises(InputError, match="--one-device"):
        sharding.as_asked(comp, 1)
    assert sharding.as_asked(comp, 8) is comp
    # shardings that say no count (all replicated): --partitions N gives it
    replicated = hg.load("module {\n  func.func @main(%x: tensor<8xf32> {mhlo.sharding = "
                         "\"{replicated}\"}) -> tensor<8xf32> {\n    return %x : tensor<8xf32>\n"
                         "  }\n}")
    assert sharding.of_module(replicated.module) is None
    assert sharding.of_module(sharding.as_asked(replicated, 4).module).num_partitions == 4


def test_the_interpreter_runs_the_global_program_agreeing_by_the_rule(made):
    done = hlogen_in(made, "run", "tensor_parallel.jaxexport", "--input",
                     "tensor_parallel.inputs.npz", "--check-interpret")
    assert done.returncode == 0, done.stderr
    assert SHARDED in done.stderr and "interpret: the global program of a module sharded 8 " \
        "ways, unpartitioned" in done.stderr
    assert "cpu vs interpret: all 32 elements match" in done.stdout
    for form in ("gspmd.mlir", "shardy.mlir"):  # the annotations dropped: no sdy, no @Sharding
        comp = hg.load(made / f"constrained.{form}")
        given = np.load(made / "constrained.inputs.npz")["arg0"]
        got = hg.compile(comp, "interpret")(given)
        np.testing.assert_allclose(got, np.load(made / "constrained.expected.npz")["result0"],
                                   rtol=1e-5, atol=1e-6)
    # a shard_map module has no global program: the interpreter runs its body per partition
    # (hlogen.runtime.manual), 8 here, a core each (tests/test_partitions.py runs 2)
    done = hlogen_in(made, "run", "shard_map_psum.jaxexport", "--input",
                     "shard_map_psum.inputs.npz", "--backend", "interpret")
    if len(os.sched_getaffinity(0)) < 8:
        assert done.returncode == 2 and "1 replica(s) x 8 partitions needs 8 cores" in done.stderr
    else:
        assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_the_partitioner_against_the_global_program_on_one_device(made):
    # a contraction over a dimension split 4 ways: the partial sums add in another order
    args = ("compare", "tensor_parallel.jaxexport", "--test", "cpu", "--reference",
            "cpu:one-device", "--input", "tensor_parallel.inputs.npz")
    bitwise = hlogen_in(made, *args, "--bitwise")
    assert bitwise.returncode == 1, bitwise.stderr
    assert "test cpu and reference cpu:one-device differ" in bitwise.stdout
    assert "test cpu: sharded: 1 replica x 8 partitions on 8 cpu devices\nreference " \
           "cpu:one-device: the global program, unpartitioned on one device" in bitwise.stderr
    # the global program on one device matches jax's one-device run of it where nothing
    # is summed across partitions
    same = hlogen_in(made, "compare", "constrained.shardy.mlir", "--test", "cpu",
                     "--reference", "cpu:one-device", "--bitwise")
    assert same.returncode == 0, same.stdout + same.stderr


def test_bisect_keeps_the_partitioner_and_names_the_partitioned_program(made):
    done = hlogen_in(made, "bisect", "tensor_parallel.shardy.mlir", "--test", "cpu",
                     "--reference", "cpu:one-device", "--bitwise")
    assert done.returncode == 0, done.stderr
    assert "it stays with every HLO pass disabled but XLA's partitioner's: the partitioned " \
           "program itself" in done.stdout
    assert "fails" not in done.stdout  # no compile without the partitioner was tried
    assert "hlogen compare tensor_parallel.shardy.mlir --test cpu --reference cpu:one-device" \
        in done.stdout


def test_partitions_and_one_device_on_the_command_line(made):
    wrong = hlogen_in(made, "run", "data_parallel.jaxexport", "--input",
                      "data_parallel.inputs.npz", "--partitions", "4")
    assert wrong.returncode == 2 and "4 partition(s) asked; the module is partitioned 8 ways" \
        in wrong.stderr
    compiled = hlogen_in(made, "compile", "constrained.gspmd.mlir", "--partitions", "8")
    assert compiled.returncode == 0 and "num_partitions=8" in compiled.stdout
    assert SHARDED in compiled.stderr
    # --one-device: the global program (what sharding.as_asked gives the commands)
    one = sharding.as_asked(hg.load(made / "data_parallel.jaxexport"), one_device=True)
    given = np.load(made / "data_parallel.inputs.npz")
    got = hg.compile(one, "cpu")(given["arg0"], given["arg1"])
    np.testing.assert_allclose(got, np.load(made / "data_parallel.expected.npz")["result0"],
                               rtol=1e-6)
    with pytest.raises(InputError, match="--partitions 8 and --one-device"):
        sharding.as_asked(one, 8, one_device=True)


def test_a_python_process_that_started_jax_with_fewer_devices_is_told_the_fix(made):
    code = ("import jax; jax.config.update('jax_num_cpu_devices', 2); jax.devices()\n"
            "import hlogen as hg\n"
            f"comp = hg.load({str(made / 'data_parallel.shardy.mlir')!r})\n"
            "try:\n    hg.compile(comp, 'cpu')\n"
            "except hg.UnsupportedError as e:\n    print(e)\n")
    said = _python("-c", code).stdout
    assert "num_partitions=8 needs 8 cpu devices; 2 are available" in said
    assert "jax.config.update(\"jax_num_cpu_devices\", 8) before jax's first use" in said


def test_replicated_copies_that_differ_are_an_error():
    from hlogen.runtime import _jaxlib
    devices = hg.compile(hg.load("func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                                 "  return %x : tensor<2xf32>\n}"), "cpu").device.client \
        .local_devices()[:2]
    replicated = _jaxlib.xla_client.HloSharding.replicate().to_proto()
    placement = _jaxlib.ShardedPlacement((3,), np.float32, devices, replicated)
    agree = placement.join([_jaxlib.Placement((3,), np.float32, d).put(np.arange(3, dtype=np.float32))
                            for d in devices])
    value, differ = placement.get(agree)
    assert differ is None and value.tolist() == [0, 1, 2]
    copies = [np.arange(3, dtype=np.float32), np.array([0, 1, 5], np.float32)]
    apart = placement.join([_jaxlib.Placement((3,), np.float32, d).put(c)
                            for d, c in zip(devices, copies)])
    assert placement.get(apart)[1] == (devices[0], devices[1])


def _unaligned(values: np.ndarray) -> np.ndarray:
    """A copy of `values` whose data starts 16 bytes past a multiple of 64 (numpy's own
    large arrays do): an array PJRT's CPU client copies rather than aliases."""
    raw = np.empty(values.nbytes + 128, np.uint8)
    start = -raw.ctypes.data % 64 + 16
    out = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


DONATED = """module @donated attributes {mhlo.num_partitions = 8 : i32} {
  func.func @main(%x: tensor<65536xf32> {mhlo.sharding = "{replicated}", tf.aliasing_output = 0 : i32})
      -> (tensor<65536xf32> {mhlo.sharding = "{replicated}"}) {
    %one = stablehlo.constant dense<1.0> : tensor<65536xf32>
    %y = stablehlo.add %x, %one : tensor<65536xf32>
    return %y : tensor<65536xf32>
  }
}"""


def test_a_replicated_input_is_one_aligned_copy_that_every_cpu_device_aliases():
    from hlogen.runtime import _jaxlib
    exe = hg.compile(hg.load(DONATED), "cpu")
    placement = exe._in[0]
    x = _unaligned(np.arange(65536, dtype=np.float32))
    held = placement.put(x)
    addresses = {shard.data.unsafe_buffer_pointer() for shard in held.addressable_shards}
    assert len(held.addressable_shards) == 8 and len(addresses) == 1  # not 8 copies
    assert addresses != {x.ctypes.data}  # hlogen's copy, not the caller's array
    assert np.asarray(held.addressable_shards[5].data).tobytes() == x.tobytes()
    # an array PJRT aliases as it is (as jax's own put does) is not copied again
    aligned = _jaxlib.aligned_copy(x)
    assert placement.host_array(aligned) is aligned


def test_a_donated_replicated_input_the_devices_share_is_not_written_in_place():
    from hlogen.runtime import _jaxlib
    exe = hg.compile(hg.load(DONATED), "cpu")
    x = _unaligned(np.arange(65536, dtype=np.float32))
    before = x.copy()
    for _ in range(3):  # through jax's fast path after the first call
        assert exe(x).tobytes() == (before + 1).tobytes()
    assert x.tobytes() == before.tobytes()
    # XLA donates the parameter (input_output_alias); PJRT's CPU client gives the result
    # new memory where the parameter aliases host memory that all 8 devices read
    held = exe._in[0].put(x)
    shared = held.addressable_shards[0].data.unsafe_buffer_pointer()
    out, = _jaxlib.execute_partitioned(exe._loaded, [held], exe._out)
    assert held.is_deleted()  # donated
    assert shared not in {s.data.unsafe_buffer_pointer() for s in out.addressable_shards}
    value, differ = exe._out[0].get(out)
    assert differ is None and value.tobytes() == (before + 1).tobytes()


@pytest.mark.parametrize("text, copies_per_slice", [
    ("{replicated}", 8), ("{devices=[2,1,4]<=[8] last_tile_dim_replicate}", 4)])
def test_copies_that_differ_anywhere_are_found_and_the_first_in_device_order_named(
        text, copies_per_slice):
    from hlogen.runtime import _jaxlib
    exe = hg.compile(hg.load(DONATED), "cpu")
    devices = exe.devices
    op_sharding = _jaxlib.xla_client.HloSharding.from_string(text).to_proto()
    shape = (2, (1 << 20) + 3)  # two of get's chunks per slice, the second of 3 bytes
    placement = _jaxlib.ShardedPlacement(shape, np.uint8, devices, op_sharding)
    whole = np.random.default_rng(0).integers(0, 255, shape, dtype=np.uint8)
    slices = placement.sharding.devices_indices_map(shape)

    def joined(changes):
        per_device = []
        for d in devices:
            data = whole[slices[d]].copy()
            for device, at in changes:
                if device == d:
                    data.reshape(-1)[at] ^= 1
            per_device.append(_jaxlib.Placement(data.shape, np.uint8, d).put(data))
        return placement.join(per_device)

    value, differ = placement.get(joined([]))
    assert differ is None and value.tobytes() == whole.tobytes()
    last = whole[slices[devices[0]]].size - 1
    # the last byte of one copy; the first byte of a later copy of the same slice
    second, third = devices[1], devices[2]
    assert placement.get(joined([(second, last)]))[1] == (devices[0], second)
    assert placement.get(joined([(third, 0), (second, last)]))[1] == (devices[0], second)
    assert placement.get(joined([(devices[7], 0)]))[1] == (devices[8 - copies_per_slice],
                                                           devices[7])


def test_the_documentation(tmp_path, monkeypatch):
    from tests import docs
    from tests.test_cli_readme import fresh_clone, run_session
    page = "docs/sharded.md"
    bin_dir = str(pathlib.Path(sys.executable).parent)  # the session's python is this venv's
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ["PATH"])
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    monkeypatch.setenv("HLOGEN_CACHE_DIR", str(tmp_path / "cache"))
    clone = fresh_clone(tmp_path)
    monkeypatch.chdir(clone)
    export, python_api = docs.blocks(page, "python", "From a jax export") + \
        docs.blocks(page, "python", "In Python")
    (clone / "sharded_mlp.py").write_text(export)
    assert len(run_session(docs.console("docs/sharded.md", "From a jax export"))) == 3
    assert len(run_session(docs.console("docs/sharded.md", "The partitioner under test"))) == 3
    assert len(run_session(docs.console("docs/sharded.md", "The interpreter as reference"))) == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        namespace = {"__name__": "sharded_docs"}
        exec(compile(python_api, page, "exec"), namespace)
    assert out.getvalue() == "sharded: 1 replica x 8 partitions on 8 cpu devices\n"
    np.testing.assert_allclose(namespace["y"], namespace["one"], rtol=1e-5)


CONFORMANCE_CASE = """// RUN: stablehlo-translate --interpret %s

module attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["x"=4]>
  func.func @main() {
    %a = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<4x2xf32>
    %b = sdy.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<4x2xf32>
    %c = stablehlo.add %b, %b : tensor<4x2xf32>
    check.expect_almost_eq_const %c, dense<[[2.0, 4.0], [6.0, 8.0], [10.0, 12.0], [14.0, 16.0]]> : tensor<4x2xf32>
    func.return
  }
}
"""


def test_check_runs_a_sharded_conformance_case_on_both_backends(tmp_path):
    (tmp_path / "sharded_add.mlir").write_text(CONFORMANCE_CASE)
    for backend in ("cpu", "interpret"):
        done = hlogen_in(tmp_path, "check", "sharded_add.mlir", "--backend", backend)
        assert done.returncode == 0 and f"{backend}: 1 pass" in done.stdout, done.stdout


def test_what_a_side_runs_is_prepared_as_compiling_does(made):
    # the fuzzer's preflight (hlogen.fuzz.triage) and the route through HLO ask this: a
    # GSPMD module's @Sharding reaches XLA partitioned, the interpreter gets no sdy op
    from hlogen import backends
    from hlogen.runtime.execution import prepare_as_compiled
    for form in ("gspmd.mlir", "shardy.mlir"):
        comp = hg.load(made / f"constrained.{form}")
        on_xla = prepare_as_compiled(comp, backends.CPU).computation.as_text()
        assert "mhlo.num_partitions = 8" in on_xla
        assert ("@Sharding" if form == "gspmd.mlir" else "sdy.sharding_constraint") in on_xla
        interpreted = prepare_as_compiled(comp, backends.INTERPRET).computation.as_text()
        assert "sdy" not in interpreted and "@Sharding" not in interpreted
    with pytest.raises(UnsupportedError, match="as one replica"):
        hg.compile(hg.load(made / "data_parallel.shardy.mlir"), "cpu", num_replicas=2)
