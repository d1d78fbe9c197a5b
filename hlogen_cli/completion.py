"""Shell completion (`eval "$(hlogen completion bash)"`): sample names, the function
names of the file a command reads (--function), and files for the options that write
them. Names are read without importing hlogen or running the user's file, so that Tab
answers at once: @hg.function definitions from the Python source (its syntax tree),
public functions from a module's text. Also where the samples are (`samples_directory`),
which `hlogen samples` reads as well."""
from __future__ import annotations

import ast
import os
import pathlib
import re
import shlex

import click
from click.shell_completion import CompletionItem

_PUBLIC_FUNCTION = re.compile(r"func\.func\s+(?:public\s+)?@([\w.$-]+)")
_TEXT_READ = 1 << 20  # a module's first MiB holds the functions a person names


def samples_directory() -> pathlib.Path:
    """$HLOGEN_SAMPLES, or the samples: shipped in the package as hlogen_cli/sample_files
    (pyproject.toml maps samples/ there), or samples/ of a clone (an editable install)."""
    if os.environ.get("HLOGEN_SAMPLES"):
        return pathlib.Path(os.environ["HLOGEN_SAMPLES"])
    here = pathlib.Path(__file__).resolve().parent
    installed, clone = here / "sample_files", here.parent / "samples"
    return installed if installed.is_dir() or not clone.is_dir() else clone


def sample_files() -> list[pathlib.Path]:
    folder = samples_directory()
    return sorted(p for p in folder.glob("*.py") if not p.name.startswith("_")) \
        if folder.is_dir() else []


def hg_functions(path: pathlib.Path) -> list[str]:
    """The names of the top-level functions of a Python file decorated with @hg.function
    (or @function, @hg.function(...)), in order; [] where it does not parse."""
    try:
        tree = ast.parse(path.read_text(errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [node.name for node in tree.body if isinstance(node, ast.FunctionDef) and
            any(_decorator_name(d) == "function" for d in node.decorator_list)]


def _decorator_name(node) -> str | None:
    node = node.func if isinstance(node, ast.Call) else node
    return node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", None)


def sample_names(ctx, param, incomplete: str) -> list[CompletionItem]:
    """FILE.FUNCTION of every sample (`hlogen samples show|run NAME`)."""
    names = [f"{p.stem}.{name}" for p in sample_files() for name in hg_functions(p)]
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def function_names(ctx, param, incomplete: str) -> list[CompletionItem]:
    """The functions --function can name in the file given before it: the @hg.function
    definitions of a .py file, the public functions of a module's text."""
    given = _file_argument(ctx)
    path = pathlib.Path(given) if given not in (None, "-") else None
    if path is None or not path.is_file():
        return []
    if path.suffix == ".py":
        names = hg_functions(path)
    else:
        try:
            with open(path, "rb") as f:
                text = f.read(_TEXT_READ).decode("utf-8", errors="replace")
        except OSError:
            return []
        names = list(dict.fromkeys(_PUBLIC_FUNCTION.findall(text)))
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def _file_argument(ctx) -> str | None:
    """The command's IN (or first FILE): click parses it, except while an option waits
    for its value (`--function <Tab>`): then from the words the shell passes
    (COMP_WORDS, in click's scripts for bash, zsh and fish), the first after the command
    name that is neither an option nor an option's value."""
    given = ctx.params.get("files") or [ctx.params.get("file")]
    if given and given[0]:
        return given[0]
    text = os.environ.get("COMP_WORDS", "")
    try:
        words = shlex.split(text)
    except ValueError:  # an open quote
        words = text.split()
    valued = {name for p in ctx.command.params if isinstance(p, click.Option) and not p.is_flag
              for name in p.opts}
    words = words[words.index(ctx.info_name) + 1:] if ctx.info_name in words else []
    skip = False
    for word in words:
        if not skip and not word.startswith("-"):
            return word
        skip = word in valued
    return None


def files(ctx, param, incomplete: str) -> list[CompletionItem]:
    """The shell's own completion of file names (for options that name a file to write)."""
    return [CompletionItem(incomplete, type="file")]


def backend_names(ctx, param, incomplete: str) -> list[CompletionItem]:
    """The declared backends (hlogen.backends; plugins once discovered)."""
    from hlogen import backends  # here, not at the top: start-up (Tab on --backend only)
    return [CompletionItem(name) for name in backends.names() if name.startswith(incomplete)]
