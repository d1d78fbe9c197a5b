"""Files hlogen writes: always through a temporary file in the same folder and a rename,
so that a failure or a concurrent writer never leaves a half-written file. They get the
permissions any tool's files get (0666 less the umask), not a temporary file's 0600."""
from __future__ import annotations

import os
import pathlib
import secrets


def write_atomically(path, data: bytes) -> None:
    """Writes `data` to `path` (its folder is created), replacing it at once."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:  # tempfile.mkstemp's loop, with the mode of open(path, "wb")
        tmp = path.parent / f".{path.name}.{secrets.token_hex(4)}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
