"""Windows over arrays, as ReduceWindow, SelectAndScatter (and convolutions) use them:
window sizes, strides, dilations and padding ("SAME", "VALID" or explicit (low, high)
pairs), checked once and turned into the window's output dimensions."""
from __future__ import annotations

import dataclasses

import numpy as np
from jaxlib.mlir import ir

from hlogen import mlir
from hlogen.errors import ShapeError
from hlogen.mlir import i64_array
from hlogen.ops._common import int_list


@dataclasses.dataclass(frozen=True)
class Window:
    """One window per dimension of an input: sizes, strides, dilations, explicit padding."""

    dimensions: tuple
    strides: tuple
    padding: tuple  # ((low, high), ...)
    base_dilations: tuple
    window_dilations: tuple

    def output_dimensions(self, input_dimensions) -> tuple:
        """XLA's window output size: (padded dilated input - dilated window) // stride + 1,
        or 0 when the window does not fit once."""
        out = []
        for n, w, s, (lo, hi), bd, wd in zip(input_dimensions, self.dimensions, self.strides,
                                              self.padding, self.base_dilations,
                                              self.window_dilations):
            padded = (n - 1) * bd + 1 + lo + hi if n else lo + hi
            dilated = (w - 1) * wd + 1
            out.append(0 if padded < dilated else (padded - dilated) // s + 1)
        return tuple(out)

    def attributes(self, dilations: bool = True) -> dict:
        pads = np.asarray(self.padding, np.int64).reshape(len(self.dimensions), 2)
        attributes = {"window_dimensions": i64_array(self.dimensions),
                      "window_strides": i64_array(self.strides),
                      "padding": ir.DenseElementsAttr.get(pads, context=mlir.context())}
        if dilations:
            attributes["base_dilations"] = i64_array(self.base_dilations)
            attributes["window_dilations"] = i64_array(self.window_dilations)
        return attributes


def window(op_name: str, input_dimensions, window_dimensions, window_strides=None, padding="VALID",
           base_dilations=None, window_dilations=None) -> Window:
    """The checked Window of `op_name` over an input of `input_dimensions`.

    "SAME" pads so that the output has ceil(input / stride) elements per dimension, half
    the padding low and the odd one high (XLA's MakePadding), with the window dilated and
    the input size as it is, base dilation or not (as jax.lax.reduce_window does; the
    spec is silent there); "VALID" pads nothing.
    """
    rank = len(input_dimensions)

    def per_dimension(arg, values, least):
        parsed = (1,) * rank if values is None else int_list(op_name, arg, values)
        if len(parsed) != rank:
            raise ShapeError(f"{op_name}: {arg}={list(parsed)} needs one entry per dimension of "
                             f"the input ({rank}: {list(input_dimensions)})")
        if any(v < least for v in parsed):
            raise ShapeError(f"{op_name}: {arg}={list(parsed)} must be >= {least} in every "
                             f"dimension")
        return parsed

    if window_dimensions is None:
        raise ShapeError(f"{op_name}: window_dimensions is required")
    sizes = per_dimension("window_dimensions", window_dimensions, 1)
    strides = per_dimension("window_strides", window_strides, 1)
    base = per_dimension("base_dilations", base_dilations, 1)
    dilation = per_dimension("window_dilations", window_dilations, 1)
    dilated_input = [(n - 1) * b + 1 if n else 0 for n, b in zip(input_dimensions, base)]
    dilated_window = [(w - 1) * d + 1 for w, d in zip(sizes, dilation)]
    if isinstance(padding, str):
        kind = padding.upper()
        if kind == "VALID":
            pads = ((0, 0),) * rank
        elif kind == "SAME":
            pads = []
            for n, w, s in zip(input_dimensions, dilated_window, strides):
                needed = max(0, (-(-n // s) - 1) * s + w - n)
                pads.append((needed // 2, needed - needed // 2))
            pads = tuple(pads)
        else:
            raise ShapeError(f"{op_name}: padding={padding!r} must be 'SAME', 'VALID' or a sequence "
                             f"of (low, high) pairs")
    else:
        try:
            pads = tuple(int_list(op_name, "padding entry", p) for p in padding)
        except TypeError:
            pads = None
        if pads is None or any(len(p) != 2 for p in pads):
            raise ShapeError(f"{op_name}: padding={padding!r} must be 'SAME', 'VALID' or a sequence "
                             f"of (low, high) pairs, one per dimension")
        if len(pads) != rank:
            raise ShapeError(f"{op_name}: padding={list(pads)} needs one (low, high) pair per "
                             f"dimension of the input ({rank})")
    for d, ((lo, hi), n) in enumerate(zip(pads, dilated_input)):
        if n + lo + hi < 0:
            raise ShapeError(f"{op_name}: padding {(lo, hi)} of dimension {d} removes more than "
                             f"its {n} elements")
    return Window(sizes, strides, pads, base, dilation)
