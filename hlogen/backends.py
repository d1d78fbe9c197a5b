"""One declaration per backend: what it is, what it refuses and why, what it needs rewritten.

Every question "can backend X run Y?" is answered here, by X's `Backend`:
- `refuses`: ops it cannot run (always, or where a predicate of the op says so),
- `refuses_types`: element types it cannot run values of,
- `dialects`: the dialects it runs (None: any that legalizes to it),
- `refuses_module`: what depends on the whole module and the replica count,
- `rewrites`: the hlogen.rewrites entries it needs (every backend XLA's semantics where
  StableHLO leaves results open; the interpreter also the definitions of the ops it lacks),
- `readable`: the result element types it hands back as they are (the others travel in
  carriers: see hlogen.runtime.execution).
hlogen.preflight checks a module against it, hlogen.rewrites applies its sets, the runtime
runs it by `kind`, and `hlogen devices`, the command line's `--backend` and the
conformance runner list the declared backends. Adding a backend is one `declare` call:
PJRT plugins are declared by hlogen.runtime when they load, and `with_options` declares
"the same backend under other XLA options". What differs by kind is a field here
(`compiles`) or the executable's (hlogen.runtime.executable): nothing branches on `kind`
but hlogen.runtime's table of compilers.

Every refusal here was seen on jaxlib 0.10.2: the op ends the process (SIGSEGV, SIGABRT,
SIGFPE), fails to compile, never finishes, or computes wrong values.
"""
from __future__ import annotations

import dataclasses
import enum
import importlib.util
import os
import threading
from typing import Callable, Mapping

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import decompositions, dynamism, mlir, random_bits, sharding
from hlogen import types as T
from hlogen.errors import InputError, UnsupportedError
from hlogen.ops import collectives
from hlogen.ops.custom_call import reserved_reason
from hlogen.ops.random import NORMAL_TYPES, UNIFORM_TYPES
from hlogen.rewrites import COMPARABLE, XLA_SEMANTICS


class Kind(enum.Enum):
    """How a backend runs a module: in-process on the StableHLO reference interpreter, or
    compiled by XLA behind a PJRT client (jaxlib's cpu and gpu, or a plugin). Each is a
    row of hlogen.runtime.COMPILERS, which names the runtime module that compiles it."""
    INTERPRETER = "interpreter"
    PJRT = "pjrt"
    IREE = "iree"  # IREE's own compiler (iree-compile) and runtime, the extra hlogen[iree]


@dataclasses.dataclass(frozen=True)
class Refusal:
    """Why a backend refuses an op: always (`when` None), or where `when(op)` is true
    (or a string, which then says why instead of `why`)."""
    why: str
    when: Callable[[ir.Operation], bool | str | None] | None = None

    def verdict(self, op: ir.Operation) -> str | None:
        found = True if self.when is None else self.when(op)
        if not found:
            return None
        return found if isinstance(found, str) else self.why


# The facts of a plugin's identity that key its executables: one plugin's executable is
# never loaded by another (another library, version, or build of the same file)
IDENTIFYING = ("library", "modified", "version", "platform", "platform_version", "pjrt_c_api")


