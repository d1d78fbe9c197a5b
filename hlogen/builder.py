"""Builder and Op: the XlaBuilder of hlogen.

A Builder owns one MLIR module with a `main` function under construction. Ops
are value handles that remember their hlogen shape (computed by the shape rules,
never read back from MLIR) and their builder. Every MLIR op is created at the
end of the builder's block with the location of the user's line that asked for it.
"""
from __future__ import annotations

import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import func

from hlogen import mlir
from hlogen import types as T
from hlogen.errors import HlogenError, ShapeError


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

    # XlaOp's C++ operators. Imported late: ops depend on this module.
    def _binary(name):
        def method(self, other):
            from hlogen import ops
            return getattr(ops, name)(self, other)
        def reflected(self, other):
            from hlogen import ops
            return getattr(ops, name)(other, self)
        return method, reflected

    __add__, __radd__ = _binary("add")
    __sub__, __rsub__ = _binary("sub")
    __mul__, __rmul__ = _binary("mul")
    __truediv__, __rtruediv__ = _binary("div")
    __mod__, __rmod__ = _binary("rem")
    __pow__, __rpow__ = _binary("pow")
    __and__, __rand__ = _binary("and_")
    __or__, __ror__ = _binary("or_")
    __xor__, __rxor__ = _binary("xor")
    __lshift__, __rlshift__ = _binary("shift_left")
    __rshift__, __rrshift__ = _binary("shift_right_arithmetic")
    __lt__, _ = _binary("lt")
    __le__, _ = _binary("le")
    __gt__, _ = _binary("gt")
    __ge__, _ = _binary("ge")
    del _binary, _

    def __neg__(self):
        from hlogen import ops
        return ops.neg(self)

    def __invert__(self):
        from hlogen import ops
        return ops.not_(self)


class Builder:
    """Builds one computation: `parameter`, `constant`, ops from `hlogen.ops`, `build`."""

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

    def emit(self, name: str, result_types, operand_values, attributes=None) -> ir.Operation:
        """Emits MLIR op `name` at the end of the computation, at the user's location."""
        if self._built:
            self._check_open(name)
        return ir.Operation.create(name, results=result_types, operands=operand_values,
                                   attributes=attributes, loc=mlir.user_location(), ip=self._ip)

    def _check_open(self, what: str):
        if self._built:
            raise HlogenError(f"{what}: builder {self.name!r} was already built; "
                              f"start a new Builder for another computation")

    # -- build --------------------------------------------------------------------

    def build(self, *results: Op):
        """The Computation whose results are `results` (one or more Ops); verifies the module."""
        from hlogen.computation import Computation
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
            raise ShapeError(f"{op_name}: operands come from different builders "
                             f"({builder!r} and {o.builder!r})")
    return builder
