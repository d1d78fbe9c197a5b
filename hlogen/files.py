"""Files hlogen writes. Every file a command writes for its user is an `Output`, checked
when the command starts and written, by `Output.write`, at its end; the executable
cache, hlogen's own folder, writes through `replace`.

An output goes where the user said and nowhere else:
- no folder is made: a missing one is exit 2, naming it (`run --profile DIR` makes DIR,
  in a folder that exists, as profilers do: `folder`);
- a regular file, or a new one, is replaced at once, through a temporary file in its
  folder and a rename, so that a failure or a concurrent writer never leaves half a
  file; the new file has the old one's permissions (0666 less the umask for a new one,
  as any tool's), and a symbolic link to it stays a link;
- anything else is written in place, never replaced: a character device (/dev/null, no
  --force needed), a FIFO, and a file reached through /proc (/dev/stdout, /dev/fd/N of
  process substitution: a file that some process holds open, appended to as it would);
- an output that is the same file as one of the command's inputs (by device and inode,
  so that links and ./x do not hide it) is refused, --force or not;
- every OS error is an InputError (exit 2) with the path as the user gave it and the
  reason (read-only, permission denied, no space left).
"""
from __future__ import annotations

import os
import pathlib
import secrets
import stat

from hlogen.errors import InputError

_PROC = "/proc"  # Linux's files of processes: their open files are links in /proc/PID/fd


class Output:
    """The file `text` that a command's `option` ("-o", "--junit", ...) names, refused
    (InputError) before the command does its work when it cannot or must not be written:
    a folder, in a folder that does not exist or cannot be written, a new file in /proc,
    one of `inputs` (paths; "-" is standard input), or a regular file that exists when
    `force` is False (commands without --force give None: they replace theirs)."""

    def __init__(self, text, option: str, force: bool | None = None, inputs=()):
        self.text, self.option = str(text), option
        folder = os.path.dirname(self.text) or "."
        if os.path.isdir(self.text):
            raise self._error("is a folder; give a file name")
        if not os.path.isdir(folder):
            raise self._error(f"the folder {folder} does not exist (hlogen creates no folders)")
        self._target, self._in_place = _landing(self.text)
        found = _stat(self._target)
        if found is None and self._in_place:
            raise self._error(f"no such file in {_PROC} (files cannot be made there)")
        if found is not None and stat.S_ISREG(found.st_mode):
            for name in inputs:
                given = _stat(0 if name == "-" else name)  # (0: standard input)
                if given is not None and os.path.samestat(found, given):
                    which = "one of the command's inputs" if name == self.text else \
                        f"the same file as the input {'<stdin>' if name == '-' else name}"
                    raise self._error(f"is {which}: hlogen never writes over its inputs, "
                                      f"--force or not; choose another {option}")
        if self._in_place:
            return
        if force is False and found is not None:
            raise InputError(f"{self.text} exists: hlogen does not overwrite files; pass "
                             f"--force to allow it (or choose another {option})")
        where = os.path.dirname(self._target)
        if not os.access(where, os.W_OK):
            raise self._error(f"cannot write in {where}: {_why_not_writable(where)}")

    def __str__(self) -> str:
        return self.text

    @property
    def regular(self) -> bool:
        """Whether it lands on a regular file (or a new one): a file that stays there to
        be read back by its name, unlike a device, a FIFO or /dev/stdout."""
        return not self._in_place

    def _error(self, why: str) -> InputError:
        return InputError(f"{self.option} {self.text}: {why}")

    def write(self, data: bytes) -> None:
        """Writes `data`: in place, or replacing the file at once (see the module)."""
        try:
            if self._in_place:  # (appended: /dev/stdout may be a file opened with >>)
                fd = os.open(self._target, os.O_WRONLY | os.O_APPEND)
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
            else:
                replace(self._target, data)
        except OSError as e:
            raise self._error(f"cannot write: {e.strerror or e}") from None


def folder(text, option: str, why: str, made: bool = False) -> pathlib.Path:
    """The folder `text` that `option` names: one that exists (`why` says why it must be
    a folder), or, `made`, one that is made if missing, in a folder that exists."""
    path = pathlib.Path(text)
    parent = os.path.dirname(os.path.normpath(text)) or "."
    if path.exists() and not path.is_dir():
        raise InputError(f"{option} {text}: {why}; {text} is not a folder")
    if not path.exists() and not (made and os.path.isdir(parent)):
        missing = parent if made else text
        raise InputError(f"{option} {text}: {why}; {missing} does not exist (hlogen creates "
                         f"no folders{f', only {text} itself' if made else ''})")
    writable = text if path.exists() else parent
    if not os.access(writable, os.W_OK):
        raise InputError(f"{option} {text}: cannot write in {writable}: "
                         f"{_why_not_writable(writable)}")
    return path


def replace(path, data: bytes) -> None:
    """Writes `data` to the regular file (or new file) `path` through a temporary file in
    its folder and a rename, keeping the permissions of the file it replaces; an OSError
    leaves `path` as it was."""
    path = os.fspath(path)
    where, name = os.path.split(path)
    old = _stat(path)
    while True:  # tempfile.mkstemp's loop, with the mode of open(path, "wb")
        tmp = os.path.join(where, f".{name}.{secrets.token_hex(4)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            if old is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _landing(text: str) -> tuple[str, bool]:
    """Where writing `text` lands, its symbolic links followed, and whether it is written
    in place: anything but a regular file, and whatever is reached through /proc (/dev/
    stdout and /dev/fd/N lead there: a rename would replace the link, not the open file)."""
    path = os.path.join(os.getcwd(), text)
    for _ in range(40):  # the kernel's limit on links followed
        folder = os.path.realpath(os.path.dirname(path))
        path = os.path.join(folder, os.path.basename(path))
        if folder == _PROC or folder.startswith(_PROC + os.sep):
            return path, True
        try:
            path = os.path.join(folder, os.readlink(path))
        except OSError:  # not a link (or not there)
            break
    found = _stat(path)
    return path, found is not None and not stat.S_ISREG(found.st_mode)


def _stat(path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def _why_not_writable(path) -> str:
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "a read-only file system"
    except OSError:
        pass
    return "permission denied"