@dataclasses.dataclass(frozen=True)
class Backend:
    name: str          # what users type: --backend NAME, hg.compile(backend=NAME)
    kind: Kind
    description: str   # one line, for `hlogen devices` and --help
    words: str         # how messages name it: "XLA (PJRT)", "the reference interpreter"
    platform: str | None = None  # the PJRT platform its client is asked for
    refuses: Mapping[str, Refusal] = dataclasses.field(default_factory=dict)
    refuses_types: Mapping[str, str] = dataclasses.field(default_factory=dict)
    dialects: tuple[str, ...] | None = None
    refuses_module: Callable[[ir.Module, int], tuple[ir.Operation, str] | None] | None = None
    rewrites: tuple = tuple(XLA_SEMANTICS)  # hlogen.rewrites entries, tried in order
    readable: frozenset | None = None  # None: every element type (PJRT's, always)
    # the parameter element types it takes as they are (None: every one); the others are
    # passed in carriers and converted inside (hlogen.runtime.execution)
    passable: frozenset | None = None
    xla_options: tuple = ()  # (name, value) pairs every compile gets (see with_options)
    # a compiler of its own (not XLA) that takes command-line flags: "--NAME=VALUE" strings
    # every compile gets (see with_flags; its runtime module checks them)
    takes_flags: bool = False
    flags: tuple = ()
    # a PJRT plugin's facts: its library, what it says of itself (hlogen.runtime.plugins)
    identity: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # XLA compiles its modules: it takes XLA options, its executables have a disk cache
    # and optimized HLO, its results come back as they are (False: the interpreter)
    compiles: bool = True

    def __post_init__(self):
        if self.readable is not None and self.compiles:
            raise InputError(f"backend {self.name!r}: `readable` is the interpreter's (its results "
                             f"are MLIR attributes); a PJRT executable hands back every type as "
                             f"it is, and nothing would turn carriers back")

    def __str__(self) -> str:
        return self.name

    def __hash__(self) -> int:  # (a name is declared once: equal backends have one name)
        return hash(self.name)

    @property
    def has_compiler(self) -> bool:
        """XLA or a compiler of its own (IREE) compiles its modules: a module's constants
        are better passed as parameters, which its folder cannot compute at compile time
        (the conformance runner lifts them)."""
        return self.compiles or self.takes_flags

    @property
    def plain_name(self) -> str:
        """Its name without the XLA options `with_options` named it by."""
        return self.name.split("[", 1)[0]

    def refusal(self, op: ir.Operation) -> str | None:
        """Why this backend cannot run `op` (by its name and dialect), or None."""
        found = self.refuses.get(op.name)
        if found is not None:
            why = found.verdict(op)
            if why:
                return why
        if self.dialects is not None and not op.name.startswith(self.dialects):
            return f"it runs {' and '.join(d.rstrip('.') for d in self.dialects)} ops only"
        return None

    @property
    def library(self) -> str | None:
        """A PJRT plugin's library, whose XLA compiles for it (and takes its XLA options);
        None for jaxlib's backends."""
        return self.identity.get("library")

    def identity_key(self) -> str:
        """What tells this backend's executables from another library's, in the keys of the
        executable caches and compiled files: a plugin's IDENTIFYING facts ("" for jaxlib's)."""
        return ";".join(f"{k}={self.identity[k]}" for k in IDENTIFYING if k in self.identity)

    def reads_as_is(self, et: T.ElementType) -> bool:
        return self.readable is None or et.name in self.readable

    def passes_as_is(self, et: T.ElementType) -> bool:
        return self.passable is None or et.name in self.passable

    def with_options(self, options: Mapping[str, object], name: str | None = None) -> "Backend":
        """This backend under other XLA options (a PJRT backend): declared under `name`
        (default: NAME[opt=value,...]), compiled and cached apart from the plain one."""
        if not self.compiles:
            raise InputError(f"backend {self.name!r}: XLA options apply to PJRT backends; "
                             + (f"{self.words} is not XLA (its own flags: with_flags)"
                                if self.takes_flags else f"{self.words} compiles nothing"))
        merged = dict(self.xla_options)
        merged.update(options)
        pairs = tuple(sorted(merged.items()))
        if name is None:
            base = self.plain_name
            name = base + "[" + ",".join(f"{k}={v}" for k, v in pairs) + "]" if pairs else base
        return declare(dataclasses.replace(self, name=name, xla_options=pairs))


    def with_flags(self, flags) -> "Backend":
        """This backend with its compiler's own command-line flags (IREE's
        "--iree-opt-level=O2"), declared as NAME[--flag=value,...] and compiled apart."""
        if not self.takes_flags:
            raise InputError(f"backend {self.name!r}: {self.words} takes no compiler flags "
                             f"(XLA's options: with_options, --xla-flag)")
        given = tuple(flags)
        for flag in given:
            if not (isinstance(flag, str) and flag.startswith("--") and len(flag) > 2
                    and "," not in flag):
                raise InputError(f"backend {self.name!r}: a compiler flag is --NAME or "
                                 f"--NAME=VALUE (no comma), got {flag!r}")
        merged = (*self.flags, *given)
        name = self.plain_name + ("[" + ",".join(merged) + "]" if merged else "")
        return declare(dataclasses.replace(self, name=name, flags=merged))


BACKENDS: dict[str, Backend] = {}  # by name, in the order declared
# Backends found but not usable (a PJRT plugin that failed to load): name -> why
UNAVAILABLE: dict[str, str] = {}
# What declares the backends found at run time (PJRT plugins: hlogen.runtime adds its
# discovery, which starts jax; this layer imports none of it): each runs once, when
# `discover` is called or `get` is asked for a name not declared.
_discoveries: list[Callable[[], None]] = []
_discovering = threading.RLock()  # a thread asking during discovery waits for its end


def on_discovery(discover_more: Callable[[], None]) -> None:
    _discoveries.append(discover_more)


