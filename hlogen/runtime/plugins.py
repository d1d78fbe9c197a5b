"""PJRT plugins as backends: each installed plugin, or a PJRT C API library named by its
path, loaded into jax and declared in hlogen.backends under a name of its own.

Where plugins are found (`available` lists them without loading any, or starting jax):
- OpenXLA's `xla_plugins` entry points (xla-cpu-pjrt declares one): the library lies
  beside the package's __init__.py; the backend is named after the entry point;
- the command line's --plugin, $HLOGEN_PLUGINS (each `PATH[:NAME],...`) and
  `load_plugin(path, name=None)`: a name defaults from the file's (libfoo_pjrt.so ->
  foo_pjrt). A library named so wins over an installed plugin of the same name (a plugin
  author testing his own build of `xla_cpu_pjrt` gets his build, under the name his
  known-failure lists and scripts use), and --plugin over $HLOGEN_PLUGINS, each said
  once on standard error; one name given two libraries in one list is refused;
- jax's own plugins (`jax_plugins` namespace packages and entry points): jax imports
  them, and they register themselves, when its backends start; hlogen declares what
  they registered, under jax's names (`discover`).

Loading one reads its GetPjrtApi first (a NULL API, or another major version of the
PJRT C API than jaxlib's, is refused with words rather than by jaxlib's crash), then
registers it with jax after jax's own backends started (so a plugin never becomes
jax's default device, and its failure is not jax's), starts its client, and asks the
plugin what it is: platform and version, device kind and count, the XLA options its
library takes (the `DebugOptions` descriptor its XLA carries, read as
hlogen.runtime.xla_options reads jaxlib's). Those facts are the backend's `identity`;
the IDENTIFYING ones key its executables (hlogen.backends).

A plugin that ends the process while it loads cannot be caught in that process:
`probe` (and `load_plugin`'s `isolate`) loads it in a child process first, and
compiles and runs a small module there, and refuses it with the signal and what it
was doing. Child processes hlogen starts load the plugins loaded here by path too
(hlogen.native.pass_to_children), so that conformance workers and isolated runs find
them by name.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import importlib.util
import json
import os
import re
import signal
import sys
import time

import numpy as np

from hlogen import backends, native, ops
from hlogen import types as T
from hlogen.backends import XLA_REFUSES_TYPES, XLA_REFUSES_UNMEASURED, Backend, Kind
from hlogen.builder import Builder
from hlogen.errors import HlogenError, InputError, UnsupportedError
from hlogen.runtime import xla_options

ENVIRONMENT = "HLOGEN_PLUGINS"  # PATH[:NAME],... loaded by discovery
# The command line's --plugin and the plugins hg.load_plugin loaded, as PATH[:NAME],...
# in variables of their own, so that discovery (in this process and in hlogen's children)
# says truthfully where each came from; the first of the three names wins
GIVEN = "HLOGEN_PLUGINS_GIVEN"
LOADED = "HLOGEN_PLUGINS_LOADED"
EXPLICIT = ((LOADED, "hg.load_plugin"), (GIVEN, "--plugin"), (ENVIRONMENT, f"${ENVIRONMENT}"))
SAID = "HLOGEN_PLUGINS_SAID"  # set once the choices were said: hlogen's children say them not again
ENTRY_POINTS = "xla_plugins"    # OpenXLA's entry point group: NAME = package (library beside it)
LIBRARY_SUFFIXES = (".so", ".dylib", ".dll")
PJRT_API_MAJOR = 0  # the PJRT C API major version jaxlib 0.10 speaks (pjrt_c_api.h)
PROBE_SECONDS = 120.0  # loading a plugin, compiling and running a small module, in a child
# jaxlib's XLA's refusals: a plugin is XLA too (of another version: a starting point)
REFUSALS = "jaxlib's XLA's (a starting point: seen with jaxlib's XLA, not checked on this plugin)"
_NAME = re.compile(r"[a-z][a-z0-9_]*")
_RESERVED = {"all"}  # the command line's word for every backend


@dataclasses.dataclass(frozen=True)
class Found:
    """A plugin found, before it loads: the backend name it gets, its library (a real
    path), where it was found (in words), its package's version ("" when none) and the
    libraries of its name that it replaces."""
    name: str
    library: str
    source: str
    version: str = ""
    replaces: str = ""  # the libraries of its name that it wins over, in words


_loaded: dict[str, Backend] = {}   # name -> declaration, of every plugin loaded here
_by_path: list[str] = []           # PATH:NAME of each loaded by path, for child processes
_said: list[bool] = []             # whether _say_choices said them in this process


# -- finding ---------------------------------------------------------------------------------

def name_from_file(path: str) -> str:
    """The backend name a library's file gives: libfoo_pjrt.so.1 -> foo_pjrt."""
    stem = os.path.basename(path).split(".", 1)[0]
    stem = stem.removeprefix("lib") or stem
    return re.sub(r"[^a-z0-9_]", "_", stem.lower()).lstrip("_0123456789") or "plugin"


