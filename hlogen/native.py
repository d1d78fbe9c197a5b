"""jaxlib's readers of modules made elsewhere (XLA's HLO parser and HLO-to-StableHLO
converter, jax.export's deserializer), as a registry the runtime fills; the child
process that native readers which may end the process run in; and how every child
process hlogen starts ends with its parent (`end_with_parent`).

They live in hlogen.runtime._jaxlib, the one module of private jax imports, which starts
jax: hlogen.runtime registers them here (importing jax only when one is first called),
and the loading layer calls them by name, below the runtime.
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

# name -> what it does (hlogen.runtime._jaxlib defines each)
NAMES = {
    "hlo_text_to_proto": "HLO text -> serialized HloModuleProto (XLA's HLO parser)",
    "hlo_proto_to_text": "serialized HloModuleProto -> HLO text",
    "hlo_to_stablehlo": "serialized HloModuleProto -> StableHLO bytecode (XLA's converter)",
    "exported_parts": "jax.export's serialized Exported -> a dict of its parts",
}
_registered: dict = {}


def register(name: str, function) -> None:
    if name not in NAMES:
        raise ValueError(f"no native reader named {name!r}; known: {', '.join(NAMES)}")
    _registered[name] = function


def call(name: str, *args):
    """Calls reader `name`; its exceptions are the caller's to turn into hlogen errors."""
    function = _registered.get(name)
    if function is None:  # only when hlogen.runtime was never imported
        raise RuntimeError(f"{NAMES[name]}: not registered (import hlogen, not hlogen.loading alone)")
    return function(*args)


# what a child of hlogen runs first: `-c` puts the current folder ('') first on sys.path,
# where a clone named hlogen/ or a numpy.py would be imported instead (python -P does
# this from 3.11 only). (The command line's parent imports no hlogen: cli/isolation.py
# writes the same line.)
CHILD_PATH = "import sys\nsys.path[:] = [p for p in sys.path if p]\n"
# and, for native code that may abort: no core file; ending with its parent (whose
# process id comes first in its arguments)
_PRELUDE = CHILD_PATH + """import resource
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
from hlogen import native
native.end_with_parent(int(sys.argv.pop(1)))
"""
_PR_SET_PDEATHSIG = 1  # prctl's option, <linux/prctl.h>


def end_with_parent(parent: int) -> None:
    """Called first in each child process hlogen starts: the kernel kills it (SIGKILL)
    when `parent`, its parent's process id, ends, however it ends (Linux's
    PR_SET_PDEATHSIG; elsewhere this does nothing). The parent's own clean-up, which kills
    its children on the way out of an exception or a signal, is the first line of
    defence; this one covers a parent killed by SIGKILL or by a native crash. A parent
    that ended before the call ends the child at once."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def run_child(code: str, data: bytes, args: list, seconds: float):
    """Runs Python `code` in a child process with `data` on its standard input (hlogen
    importable as here, no core file written), for native code that may end the process
    on bad input: the completed process (stdout and stderr as bytes), or None when it ran
    out of time. (A child process, not a fork: forking a process that runs XLA threads
    can hang.)"""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [package_parent, *filter(None, [os.environ.get("PYTHONPATH")])]))
    try:
        return subprocess.run([sys.executable, "-c", _PRELUDE + code, str(os.getpid()), *args],
                              input=data, env=env, capture_output=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        return None