def discover() -> dict[str, Backend]:
    """Every backend: the ones declared, and the ones discovery finds (each installed PJRT
    plugin, loaded on the first call; hlogen.runtime.plugins)."""
    with _discovering:
        while _discoveries:
            _discoveries.pop(0)()
    return BACKENDS


def compiles(name) -> bool:
    """Whether backend `name` compiles modules with XLA (a PJRT backend)."""
    return get(name).compiles


def declare(backend: Backend) -> Backend:
    """Adds `backend` (or returns the one declared under its name, if it is the same)."""
    found = BACKENDS.get(backend.name)
    if found is not None and found != backend:
        raise InputError(f"a backend named {backend.name!r} is already declared "
                         f"({found.description})")
    return BACKENDS.setdefault(backend.name, backend)


def declared() -> list[Backend]:
    """The backends declared in their own right, in the order declared: not one that
    `with_options` declared for the runs of a side under other XLA options (a run of
    every backend, devices and the lists of names leave those out)."""
    return [b for b in BACKENDS.values() if b.name == b.plain_name]


def names() -> list[str]:
    """The names of the backends declared in their own right."""
    return [b.name for b in declared()]


def get(name) -> Backend:
    """The backend declared as `name` (a Backend is returned as it is)."""
    if isinstance(name, Backend):
        return name
    found = BACKENDS.get(name)
    if found is None:
        found = discover().get(name)
    if found is None and isinstance(name, str) and name.endswith("]") and "[" in name:
        base = BACKENDS.get(name.split("[", 1)[0])  # iree[--iree-opt-level=O2]
        if base is not None and base.takes_flags:
            return base.with_flags(name[len(base.name) + 1:-1].split(","))
    if found is None:
        plain = name.split("[", 1)[0] if isinstance(name, str) else name
        if plain in UNAVAILABLE:
            raise UnsupportedError(f"backend {name!r} cannot be used: {UNAVAILABLE[plain]}")
        if name in UNAVAILABLE:
            raise UnsupportedError(f"backend {name!r} cannot be used: {UNAVAILABLE[name]}")
        raise InputError(f"backend must be one of {', '.join(names())} (or None for jax's "
                         f"default device), got {name!r}")
    return found


# -- XLA behind PJRT ---------------------------------------------------------------------------

def _element_type(value) -> T.ElementType:
    return mlir.shape_of_type(value.type).element_type


def _rng_refusal(op):
    # XLA CPU aborts on types it does not generate (ops.random's table says which)
    et = _element_type(op.results[0])
    supported = NORMAL_TYPES if mlir.enum_attribute(op, "rng_distribution") == "NORMAL" \
        else UNIFORM_TYPES
    if et.name not in supported:
        return f"XLA CPU generates only {', '.join(sorted(supported))} values, not {et.name}"
    return None


def _bits_refusal(op):
    # XLA CPU treats float or signed random bits as unsigned ones, and the ops that use
    # them too: ops.rng_bit_generator emits unsigned bits and bitcasts them
    et = _element_type(op.results[1])
    if et.kind != T.UNSIGNED:
        return (f"XLA CPU miscompiles random bits of type {et.name}; generate unsigned bits of "
                f"the same width and bitcast them (as ops.rng_bit_generator does)")
    return None


def _two_bit(what: str):
    """A predicate: `op` has s2/u2 operands, which XLA CPU `what` (s4 and wider work)."""
    def refusal(op):
        for value in op.operands:
            if _element_type(value).bits == 2:
                return (f"XLA CPU {what} {_element_type(value).name} values; convert them to "
                        f"s8/u8 first")
        return None
    return refusal


def _complex_operands(op) -> bool:
    return _element_type(op.operands[0]).kind == T.COMPLEX


def _ordered_complex(op) -> bool:
    return _complex_operands(op) and \
        mlir.enum_attribute(op, "comparison_direction") not in ("EQ", "NE")


# StableHLO's ops that carry a result_accuracy (hg.ResultAccuracy, XlaBuilder's ResultAccuracy)
_ACCURACY_OPS = frozenset(f"stablehlo.{name}" for name in (
    "exponential", "exponential_minus_one", "log", "log_plus_one", "logistic", "rsqrt", "sqrt",
    "cbrt", "sine", "cosine", "tan", "tanh"))