def available() -> list[Found]:
    """The plugins loaded here, the ones named (hg.load_plugin's, --plugin's,
    $HLOGEN_PLUGINS') and the installed ones (entry points), without loading any. (jax's
    own plugins are known only once jax starts: `discover`.) A name is listed once: a
    plugin loaded here first, then one named (in that order) over an installed one, saying
    which it replaces; InputError for one name given two libraries in one list."""
    found: dict[str, Found] = {b.name: Found(b.name, b.identity["library"],
                                             b.identity["source"], b.identity["version"])
                               for b in _loaded.values()}
    named, installed = _named(), _entry_points()
    for each in [*named, *installed]:
        first = found.setdefault(each.name, each)
        if first.library != each.library and first.name not in _loaded:
            other = (f"the installed {each.library}" if each in installed
                     else f"{each.library} given by {each.source}")
            found[each.name] = dataclasses.replace(
                first, replaces=", ".join(filter(None, [first.replaces, other])))
    order = dict.fromkeys(f.name for f in [*installed, *named, *found.values()])
    return [found[name] for name in order]  # installed first, as `hlogen devices` lists them


def choices() -> list[str]:
    """In words, each plugin named that replaces another of its name (`available`)."""
    return [f"{f.name}: using {f.library} given by {f.source}, not {f.replaces}"
            for f in available() if f.replaces]


def _entry_points() -> list[Found]:
    import importlib.metadata  # start-up: 12 ms, only when plugins are looked for
    found = []
    for entry in importlib.metadata.entry_points(group=ENTRY_POINTS):
        dist = getattr(entry, "dist", None)
        version = dist.version if dist is not None else ""
        where = f"{ENTRY_POINTS} entry point {entry.name} ({dist.name if dist else entry.value})"
        library = _library_beside(entry.value, entry.name)
        if library is None:
            backends.UNAVAILABLE.setdefault(
                entry.name, f"{where}: no PJRT library ({', '.join(LIBRARY_SUFFIXES)}) beside "
                            f"its package {entry.value}")
            continue
        found.append(Found(entry.name, library, where, version))
    return found


