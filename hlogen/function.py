"""@hg.function: a Computation from a Python function whose parameters are annotated
with shapes; calling the result compiles (once) and runs it."""
from __future__ import annotations

import functools
import inspect
import re

from hlogen import types as T
from hlogen.builder import Builder, Op
from hlogen.errors import HlogenError


class Function:
    """A traced Python function: `.computation`, and calling it runs it (PJRT, default backend)."""

    def __init__(self, fn, name: str | None = None):
        if not callable(fn):
            raise HlogenError(f"hg.function decorates a Python function, got {type(fn).__name__} "
                              f"{fn!r}")
        if name is not None and not isinstance(name, str):
            raise HlogenError(f"hg.function: name must be a string, got {name!r}")
        functools.update_wrapper(self, fn)
        # a builder name is an identifier: "<lambda>" becomes "lambda"
        self.computation = trace(fn, name or re.sub(r"\W", "", getattr(fn, "__name__", "")) or "main")

    def __call__(self, *arrays):
        from hlogen.runtime import compile
        return compile(self.computation)(*arrays)

    def __repr__(self) -> str:
        return f"<hg.function {self.computation.signature()}>"


def function(fn=None, *, name: str | None = None):
    """Decorator: `@hg.function` or `@hg.function(name="...")`."""
    if fn is None:
        return lambda f: Function(f, name)
    return Function(fn, name)


def trace(fn, name: str):
    """Builds the Computation of `fn`: one parameter per annotated argument."""
    try:
        annotations = inspect.get_annotations(fn, eval_str=True)
    except Exception as e:
        raise HlogenError(f"{name}: cannot evaluate its annotations: {e}") from None
    builder = Builder(name)
    args = []
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as e:
        raise HlogenError(f"{name}: cannot read its signature: {e}") from None
    for p in parameters:
        shape = annotations.get(p.name)
        if not isinstance(shape, (T.Shape, T.TupleShape, T.TokenShape)):
            raise HlogenError(f"{name}: parameter {p.name!r} needs a shape annotation such as "
                              f"hg.f32[2, 3], got {shape!r}")
        args.append(builder.parameter(shape, p.name))
    result = fn(*args)
    results = result if isinstance(result, (tuple, list)) else (result,)
    for i, r in enumerate(results):
        if not isinstance(r, Op):
            raise HlogenError(f"{name}: must return an Op or a tuple of Ops; result {i} is "
                              f"{type(r).__name__}")
    return builder.build(*results)