def _tolerance_refusal(backend: str):
    """refuses_module of a backend that runs one implementation of each op whatever the
    tolerance asked, without checking it (HIGHEST is that implementation; DEFAULT as well).
    A module check, not a refusal of the ops: what a backend runs of them is unchanged."""
    why = (f"result_accuracy in TOLERANCE mode: {backend} has one implementation of this op "
           f"and runs it whatever the tolerance, without checking it, so the tolerance cannot "
           f"be promised; ask for mode HIGHEST (that implementation) or DEFAULT")

    def refusal(module: ir.Module, num_replicas: int):
        for op in mlir.walk(module):
            if op.name in _ACCURACY_OPS and "result_accuracy" in op.attributes and \
                    stablehlo.ResultAccuracyAttr(op.attributes["result_accuracy"]).mode == "TOLERANCE":
                return op, why
        return None
    return refusal


def _loop_in_map(op) -> bool:
    # found by hlogen.differential's generator: XLA CPU's loop emitter CHECK-fails
    # ("operand_maps.size() == 1" in computation_partitioner.cc) on a while in a map
    return any(inner.name == "stablehlo.while" for inner in mlir.walk_op(op))


def _variadic_with_channel(op):
    return len(op.operands) > 1 and "channel_handle" in op.attributes


# jax's host callbacks (io_callback, pure_callback, debug.callback and debug.print): they
# name a Python function of the process that lowered the module by its index (or address)
# there; in another process XLA calls whatever that is, and ends the process (SIGSEGV)
_HOST_CALLBACKS = frozenset({
    "xla_python_cpu_callback", "xla_ffi_python_cpu_callback",
    "xla_ffi_partitioned_python_cpu_callback", "xla_python_gpu_callback",
    "xla_ffi_python_gpu_callback", "xla_ffi_partitioned_python_gpu_callback"})


# Ops in whose regions XLA CPU runs a custom call (checked with jaxlib 0.10.2). In the
# others it does not: a reduce body ends the process, a sort comparator fails to link;
# the rest (reduce_window, scatter...) are refused without having been tried.
_REGIONS_THAT_RUN_CUSTOM_CALLS = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if",
                                            "stablehlo.map"})




def _pjrt_custom_call(op):
    # jax's host callbacks, reserved targets, places XLA CPU does not run one
    target = mlir.call_target(op)
    if target in _HOST_CALLBACKS:
        return (f"{target} is a jax host callback: it calls a Python function of the process "
                f"that lowered the module, which this process does not have (XLA would end "
                f"the process); lower the function without the callback")
    reason = reserved_reason(target)
    if target in sharding.GSPMD_MARKERS and reason is not None:
        partitions = collectives.partitions_of(op)
        if partitions > 1 and "mhlo.sharding" in op.attributes:
            reason = None  # XLA's SPMD partitioner reads and removes them
        elif partitions > 1:
            return (f"target {target!r} is GSPMD's marker: it needs an mhlo.sharding "
                    f"attribute (what the partitioner reads), and this one has none")
        else:
            return (f"target {target!r} is GSPMD's marker, which XLA's SPMD partitioner "
                    f"handles: compile for the partitions the module's shardings name "
                    f"(num_partitions > 1), or drop the marker to run the global program")
    if reason is not None:  # in a loaded module, most likely XLA's optimized HLO
        return (f"target {reason} (XLA's optimized HLO holds such calls, made from other "
                f"ops: the module XLA dumped before optimizations has those)")
    parent = op.parent
    while parent is not None and parent.name != "func.func":
        if parent.name not in _REGIONS_THAT_RUN_CUSTOM_CALLS:
            return (f"XLA CPU does not run a custom_call inside the computation of "
                    f"{parent.name} (in a reduce body it ends the process); custom calls run "
                    f"at the top level and in while, case, if and map bodies")
        parent = parent.parent
    return None


_NO_F6 = "XLA CPU has no f6 types: it fails to compile them, and ends the process on an f6 constant"