def _library_beside(module: str, name: str) -> str | None:
    """The library in the folder of package `module`: the one named `name`, else the only one."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    folders = list(spec.submodule_search_locations or []) if spec else []
    if spec and spec.origin and not folders:
        folders = [os.path.dirname(spec.origin)]
    for folder in folders:
        libraries = sorted(n for n in os.listdir(folder) if n.endswith(LIBRARY_SUFFIXES))
        named = [n for n in libraries if n.split(".", 1)[0] == name]
        if named or len(libraries) == 1:
            return os.path.realpath(os.path.join(folder, (named or libraries)[0]))
    return None


def parse_list(text: str) -> list[tuple[str, str | None]]:
    """(path, name or None) of each item of `PATH[:NAME],...` ($HLOGEN_PLUGINS, the
    command line's --plugin)."""
    items = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        path, sep, name = item.rpartition(":")
        items.append((path, name) if sep and name and "/" not in name else (item, None))
    return items


def _named() -> list[Found]:
    """The plugins named by path (EXPLICIT's variables, in order), each name once in each
    list: two libraries under one name in one list is an InputError naming both."""
    found = []
    for variable, words in EXPLICIT:
        listed: dict[str, str] = {}
        for path, name in parse_list(os.environ.get(variable, "")):
            library = os.path.realpath(path)
            name = name or name_from_file(path)  # the name as given: a link is named by itself
            if name in listed:
                if listed[name] != library:
                    raise InputError(f"{words} names two libraries as plugin {name}: "
                                     f"{listed[name]} and {library}; give one of them a name "
                                     f"of its own (PATH:OTHERNAME)")
                continue  # the same library twice
            listed[name] = library
            found.append(Found(name, library, words, _package_version(library)))
    return found


def _package_version(library: str) -> str:
    """The version of the installed package that holds `library`, or ""."""
    import importlib.metadata  # start-up: 12 ms, only when plugins are looked for
    for folder in sys.path:
        folder = os.path.realpath(folder or ".")
        if library.startswith(folder + os.sep):
            top = library[len(folder) + 1:].split(os.sep, 1)[0]
            for dist in importlib.metadata.packages_distributions().get(top, []):
                return importlib.metadata.version(dist)
    return ""


# -- loading ---------------------------------------------------------------------------------

def discover(isolate: bool = False) -> list[Backend]:
    """Loads each available plugin not loaded yet and declares it, and declares the
    plugins jax's own discovery registered; one that fails is left out, with why, in
    hlogen.backends.UNAVAILABLE. `isolate`: probe each in a child process first (one
    that ends the process is refused instead of ending this one). The plugins declared."""
    _say_choices()
    for found in available():
        if found.name in _loaded or found.name in backends.UNAVAILABLE:
            continue
        try:
            _load(found, isolate)
        except HlogenError as e:
            backends.UNAVAILABLE[found.name] = str(e)
    _declare_jax_plugins()
    return list(_loaded.values())


def _say_choices() -> None:
    """Says on standard error, once for hlogen and its children, each plugin named that
    replaces another of its name: the user sees which library runs."""
    if os.environ.get(SAID) or _said:
        return
    for words in choices():
        print(f"hlogen: {words}", file=sys.stderr, flush=True)
    _said.append(True)
    native.pass_to_children(_quiet_children)


def _quiet_children() -> dict:
    return {SAID: "1"}


def load_plugin(path, name: str | None = None, isolate: bool = True) -> Backend:
    """Loads the PJRT C API library at `path` as backend `name` (default: from the file's
    name, libfoo_pjrt.so -> foo_pjrt) and returns its declaration: then
    `hg.compile(comp, backend=name)`. With `isolate` (the default) it is first loaded,
    and a small module compiled and run, in a child process: a library that aborts or
    crashes is refused (UnsupportedError naming it and the signal) instead of ending this
    process. Child processes of hlogen (conformance workers, isolated runs) load it too."""
    library = _existing(path)
    name = name_from_file(library) if name is None else name
    found = _loaded.get(name)
    if found is not None and found.identity["library"] == library:
        return found
    backend = _load(Found(name, library, "hg.load_plugin", _package_version(library)), isolate)
    _by_path.append(f"{library}:{name}")
    native.pass_to_children(_for_children)
    return backend


def _for_children() -> dict:
    """The plugins loaded here by path, for a child (its LOADED, over this process's)."""
    return {LOADED: ",".join(filter(None, [os.environ.get(LOADED), *_by_path]))}


def _existing(path) -> str:
    library = os.path.realpath(os.fspath(path))
    if not os.path.isfile(library):
        raise InputError(f"{path}: no such file (a PJRT plugin is a shared library exporting "
                         f"GetPjrtApi)")
    return library


def _check_name(found: Found) -> None:
    taken = backends.BACKENDS.get(found.name)
    why = (f"a backend named {found.name!r} is declared already ({taken.description})"
           if taken is not None else
           f"{found.name!r} is the command line's word for every backend"
           if found.name in _RESERVED else None)
    if why is None and not _NAME.fullmatch(found.name):
        why = f"a backend name is lowercase letters, digits and _, got {found.name!r}"
    if why is not None:
        raise InputError(f"{_which(found.name, found.library)}: {why}; give it a name of its own "
                         f"(hg.load_plugin(path, name=...), PATH:NAME)")


def _load(found: Found, isolate: bool, phase=lambda words: None) -> Backend:
    _check_name(found)
    if isolate:
        probe(found.library, found.name)
    from hlogen.runtime import _jaxlib, pjrt  # start-up: jax starts when a plugin loads
    if _jaxlib.platform_taken(found.name):
        raise InputError(f"{_which(found.name, found.library)}: jax has a platform named "
                         f"{found.name!r} already; give the plugin a name of its own "
                         f"(hg.load_plugin(path, name=...), PATH:NAME)")
    # jax's own backends start first, as hlogen starts them: then the plugin is not among
    # the backends jax starts together (it would become jax's default device, and its
    # failure jax's), and jaxlib's XLA logs as the user asked (see _plugin_log_level)
    pjrt.client(None)
    with _plugin_log_level():
        phase("reading its API (GetPjrtApi)")
        version = read_api(found.library, found.name)
        phase("starting its client")
        try:
            client, _ = _jaxlib.load_plugin(found.name, found.library)
        except (RuntimeError, ValueError, TypeError) as e:  # jax's errors are RuntimeErrors
            raise UnsupportedError(f"{_which(found.name, found.library)}: its client did not "
                                   f"start: {e}") from None
    return _declare(found, client, version)


@contextlib.contextmanager
def _plugin_log_level():
    """A plugin's XLA logs at TF_CPP_MIN_LOG_LEVEL as it is when its library loads:
    3 (fatal errors only) unless the user asked for everything (0), so that its chatter
    ("Unsupported fusion type" while compiling) stays out of users' output."""
    before = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    if before != "0":
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
        else:
            os.environ["TF_CPP_MIN_LOG_LEVEL"] = before


class _ApiVersion(ctypes.Structure):  # PJRT_Api_Version, pjrt_c_api.h
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class _ApiStart(ctypes.Structure):  # the start of PJRT_Api, pjrt_c_api.h
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("pjrt_api_version", _ApiVersion)]


