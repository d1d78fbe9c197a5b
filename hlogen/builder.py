"""Builder and Op: the XlaBuilder of hlogen.

A Builder owns one MLIR module with a `main` function under construction. Ops
are value handles that remember their hlogen shape (computed by the shape rules,
never read back from MLIR) and their builder. Every MLIR op is created at the
end of the builder's block with the location of the user's line that asked for it.

`trace` is the one mechanism that turns the computation an op takes (a
comparator, a reducer, a loop body...) into a region: a Python callable is
called with scalar (or array) parameters of a RegionBuilder, a Computation is
checked against the signature XLA prescribes and inlined.
"""
from __future__ import annotations

import dataclasses
import inspect
import re
import traceback

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from hlogen import mlir
from hlogen import types as T
from hlogen.computation import Computation, set_names
from hlogen.errors import HlogenError, ShapeError, UnsupportedError


class Op:
    """A value in a computation under construction: `.shape`, `.dtype`, `.builder`.

    Python operators map to the ops of the same meaning (`x + y` is `ops.add`,
    `x < y` is `ops.lt`; `==` stays Python identity, use `ops.eq`).
    """

    __slots__ = ("value", "shape", "builder")

    def __init__(self, builder: "Builder", value: ir.Value, shape):
        self.builder = builder
        self.value = value
        self.shape = shape

    @property
    def dtype(self) -> T.ElementType | None:
        """The element type (hg.f32, ...); None for tuples and tokens."""
        return self.shape.element_type if isinstance(self.shape, T.Shape) else None

    def __repr__(self) -> str:
        return f"Op({self.shape})"

    def __bool__(self):
        raise HlogenError(f"{self!r} is a value of a computation under construction, not a "
                          f"Python boolean: use ops.select to choose between values")

    def __getitem__(self, index):
        raise HlogenError(f"{self!r} cannot be indexed: use ops.get_tuple_element(op, i) for an "
                          f"element of a tuple")

    # XlaOp's C++ operators (x + y, -x, x < y, ...) are installed by hlogen.ops, which
    # defines the ops and sits above this module: install_operators.


def install_operators(binary: dict, comparisons: dict, unary: dict) -> None:
    """Gives Op its Python operators: `binary` maps an operator's name ("add" for `+`) to
    the op (with the reflected form, `1 + x`), `comparisons` the same without it (Python
    reflects `<` into `>` itself), `unary` ("neg" for `-x`) to a one-operand op."""
    for name, op in binary.items():
        setattr(Op, f"__{name}__", lambda self, other, op=op: op(self, other))
        setattr(Op, f"__r{name}__", lambda self, other, op=op: op(other, self))
    for name, op in comparisons.items():
        setattr(Op, f"__{name}__", lambda self, other, op=op: op(self, other))
    for name, op in unary.items():
        setattr(Op, f"__{name}__", lambda self, op=op: op(self))


