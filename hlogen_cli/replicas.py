"""Values per replica on the command line (`hlogen run --replicas N`).

The same rule reads --input (per parameter) and --expected-output (per result). For a
computation of K parameters, the values given (an .npz counting as its arrays) are:

- K values, each either the parameter's shape (the same on every replica) or that shape
  with a leading dimension of N (replica r gets the slice [r]);
- K * N values: replica 0's K, then replica 1's, ...;
- in a multi-process run, also K * L values, those of this process's L replicas.

Results are kept per replica and saved with a leading replica dimension (the form
--input reads back). In a multi-process run each process holds L = N / P consecutive
replicas (process p: replicas p*L .. p*L + L - 1), as hlogen places them
(hg.distributed): it passes their inputs and prints and saves their results.
"""
from __future__ import annotations

import numpy as np

from hlogen import types as T
from hlogen.errors import InputError
from hlogen.types import shape_text


def local_replicas(num_replicas: int, num_processes: int, process_id: int) -> list[int]:
    per_process = num_replicas // num_processes
    return list(range(process_id * per_process, (process_id + 1) * per_process))


def split(values: list, shapes: list, names: list, num_replicas: int, local: list[int],
          option: str, counted: str) -> list[list]:
    """One list of K values per local replica. `counted` says what K counts, for
    messages (e.g. "f takes 2 argument(s)")."""
    k, n = len(shapes), num_replicas
    if n == 1 or len(values) == k:
        columns = [_per_replica(v, s, name, n, option) for v, s, name in zip(values, shapes, names)]
        return [[column[r] for column in columns] for r in local]
    if len(values) == k * n:
        return [list(values[r * k:(r + 1) * k]) for r in local]
    if len(local) < n and len(values) == k * len(local):
        return [list(values[i * k:(i + 1) * k]) for i in range(len(local))]
    mine = (f", or {k * len(local)} (this process's replicas {local[0]}..{local[-1]}, "
            f"{k} each)" if len(local) < n else "")
    raise InputError(f"{option}: {counted}; with --replicas {n} give {k} value(s) (each the "
                     f"same on every replica, or with a leading dimension of {n}: replica r "
                     f"gets [r]) or {k * n} ({k} per replica: replica 0's, then replica 1's, "
                     f"...){mine}; got {len(values)}")


def _per_replica(value, shape, name: str, n: int, option: str) -> list:
    """`value` for each of n replicas: its slices along a leading replica dimension, or
    itself on each (the library checks it against the shape then)."""
    if n > 1 and isinstance(shape, T.Shape) and isinstance(value, np.ndarray) and \
            value.ndim == len(shape.dimensions) + 1 and value.shape[1:] == tuple(shape.dimensions):
        if value.shape[0] != n:
            raise InputError(f"{option} for {name!r}: {shape_text(value)} has a leading "
                             f"(replica) dimension of {value.shape[0]}; "
                             f"--replicas {n} needs {n}: one slice per replica")
        return list(value)
    return [value] * n


def label(replica: int, num_replicas: int, index: int) -> str:
    """How a result is named in what run prints: result[i], or replica r result[i]."""
    return f"result[{index}]" if num_replicas == 1 else f"replica {replica} result[{index}]"


def stacked(per_replica: list[list[np.ndarray]], num_replicas: int) -> list[np.ndarray]:
    """The results to save: as they are for one replica; else each with a leading
    dimension over the (local) replicas."""
    if num_replicas == 1:
        return per_replica[0]
    return [np.stack(column) for column in zip(*per_replica)]
