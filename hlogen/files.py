"""Files hlogen writes: always through a temporary file in the same folder and a rename,
so that a failure or a concurrent writer never leaves a half-written file."""
from __future__ import annotations

import os
import pathlib
import tempfile


def write_atomically(path, data: bytes) -> None:
    """Writes `data` to `path` (its folder is created), replacing it at once."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