def _which(name: str, library: str) -> str:
    return f"PJRT plugin {name} ({library or 'library not known'})"


def read_api(library: str, name: str) -> str:
    """The PJRT C API version ("major.minor") of the library's GetPjrtApi, calling it in
    this process; UnsupportedError when it is no PJRT C API library, returns NULL or
    speaks another major version than jaxlib."""
    try:
        handle = ctypes.CDLL(library)
    except OSError as e:
        raise UnsupportedError(f"{_which(name, library)}: not a shared library this "
                               f"process can load: {e}") from None
    try:
        get_api = handle.GetPjrtApi
    except AttributeError:
        raise UnsupportedError(f"{_which(name, library)} exports no GetPjrtApi: not a PJRT "
                               f"C API library") from None
    get_api.restype = ctypes.c_void_p
    return _api_version(get_api(), library, name)


def _api_version(address: int | None, library: str, name: str) -> str:
    if not address:
        raise UnsupportedError(f"{_which(name, library)}: its GetPjrtApi returned NULL (no API)")
    start = _ApiStart.from_address(address)
    version = start.pjrt_api_version
    if start.struct_size < ctypes.sizeof(_ApiStart) or \
            version.struct_size < ctypes.sizeof(_ApiVersion) or \
            version.major_version != PJRT_API_MAJOR:
        raise UnsupportedError(
            f"{_which(name, library)}: its API is PJRT C API version {version.major_version}."
            f"{version.minor_version} (struct sizes {start.struct_size} and "
            f"{version.struct_size}); jaxlib speaks major version {PJRT_API_MAJOR}")
    return f"{version.major_version}.{version.minor_version}"


def _declare(found: Found, client, api_version: str) -> Backend:
    try:
        stat = os.stat(found.library)
    except OSError as e:  # removed after it loaded, or a library dladdr cannot name ("")
        raise UnsupportedError(f"{_which(found.name, found.library)}: its library cannot be read "
                               f"({e.strerror}): hlogen keys a plugin's executables by that "
                               f"file") from None
    devices = client.local_devices()
    options = xla_options.fields(found.library)
    identity = {
        "library": found.library,
        "modified": (f"{stat.st_size} bytes, "
                     f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(stat.st_mtime))}"
                     f".{stat.st_mtime_ns % 10**9:09d}"),
        "version": found.version,
        "platform": client.platform,
        "platform_version": " ".join(client.platform_version.split()),
        "pjrt_c_api": api_version,
        "devices": str(len(devices)),
        "device_kind": devices[0].device_kind if devices else "",
        "xla_options": (f"{len(options)} DebugOptions fields (read from its library)" if options
                        else "not known (its library holds no DebugOptions descriptor): XLA "
                             "checks them when it compiles"),
        "source": found.source + (f", not {found.replaces}" if found.replaces else ""),
        "refusals": REFUSALS,
    }
    backend = backends.declare(Backend(
        name=found.name, kind=Kind.PJRT, platform=found.name,
        words=f"the PJRT plugin {found.name}",
        description=(f"PJRT plugin: {len(devices)} {identity['device_kind']} device(s) on "
                     f"platform {client.platform}, {found.library}"
                     + (f" ({found.version})" if found.version else "")),
        refuses=XLA_REFUSES_UNMEASURED, refuses_types=XLA_REFUSES_TYPES, identity=identity))
    _loaded[found.name] = backend
    backends.UNAVAILABLE.pop(found.name, None)
    return backend


