"""Host arrays in and out of a computation: the checks and the calling convention.

Arguments: one per parameter; a numpy array (or jax array) of exactly the
parameter's dtype and dimensions, a Python number or nested list (converted to
the parameter's element type when exactly representable), or, for a tuple
parameter, a tuple of those. Results: a bare array for one result, a tuple for
several, nested tuples for tuple-shaped results.
"""
from __future__ import annotations

import numpy as np

from hlogen import types as T
from hlogen.errors import HlogenError, InputError, ShapeError, UnsupportedError


def check_signature(computation) -> None:
    """Refuses what cannot cross the host boundary: tokens."""
    for kind, shapes in (("parameter", computation.parameter_shapes),
                         ("result", computation.result_shapes)):
        for i, shape in enumerate(shapes):
            if any(isinstance(leaf, T.TokenShape) for leaf in T.leaves(shape)):
                raise UnsupportedError(f"{computation.name}: {kind} {i} is (or holds) a token, "
                                       f"which cannot be passed between host and device")


_LISTED = 8


def flatten_arguments(computation, args) -> list[np.ndarray]:
    """Checks `args` against the parameters; returns the leaf arrays, depth-first."""
    names, shapes = computation.parameter_names, computation.parameter_shapes
    if len(args) != len(shapes):
        listed = [f"{n}: {s}" for n, s in zip(names, shapes)]
        if len(listed) > _LISTED:  # one paragraph, even for thousands of parameters
            listed = listed[:_LISTED] + [f"... {len(listed) - _LISTED} more"]
        expected = ", ".join(listed) or "no arguments"
        raise InputError(f"{computation.name} takes {len(shapes)} argument(s) ({expected}), "
                         f"got {len(args)}")
    flat: list[np.ndarray] = []
    for name, shape, arg in zip(names, shapes, args):
        _flatten(f"parameter {name!r} of {computation.name}", shape, arg, flat)
    return flat


def _flatten(where, shape, arg, flat):
    if isinstance(shape, T.TupleShape):
        if not isinstance(arg, (tuple, list)) or len(arg) != len(shape.elements):
            raise InputError(f"{where} is the tuple {shape}: pass a tuple of "
                             f"{len(shape.elements)} values, got {_describe(arg)}")
        for i, (s, a) in enumerate(zip(shape.elements, arg)):
            _flatten(f"{where}, element {i}", s, a, flat)
        return
    flat.append(check_array(where, shape, arg))


def native(array: np.ndarray) -> np.ndarray:
    """`array` in the machine's byte order.

    jax reads a big-endian float32 array as if it were little-endian (jax.jit returns
    garbage for it), so arrays of the other byte order are converted before they reach it.
    """
    return array if array.dtype.isnative else array.astype(array.dtype.newbyteorder("="))


def check_array(where: str, shape: T.Shape, arg) -> np.ndarray:
    """`arg` as a numpy array of exactly `shape`; an InputError naming `where` otherwise."""
    if hasattr(arg, "dtype") and hasattr(arg, "shape"):  # numpy or jax arrays: exact dtype
        if np.dtype(arg.dtype).newbyteorder("=") != shape.dtype:
            raise InputError(f"{where} expects {shape} ({shape.dtype} elements), got "
                             f"{_describe(arg)}")
        array = native(np.asarray(arg))
    else:
        try:
            array = T.as_array(arg, shape.element_type, what=where)
        except ShapeError as e:
            raise InputError(str(e)) from None
    if array.shape != shape.dimensions:
        raise InputError(f"{where} expects {shape}, got {_describe(array)}")
    return array


def _describe(value) -> str:
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        name = str(np.dtype(value.dtype))
        return f"{'an' if name[0] in 'aeio' else 'a'} {name} array of shape {tuple(value.shape)}"
    return f"{type(value).__name__} {value!r}"[:200]


def structure_results(result_shapes, flat: list):
    """Leaf results -> the calling convention (bare, tuple, nested tuples)."""
    results = T.rebuild(result_shapes, flat)
    return results[0] if len(results) == 1 else tuple(results)


def replica_lists(exe, per_replica_args) -> list:
    """`per_replica_args` checked to hold one list of arguments per local replica."""
    if not isinstance(per_replica_args, (list, tuple)) or \
            not all(isinstance(a, (list, tuple)) for a in per_replica_args):
        raise InputError(f"run_replicated takes a list with one list of arguments per replica, "
                         f"got {type(per_replica_args).__name__}")
    want = len(exe.local_replicas)
    if len(per_replica_args) != want:
        which = "" if want == exe.num_replicas else f" (this process runs replicas {exe.local_replicas})"
        raise InputError(f"{exe.computation.name} runs {want} replica(s){which}: pass one list "
                         f"of arguments per replica, got {len(per_replica_args)}")
    return list(per_replica_args)


def replicated_call_error(exe) -> HlogenError:
    """What calling a replicated executable with plain arguments raises."""
    return HlogenError(f"{exe.computation.name} was compiled for {exe.num_replicas} replicas: "
                       f"call .run_replicated(per_replica_args), with one list of arguments "
                       f"per replica")
