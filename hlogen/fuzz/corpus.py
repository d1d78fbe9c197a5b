"""The fuzzer's corpus: modules of StableHLO files, made runnable as the conformance
runner makes them."""
from __future__ import annotations

import os

from hlogen.computation import Computation
from hlogen.conformance import files as conformance_files
from hlogen.conformance.module import load_case
from hlogen.errors import HlogenError, InputError
from hlogen.fuzz.mutation import mutate
from hlogen.loading import load


class Corpus:
    """Modules to run and mutate: their places (file, module index) are listed at once,
    each is read (made runnable) when first picked."""

    def __init__(self, places: list):
        self.places = places          # (path, index) or a Computation
        self.read: dict = {}          # place -> (name, Computation, arguments) or None

    def __bool__(self) -> bool:
        return bool(self.places)

    def pick(self, k: int, seed: int):
        """The k-th program from the corpus: module k mod n, as it is the first time and
        mutated after. (where, computation, arguments or None)."""
        n = len(self.places)
        for step in range(n):  # a module that cannot be read gives its turn to the next
            place = self.places[(k + step) % n]
            entry = self._entry(place)
            if entry is None:
                continue
            name, comp, arguments = entry
            if (k + step) < n:
                return name, comp, arguments
            try:
                return f"mutate({name}, {seed})", mutate(comp, seed), arguments
            except HlogenError:  # nothing a mutation applies to: as it is
                return name, comp, arguments
        raise InputError("the corpus holds no module hlogen can run")

    def _entry(self, place):
        if place not in self.read:
            self.read[place] = _read(place)
        return self.read[place]


def _read(place):
    """(name, Computation, arguments or None) of a corpus place, None when it cannot run."""
    if isinstance(place, Computation):
        return place.source or place.name, place, None
    path, index = place
    if index is None:
        try:
            return path, load(path), None
        except HlogenError:
            return None
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    plan = conformance_files.plan_of(text)
    module = conformance_files.modules_of(path, text, plan)[index]
    if plan.filecheck or conformance_files.interpreter_only(module.text):
        return None
    text = "\n" * (module.line - 1) + module.text  # (locations are the file's lines)
    try:
        case = load_case(text, path, lift_constants=True)
        if case.computation is not None and \
                len(case.arguments) != len(case.computation.parameter_shapes):
            case = load_case(text, path, lift_constants=False)  # parameters of its own
            case.arguments = None  # (random inputs)
    except HlogenError:
        return None
    if case.computation is None or case.replicated is not None:
        return None
    return f"{path}#{index}" if plan.split else path, case.computation, case.arguments


def corpus_of(corpus) -> Corpus:
    """The places of `corpus` (paths of files or folders, and Computations): every module
    of every .mlir file (files of StableHLO's tests split on `// -----`), other files as
    hg.load reads them."""
    if isinstance(corpus, (str, os.PathLike, Computation)):
        corpus = [corpus]
    places = []
    for item in corpus:
        if isinstance(item, Computation):
            places.append(item)
            continue
        path = os.fspath(item)
        found = conformance_files.discover([path]) if os.path.isdir(path) else [path]
        for file in found:
            if not os.path.isfile(file):
                raise InputError(f"--corpus {file}: no such file or folder")
            if not file.endswith(".mlir"):
                places.append((file, None))
                continue
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read()
            count = len(conformance_files.modules_of(file, text, conformance_files.plan_of(text)))
            places += [(file, i) for i in range(count)]
    return Corpus(places)
