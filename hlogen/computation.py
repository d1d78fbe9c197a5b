"""Computation: a built StableHLO module with an entry function `main`.

Its signature (parameter and result shapes, parameter names) is read from
`main`, so a Computation loaded from a file is the same kind of object as one
a Builder made. Serialization: text, MLIR bytecode, and StableHLO portable
artifacts (versioned VHLO bytecode, readable by later StableHLO releases).
"""
from __future__ import annotations

import functools
import hashlib
import io
import re

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen.errors import HlogenError, InputError

# How a Computation draws itself in a notebook (its signature and graph): installed by
# hlogen.graph, which draws modules and sits above this module.
_DRAWING: dict = {}


def install_drawing(html, svg) -> None:
    """`html(comp)` and `svg(comp)`: what `_repr_html_` and `_repr_svg_` return."""
    _DRAWING.update(html=html, svg=svg)


# a name location, loc("x") or loc("x"(...)); not a file location, loc("f.mlir":1:2)
_NAME_LOC = re.compile(r'loc\("((?:[^"\\]|\\.)*)"(?:\(|\)$)')
# The argument attribute that holds a parameter's name in every form of a module (text
# without locations included: locations are debug information, printed only on request).
NAME_ATTRIBUTE = "hlogen.name"
# where other producers put names: jax's exports before 0.4.31 (jax.arg_info)
_OTHER_NAME_ATTRIBUTES = ("jax.arg_info",)