def _declare_jax_plugins() -> None:
    from hlogen.runtime import _jaxlib, pjrt  # start-up: jax's plugins are known once it starts
    pjrt.client(None)  # jax's backends (and the plugins it found), started as hlogen starts them
    for name, (client, c_api) in _jaxlib.jax_plugins().items():
        if name in backends.BACKENDS:
            continue
        address = _jaxlib.api_address(c_api)
        library = _library_at(address)
        try:
            _declare(Found(name, library, "jax_plugins (registered by the plugin, as jax "
                           "started)", _package_version(library)),
                     client, _api_version(address, library, name))
        except HlogenError as e:
            backends.UNAVAILABLE[name] = str(e)


class _DlInfo(ctypes.Structure):  # Dl_info, <dlfcn.h>
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def _library_at(address: int) -> str:
    """The file of the shared library that holds `address` (a plugin's PJRT_Api: jax
    keeps no path of the plugins it loaded), or "" where dladdr cannot say."""
    info = _DlInfo()
    try:
        found = ctypes.CDLL(None).dladdr(ctypes.c_void_p(address), ctypes.byref(info))
    except (OSError, AttributeError):
        return ""
    return os.path.realpath(info.dli_fname.decode()) if found and info.dli_fname else ""


# -- probing in a child process --------------------------------------------------------------

_PROBE = "from hlogen.runtime import plugins\nplugins._probe_here(sys.argv[1], sys.argv[2])"


def probe(path, name: str | None = None, seconds: float = PROBE_SECONDS) -> dict:
    """Loads the plugin at `path` in a child process, compiles and runs a small module on
    it there, and returns its identity (what `load_plugin` would declare). A plugin that
    ends that process (SIGABRT, SIGSEGV, ...), passes `seconds`, fails or computes a wrong
    result is refused: UnsupportedError naming it, the signal and what it was doing.
    This process loads nothing."""
    library = _existing(path)
    name = name_from_file(library) if name is None else name
    done = native.run_child(_PROBE, b"", [library, name], seconds)
    which = _which(name, library)
    if done is None:
        raise UnsupportedError(f"{which} did not finish loading, compiling and running a "
                               f"small module in {seconds:g} s")
    said = done.stdout.decode(errors="replace").splitlines()
    doing = [line[6:] for line in said if line.startswith("phase ")]
    answer = [json.loads(line[7:]) for line in said if line.startswith("answer ")]
    if done.returncode < 0:
        how = signal.Signals(-done.returncode).name
        raise UnsupportedError(f"{which} ended the process with {how} while "
                               f"{doing[-1] if doing else 'starting'}{_last_words(done.stderr)}")
    if not answer:
        raise UnsupportedError(f"{which}: the process that loaded it exited with status "
                               f"{done.returncode}{_last_words(done.stderr)}")
    if "error" in answer[-1]:
        raise UnsupportedError(answer[-1]["error"])
    return answer[-1]["identity"]


def _last_words(stderr: bytes) -> str:
    text = stderr.decode(errors="replace")
    fatal = native.FATAL.search(text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    said = fatal.group(1) if fatal else lines[-1] if lines else ""
    return f": {said[:500]}" if said else ""


def _probe_here(library: str, name: str) -> None:
    """The child of `probe`: says each phase ("phase ...") and then its answer
    ("answer {json}": the identity, or the error) on standard output."""
    def phase(words):
        print("phase", words, flush=True)
    try:
        backend = _load(Found(name, library, "probe", _package_version(library)), False, phase)
        phase("compiling a small module")
        from hlogen.runtime import pjrt  # start-up: jax (started by now, in this child)
        b = Builder("probe")
        x = b.parameter(T.f32[4], "x")
        exe = pjrt.compile(b.build(ops.add(ops.mul(x, x), x)), backend)
        phase("running a small module")
        values = np.array([1, 2, 3, -4], np.float32)
        got = np.asarray(exe(values))
        if not np.array_equal(got, values * values + values):
            raise UnsupportedError(f"{_which(name, library)} computes x*x+x wrongly: "
                                   f"x={values.tolist()} gave {got.tolist()}")
        answer = {"identity": dict(backend.identity)}
    except HlogenError as e:
        answer = {"error": str(e)}
    print("answer", json.dumps(answer), flush=True)