# What XLA behind jaxlib's PJRT client refuses: the declaration of cpu and gpu, and the
# start of a plugin's (a plugin is XLA too, often of another version).
XLA_REFUSES = {
    "stablehlo.all_reduce": Refusal(
        "XLA CPU fails to compile an all-reduce of several operands that has a channel id "
        "(\"LogicalBuffer ... does not have a layout\"); replicas of one module need no "
        "channel id, or reduce the elements one by one", _variadic_with_channel),
    "stablehlo.infeed": Refusal("jaxlib's PJRT client has no way to fill a device's infeed "
                                "queue, so the run would wait forever"),
    "stablehlo.custom_call": Refusal("", _pjrt_custom_call),
    "stablehlo.rng": Refusal("", _rng_refusal),
    "stablehlo.rng_bit_generator": Refusal("", _bits_refusal),
    "stablehlo.sort": Refusal("", _two_bit("sorts wrongly")),
    "stablehlo.concatenate": Refusal("", _two_bit("ends the process (a CHECK in ir_array.cc) "
                                                  "concatenating")),
    "stablehlo.remainder": Refusal("XLA CPU ends the process (SIGSEGV) compiling a remainder of "
                                   "complex numbers", _complex_operands),
    "stablehlo.map": Refusal("XLA CPU ends the process (a CHECK in computation_partitioner.cc) "
                             "compiling a while loop inside a map's computation", _loop_in_map),
}
XLA_REFUSES_TYPES = {"f6e2m3fn": _NO_F6, "f6e3m2fn": _NO_F6}
# An XLA other than jaxlib's CPU (GPU, a plugin): how it hands back a dynamic result
# (hlogen.dynamism reads XLA CPU's: its elements first, in a buffer of the bound's size)
# is not measured, so a module with dynamic dimensions (hlogen's own set_dimension_size
# for a bounded parameter included) is refused.
XLA_REFUSES_UNMEASURED = {**XLA_REFUSES, "stablehlo.set_dimension_size": Refusal(
    "hlogen reads dynamic results as XLA CPU hands them back; this XLA's way is not measured")}

CPU = declare(Backend(
    name="cpu", kind=Kind.PJRT, platform="cpu", words="XLA (PJRT)",
    description="XLA CPU, jaxlib's PJRT client",
    refuses={**XLA_REFUSES, "stablehlo.collective_broadcast": Refusal(
        "XLA CPU does not implement collective_broadcast (\"HLO opcode `collective-broadcast` "
        "is not supported by XLA:CPU ThunkEmitter\")")},
    refuses_types=XLA_REFUSES_TYPES,
    # jaxlib 0.10.2's XLA CPU runs exp with atol = rtol = 1e-60 (TPUs alone choose by
    # tolerance, and fail where none meets it)
    refuses_module=_tolerance_refusal("XLA CPU")))
GPU = declare(Backend(
    name="gpu", kind=Kind.PJRT, platform="gpu", words="XLA (PJRT)",
    description="XLA GPU, jaxlib's PJRT client (the extra hlogen[cuda])",
    refuses=XLA_REFUSES_UNMEASURED,
    refuses_types=XLA_REFUSES_TYPES))


# -- the reference interpreter ---------------------------------------------------------------

def _tuple_operands(op) -> bool:
    return any(str(v.type).startswith("tuple<") for v in op.operands)


def _native_code(op):
    # what is left of the custom calls after hlogen.decompositions' LAPACK rewrites
    target = mlir.call_target(op)
    if target.startswith("lapack_") and any(isinstance(r.type, ir.TupleType) for r in op.results):
        return (f"{target}: hlogen rewrites LAPACK calls of several results, as jax emits "
                f"them (and hlogen reads XLA's HLO), not of one tuple result")
    if target.startswith("lapack_"):
        return (f"{target}: this LAPACK routine has no formulation here (the eigen, SVD and QR "
                f"solvers run on PJRT only; hlogen rewrites jaxlib's lapack_?potrf_ffi, "
                f"lapack_?trsm_ffi and lapack_?getrf_ffi whose matrices are column-major, as "
                f"jax states their operand_layouts and result_layouts)")
    return (f"{target} is native code, which the interpreter cannot call (hlogen rewrites only "
            f"jaxlib's LAPACK potrf, trsm and getrf)")


