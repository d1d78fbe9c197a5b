"""@hg.function: a Computation from a Python function whose parameters are annotated
with shapes; calling the result compiles (once) and runs it.

A mistake in a function's body is an error naming the file and line, raised where the
decorator runs. Tools that read a whole file of functions (the command line) read it
under `deferred_errors()`: a function that cannot be traced keeps its error until its
`.computation` is used, so that one broken function leaves the others usable.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import re

from hlogen import runtime
from hlogen import types as T
from hlogen.builder import Builder, Op, _user_line
from hlogen.errors import HlogenError, InputError

_deferring = contextvars.ContextVar("hlogen_function_deferring", default=False)


@contextlib.contextmanager
def deferred_errors():
    """Within it, @hg.function keeps a tracing error for `.computation` to raise."""
    token = _deferring.set(True)
    try:
        yield
    finally:
        _deferring.reset(token)


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
        traced_name = name or re.sub(r"\W", "", getattr(fn, "__name__", "")) or "main"
        self._error = None
        try:
            self._computation = trace(fn, traced_name)
        except Exception as e:
            if not _deferring.get():
                raise
            self._error = e if isinstance(e, HlogenError) else InputError(
                f"{_user_line(e)}: in @hg.function {traced_name}: {type(e).__name__}: {e}")

    @property
    def computation(self):
        """The traced Computation (raises the tracing error kept by deferred_errors)."""
        if self._error is not None:
            raise self._error
        return self._computation

    def __call__(self, *arrays):
        return runtime.compile(self.computation)(*arrays)

    def __repr__(self) -> str:
        if self._error is not None:
            return f"<hg.function {self.__name__}: not traced ({self._error})>"
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
    try:
        result = fn(*args)
    except HlogenError as e:  # named by the user's line (an op's own check knows only the op)
        raise type(e)(f"{_user_line(e)}: in @hg.function {name}: {e}") from None
    results = result if isinstance(result, (tuple, list)) else (result,)
    for i, r in enumerate(results):
        if not isinstance(r, Op):
            raise HlogenError(f"{name}: must return an Op or a tuple of Ops; result {i} is "
                              f"{type(r).__name__}")
    return builder.build(*results)
