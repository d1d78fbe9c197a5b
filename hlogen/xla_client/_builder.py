"""XlaBuilder and XlaComputation of the removed xla_client, over hlogen's Builder.

An XlaBuilder is an hlogen Builder: XlaOps are hlogen Ops, so every op of hlogen.ops
works on them. What XlaBuilder adds is XLA's bookkeeping: parameters by number (in any
order), a root that defaults to the last op, shardings, metadata and frontend attributes
on the ops made while they are set, input/output aliases, and XLA's way with errors:
an op that breaks a rule returns a failed XlaOp, the ops fed with it fail silently, and
the first error (hlogen's message, with the op and the user's line) is raised by
`build` or `get_shape`, where XlaBuilder reported it.

An XlaComputation holds the built hlogen Computation. A tuple root is kept as its
elements, one result each (the form PJRT runs and XLA's reducers return): the HLO
module, made on demand by XLA's converter, has the tuple root again.
"""
from __future__ import annotations

import functools
import re

from jaxlib.mlir import ir

from hlogen import mlir
from hlogen import types as T
from hlogen.builder import Builder, Op, apply
from hlogen.computation import Computation, set_attributes
from hlogen.errors import HlogenError, InputError, ShapeError, UnsupportedError
from hlogen.hlo import module_proto
from hlogen.loading import load
from hlogen.ops import tuple as make_tuple
from hlogen.runtime import _jaxlib
from hlogen.xla_client._protos import FrontendAttributes, OpMetadata, sharding_text
from hlogen.xla_client._types import ProgramShape, Shape, hg_shape, xla_shape

XlaOp = Op

# ops whose value depends on more than their operands: never constant (XlaBuilder::IsConstant)
_NOT_CONSTANT = frozenset({
    "stablehlo.rng", "stablehlo.rng_bit_generator", "stablehlo.infeed", "stablehlo.recv",
    "stablehlo.custom_call", "stablehlo.replica_id", "stablehlo.partition_id",
    "stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
    "stablehlo.reduce_scatter", "stablehlo.collective_permute", "stablehlo.collective_broadcast"})


class _Failed(Op):
    """The XlaOp of an op that failed: it stands for the builder's first error."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "XlaOp(<failed>)"


def _valid_name(name) -> str:
    """XLA takes any name; hlogen's module names are identifiers."""
    if not isinstance(name, str):
        raise InputError(f"XlaBuilder: name must be a string, got {name!r}")
    name = re.sub(r"[^\w.$-]", "_", name)
    return name if re.match(r"[A-Za-z_]", name) else f"_{name}"