def cores() -> int:
    """The cores this process may run on (the interpreter's runner has a thread per core)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _runs_repeatedly(op: ir.Operation) -> bool:
    parent = op.parent
    while parent is not None:
        if parent.name == "stablehlo.while":
            return True
        if parent.name == "func.func":
            return mlir.symbol_name(parent) != "main"
        parent = parent.parent
    return False


def _parallel_runner_refusal(module: ir.Module, num_replicas: int):
    """What the interpreter's parallel runner (replicas, partitions, collectives)
    deadlocks on (the process aborts with "rendezvous timed out") or computes wrongly:
    (op or None, why)."""
    ops = [op for op in mlir.walk(module) if op.name in collectives.OPS]
    processes = num_replicas * collectives.partitions_of(module.operation)
    if processes == 1 and not ops:
        return None  # no parallel runner
    # The runner (StableHLO's evalRunParallelOp) runs each process as a task of an
    # llvm::DefaultThreadPool, whose threads are as many as the CPUs of the process's
    # affinity mask; a process at a collective holds its thread until every process of
    # its group arrives, so processes beyond the threads never start (rendezvous timed
    # out). Without a collective that waits, each process ends and frees its thread.
    waits = [op for op in ops if op.name not in ("stablehlo.replica_id",
                                                 "stablehlo.partition_id")]
    threads = cores()
    if processes > threads and waits:
        grid = (f"num_replicas={num_replicas}" if processes == num_replicas else
                f"{num_replicas} replica(s) x {processes // num_replicas} partitions")
        return waits[0], (f"the reference interpreter's parallel runner has one thread per "
                          f"core ({threads} here), and a process waiting at a collective "
                          f"holds its thread, so the processes beyond the threads never start "
                          f"(it aborts: rendezvous timed out): {grid} needs {processes} cores")
    for op in waits:
        if _runs_repeatedly(op):
            return op, ("it runs more than once (in a while loop, or in a function other "
                        "than main), and the runner mixes the data of a collective's "
                        "executions")
        if op.name == "stablehlo.collective_permute" and any(
                a == b for a, b in collectives.pairs_of(op)):
            return op, "a replica that sends to itself deadlocks its runner"
    return None


_LACKS = "the interpreter has no usable implementation of it (it aborts, or does not finish)"
_interpreter_tolerance = _tolerance_refusal("the reference interpreter")
_MAX_TO_ZERO = "the reference interpreter rounds results equal to the largest finite value (±{}) to 0"

INTERPRET = declare(Backend(
    name="interpret", kind=Kind.INTERPRETER, words="the reference interpreter", compiles=False,
    description="the StableHLO reference interpreter: slow, exact, in this process",
    refuses={
        "stablehlo.rng": Refusal("its state is XLA's, kept in the process, so no module can "
                                 "give the same numbers; use rng_bit_generator, whose state "
                                 "is explicit"),
        "stablehlo.custom_call": Refusal("", _native_code),
        "stablehlo.einsum": Refusal("hlogen rewrites einsums of two operands without '...' or "
                                    "a label repeated within one of them; the interpreter has "
                                    "none"),
        "stablehlo.unary_einsum": Refusal(_LACKS + "; XLA does not translate it either"),
        **{name: Refusal("the interpreter runs one module, with nothing outside it to "
                         "exchange data with") for name in (
            "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv")},
        "func.call": Refusal("the interpreter aborts on tuples passed to func.call",
                             _tuple_operands),
        "stablehlo.remainder": Refusal("the interpreter aborts on a remainder of complex numbers "
                                       "(it has none)", _complex_operands),
        "stablehlo.compare": Refusal("the interpreter aborts on an ordered comparison of complex "
                                     "numbers (only EQ and NE compare them)", _ordered_complex),
    },
    refuses_types={
        "f4e2m1fn": _MAX_TO_ZERO.format(6),
        "f6e2m3fn": _MAX_TO_ZERO.format(7.5),
        "f6e3m2fn": _MAX_TO_ZERO.format(28),
        "f8e8m0fnu": ("the reference interpreter converts its NaN to Inf and returns numbers "
                      "where the type has none (negative values, zero) instead of NaN"),
    },
    dialects=("stablehlo.", "func."),
    refuses_module=lambda module, num_replicas: (
        _interpreter_tolerance(module, num_replicas) or
        _parallel_runner_refusal(module, num_replicas)),
    rewrites=(*XLA_SEMANTICS, *decompositions.RULES, *random_bits.RULES, *dynamism.RULES),
    readable=mlir.ATTRIBUTE_READABLE))


# -- IREE (the extra hlogen[iree]) -------------------------------------------------------------
# Measured with iree-base-compiler and iree-base-runtime 3.13.0 on llvm-cpu (the shared
# notes' IREE_NOTES.md): what it fails to compile, ends the process on, or computes wrongly.

IREE_VERSION = "3.13"  # the release these refusals were measured with (pyproject's pin)


def _iree_missing() -> str | None:
    """Why IREE's compiler or runtime cannot be used here, or None (found, not imported:
    importing them is the runtime's business)."""
    for module in ("iree.compiler", "iree.runtime"):
        try:
            found = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            found = None
        if found is None:
            return (f"{module} is not installed: IREE is the extra hlogen[iree] "
                    f"(pip install 'hlogen[iree]', IREE {IREE_VERSION})")
    return None


def _dims(op, name: str) -> list[int]:
    return list(ir.DenseI64ArrayAttr(op.attributes[name])) if name in op.attributes else []


