"""XLA's options per compile: any field of XLA's `DebugOptions`, by name, checked and typed
before anything compiles.

jaxlib's `CompileOptions.env_option_overrides` sets a `DebugOptions` field by name (a
value of Python type bool, int, float or str; a repeated field as one comma-separated
string); XLA refuses an unknown name only when it compiles ("No such compile option").
The names and types come from the `DebugOptions` descriptor that jaxlib itself carries:
protobuf's generated code keeps each .proto file's serialized `FileDescriptorProto` in
the library (libjax_common.so holds xla/xla.proto's), which is read here with
hlogen.hlo's protobuf reader, without starting jax. So an unknown name is refused with
the closest known ones, and a value is typed as XLA reads it. (A jaxlib whose library
holds no such descriptor gets its names checked by XLA when it compiles.)

Per-compile options override XLA_FLAGS for the same field; XLA_FLAGS keeps working for
the others (XLA reads it once per process).
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import mmap
import os
from collections.abc import Mapping

import jaxlib  # the folder of its libraries (the package, loaded with its MLIR bindings: no jax)

from hlogen.errors import InputError
from hlogen.hlo import proto_fields

# running already-optimized HLO as it is (run_hlo_module's --run_test_hlo_passes=false)
NO_HLO_PASSES = (("xla_disable_all_hlo_passes", True),)

# FieldDescriptorProto.Type -> the kind of value (and the range of the integer ones)
_KIND = {1: "float", 2: "float", 8: "bool", 9: "string", 14: "enum",
         10: "message", 11: "message", 12: "bytes"}
_RANGE = {5: (-2**31, 2**31 - 1), 15: (-2**31, 2**31 - 1), 17: (-2**31, 2**31 - 1),
          13: (0, 2**32 - 1), 7: (0, 2**32 - 1),
          3: (-2**63, 2**63 - 1), 16: (-2**63, 2**63 - 1), 18: (-2**63, 2**63 - 1),
          4: (0, 2**64 - 1), 6: (0, 2**64 - 1)}
_REPEATED = 3  # FieldDescriptorProto.Label
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")
# where protobuf keeps xla/xla.proto's descriptor: its first field, the file's name
_DESCRIPTOR = b"\n\rxla/xla.proto\x12\x03xla"


@dataclasses.dataclass(frozen=True)
class Field:
    """A DebugOptions field: its kind ("bool", "int", "float", "string", "enum", "message",
    "bytes"), whether it is repeated, an integer's range, an enum's values by name."""

    name: str
    kind: str
    repeated: bool = False
    low: int | None = None
    high: int | None = None
    values: tuple = ()  # an enum's (name, number) pairs, where jaxlib's descriptor has them


def _library_files() -> list[str]:
    folder = os.path.dirname(os.path.abspath(jaxlib.__file__))
    names = sorted(os.listdir(folder), key=lambda n: "jax_common" not in n)
    return [os.path.join(folder, n) for n in names if n.endswith((".so", ".dylib", ".pyd"))]


def _descriptor(paths: list[str]) -> bytes | None:
    """The start of xla/xla.proto's serialized FileDescriptorProto in one of the libraries
    at `paths`, or None."""
    for path in paths:
        try:
            with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                at = m.find(_DESCRIPTOR)
                if at >= 0:
                    return m[at:at + (1 << 22)]  # the file's descriptor is far smaller
        except (OSError, ValueError):  # unreadable, or empty
            continue
    return None


def _read_fields(descriptor: bytes) -> dict[str, Field]:
    message = None
    try:  # the descriptor's own fields: message types are field 4
        for number, _, value in proto_fields(descriptor):
            if number == 4:
                first = next(proto_fields(value), None)
                if first and first[0] == 1 and first[2] == b"DebugOptions":
                    message = value
                    break
    except ValueError:  # past the descriptor's end before DebugOptions: not this one
        return {}
    if message is None:
        return {}
    parts = [(n, v) for n, _, v in proto_fields(message)]
    enums = {}  # nested enum types (DescriptorProto field 4): name -> (value name, number)
    for number, value in parts:
        if number == 4:
            fields_of = [(n, v) for n, _, v in proto_fields(value)]
            name = next(v for n, v in fields_of if n == 1).decode()
            members = [dict(_scalars(v)) for n, v in fields_of if n == 2]
            enums[name] = tuple((m[1].decode(), m.get(2, 0)) for m in members)
    found = {}
    for number, value in parts:
        if number != 2:  # fields are field 2 (FieldDescriptorProto)
            continue
        f = dict(_scalars(value))
        name, label, kind = f[1].decode(), f.get(4, 1), f.get(5, 0)
        low, high = _RANGE.get(kind, (None, None))
        type_name = f.get(6, b"").decode().rsplit(".", 1)[-1]
        found[name] = Field(name, _KIND.get(kind, "int"), label == _REPEATED, low, high,
                            enums.get(type_name, ()) if kind == 14 else ())
    return found


def _scalars(message: bytes):
    """(field number, value) of a message's fields; a varint's value as a (signed) int."""
    for number, wire, value in proto_fields(message):
        yield number, (value - (1 << 64) if wire == 0 and value >= 1 << 63 else value)


@functools.lru_cache(maxsize=None)
def fields(library: str | None = None) -> dict[str, Field]:
    """Every DebugOptions field of this jaxlib, or of the XLA in `library` (a PJRT plugin's:
    another XLA has other fields), by name ({} where the library holds no descriptor)."""
    descriptor = _descriptor([library] if library else _library_files())
    return _read_fields(descriptor) if descriptor is not None else {}


def parse(text: str) -> tuple[str, str]:
    """(name, value) of "NAME=VALUE"."""
    name, sep, value = str(text).partition("=")
    if not sep or not name.strip():
        raise InputError(f"an XLA option is NAME=VALUE (e.g. xla_disable_hlo_passes=algsimp), "
                         f"got {text!r}")
    return name.strip(), value


def check(options, library: str | None = None) -> tuple:
    """`options` (a dict, (name, value) pairs or "NAME=VALUE" strings; None for none; a
    name's leading "--", as in XLA_FLAGS, is dropped) as sorted (name, typed value)
    pairs, ready for `CompileOptions.env_option_overrides`. An unknown name or a value
    of the wrong type is an InputError. `library`: the XLA that takes them (a PJRT
    plugin's library; None: jaxlib's)."""
    if options is None:
        return ()
    if isinstance(options, str):
        options = [options]
    pairs = list(options.items()) if isinstance(options, Mapping) else \
        [parse(o) if isinstance(o, str) else _pair(o) for o in options]
    typed: dict = {}
    for name, value in pairs:
        name = str(name).strip().removeprefix("--")
        if name in typed:
            raise InputError(f"XLA option {name} is given twice; a list of values is one "
                             f"comma-separated value")
        typed[name] = _typed(name, value, library)
    return tuple(sorted(typed.items()))


def _pair(option) -> tuple:
    if isinstance(option, (tuple, list)) and len(option) == 2:
        return tuple(option)
    raise InputError(f"an XLA option is a (name, value) pair or NAME=VALUE, got {option!r}")


def _typed(name: str, value, library: str | None):
    known = fields(library)
    if not known:  # no descriptor in this jaxlib: XLA checks when it compiles
        return value if isinstance(value, (bool, int, float, str)) else str(value)
    field = known.get(name)
    if field is None:
        close = difflib.get_close_matches(name, known, n=4, cutoff=0.6)
        hint = (f"the closest known: {', '.join(close)}" if close else
                "the names are the fields of DebugOptions in XLA's xla/xla.proto")
        raise InputError(f"no XLA option named {name!r}; {hint}")
    if field.kind in ("message", "bytes"):
        raise InputError(f"XLA option {name} is a {field.kind} field, which cannot be set per "
                         f"compile (XLA_FLAGS may set it)")
    if not field.repeated:
        return _one(field, value)
    items = value.split(",") if isinstance(value, str) else \
        list(value) if isinstance(value, (list, tuple)) else [value]
    return ",".join(str(_one(field, v)) for v in items if v != "")


def _one(field: Field, value):
    wrong = InputError(f"XLA option {field.name} takes {_what(field)}, got {value!r}")
    text = value.strip() if isinstance(value, str) else None
    if field.kind == "bool":
        if isinstance(value, bool) or (isinstance(value, int) and value in (0, 1)):
            return bool(value)
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise wrong
    if field.kind in ("int", "float"):
        if isinstance(value, bool) or (field.kind == "int" and isinstance(value, float)):
            raise wrong
        try:
            number = (int if field.kind == "int" else float)(text if text is not None else value)
        except (TypeError, ValueError):
            raise wrong from None
        if field.kind == "int" and not field.low <= number <= field.high:
            raise wrong
        return number
    if field.kind == "enum":
        names = dict(field.values)
        if text is not None and (not names or text in names):
            return text
        if isinstance(value, int) and not isinstance(value, bool) and \
                (not names or value in names.values()):
            return value
        close = difflib.get_close_matches(str(value), names, n=3, cutoff=0.5)
        raise InputError(f"XLA option {field.name} takes {_what(field)}, got {value!r}"
                         + (f"; the closest: {', '.join(close)}" if close else ""))
    if text is None:  # strings
        raise wrong
    return value


def _what(field: Field) -> str:
    if field.kind == "enum" and field.values:
        return "one of " + ", ".join(n for n, _ in field.values)
    return {"bool": "true or false", "int": f"an integer in [{field.low}, {field.high}]",
            "float": "a number", "string": "a string", "enum": "an enum value"}[field.kind]


def merged(*checked: tuple) -> tuple:
    """Checked option sets, later ones winning for the same name (a backend's own options,
    then a compile's), as one sorted tuple."""
    combined: dict = {}
    for options in checked:
        combined.update(options)
    return tuple(sorted(combined.items()))


def text(options: tuple) -> str:
    """Checked options as NAME=VALUE words (what a report says was in force)."""
    return " ".join(f"{n}={str(v).lower() if isinstance(v, bool) else v}" for n, v in options)