class XlaBuilder(Builder):
    """XLA's XlaBuilder: ops are added with the functions of `xla_client.ops`, then
    `build()` makes the XlaComputation and starts the builder over, as XLA's did."""

    def __init__(self, name: str):
        self._aliases: dict[int, int] = {}  # parameter number -> output index
        self._error: tuple | None = None  # (error class, message) of the first failure
        self._annotations: dict = {}  # what set_sharding & co. put on the ops made now
        # the modules built before: kept, so that an XlaOp of one stays safe to refuse
        self._built_modules: list = []
        self._start(_valid_name(name))

    def _start(self, name: str) -> None:
        """A new computation: what XlaBuilder's build() clears (its ops and parameters;
        annotations and aliases stay set, as there)."""
        Builder.__init__(self, name)
        self._numbers: list[int] = []  # each parameter's number, in the order made
        self._shardings: dict[int, str] = {}  # parameter (in the order made) -> sharding
        self._last_op: Op | None = None  # XLA's default root: the last op made

    def emit(self, name, result_types, operand_values, attributes=None, regions=()):
        if self._built_modules:
            self._check_current(name, operand_values)
        return Builder.emit(self, name, result_types, operand_values, attributes, regions)

    def _check_current(self, what: str, values) -> None:
        """Refuses values of a computation built before (MLIR would crash on them)."""
        for v in values:
            block = v.owner if isinstance(v, ir.BlockArgument) else v.owner.operation.block
            if block != self._block:
                raise InputError(f"{what}: an operand is an XlaOp of a computation {self!r} "
                                 f"already built; build() starts the builder over, as "
                                 f"XlaBuilder's did")

    def __repr__(self) -> str:
        return f"XlaBuilder({self.name!r})"

    # -- parameters ----------------------------------------------------------------------

    def _parameter(self, number, shape, name: str = "") -> Op:
        if isinstance(number, bool) or not isinstance(number, int) or number < 0:
            raise ShapeError(f"Parameter: parameter_number must be a non-negative int, got "
                             f"{number!r}")
        if number in self._numbers:
            raise ShapeError(f"Parameter: parameter number {number} is already used in "
                             f"{self!r}")
        shape = hg_shape(shape, "Parameter: shape")
        name = name or f"arg{number}"  # the number, wherever the parameter is made
        if name in self._parameter_names:  # XLA makes names unique
            name = f"{name}.{len(self._numbers)}"
        op = Builder.parameter(self, shape, name)
        if "mhlo.sharding" in self._annotations:
            self._shardings[len(self._numbers)] = self._annotations["mhlo.sharding"]
        self._numbers.append(number)
        self._last_op = op
        return op

    def parameter(self, shape, name=None) -> Op:
        """hlogen's form: the next parameter number."""
        return self._parameter(len(self._numbers), shape, name or "")

    # -- errors, as XlaBuilder reports them -----------------------------------------------

    def _fail(self, op_name: str, error: HlogenError) -> None:
        if self._error is None:
            where = mlir.file_location(mlir.user_location())
            at = f" at {where[0]}:{where[1]}" if where else ""
            self._error = (type(error), f"ops.{op_name}{at}: {error}")

    def _failed(self) -> _Failed:
        return _Failed(self, None, None)

    def _raise_error(self) -> None:
        if self._error is not None:
            cls, message = self._error
            raise cls(f"XlaBuilder {self.name!r}: {message}")

    # -- annotations of the ops made while they are set -----------------------------------

    def set_sharding(self, sharding) -> None:
        self._annotations["mhlo.sharding"] = sharding_text(sharding)

    def clear_sharding(self) -> None:
        self._annotations.pop("mhlo.sharding", None)

    def set_op_metadata(self, metadata: OpMetadata) -> None:
        """Each op made from now on carries `metadata` as its location: op_name as the
        location's name (XLA's op_name), the source file and line as its file location."""
        for field in ("op_type", "op_name", "source_file", "source_line"):
            if not hasattr(metadata, field):
                raise InputError(f"set_op_metadata: metadata must be an xla_client.OpMetadata, "
                                 f"got {metadata!r}")
        self._annotations["location"] = metadata

    def clear_op_metadata(self) -> None:
        self._annotations.pop("location", None)

    def set_frontend_attributes(self, attributes) -> None:
        try:
            entries = {str(k): str(v) for k, v in dict(attributes).items()}
        except (TypeError, ValueError):
            raise InputError(f"set_frontend_attributes: attributes must map strings to strings, "
                             f"got {attributes!r}") from None
        self._annotations["mhlo.frontend_attributes"] = FrontendAttributes(entries)

    def clear_frontend_attributes(self) -> None:
        self._annotations.pop("mhlo.frontend_attributes", None)

    def annotate(self, result) -> None:
        """Puts the annotations now set on the op(s) that made `result`."""
        for op in result if isinstance(result, tuple) else (result,):
            owner = op.value.owner if isinstance(op.value, ir.OpResult) else None
            if owner is None:
                continue
            ctx = mlir.context()
            for key, value in self._annotations.items():
                if key == "location":
                    owner.location = _metadata_location(value, owner.location)
                elif key == "mhlo.sharding":
                    owner.attributes[key] = ir.StringAttr.get(value, context=ctx)
                else:
                    owner.attributes[key] = ir.DictAttr.get(
                        {k: ir.StringAttr.get(v, context=ctx) for k, v in value.items()}, context=ctx)

    def setup_alias(self, output_index, param_number, param_index) -> None:
        """The output at `output_index` ([] for a non-tuple root, [i] for element i of a
        tuple root) may reuse the buffer of parameter `param_number`."""
        output_index, param_index = list(output_index), list(param_index)
        if len(output_index) > 1 or param_index:
            raise InputError(f"setup_alias: output_index={output_index}, param_index="
                             f"{param_index}: hlogen aliases a whole parameter to a root or "
                             f"an element of a tuple root (nested indices are not supported)")
        self._aliases[param_number] = output_index[0] if output_index else 0

    # -- shapes --------------------------------------------------------------------------

    def get_shape(self, op) -> Shape:
        self._raise_error()
        return xla_shape(self._own(op, "get_shape").shape)

    GetShape = get_shape

    def get_program_shape(self, root=None) -> ProgramShape:
        self._raise_error()
        root = self._last() if root is None else self._own(root, "get_program_shape")
        shapes = [xla_shape(s) for _, s in sorted(zip(self._numbers, self._parameter_shapes()))]
        return ProgramShape(shapes, xla_shape(root.shape))

    def _parameter_shapes(self) -> list:
        return [mlir.shape_of_type(a.type) for a in self._block.arguments]

    def is_constant(self, op) -> bool:
        """Whether `op` depends on no parameter and on nothing else outside the builder
        (random numbers, collectives, infeed, custom calls)."""
        self._raise_error()
        return _constant(self._own(op, "is_constant").value, self._block)

    def _own(self, op, what: str) -> Op:
        if not isinstance(op, Op) or op.builder is not self:
            raise InputError(f"{what}: {op!r} is not an XlaOp of {self!r}")
        return op

    def _last(self) -> Op:
        """XLA's default root: the last op made (by xla_client.ops) or parameter."""
        if self._last_op is None:
            raise ShapeError(f"build: {self!r} has no op to be the root; pass root= or add ops")
        return self._last_op

    # -- build ---------------------------------------------------------------------------

    def build(self, root=None) -> "XlaComputation":
        """The XlaComputation whose root is `root` (None: the last op added)."""
        self._raise_error()
        root = self._last() if root is None else self._own(root, "build")
        if self._built_modules:
            self._check_current("build", [root.value])
        root = self._parameters_in_order(root)
        owner = root.value.owner if isinstance(root.value, ir.OpResult) else None
        tupled = owner is not None and owner.name == "stablehlo.tuple"
        results = ([Op(self, v, s) for v, s in zip(owner.operands, root.shape.elements)]
                   if tupled else [root])
        if not results:
            raise ShapeError(f"build: the root of {self!r} is an empty tuple; XLA's converter "
                             f"and PJRT need at least one result")
        for index, output in self._aliases.items():
            if not 0 <= index < len(self._numbers) or not 0 <= output < len(results):
                raise InputError(f"setup_alias: parameter {index} -> output {output} names a "
                                 f"parameter or output {self!r} does not have")
        computation = Builder.build(self, *results)
        main = computation.main
        ctx = mlir.context()
        arguments = _merge(
            {i: {"mhlo.sharding": ir.StringAttr.get(s, context=ctx)} for i, s in self._shardings.items()},
            {i: {"tf.aliasing_output": ir.IntegerAttr.get(ir.IntegerType.get_signless(32, ctx), o)}
             for i, o in self._aliases.items()})
        if arguments:
            set_attributes(main, "arg_attrs", len(self._numbers), arguments)
        root_sharding = owner.attributes["mhlo.sharding"] if owner is not None and \
            "mhlo.sharding" in owner.attributes else None
        if root_sharding is not None:
            set_attributes(main, "res_attrs", len(results), {
                i: {"mhlo.sharding": ir.StringAttr.get(s, context=ctx)}
                for i, s in enumerate(_split_sharding(ir.StringAttr(root_sharding).value,
                                                      len(results), tupled))})
        if tupled and not list(owner.result.uses):
            owner.operation.erase()  # the tuple lives on as the results
        self._built_modules.append(self.module)
        self._start(self.name)
        return XlaComputation._of(computation, tupled)

    Build = build

    def _parameters_in_order(self, root: Op) -> Op:
        """Makes the arguments of main the parameters in number order (XLA lets them be
        made in any order); returns `root`, remapped if it is a parameter."""
        numbers = self._numbers
        if sorted(numbers) != list(range(len(numbers))):
            missing = sorted(set(range(max(numbers) + 1)) - set(numbers))
            raise ShapeError(f"build: {self!r} has parameters {sorted(numbers)}; parameter "
                             f"numbers must be 0..N-1 (missing {missing})")
        if numbers == sorted(numbers):
            return root
        made = list(self._block.arguments)
        order = sorted(range(len(numbers)), key=numbers.__getitem__)  # made index per number
        if isinstance(root.value, ir.BlockArgument):  # the root's new position: its number
            root = (numbers[root.value.arg_number], root.shape)
        for i in order:
            new = self._block.add_argument(made[i].type, made[i].location)
            made[i].replace_all_uses_with(new)
        for _ in made:
            self._block.erase_argument(0)
        self._parameter_names = [self._parameter_names[i] for i in order]
        self._shardings = {order.index(i): s for i, s in self._shardings.items()}
        if isinstance(root, tuple):
            root = Op(self, self._block.arguments[root[0]], root[1])
        self._numbers = sorted(numbers)
        return root


