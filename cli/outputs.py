"""Files the commands write (emit, opt, compile -o, run --output): one rule for where.

A file goes into a folder that exists (hlogen creates no folders: a typo must not make
one), never over a folder, and over a file that exists only with --force where the
command has it (emit, opt). Files follow the umask like any tool's (hlogen.files),
written whole or not at all.
"""
from __future__ import annotations

import pathlib

from hlogen.errors import InputError
from hlogen.files import write_atomically


def checked(text: str, option: str, force: bool | None = None) -> pathlib.Path:
    """The path `text` of an output option, refused (InputError, exit 2) when its folder
    is missing, when it is a folder, or (force False) when it exists."""
    path = pathlib.Path(text)
    if path.is_dir():
        raise InputError(f"{option} {text}: is a folder; give a file name")
    folder = path.parent
    if not folder.is_dir():
        raise InputError(f"{option} {text}: the folder {folder} does not exist (hlogen creates "
                         f"no folders)")
    if force is False and path.exists():
        raise InputError(f"{path} exists: hlogen does not overwrite files; pass --force to "
                         f"allow it (or choose another {option})")
    return path


def folder(text: str, option: str, why: str) -> pathlib.Path:
    """The existing folder `text` (emit's -o for several functions)."""
    path = pathlib.Path(text)
    if not path.is_dir():
        missing = "does not exist" if not path.exists() else "is a file"
        raise InputError(f"{option} {text}: {why}; {text} {missing} (hlogen creates no "
                         f"folders)")
    return path


write = write_atomically