def _scatter_dims(op):
    # iree_linalg_ext.scatter takes index dimensions that are a leading run of the operand's
    # ([0], [0, 1], any single one); others fail ("expected indices to be equal to batch rank")
    dims = list(stablehlo.ScatterDimensionNumbers(
        op.attributes["scatter_dimension_numbers"]).scattered_dims_to_operand_dims)
    if len(dims) >= 2 and dims != list(range(len(dims))):
        return (f"IREE fails to compile a scatter whose scatter_dims_to_operand_dims {dims} is "
                f"not a leading run [0, 1, ...] of the operand's dimensions")
    return None


def _of_kind(*kinds, bits=None):
    """A predicate: the op's first operand (or result) has an element type of `kinds`
    (and, if given, of `bits` bits)."""
    def found(op):
        value = op.operands[0] if len(op.operands) else op.results[0]
        et = _element_type(value)
        return et.kind in kinds and (bits is None or et.bits in bits)
    return found


def _padded(op) -> bool:
    return "padding" in op.attributes and any(
        int(v) for v in ir.DenseIntElementsAttr(op.attributes["padding"]))


def _padded_unsigned_window(op) -> bool:
    # (a padded 1-D one compiled; every padded 2-D one of testdata failed)
    return _element_type(op.operands[0]).kind == T.UNSIGNED and _padded(op) and \
        mlir.shape_of_type(op.operands[0].type).rank >= 2


def _windows_not_tiled(op) -> bool:
    # IREE legalizes select_and_scatter only where the windows tile the operand (tried:
    # ranks 1-4 with strides equal to the windows compile; overlapping windows do not)
    window = _dims(op, "window_dimensions")
    strides = _dims(op, "window_strides") or [1] * len(window)
    return strides != window or _padded(op)


def _complex128_constant(op) -> bool:
    return _element_type(op.results[0]).name == "c128"


def _philox(op) -> bool:
    return mlir.enum_attribute(op, "rng_algorithm") == "PHILOX"


_NO_LIBM = ("IREE's llvm-cpu executables link no libm: {} of {} fails to link "
            "(iree-lld: undefined symbol)")
_IREE_COLLECTIVES = ("IREE's CPU runtime implements no collectives (\"collectives not "
                     "implemented\" at run time)")

IREE_REFUSES = {
    "stablehlo.custom_call": Refusal("IREE's StableHLO input marks every custom_call illegal "
                                     "(after hlogen's LAPACK rewrites, this one is native code)"),
    "stablehlo.create_token": Refusal("IREE's StableHLO input has no tokens"),
    "stablehlo.after_all": Refusal("IREE's StableHLO input has no tokens"),
    **{name: Refusal("IREE runs one module, with nothing outside it to exchange data with")
       for name in ("stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send",
                    "stablehlo.recv")},
    **{name: Refusal(_IREE_COLLECTIVES) for name in collectives.OPS
       if name != "stablehlo.partition_id"},
    "stablehlo.rng": Refusal("its state is XLA's, kept in XLA's process, so IREE cannot give "
                             "the same numbers; use rng_bit_generator, whose state is explicit"),
    "stablehlo.rng_bit_generator": Refusal(
        "IREE's PHILOX bits differ from XLA's (its new state agrees); THREE_FRY and DEFAULT "
        "agree bitwise", _philox),
    "stablehlo.scatter": Refusal("", _scatter_dims),
    "stablehlo.select_and_scatter": Refusal(
        "IREE fails to legalize a select_and_scatter whose windows overlap or leave gaps "
        "(window_strides other than window_dimensions) or are padded", _windows_not_tiled),
    "stablehlo.fft": Refusal("IREE fails to legalize an FFT of more than one dimension",
                             lambda op: len(_dims(op, "fft_length")) > 1),
    "stablehlo.constant": Refusal(
        "iree-compile ends by SIGFPE on a complex<f64> constant (its constant packing); pass "
        "the value as a parameter", _complex128_constant),
    "stablehlo.bitcast_convert": Refusal(
        "iree-compile ends by SIGSEGV on a bitcast_convert of complex<f64>",
        lambda op: _element_type(op.operands[0]).name == "c128" or
        _element_type(op.results[0]).name == "c128"),
    "stablehlo.cbrt": Refusal("IREE has no cbrt of f64 or complex numbers ('math.cbrt' illegal)",
                              lambda op: _element_type(op.operands[0]).name in
                              ("f64", "c64", "c128")),
    "stablehlo.atan2": Refusal(_NO_LIBM.format("atan2", "f64"), _of_kind(T.FLOAT, bits=(64,))),
}
for _name, _symbol in (("sine", "sin"), ("cosine", "cos"), ("tan", "cos"), ("tanh", "tanh")):
    IREE_REFUSES[f"stablehlo.{_name}"] = Refusal(
        _NO_LIBM.format(_symbol, f"f64 or complex<f64> {_name}"),
        lambda op: _element_type(op.operands[0]).name in ("f64", "c128"))