class Computation:
    """A built computation: `.module`, `.as_text()`, `.to_bytecode()`, `.to_portable()`."""

    def __init__(self, module: ir.Module, source: str | None = None):
        self.module = module
        self.source = source  # the file (or "<text>") it was loaded from; None when built
        self.main = main_of(module, source)  # the entry function (a func.func)

    @property
    def name(self) -> str:
        attr = self.module.operation.attributes
        return ir.StringAttr(attr["sym_name"]).value if "sym_name" in attr else "main"

    @functools.cached_property
    def parameter_shapes(self) -> list:
        return [mlir.shape_of_type(t) for t in self._function_type.inputs]

    @functools.cached_property
    def result_shapes(self) -> list:
        return [mlir.shape_of_type(t) for t in self._function_type.results]

    @functools.cached_property
    def parameter_names(self) -> list[str]:
        """Names given to `Builder.parameter` (or by the module's maker: jax's argument
        names, HLO's parameter names); `arg<i>` where a parameter has none."""
        return [name or f"arg{i}" for i, name in enumerate(given_names(self.main))]

    def parameter_attribute(self, key: str) -> list:
        """The string attribute `key` of each parameter, None where it has none (jax's
        `jax.global_constant`, e.g. "_platform_index" on the first parameter of a
        multi-platform export's module)."""
        attrs = self.main.attributes
        per_argument = list(ir.ArrayAttr(attrs["arg_attrs"])) if "arg_attrs" in attrs else []
        found = []
        for i in range(len(self.parameter_shapes)):
            entries = ir.DictAttr(per_argument[i]) if i < len(per_argument) else None
            found.append(ir.StringAttr(entries[key]).value
                         if entries is not None and key in entries and
                         isinstance(entries[key], ir.StringAttr) else None)
        return found

    @property
    def _function_type(self) -> ir.FunctionType:
        return mlir.function_type(self.main)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A digest of the module (without locations): the key of executable caches."""
        # the module was verified when built or loaded: printing need not verify it again
        text = self.module.operation.get_asm(assume_verified=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def signature(self) -> str:
        params = ", ".join(f"{n}: {s}" for n, s in zip(self.parameter_names, self.parameter_shapes))
        results = ", ".join(map(str, self.result_shapes))
        return f"{self.name}({params}) -> ({results})"

    def __repr__(self) -> str:
        return f"<Computation {self.signature()}>"

    def _repr_html_(self) -> str | None:  # Jupyter: the signature and the graph
        return _DRAWING["html"](self) if "html" in _DRAWING else None

    def _repr_svg_(self) -> str | None:
        return _DRAWING["svg"](self) if "svg" in _DRAWING else None

    # -- serialization --------------------------------------------------------------

    def as_text(self, debug_info: bool = False) -> str:
        """The StableHLO text; `debug_info=True` adds the locations (file and line of each op)."""
        return self.module.operation.get_asm(enable_debug_info=debug_info)

    __str__ = as_text

    def to_bytecode(self) -> bytes:
        """MLIR bytecode of the module (same jaxlib version to read it back)."""
        buf = io.BytesIO()
        self.module.operation.write_bytecode(buf)
        return buf.getvalue()

    def to_portable(self, target_version: str | None = None) -> bytes:
        """A StableHLO portable artifact (VHLO), for `target_version` (default: the current one).

        CHLO ops have no portable form: the module is legalized to StableHLO first.
        """
        version = target_version or stablehlo.get_current_version()
        minimum = stablehlo.get_minimum_version()
        if not re.fullmatch(r"\d+\.\d+\.\d+", str(version)):
            raise HlogenError(f"to_portable: target_version must look like 1.9.0, got {version!r}")
        # in this context, whose diagnostics are collected into the message (the string
        # form parses in a context of its own, which prints them raw on stderr)
        with mlir.collected_diagnostics() as messages:
            try:
                module = self.clone().module
                mlir.run_pipeline(module, f"builtin.module({mlir.LEGALIZE})")
                return stablehlo.serialize_portable_artifact(module, version)
            except Exception as e:
                said = "; ".join(m.split(": ", 1)[-1] for m in messages) or str(e)
                raise HlogenError(
                    f"to_portable: cannot serialize for StableHLO {version} (this jaxlib writes "
                    f"{minimum} to {stablehlo.get_current_version()}): {said}") from None

    def clone(self) -> "Computation":
        """An independent copy (passes change modules in place)."""
        return Computation(ir.Module.parse(self.to_bytecode(), context=mlir.context()), self.source)


def given_names(function: ir.Operation) -> list:
    """The name of each argument of `function`, None where it has none: its name
    attribute, else the name of its location (what jax and XLA's converter write)."""
    attrs = function.attributes
    per_argument = list(ir.ArrayAttr(attrs["arg_attrs"])) if "arg_attrs" in attrs else []
    names = []
    for i, arg in enumerate(function.regions[0].blocks[0].arguments):
        name = None
        if i < len(per_argument):
            found = ir.DictAttr(per_argument[i])
            for key in (NAME_ATTRIBUTE, *_OTHER_NAME_ATTRIBUTES):
                if key in found:
                    name = ir.StringAttr(found[key]).value
                    break
        if name is None:
            m = _NAME_LOC.match(str(arg.location))
            name = m.group(1) if m else None
        names.append(name or None)
    return names


def set_names(function: ir.Operation, names: list) -> None:
    """Writes each name of `names` (None: none) into `function`'s argument attributes,
    keeping the attributes already there."""
    ctx = function.context
    set_attributes(function, "arg_attrs", len(names), {
        i: {NAME_ATTRIBUTE: ir.StringAttr.get(name, context=ctx)}
        for i, name in enumerate(names) if name is not None})


def set_attributes(function: ir.Operation, kind: str, count: int, updates: dict) -> None:
    """Adds attributes to the arguments (`kind` "arg_attrs") or results ("res_attrs") of
    `function`, which has `count` of them: `updates` maps an index to {name: attribute};
    the attributes already there are kept."""
    ctx = function.context
    attrs = function.attributes
    old = list(ir.ArrayAttr(attrs[kind])) if kind in attrs else []
    dicts = []
    for i in range(count):
        entries = {}
        if i < len(old):
            found = ir.DictAttr(old[i])
            entries = {found[j].name: found[j].attr for j in range(len(found))}
        entries.update(updates.get(i, {}))
        dicts.append(ir.DictAttr.get(entries, context=ctx))
    attrs[kind] = ir.ArrayAttr.get(dicts, context=ctx)


def is_public(function: ir.Operation) -> bool:
    """Whether a func.func is public (MLIR's default, without sym_visibility)."""
    return "sym_visibility" not in function.attributes or \
        ir.StringAttr(function.attributes["sym_visibility"]).value == "public"


def main_of(module: ir.Module, source) -> ir.Operation:
    found = mlir.functions(module).get("main")
    if found is not None:
        return found
    raise InputError(f"{source or 'the module'}: the module has no function @main: hlogen runs "
                     f"the function named main")
