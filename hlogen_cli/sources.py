"""Where computations come from on the command line: .py files of @hg.function
definitions, modules in any form hg.load reads (text, bytecode, portable artifacts),
from a file, a pipe (/dev/fd/N) or standard input (-), and compiled files (`hlogen
compile -o`)."""
from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import sys
import traceback

import hlogen as hg
from hlogen import hlo
from hlogen.errors import InputError
from hlogen.function import deferred_errors
from hlogen.loading import load_bytes, with_entry
from hlogen_cli import compiled

PYTHON_SUFFIXES = (".py",)


def functions_in(path: str) -> dict[str, hg.Function]:
    """The @hg.function objects a Python file defines, in definition order."""
    file = pathlib.Path(path)
    if not file.is_file():
        raise InputError(f"{path}: no such file")
    if not path.endswith(PYTHON_SUFFIXES):
        raise InputError(f"{path}: not a Python file: emit and samples take FILE.py files of "
                         f"@hg.function definitions (hlogen opt IN --format ... converts a "
                         f"module; hlogen run runs one)")
    name = f"hlogen_source_{abs(hash(str(file.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, file)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))  # the file may import its neighbours
    try:
        with deferred_errors():  # a broken function leaves the others usable
            spec.loader.exec_module(module)
    except hg.HlogenError:
        raise
    except SyntaxError as e:
        raise InputError(f"{path}:{e.lineno}:{e.offset or 0}: {e.msg}") from None
    except Exception as e:
        where = _innermost_line_in(file, e)
        raise InputError(f"{where}: {type(e).__name__}: {e}") from None
    finally:
        sys.path.pop(0)
    found = {n: f for n, f in vars(module).items() if isinstance(f, hg.Function)}
    if not found:
        raise InputError(f"{path}: defines no @hg.function")
    return found


def _innermost_line_in(file: pathlib.Path, error: Exception) -> str:
    frames = [f for f in traceback.extract_tb(error.__traceback__)
              if pathlib.Path(f.filename).resolve() == file.resolve()]
    return f"{file}:{frames[-1].lineno}" if frames else str(file)


def pick(functions: dict, name: str | None, path: str):
    """The function called `name`, or the only one when no name is given."""
    if name is None:
        if len(functions) == 1:
            return next(iter(functions.values()))
        raise InputError(f"{path} defines {len(functions)} functions ({', '.join(functions)}): "
                         f"choose one with --function")
    if name not in functions:
        raise InputError(f"{path}: no @hg.function named {name!r}; it defines {', '.join(functions)}")
    return functions[name]


def read_module(path: str) -> tuple[bytes, str]:
    """The bytes of a module file, a pipe (/dev/fd/N), or standard input for `-`; and
    how messages name them."""
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    file = pathlib.Path(path)
    if file.is_dir():
        raise InputError(f"{path}: is a directory, not a module file")
    try:
        return file.read_bytes(), path
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read: {e.strerror}") from None


def load_mlir(path: str) -> hg.Computation:
    """A module from a file in any form hg.load reads, or from standard input for `-`
    (HLO read by XLA in a child process, as module_source does)."""
    data, where = read_module(path)
    return load_bytes(data, where, isolated=True, file=_regular_file(path))


def computation_from(path: str, function: str | None) -> hg.Computation:
    """The computation to run from a .py file (by function name) or a module."""
    return module_source(path, function).computation


@dataclasses.dataclass
class Source:
    """What IN holds: the computation; the compiled file it came from (or None); the
    arguments it recorded (an HloSnapshot's), or None."""

    computation: hg.Computation
    compiled: compiled.CompiledFile | None = None
    recorded: list | None = None


def module_source(path: str, function: str | None) -> Source:
    """The Source of IN: a .py file (by function name), a module (its public function
    `function`, default main), a compiled file, or an HloSnapshot (its module and the
    arguments it ran with)."""
    if path.endswith(PYTHON_SUFFIXES):
        return Source(pick(functions_in(path), function, path).computation)
    data, where = read_module(path)
    if compiled.is_compiled(data):
        found = compiled.CompiledFile(data, where)
        if function not in (None, "main"):
            raise InputError(f"{where}: a compiled file runs the function it was compiled "
                             f"from ({found.computation.name}), not {function!r}")
        return Source(found.computation, found)
    # HLO is read by XLA in a child process (its parser ends the process on some
    # malformed modules): bad input is exit 2, in every command
    comp = with_entry(load_bytes(data, where, isolated=True, file=_regular_file(path)),
                      function, where)
    return Source(comp, recorded=hlo.snapshot_arguments(data, where))


def _regular_file(path: str) -> str | None:
    """`path` where MLIR may read it again, so that ops' locations name it (not a pipe,
    /dev/fd/N, which was read once already; not standard input)."""
    return path if path != "-" and pathlib.Path(path).is_file() else None