for _name in ("exponential", "exponential_minus_one", "log", "log_plus_one", "sqrt", "rsqrt",
              "logistic", "power"):  # (f64 ones link: only complex<f64> needs sin, cos, atan2)
    IREE_REFUSES[f"stablehlo.{_name}"] = Refusal(
        _NO_LIBM.format("sin, cos or atan2", f"complex<f64> {_name}"),
        lambda op: _element_type(op.operands[0]).name == "c128")
IREE_REFUSES["stablehlo.convert"] = Refusal(
    "IREE's llvm-cpu executables lack the runtime routine of an integer-to-bf16 conversion "
    "(iree-lld: undefined symbol __truncsfbf2); convert to f32 first",
    lambda op: _element_type(op.results[0]).name == "bf16" and
    _element_type(op.operands[0]).kind in (T.SIGNED, T.UNSIGNED, T.PRED))
IREE_REFUSES["stablehlo.reverse"] = Refusal(
    "IREE fails to legalize a reverse of unsigned integers ('linalg.generic')",
    _of_kind(T.UNSIGNED))

IREE_REFUSES["stablehlo.reduce_window"] = Refusal(
    "IREE fails to legalize a padded reduce_window of unsigned integers over a 2-D or larger "
    "operand (\"unresolved target materialization from ('ui8') to ('i8')\": jax's cummax, "
    "cummin, cumprod of unsigned integers); unpadded ones run", _padded_unsigned_window)

# what iree.runtime cannot pass as a parameter or hand back (a HAL element type it has no
# numpy mapping for, or none at all): each travels as a byte and is converted inside
IREE_CARRIED = frozenset({"f8e4m3b11fnuz", "f8e4m3", "f8e3m4", "f4e2m1fn", "s2", "u2", "s4", "u4"})
_IREE_TAKES = frozenset(t for t in T.ELEMENT_TYPES if t not in IREE_CARRIED)


def _fraction_of_a_byte(value) -> bool:
    if not isinstance(value.type, ir.RankedTensorType):
        return False
    shape = mlir.shape_of_type(value.type)
    if shape.element_type.bits >= 8 or any(not isinstance(d, int) or d < 0
                                           for d in shape.dimensions):
        return False
    count = 1
    for d in shape.dimensions:
        count *= d
    return count * shape.element_type.bits % 8 != 0


def _iree_module_refusal(module: ir.Module, num_replicas: int):
    if num_replicas > 1:
        return None, (f"num_replicas={num_replicas}: IREE's CPU runtime runs one replica "
                      f"(it implements no collectives)")
    for op in mlir.walk(module):
        for value in (*op.results, *(a for r in op.regions for blk in r for a in blk.arguments)):
            if _fraction_of_a_byte(value) and _element_type(value).name != "pred":
                return op, (f"IREE stores each tensor in whole bytes: {value.type} of "
                            f"{_element_type(value).bits}-bit elements is not a whole number "
                            f"of bytes ('stream.tensor.sizeof' fails)")
    return None


_iree_missing_why = _iree_missing()
if _iree_missing_why is None:
    IREE = declare(Backend(
        name="iree", kind=Kind.IREE, words="IREE (llvm-cpu)", compiles=False, takes_flags=True,
        description=f"IREE {IREE_VERSION}: its own StableHLO compiler (iree-compile, llvm-cpu) "
                    f"and runtime, in a worker process",
        refuses=IREE_REFUSES,
        refuses_types={
            "f8e8m0fnu": "IREE computes wrong values of it (2 + 2 gave 2)",
            "f6e2m3fn": "IREE fails to compile f6 values ('vector.load' illegal)",
            "f6e3m2fn": "IREE fails to compile f6 values ('vector.load' illegal)",
        },
        dialects=("stablehlo.", "func.", "chlo."),
        refuses_module=_iree_module_refusal,
        # XLA's semantics; what IREE chooses otherwise or gets wrong written so that it has
        # no choice (its stable sort is not stable, its float -> integer conversion out of
        # range differs, its runtime ends on a scatter index out of bounds); and hlogen's
        # formulations of what it lacks: Cholesky, triangular solve, jaxlib's LAPACK calls
        rewrites=(*XLA_SEMANTICS, *COMPARABLE, *decompositions.LINEAR_ALGEBRA),
        readable=_IREE_TAKES, passable=_IREE_TAKES))
else:
    UNAVAILABLE["iree"] = _iree_missing_why