def _merge(*per_index: dict) -> dict:
    merged: dict = {}
    for updates in per_index:
        for i, entries in updates.items():
            merged.setdefault(i, {}).update(entries)
    return merged


def _split_sharding(text: str, count: int, tupled: bool) -> list[str]:
    """The sharding of each result: a tuple root's sharding has one per element."""
    if not tupled:
        return [text]
    sharding = _jaxlib.xla_client.HloSharding.from_string(text)
    elements = sharding.tuple_elements() if sharding.tuple_elements() else [sharding] * count
    return [str(e) for e in elements]


def _metadata_location(metadata, location: ir.Location) -> ir.Location:
    """XLA's op metadata as an MLIR location, which XLA's converter reads back: the op
    name as the name, the source file and line as the file location."""
    ctx = mlir.context()
    inner = (mlir.location(metadata.source_file, int(metadata.source_line))
             if metadata.source_file else location)
    name = metadata.op_name or metadata.op_type
    return ir.Location.name(name, childLoc=inner, context=ctx) if name else inner


def _constant(value, main_block) -> bool:
    """Whether `value` depends on no argument of `main_block` and on no op of _NOT_CONSTANT,
    by a walk with a stack (chains of thousands of ops are common)."""
    seen, stack = set(), [value]  # values and the operations of regions
    while stack:
        item = stack.pop()
        if isinstance(item, ir.BlockArgument):
            if item.owner == main_block:  # a region's own arguments are inside the value
                return False
            continue
        operation = item.owner.operation if isinstance(item, ir.Value) else item.operation
        if operation in seen:
            continue
        seen.add(operation)
        if operation.name in _NOT_CONSTANT:
            return False
        stack.extend(operation.operands)
        stack.extend(inner for region in operation.regions for block in region.blocks
                     for inner in block.operations)
    return True