class Builder:
    """Builds one computation: `parameter`, `constant`, ops from `hlogen.ops`, `build`."""

    _location = None  # where ops are emitted: None for the user's line (InsertingBuilder: the op's)

    def __init__(self, name: str = "main"):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.$-]*", name):
            raise HlogenError(f"Builder name must be an identifier, got {name!r}")
        self.name = name
        loc = mlir.user_location()
        ctx = mlir.context()
        self.module = ir.Module.create(loc)
        self.module.operation.attributes["sym_name"] = ir.StringAttr.get(name, context=ctx)
        with ir.InsertionPoint(self.module.body):
            self._func = func.FuncOp("main", ir.FunctionType.get([], [], context=ctx), loc=loc)
        self._block = self._func.add_entry_block()
        self._ip = ir.InsertionPoint(self._block)
        self._parameter_names: list[str] = []
        self._built = False

    def __repr__(self) -> str:
        return f"Builder({self.name!r})"

    @property
    def insertion_point(self) -> ir.InsertionPoint:
        """Where the next op goes (for MLIR code that emits beside the builder's ops)."""
        return self._ip

    # -- parameters and constants -------------------------------------------------

    def parameter(self, shape, name: str | None = None) -> Op:
        """The next parameter of the computation (parameters are numbered in call order)."""
        self._check_open("parameter")
        shape = T.as_shape(shape)
        index = len(self._parameter_names)
        name = f"arg{index}" if name is None else name
        if not isinstance(name, str) or not name:
            raise HlogenError(f"parameter {index}: name must be a non-empty string, got {name!r}")
        if name in self._parameter_names:
            raise HlogenError(f"parameter {index}: the name {name!r} is already used by "
                              f"parameter {self._parameter_names.index(name)}")
        self._parameter_names.append(name)
        loc = ir.Location.name(name, childLoc=mlir.user_location(), context=mlir.context())
        return Op(self, self._block.add_argument(mlir.ir_type(shape), loc), shape)

    def constant(self, value, dtype=None) -> Op:
        """A constant from a numpy array or Python value.

        Without `dtype`, numpy arrays keep their dtype and Python values become
        s32, f32, c64 or pred, as in XLA's literals. With `dtype`, every value must be
        representable in it (floats may round; overflow and truncation are errors).
        """
        self._check_open("constant")
        array = T.as_array(value, dtype, what="constant")
        shape = T.Shape(T.element_type(array.dtype), array.shape)
        attr = mlir.dense_attr(array, shape)
        return self.add_op("stablehlo.constant", shape, [], {"value": attr})

    # -- emission -----------------------------------------------------------------

    def add_op(self, name: str, shape, operands, attributes=None) -> Op:
        """Emits MLIR op `name` with one result of `shape`; operands are Ops."""
        operation = self.emit(name, [mlir.ir_type(shape)], [o.value for o in operands], attributes)
        return Op(self, operation.result, shape)

    def emit(self, name: str, result_types, operand_values, attributes=None,
             regions=()) -> ir.Operation:
        """Emits MLIR op `name` at the end of the computation, at the user's location.

        `regions` are traced computations (see `trace`), moved into the op in order.
        """
        if self._built:
            self._check_open(name)
        operation = ir.Operation.create(name, results=result_types, operands=operand_values,
                                        attributes=attributes, regions=len(regions),
                                        loc=self._location or mlir.user_location(), ip=self._ip)
        if regions:  # reading operation.regions costs, on the hot path of emission
            for region, traced in zip(operation.regions, regions):
                traced.block.append_to(region)
        return operation

    def add_op_with_regions(self, name: str, shapes, operands, attributes, regions) -> list[Op]:
        """Emits MLIR op `name` with one result per shape of `shapes` and traced `regions`."""
        operation = self.emit(name, [mlir.ir_type(s) for s in shapes],
                              [o.value for o in operands], attributes, regions)
        return [Op(self, r, s) for r, s in zip(operation.results, shapes)]

    def _check_open(self, what: str):
        if self._built:
            raise HlogenError(f"{what}: builder {self.name!r} was already built; "
                              f"start a new Builder for another computation")

    # -- build --------------------------------------------------------------------

    def build(self, *results: Op):
        """The Computation whose results are `results` (one or more Ops); verifies the module."""
        self._check_open("build")
        if not results:
            raise HlogenError(f"build: builder {self.name!r} needs at least one result")
        for i, r in enumerate(results):
            if not isinstance(r, Op):
                raise HlogenError(f"build: result {i} must be an Op, got {type(r).__name__}")
            if r.builder is not self:
                raise HlogenError(f"build: result {i} ({r!r}) belongs to {r.builder!r}, "
                                  f"not {self!r}")
        loc = mlir.user_location()
        func.ReturnOp([r.value for r in results], loc=loc, ip=self._ip)
        function_type = ir.FunctionType.get([a.type for a in self._block.arguments],
                                            [r.value.type for r in results], context=mlir.context())
        self._func.attributes["function_type"] = ir.TypeAttr.get(function_type, context=mlir.context())
        # names in an attribute too: locations are left out of text printed without debug
        # information (arg<i> needs none: it means the position)
        names = [n if n != f"arg{i}" else None for i, n in enumerate(self._parameter_names)]
        if any(names):
            set_names(self._func.operation, names)
        self._built = True
        try:
            self.module.operation.verify()
        except ir.MLIRError as e:
            # Shape rules run before emission, so this means hlogen emitted something
            # invalid; the locations still point at the user's lines.
            raise HlogenError(f"build: the module of {self.name!r} does not verify:\n"
                              f"{mlir.diagnostics(e)}") from None
        return Computation(self.module)


