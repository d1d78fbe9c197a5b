"""Fft: FFT, IFFT, RFFT, IRFFT over the len(fft_length) innermost dimensions."""
from __future__ import annotations

from jaxlib.mlir.dialects import stablehlo

from hlogen import mlir
from hlogen import types as T
from hlogen.errors import ShapeError
from hlogen.mlir import i64_array
from hlogen.ops._common import COMPLEX, FLOAT, array_operand, int_list

_COMPLEX_OF = {"f32": T.c64, "f64": T.c128}
_FFT_TYPES = ("FFT", "IFFT", "RFFT", "IRFFT")


def fft_shape(shape: T.Shape, fft_type: str, length: tuple) -> T.Shape:
    """The spec's table: FFT/IFFT complex -> complex, same shape; RFFT real -> complex with
    the last dimension fft_length[-1] // 2 + 1; IRFFT complex (last dimension
    fft_length[-1] // 2 + 1) -> real with the last dimension fft_length[-1]."""
    def fail(rule):
        raise ShapeError(f"fft: operand {shape}, fft_type={fft_type!r}, fft_length={list(length)}: "
                         f"{rule}")
    if fft_type not in _FFT_TYPES:
        fail(f"fft_type must be one of {', '.join(_FFT_TYPES)}")
    if not 1 <= len(length) <= 3 or any(n < 0 for n in length):
        fail("fft_length gives 1 to 3 non-negative sizes, for the innermost dimensions")
    if shape.rank < len(length):
        fail(f"the operand needs at least {len(length)} dimensions")
    et, inner = shape.element_type, shape.dimensions[shape.rank - len(length):]
    half = length[-1] // 2 + 1 if length[-1] else 0  # (XLA's InferFftShape keeps 0 as 0)
    if fft_type == "RFFT":
        if et.name not in _COMPLEX_OF:
            fail("RFFT takes f32 or f64")
        if inner != length:
            fail(f"the innermost dimensions {list(inner)} must be fft_length")
        return T.Shape(_COMPLEX_OF[et.name], shape.dimensions[:-1] + (half,))
    if et.kind != COMPLEX:
        fail(f"{fft_type} takes c64 or c128")
    if fft_type == "IRFFT":
        if inner[:-1] != length[:-1] or inner[-1] != half:
            fail(f"the innermost dimensions {list(inner)} must be fft_length with its last size "
                 f"halved: {list(length[:-1]) + [half]}")
        return T.Shape(et.component, shape.dimensions[:-1] + (length[-1],))
    if inner != length:
        fail(f"the innermost dimensions {list(inner)} must be fft_length")
    return shape


def fft(operand, fft_type, fft_length):
    """Fft(operand, fft_type, fft_length): the forward or inverse, complex or real
    discrete Fourier transform over the len(fft_length) innermost dimensions."""
    shape = array_operand("fft", "operand", operand)
    if shape.element_type.kind not in (FLOAT, COMPLEX):
        raise ShapeError(f"fft: operand {shape} must be f32, f64, c64 or c128")
    length = int_list("fft", "fft_length", fft_length)
    result = fft_shape(shape, fft_type, length)
    return operand.builder.add_op("stablehlo.fft", result, [operand], {
        "fft_type": stablehlo.FftTypeAttr.get(fft_type, context=mlir.context()),
        "fft_length": i64_array(length)})