# -- XlaComputation ------------------------------------------------------------------------

class XlaComputation:
    """A built computation: XLA's HLO module (as_hlo_text, as_serialized_hlo_module_proto,
    get_hlo_module, program_shape), or `.computation`, hlogen's Computation of it.

    `XlaComputation(serialized_hlo_module_proto)` reads an HLO module, as the original did.
    """

    def __init__(self, serialized_hlo_module_proto: bytes):
        data = bytes(serialized_hlo_module_proto)
        proto = module_proto(data)
        if proto is None:
            raise InputError("XlaComputation: the bytes are not a serialized HloModuleProto")
        self._hlo = _jaxlib.xla_client.XlaComputation(proto)
        self._computation = None  # read on first use: hlogen's reader of HLO
        try:
            self._tupled = self._hlo.program_shape().result_shape().is_tuple()
        except _jaxlib.JaxRuntimeError as e:
            raise InputError(f"XlaComputation: the HloModuleProto is not a module: {e}") from None

    @classmethod
    def _of(cls, computation: Computation, tupled: bool) -> "XlaComputation":
        self = cls.__new__(cls)
        self._computation, self._hlo, self._tupled = computation, None, tupled
        return self

    @property
    def computation(self) -> Computation:
        """hlogen's Computation: a tuple root as one result per element."""
        if self._computation is None:
            self._computation = load(self._hlo.as_serialized_hlo_module_proto())
        return self._computation

    @property
    def tupled(self) -> bool:
        """Whether the root is a tuple (of the computation's results)."""
        return self._tupled

    def hlo(self):
        """jaxlib's XlaComputation: the HLO module, by XLA's converter (made once)."""
        if self._hlo is None:
            try:
                self._hlo = _jaxlib.hlo_computation(self._computation.to_bytecode(), self._tupled)
            except _jaxlib.JaxRuntimeError as e:
                raise UnsupportedError(f"XlaComputation {self.name()!r}: XLA's converter cannot "
                                       f"make an HLO module of it: {e}") from None
        return self._hlo

    def __repr__(self) -> str:
        return f"<XlaComputation {self.name()}: {self.program_shape()}>"

    def name(self) -> str:
        return self._computation.name if self._computation is not None else self._hlo.name()

    def program_shape(self) -> ProgramShape:
        if self._hlo is not None:
            return self._hlo.program_shape()
        comp = self._computation
        result = T.TupleShape(tuple(comp.result_shapes)) if self._tupled else comp.result_shapes[0]
        return ProgramShape([xla_shape(s) for s in comp.parameter_shapes], xla_shape(result))

    def as_hlo_text(self, print_large_constants: bool = False) -> str:
        return self.hlo().as_hlo_text(print_large_constants)

    def as_serialized_hlo_module_proto(self) -> bytes:
        return self.hlo().as_serialized_hlo_module_proto()

    def get_hlo_module(self):
        return self.hlo().get_hlo_module()

    as_hlo_module = get_hlo_module

    def as_hlo_dot_graph(self) -> str:
        return self.hlo().as_hlo_dot_graph()

    def hash(self) -> int:
        return self.hlo().hash()