def same_builder(op_name: str, *operands) -> "Builder":
    """The builder shared by `operands` (Ops); an error if they come from several."""
    builder = None
    for i, o in enumerate(operands):
        if not isinstance(o, Op):
            raise ShapeError(f"{op_name}: operand {i} must be an Op, got {type(o).__name__} {o!r}")
        if builder is None:
            builder = o.builder
        elif o.builder is not builder:
            hint = ""
            if isinstance(o.builder, RegionBuilder) or isinstance(builder, RegionBuilder):
                hint = (": a computation (comparator, reducer, body...) sees only its own "
                        "parameters; pass other values as operands of the op")
            raise ShapeError(f"{op_name}: operands come from different builders "
                             f"({builder!r} and {o.builder!r}){hint}")
    return builder


# -- computations traced into regions -------------------------------------------------------

class RegionBuilder(Builder):
    """Builds the body of one computation an op takes, e.g. the comparator of sort.

    Its parameters are the block arguments `trace` makes; it has no `parameter`
    or `build` of its own, and closes once the computation is traced.
    """

    # (not Builder.__init__, which starts a module: a region's ops go into its parent's)
    def __init__(self, parent: Builder, description: str, block: ir.Block):
        self.name = parent.name
        self.parent = parent
        self.description = description
        self.module = parent.module  # the top module: functions a Computation calls go there
        self._block = block
        self._ip = ir.InsertionPoint(block)
        self._parameter_names = []
        self._built = False

    def __repr__(self) -> str:
        return f"<{self.description}>"

    def parameter(self, shape, name=None):
        raise HlogenError(f"parameter: {self.description} gets its parameters from the op; "
                          f"use the arguments the callable receives")

    def build(self, *results):
        raise HlogenError(f"build: {self.description} is built by the op that takes it; "
                          f"return its results from the callable instead")

    def _check_open(self, what: str):
        if self._built:
            raise HlogenError(f"{what}: {self.description} was already traced; values of a "
                              f"computation cannot be used outside it")


class InsertingBuilder(RegionBuilder):
    """Emits before `operation` of an existing module, at its location: for rewrites that
    express an op with others (hlogen.rewrites)."""

    def __init__(self, module: ir.Module, operation: ir.Operation, description: str):
        self.name, self.parent, self.description, self.module = "rewrite", None, description, module
        self._block = operation.block
        self._ip = ir.InsertionPoint(operation)
        self._location = operation.location
        self._parameter_names = []
        self._built = False


@dataclasses.dataclass
class Traced:
    """A computation traced into a detached block, ready to move into its op's region."""

    block: ir.Block
    result_shapes: list
    holder: ir.Operation  # owns the block until Builder.emit moves it


def trace(builder: Builder, op_name: str, what: str, computation, parameter_shapes,
          result_shapes=None, captured=None) -> Traced:
    """Traces `computation` (a Python callable or a Computation) for op `op_name`.

    The computation gets one parameter per shape of `parameter_shapes` (scalars for
    comparators and reducers). `result_shapes`, when given, is what it must return
    (Python numbers returned by a callable become constants of those types); without
    it, any Ops are accepted and the caller checks them. Errors name the op, `what`
    (e.g. "comparator") and, inside a callable, the user's line.

    `captured` (Ops of `builder`, one per parameter) is for ops whose regions take no
    arguments (stablehlo.if and case): the parameters then stand for these values,
    which the region reads from the enclosing block.
    """
    parameter_shapes = list(parameter_shapes)
    description = f"the {what} of {op_name}"
    loc = mlir.user_location()
    holder = ir.Operation.create("builtin.module", regions=1, loc=loc)
    block = holder.regions[0].blocks.append(*[mlir.ir_type(s) for s in parameter_shapes],
                                            arg_locs=[loc] * len(parameter_shapes))
    region_builder = RegionBuilder(builder, description, block)
    if isinstance(computation, Computation):
        params = [Op(region_builder, a, s) for a, s in zip(block.arguments, parameter_shapes)]
        values, shapes = _inline(region_builder, op_name, what, computation, params,
                                 result_shapes)
    elif callable(computation):
        values, shapes = _call(region_builder, op_name, what, computation, parameter_shapes,
                               result_shapes)
    else:
        raise ShapeError(f"{op_name}: {what} must be a Python callable or an hg.Computation, "
                         f"got {type(computation).__name__} {computation!r}")
    ir.Operation.create("stablehlo.return", operands=values, loc=loc, ip=region_builder._ip)
    region_builder._built = True
    if captured is not None:
        for argument, value in zip(list(block.arguments), captured):
            argument.replace_all_uses_with(value.value)
        for i in reversed(range(len(captured))):
            block.erase_argument(i)
    return Traced(block, shapes, holder)