def xla_computation_to_mlir_module(computation: XlaComputation) -> str:
    """The StableHLO text of an XlaComputation (a tuple root as one result per element)."""
    return computation.computation.as_text()


def mlir_module_to_xla_computation(mlir_module, use_tuple_args: bool = False,
                                   return_tuple: bool = False) -> XlaComputation:
    """An XlaComputation of MLIR text or bytecode; `return_tuple`: its results are the
    elements of a tuple root."""
    if use_tuple_args:
        raise InputError("mlir_module_to_xla_computation: use_tuple_args=True is not supported: "
                         "hlogen passes parameters as they are")
    return XlaComputation._of(load(mlir_module), return_tuple)


def computation_of(value, op_name: str, what: str):
    """What hlogen's ops take for a computation `value` (an XlaComputation): its results,
    one per element of a tuple root, as XLA's reducers return them. hlogen Computations
    and Python callables pass through."""
    if isinstance(value, XlaComputation):
        return value.computation
    if isinstance(value, Computation) or callable(value):
        return value
    raise ShapeError(f"{op_name}: {what} must be an XlaComputation (built by another "
                     f"XlaBuilder), got {type(value).__name__} {value!r}")


def as_built(value, op_name: str, what: str):
    """A computation that returns what the XlaComputation `value` returns, a tuple root
    as one tuple: for While, Conditional and Call, whose values are those tuples."""
    computation = computation_of(value, op_name, what)
    if not (isinstance(value, XlaComputation) and value.tupled):
        return computation

    def tupled(*params, builder):
        return make_tuple(apply(builder, op_name, what, computation, params), builder=builder)
    return tupled


def xla_op(results: int = 1):
    """Makes an ops function behave as XlaBuilder's: a failure (an hlogen error, or any
    error on an operand that already failed) gives failed XlaOps and is reported by
    build(); the annotations set on the builder go on the ops made."""
    def wrap(fn):
        name = fn.__name__

        @functools.wraps(fn)
        def op(*args, **kwargs):
            try:
                out = fn(*args, **kwargs)
            except Exception as e:
                builder = _builder_of(args, kwargs)
                if builder is None or not (isinstance(e, HlogenError) or _any_failed(args, kwargs)):
                    raise
                builder._fail(name, e)
                return builder._failed() if results == 1 else (builder._failed(),) * results
            last = out[-1] if results > 1 else out
            builder = last.builder
            if isinstance(builder, XlaBuilder):
                builder._last_op = last
                if builder._annotations:
                    builder.annotate(out)
            return out
        return op
    return wrap


def _values(args, kwargs):
    for a in (*args, *kwargs.values()):
        if isinstance(a, (list, tuple)):
            yield from a
        else:
            yield a


def _builder_of(args, kwargs) -> XlaBuilder | None:
    for a in _values(args, kwargs):
        if isinstance(a, XlaBuilder):
            return a
        if isinstance(a, Op) and isinstance(a.builder, XlaBuilder):
            return a.builder
    return None


def _any_failed(args, kwargs) -> bool:
    return any(isinstance(a, _Failed) for a in _values(args, kwargs))