def _describe_shapes(shapes) -> str:
    return "(" + ", ".join(map(str, shapes)) + ")"


def _call(rb: RegionBuilder, op_name, what, fn, parameter_shapes, result_shapes):
    params = [Op(rb, arg, s) for arg, s in zip(rb._block.arguments, parameter_shapes)]
    returned = _results(rb, op_name, what, _invoke(rb, op_name, what, fn, params), result_shapes)
    shapes = [r.shape for r in returned]
    _check_results(op_name, what, shapes, result_shapes)
    return [r.value for r in returned], shapes


def _invoke(rb: RegionBuilder, op_name, what, fn, params) -> list:
    """What the callable `fn` returns for `params`, as a list; errors name op and line."""
    keywords = {}
    try:
        signature = inspect.signature(fn)
    except ValueError:
        signature = None  # no signature to check (some builtins): the call itself will tell
    if signature is not None:
        builder_parameter = signature.parameters.get("builder")
        if builder_parameter is not None and builder_parameter.kind == builder_parameter.KEYWORD_ONLY:
            keywords["builder"] = rb  # for constants in a computation without parameters
        try:
            signature.bind(*params, **keywords)
        except TypeError:
            raise ShapeError(f"{op_name}: the {what} is called with {len(params)} parameters "
                             f"{_describe_shapes([p.shape for p in params])}, but "
                             f"{_callable_name(fn)} does not accept {len(params)} positional "
                             f"arguments") from None
    try:
        returned = fn(*params, **keywords)
    except HlogenError as e:
        raise type(e)(f"{op_name}: in the {what} ({_user_line(e)}): {e}") from None
    return list(returned) if isinstance(returned, (tuple, list)) else [returned]


def _results(rb: RegionBuilder, op_name, what, returned: list, result_shapes=None) -> list[Op]:
    """The Ops a callable returned: Python numbers made constants of `result_shapes`."""
    if result_shapes is not None and len(returned) == len(result_shapes):
        returned = [rb.constant(r, s.element_type) if _is_number(r) and isinstance(s, T.Shape)
                    and s.rank == 0 else r for r, s in zip(returned, result_shapes)]
    for i, r in enumerate(returned):
        if not isinstance(r, Op):
            raise ShapeError(f"{op_name}: the {what} must return Ops; result {i} is "
                             f"{type(r).__name__} {r!r}")
        if r.builder is not rb:
            raise ShapeError(f"{op_name}: the {what} returns {r!r} from {r.builder!r}: a "
                             f"computation can return only values it computed from its own "
                             f"parameters")
    return returned


def apply(rb: RegionBuilder, op_name: str, what: str, computation, args) -> list[Op]:
    """`computation` (a callable or a Computation) applied to `args`, Ops of `rb`, inside a
    region being traced: for ops that wrap the user's computation in one of their own
    (e.g. to carry tuples, which some regions cannot take)."""
    if isinstance(computation, Computation):
        values, shapes = _inline(rb, op_name, what, computation, args, None)
        return [Op(rb, v, s) for v, s in zip(values, shapes)]
    if not callable(computation):
        raise ShapeError(f"{op_name}: {what} must be a Python callable or an hg.Computation, "
                         f"got {type(computation).__name__} {computation!r}")
    return _results(rb, op_name, what, _invoke(rb, op_name, what, computation, list(args)))


def build_computation(op_name: str, what: str, fn, parameter_shapes):
    """The Computation of the callable `fn` on parameters of `parameter_shapes`, for ops that
    call a computation as a function (Call, CompositeCall); errors as in `trace`."""
    b = Builder(re.sub(r"\W", "", getattr(fn, "__name__", "")) or what)
    params = [b.parameter(s) for s in parameter_shapes]
    return b.build(*_results(b, op_name, what, _invoke(b, op_name, what, fn, params)))


def _inline(rb: RegionBuilder, op_name, what, computation, params, result_shapes):
    """Inlines `computation` at the end of `rb`'s block, on `params` (Ops of `rb`)."""
    name = computation.name
    _check_shapes(op_name, what, "parameter", computation.parameter_shapes,
                  [p.shape for p in params], f"computation {name!r}")
    _check_results(op_name, what, computation.result_shapes, result_shapes, name)
    _copy_functions(rb.module, computation)
    values = mlir.inline_call(computation.main, [p.value for p in params], rb._ip,
                              mlir.user_location())
    return values, list(computation.result_shapes)


def _copy_functions(module: ir.Module, computation) -> None:
    """The functions other than main that `computation` calls, copied into `module`."""
    present = mlir.functions(module)
    for name, op in mlir.functions(computation.module).items():
        if name == "main":
            continue
        if name not in present:
            module.body.append(op.operation.clone(ip=False))
        elif _generic(present[name]) != _generic(op):
            raise UnsupportedError(f"computation {computation.name!r} calls a function @{name} "
                                   f"that differs from the @{name} already in the module")


def copy_function(module: ir.Module, computation) -> str:
    """A private copy of `computation`'s main in `module` (with the functions it calls),
    named after the computation; an identical copy already there is reused. Returns its name."""
    _copy_functions(module, computation)
    present = mlir.functions(module)
    clone = computation.main.clone(ip=False)
    clone.attributes["sym_visibility"] = ir.StringAttr.get("private", context=mlir.context())
    base = re.sub(r"\W", "_", computation.name)
    for i in range(len(present) + 2):
        name = base if i == 0 else f"{base}_{i}"
        if name == "main":
            continue
        clone.attributes["sym_name"] = ir.StringAttr.get(name, context=mlir.context())
        if name not in present:
            module.body.append(clone)
            return name
        if _generic(present[name]) == _generic(clone):
            return name
    raise AssertionError("unreachable: one of len(present) + 2 names is free")


def _generic(op) -> str:
    # the generic form: a module under construction does not verify, so prints generically
    return op.operation.get_asm(print_generic_op_form=True, use_local_scope=True)


def _check_results(op_name, what, shapes, expected, name=None):
    if expected is not None:
        _check_shapes(op_name, what, "result", shapes, expected,
                      f"computation {name!r}" if name else "it")


def _check_shapes(op_name, what, kind, shapes, expected, source):
    """The parameters or results of a computation (`source`) against what the op requires."""
    verb, noun = ("take", "parameters") if kind == "parameter" else ("return", "value(s)")
    if len(shapes) != len(expected):
        raise ShapeError(f"{op_name}: the {what} must {verb} {len(expected)} {noun} "
                         f"{_describe_shapes(expected)}; {source} {verb}s {len(shapes)} "
                         f"{_describe_shapes(shapes)}")
    for i, (g, want) in enumerate(zip(shapes, expected)):
        if g != want:
            raise ShapeError(f"{op_name}: {kind} {i} of the {what} must be {want}; {source} "
                             f"{'has' if kind == 'parameter' else 'returns'} {g}")


def _is_number(value) -> bool:
    return isinstance(value, (bool, int, float, complex)) or (
        hasattr(value, "dtype") and getattr(value, "shape", None) == ())


def _callable_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or type(fn).__name__


def _user_line(error: BaseException) -> str:
    """file:line of the innermost frame of `error` outside hlogen: the user's line."""
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if not f.filename.startswith(mlir._PACKAGE_DIR)]
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "<unknown>"
