"""Independent numpy references for XLA's linear-algebra ops, written from the specs alone.

Sources: the XLA operation semantics (spec/operation-semantics.zh.md: Dot, DotGeneral, Conv /
ConvWithGeneralPadding, Fft, Cholesky, TriangularSolve, BatchNormTraining,
BatchNormInference, BatchNormGrad) and the StableHLO specification (openxla/stablehlo
docs/spec.md: dot_general, convolution, fft, cholesky, triangular_solve, batch_norm_grad,
batch_norm_inference, batch_norm_training). Nothing here calls a library convolution, matrix
factorization or solver: dot_general is an einsum whose subscripts are built from the
dimension numbers, the convolution evaluates the StableHLO window formulas directly, Cholesky
and TriangularSolve are written-out column / substitution loops. Only the FFT delegates to
numpy.fft (the DFT itself is not what is being specified; which axes, in which order, with
which lengths is).

Conventions:
  * Arithmetic is done in a wide type and the result is cast once at the end:
      bool and signed integers -> int64, unsigned integers -> uint64 (both wrap modulo 2**64,
      so a narrower integer result is the exact result wrapped to its width), floats
      (float16/32/64, bfloat16, the ml_dtypes small floats) -> float64, complex ->
      complex128. A pred result is "any nonzero" of the integer sum, i.e. OR of ANDs.
    Float results are therefore the exactly-rounded-from-float64 values, not what a backend
    accumulating in float32 (or TF32 / bf16 passes, "precision_config DEFAULT") gives:
    compare floats with a tolerance.
  * Element types may be numpy dtypes, ml_dtypes types, or XLA's short names ("f32", "s8",
    "bf16", "c64", "pred", ...) wherever a `preferred_element_type` is taken.
  * Results are fresh arrays. Nothing is validated beyond what a function needs: inputs are
    assumed to satisfy the specs' constraints.
"""
from __future__ import annotations

import itertools
import string

import ml_dtypes
import numpy as np

from tests.spec_reference import _kind
from tests.spec_reference_computations import padding_for

__all__ = [
    "dot_general", "dot", "conv_general_dilated", "conv", "conv_with_general_padding",
    "conv_padding", "conv_dimension_numbers", "fft", "cholesky", "triangular_solve",
    "batch_norm_training", "batch_norm_inference", "batch_norm_grad",
]


# -- element types ------------------------------------------------------------------------

_SHORT_NAMES = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
}


def _dtype(t) -> np.dtype:
    if isinstance(t, str) and t.lower() in _SHORT_NAMES:
        return np.dtype(_SHORT_NAMES[t.lower()])
    if not isinstance(t, (str, type, np.dtype)) and hasattr(t, "dtype"):  # e.g. hg.f32
        return np.dtype(t.dtype)
    return np.dtype(t)


def _wide(*dtypes) -> np.dtype:
    kinds = {_kind(d) for d in dtypes}
    if "c" in kinds:
        return np.dtype(np.complex128)
    if "f" in kinds:
        return np.dtype(np.float64)
    if kinds == {"u"}:
        return np.dtype(np.uint64)
    return np.dtype(np.int64)


def _to_wide(x: np.ndarray, wide: np.dtype) -> np.ndarray:
    if _kind(x.dtype) in "iu" and x.dtype.kind not in "iu":  # ml_dtypes int4 / uint4 / ...
        x = x.astype(np.int64)
    return x.astype(wide)


def _cast(x: np.ndarray, dtype) -> np.ndarray:
    """Cast a wide result to `dtype`: integers wrap to the target width, bool is x != 0."""
    dtype = np.dtype(dtype)
    k = _kind(dtype)
    if k == "b":
        return np.asarray(x != 0)
    if k in "iu" and x.dtype.kind in "iu":
        bits = ml_dtypes.iinfo(dtype).bits if dtype.kind not in "iu" else dtype.itemsize * 8
        v = x.astype(np.uint64)  # two's complement view, modulo 2**64
        if bits < 64:
            v = v & np.uint64((1 << bits) - 1)
            if k == "i":  # back to a signed value
                signed = v.astype(np.int64)
                signed = np.where(signed >= (1 << (bits - 1)), signed - (1 << bits), signed)
                return signed.astype(dtype)
            return v.astype(dtype)
        return v.astype(dtype) if k == "u" else v.view(np.int64).astype(dtype)
    with np.errstate(all="ignore"):
        return np.asarray(x).astype(dtype)


def _ints(vs) -> list[int]:
    if vs is None:
        return []
    if isinstance(vs, np.ndarray):
        vs = vs.reshape(-1).tolist()
    return [int(v) for v in vs]


# -- Dot / DotGeneral ---------------------------------------------------------------------

def dot_general(lhs, rhs, lhs_contracting_dimensions, rhs_contracting_dimensions,
                lhs_batch_dimensions=(), rhs_batch_dimensions=(), preferred_element_type=None):
    """StableHLO dot_general: result dims are the batch dims (in lhs_batch_dimensions order),
    then lhs's remaining dims, then rhs's remaining dims, each in ascending order ("生成的维度
    编号从批处理维度开始,然后是 lhs 非收缩/非批处理维度,最后是 rhs 非收缩/非批处理维度");
    result[...] = the sum over the contracting dims of lhs * rhs. The i-th lhs batch /
    contracting dimension is paired with the i-th rhs one."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    lc, rc = _ints(lhs_contracting_dimensions), _ints(rhs_contracting_dimensions)
    lb, rb = _ints(lhs_batch_dimensions), _ints(rhs_batch_dimensions)
    out_dtype = _dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    wide = _wide(lhs.dtype, rhs.dtype)

    letters = iter(string.ascii_letters)
    lsub, rsub = [None] * lhs.ndim, [None] * rhs.ndim
    batch = []
    for l, r in zip(lb, rb):
        lsub[l] = rsub[r] = next(letters)
        batch.append(lsub[l])
    for l, r in zip(lc, rc):
        lsub[l] = rsub[r] = next(letters)
    lfree = []
    for d in range(lhs.ndim):
        if lsub[d] is None:
            lsub[d] = next(letters)
            lfree.append(lsub[d])
    rfree = []
    for d in range(rhs.ndim):
        if rsub[d] is None:
            rsub[d] = next(letters)
            rfree.append(rsub[d])
    subscripts = f"{''.join(lsub)},{''.join(rsub)}->{''.join(batch + lfree + rfree)}"
    with np.errstate(all="ignore"):
        result = np.einsum(subscripts, _to_wide(lhs, wide), _to_wide(rhs, wide))
    return _cast(np.asarray(result), out_dtype)


def dot(lhs, rhs, preferred_element_type=None):
    """XLA Dot: "该运算会对 lhs 的第二个维度(如果只有 1 个维度,则为第一个维度)和 rhs 的第一个
    维度执行乘积求和" -- vector[n].vector[n] -> scalar, matrix[m x k].vector[k] -> vector[m],
    matrix[m x k].matrix[k x n] -> matrix[m x n] (and, by the same sentence, vector[k].matrix
    [k x n] -> vector[n]). Other ranks are outside the spec's table and raise ValueError."""
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    if lhs.ndim not in (1, 2) or rhs.ndim not in (1, 2):
        raise ValueError(f"Dot is specified for ranks 1 and 2 only, got {lhs.ndim} and {rhs.ndim}")
    return dot_general(lhs, rhs, [0 if lhs.ndim == 1 else 1], [0],
                       preferred_element_type=preferred_element_type)


# -- Conv ---------------------------------------------------------------------------------

_DNUM_KEYS = ("input_batch_dimension", "input_feature_dimension", "input_spatial_dimensions",
              "kernel_input_feature_dimension", "kernel_output_feature_dimension",
              "kernel_spatial_dimensions", "output_batch_dimension", "output_feature_dimension",
              "output_spatial_dimensions")


def conv_dimension_numbers(dimension_numbers, ndim: int) -> dict:
    """The nine StableHLO dimension numbers as a dict (spatial ones as lists), from:

      * None: XLA's fixed order, lhs (batch, feature, spatial...), rhs (output-feature,
        input-feature, spatial...), output (batch, feature, spatial...).
      * a dict with the nine keys, or any object with those attributes.
      * three layout strings as jax.lax uses them, e.g. ("NHWC", "HWIO", "NHWC"): N / C mark
        lhs and output batch / feature, O / I the kernel's output / input feature; every
        other character is a spatial dimension, matched across the three strings by
        character, and the spatial dimensions are ORDERED AS THEY APPEAR IN THE KERNEL STRING
        (jax: "window_strides[0] is matched with the dimension corresponding to the first
        character appearing in rhs_spec that is not 'I' or 'O'"), so window_strides, padding
        and the dilations follow that order.
      * three integer sequences (jax.lax.ConvDimensionNumbers): lhs_spec = (batch, feature,
        spatial...), rhs_spec = (output feature, input feature, spatial...), out_spec =
        (batch, feature, spatial...).
    """
    if dimension_numbers is None:
        sp = list(range(2, ndim))
        return dict(zip(_DNUM_KEYS, (0, 1, sp, 1, 0, list(sp), 0, 1, list(sp))))
    if isinstance(dimension_numbers, dict) or hasattr(dimension_numbers, _DNUM_KEYS[0]):
        get = (dimension_numbers.__getitem__ if isinstance(dimension_numbers, dict)
               else lambda k: getattr(dimension_numbers, k))
        return {k: (_ints(get(k)) if k.endswith("dimensions") else int(get(k))) for k in _DNUM_KEYS}
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    if all(isinstance(s, str) for s in (lhs_spec, rhs_spec, out_spec)):
        spatial = [c for c in rhs_spec if c not in "OI"]
        return {
            "input_batch_dimension": lhs_spec.index("N"),
            "input_feature_dimension": lhs_spec.index("C"),
            "input_spatial_dimensions": [lhs_spec.index(c) for c in spatial],
            "kernel_input_feature_dimension": rhs_spec.index("I"),
            "kernel_output_feature_dimension": rhs_spec.index("O"),
            "kernel_spatial_dimensions": [rhs_spec.index(c) for c in spatial],
            "output_batch_dimension": out_spec.index("N"),
            "output_feature_dimension": out_spec.index("C"),
            "output_spatial_dimensions": [out_spec.index(c) for c in spatial],
        }
    lhs_spec, rhs_spec, out_spec = (_ints(s) for s in (lhs_spec, rhs_spec, out_spec))
    return dict(zip(_DNUM_KEYS, (lhs_spec[0], lhs_spec[1], lhs_spec[2:], rhs_spec[1], rhs_spec[0],
                                 rhs_spec[2:], out_spec[0], out_spec[1], out_spec[2:])))


def _dilated(n: int, d: int) -> int:
    """StableHLO convolution (C25): `dim = 0 ? 0 : (dim - 1) * dilation + 1`."""
    return 0 if n == 0 else (n - 1) * d + 1


def conv_padding(padding, input_spatial_dims, kernel_spatial_dims, window_strides,
                 lhs_dilation=None, rhs_dilation=None) -> list[tuple[int, int]]:
    """Explicit (low, high) padding per spatial dimension.

      * "VALID": no padding ("有效填充只是表示不填充").
      * "SAME": XLA's MakePadding (xla/hlo/builder/padding.cc, what XlaBuilder::Conv uses),
        applied to the lhs-DILATED input extent and the rhs-DILATED window extent:
            base   = (input - 1) * lhs_dilation + 1   (0 for an empty dimension)
            window = (kernel - 1) * rhs_dilation + 1
            out    = ceil(base / stride)
            total  = max((out - 1) * stride + window - base, 0)
            low, high = total // 2, total - total // 2     -- the odd element goes high
        so that "在不考虑步长的情况下,输出与输入具有相同的形状". Without dilations this is
        exactly MakePadding and jax.lax.padtype_to_pads; with rhs_dilation only it is exactly
        what jax.lax.conv_general_dilated does (padtype_to_pads on the undilated input and the
        dilated kernel: the same thing when lhs_dilation is 1). XLA has no SAME for a
        dilated conv (Conv takes no dilations; ConvGeneralDilated takes explicit pairs) and
        jax refuses SAME with lhs_dilation > 1 ("String padding is not implemented for
        transposed convolution"): the lhs-dilated base there is this reference's choice,
        consistent with tests/spec_reference_computations.padding_for (ReduceWindow).
      * a sequence of (low, high) pairs or an [n, 2] array: taken as is (negative allowed).
    """
    # the same rule as ReduceWindow's (lhs dilation as base, rhs dilation as window dilation)
    return padding_for(padding, input_spatial_dims, kernel_spatial_dims, window_strides,
                       lhs_dilation, rhs_dilation)


def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         preferred_element_type=None):
    """StableHLO convolution, evaluated from its formulas:

      padded_lhs = pad(lhs, 0, low, high, interior = lhs_dilation - 1)   (negative edges cut)
      for every output spatial index o and kernel spatial index k, per spatial dim j:
          p_j = o_j * window_strides[j] + k_j * rhs_dilation[j]      (position in padded_lhs)
          q_j = p_j - low_j                                           (position in the dilated lhs)
          the tap reads lhs[..., q_j / lhs_dilation[j], ...] when 0 <= q_j < dilated size and
          lhs_dilation[j] divides q_j, and a padding zero otherwise;
      result[b, f, o] = sum over kernel input feature i and k of
          lhs[bg(f) * (N / batch_group_count) + b, fg(f) * I + i, taps] * rhs[f, i, k]
      where I = dim(rhs, kernel_input_feature_dimension),
            fg(f) = f // (O / feature_group_count)  -- "lhses = split(lhs, feature_group_count,
                    input_feature_dimension); rhses = split(rhs, feature_group_count,
                    kernel_output_feature_dimension); ... concatenate(results,
                    output_feature_dimension)",
            bg(f) = f // (O / batch_group_count)    -- "lhses = split(lhs, batch_group_count,
                    input_batch_dimension); rhses = split(rhs, batch_group_count,
                    kernel_output_feature_dimension); ... concatenate(results,
                    output_feature_dimension)",
      and the output has dim(lhs, batch) / batch_group_count batches, O features and
      num_windows = is_empty ? 0 : (padded - dilated_window) // stride + 1 positions per
      spatial dim (StableHLO (C25)). window_reversal is not supported (always false).

    The loop runs over kernel taps; for each tap the formula above is evaluated for all
    output positions at once (np.ix_ over the per-dimension valid positions).
    `padding` is "SAME" / "VALID" / [(low, high), ...] (see conv_padding), `dimension_numbers`
    see conv_dimension_numbers; window_strides / dilations None mean all ones.
    """
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    dn = conv_dimension_numbers(dimension_numbers, lhs.ndim)
    nsp = lhs.ndim - 2
    strides = [1] * nsp if window_strides is None else _ints(window_strides)
    ld = [1] * nsp if lhs_dilation is None else _ints(lhs_dilation)
    rd = [1] * nsp if rhs_dilation is None else _ints(rhs_dilation)
    G, BG = int(feature_group_count), int(batch_group_count)
    out_dtype = _dtype(preferred_element_type) if preferred_element_type is not None else lhs.dtype
    wide = _wide(lhs.dtype, rhs.dtype)

    # canonical views: L[n, c, spatial...], K[o, i, spatial...]
    L = _to_wide(np.transpose(lhs, [dn["input_batch_dimension"], dn["input_feature_dimension"],
                                    *dn["input_spatial_dimensions"]]), wide)
    K = _to_wide(np.transpose(rhs, [dn["kernel_output_feature_dimension"],
                                    dn["kernel_input_feature_dimension"],
                                    *dn["kernel_spatial_dimensions"]]), wide)
    N, in_sp = L.shape[0], L.shape[2:]
    O, I, k_sp = K.shape[0], K.shape[1], K.shape[2:]
    pads = conv_padding(padding, in_sp, k_sp, strides, ld, rd)

    num_windows = []
    for j in range(nsp):
        padded = pads[j][0] + _dilated(in_sp[j], ld[j]) + pads[j][1]
        window = _dilated(k_sp[j], rd[j])
        empty = padded <= 0 or window > padded
        num_windows.append(0 if empty else (padded - window) // strides[j] + 1)

    Nb = N // BG
    R = np.zeros((Nb, O, *num_windows), wide)
    if R.size:
        f = np.arange(O)
        bgroup = f // (O // BG)
        fgroup = f // (O // G)
        batch_idx = bgroup[None, :] * Nb + np.arange(Nb)[:, None]          # [Nb, O]
        chan_idx = fgroup[:, None] * I + np.arange(I)[None, :]              # [O, I]
        with np.errstate(all="ignore"):
            for k in itertools.product(*(range(s) for s in k_sp)):
                outs, srcs = [], []
                for j in range(nsp):
                    o = np.arange(num_windows[j])
                    q = o * strides[j] + k[j] * rd[j] - pads[j][0]
                    ok = (q >= 0) & (q < _dilated(in_sp[j], ld[j])) & (q % ld[j] == 0)
                    outs.append(o[ok])
                    srcs.append(q[ok] // ld[j])
                if any(len(o) == 0 for o in outs):
                    continue
                taps = L[(slice(None), slice(None)) + np.ix_(*srcs)]            # [N, C, V...]
                x = taps[batch_idx[:, :, None], chan_idx[None, :, :]]           # [Nb, O, I, V...]
                w = K[(slice(None), slice(None)) + tuple(k)]                    # [O, I]
                contrib = (x * w.reshape(1, O, I, *([1] * nsp))).sum(axis=2)    # [Nb, O, V...]
                R[(slice(None), slice(None)) + np.ix_(*outs)] += contrib

    # canonical (batch, feature, spatial...) -> the output layout
    canon = {dn["output_batch_dimension"]: 0, dn["output_feature_dimension"]: 1}
    canon.update({d: 2 + j for j, d in enumerate(dn["output_spatial_dimensions"])})
    R = np.transpose(R, [canon[d] for d in range(lhs.ndim)])
    return _cast(R, out_dtype)


def conv(lhs, rhs, window_strides, padding, feature_group_count=1, batch_group_count=1,
         preferred_element_type=None):
    """XLA Conv: the fixed layout (lhs [batch, z, spatial...], rhs [output-z, input-z,
    spatial...]), padding "SAME" / "VALID", no dilation."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, None, None, None,
                                feature_group_count, batch_group_count, preferred_element_type)


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              feature_group_count=1, batch_group_count=1,
                              preferred_element_type=None):
    """XLA ConvWithGeneralPadding: the fixed layout, explicit (low, high) padding, dilations."""
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                                None, feature_group_count, batch_group_count,
                                preferred_element_type)


# -- Fft ----------------------------------------------------------------------------------

def _complex_for(dtype) -> np.dtype:
    return np.dtype(np.complex128 if np.dtype(dtype) == np.float64 else np.complex64)


def _real_for(dtype) -> np.dtype:
    return np.dtype(np.float64 if np.dtype(dtype) == np.complex128 else np.float32)


def fft(x, fft_type, fft_length):
    """XLA Fft on the len(fft_length) innermost axes (1 to 3), in complex128 / float64 and
    cast back:

      FFT   complex -> complex, forward, unnormalized; shape kept.
      IFFT  complex -> complex, inverse (numpy's 1/n normalization: IFFT(FFT(x)) == x).
      RFFT  real -> complex: the real transform of the innermost axis first, then complex
            FFTs of the outer axes; the innermost axis shrinks to fft_length[-1] // 2 + 1
            ("fft_length[-1] // 2 + 1", StableHLO "dim(operand, -1) / 2 + 1").
      IRFFT complex -> real: complex IFFTs of the outer axes first, then the inverse real
            transform of the innermost axis, whose output has fft_length[-1] points and
            reads only the first fft_length[-1] // 2 + 1 inputs; the rest of the spectrum is
            their conjugate mirror ("从 1 到 fft_length[-1] // 2 + 1 条目的反共轭推断").
            The imaginary parts of the DC term (and of the Nyquist term when fft_length[-1]
            is even) are IGNORED, as numpy's (pocketfft's) c2r transform does: the spec only
            calls IRFFT "the inverse of RFFT", which a non-Hermitian input cannot be.
    Result types: RFFT f64 -> c128, other reals -> c64; IRFFT c128 -> f64, c64 -> f32; FFT /
    IFFT keep the operand's complex type. An empty result (a zero length) is all-zero of the
    right shape.
    """
    x = np.asarray(x)
    kind = (fft_type if isinstance(fft_type, str) else getattr(fft_type, "name", str(fft_type)))
    kind = kind.upper().split(".")[-1]
    lengths = _ints(fft_length)
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    if kind in ("FFT", "IFFT"):
        shape, dtype = x.shape, x.dtype
    elif kind == "RFFT":
        n = lengths[-1]
        shape, dtype = x.shape[:-1] + (0 if n == 0 else n // 2 + 1,), _complex_for(x.dtype)
    elif kind == "IRFFT":
        shape, dtype = x.shape[:-1] + (lengths[-1],), _real_for(x.dtype)
    else:
        raise ValueError(f"unknown fft_type {fft_type!r}")
    if 0 in shape or 0 in lengths:
        return np.zeros(shape, dtype)
    if kind == "FFT":
        y = np.fft.fftn(x.astype(np.complex128), axes=axes)
    elif kind == "IFFT":
        y = np.fft.ifftn(x.astype(np.complex128), axes=axes)
    elif kind == "RFFT":
        y = np.fft.rfftn(x.astype(np.float64), s=lengths, axes=axes)
    else:
        y = np.fft.irfftn(x.astype(np.complex128), s=lengths, axes=axes)
    return y.astype(dtype)


# -- Cholesky -----------------------------------------------------------------------------

def _cholesky_lower(t: np.ndarray) -> np.ndarray | None:
    """The lower Cholesky factor of the Hermitian matrix whose lower triangle is t's (t's
    strict upper triangle and the imaginary part of its diagonal are never read), or None
    when a pivot's square root is NaN (a negative or NaN pivot). A zero pivot is divided by
    (inf / NaN entries). Both are the spec's "结果由实现定义" case."""
    n = t.shape[0]
    l = np.zeros_like(t)
    for j in range(n):
        d = t[j, j].real - np.sum(np.abs(l[j, :j]) ** 2)
        if not d >= 0:
            return None
        l[j, j] = np.sqrt(d)
        l[j + 1:, j] = (t[j + 1:, j] - l[j + 1:, :j] @ l[j, :j].conj()) / l[j, j]
    return l


def cholesky(a, lower=True):
    """XLA Cholesky, batched over all but the two minor dimensions.

    lower=True: reads a's lower triangle (diagonal included) as the Hermitian matrix A and
    returns L with A = L @ L^H; lower=False: reads the upper triangle and returns U with
    A = U^H @ U ("如果 lower 为 true,则计算下三角矩阵 l,使 a=l.l^T。如果 lower 为 false,则计算
    上三角矩阵 u,使 a=u^T.u"; for complex types the transposes are conjugate transposes, as
    "对称(赫尔米特)正定矩阵" says). The imaginary part of the diagonal is ignored (a Hermitian
    matrix's diagonal is real).

    The other triangle of the result: the spec says "另一个三角形中的值由实现定义,可以是任何值"
    (StableHLO: "implementation-defined"); this reference returns ZEROS there (as XLA's
    CholeskyExpander does). Tests should compare only np.tril(result) / np.triu(result).

    Not positive definite: XLA "如果 a 不是对称(赫尔米特)正定矩阵,则结果由实现定义", StableHLO
    "the behavior is undefined". This reference returns an all-NaN matrix for that batch
    element when a pivot is negative or NaN (what XLA's CholeskyExpander does: it selects
    "FullLike(l, NaN)" when a pivot's sqrt is NaN); tests should not compare such inputs.
    """
    a = np.asarray(a)
    wide = np.complex128 if _kind(a.dtype) == "c" else np.float64
    A = a.astype(wide)
    out = np.zeros_like(A)
    with np.errstate(all="ignore"):
        for idx in np.ndindex(*A.shape[:-2]):
            m = A[idx]
            # upper: U = L^H where L is the lower factor of the same Hermitian matrix
            l = _cholesky_lower(np.tril(m if lower else m.conj().T))
            if l is None:
                out[idx] = np.nan
            else:
                out[idx] = np.tril(l) if lower else np.triu(l.conj().T)  # +0 off the triangle
    return out.astype(a.dtype)


# -- TriangularSolve ----------------------------------------------------------------------

def _substitute(m: np.ndarray, b: np.ndarray, lower: bool) -> np.ndarray:
    """Solve m @ x = b for triangular m (batched over leading dims) by forward (lower) or back
    (upper) substitution; only m's `lower` triangle and diagonal are read."""
    n = m.shape[-1]
    x = np.zeros(np.broadcast_shapes(m.shape[:-2], b.shape[:-2]) + b.shape[-2:], b.dtype)
    order = range(n) if lower else range(n - 1, -1, -1)
    for i in order:
        done = slice(0, i) if lower else slice(i + 1, n)
        s = np.einsum("...k,...kj->...j", m[..., i, done], x[..., done, :])
        x[..., i, :] = (b[..., i, :] - s) / m[..., i, i][..., None]
    return x


def triangular_solve(a, b, left_side, lower, unit_diagonal, transpose_a):
    """XLA TriangularSolve: solves op(a) @ x = b (left_side) or x @ op(a) = b (not left_side)
    for x, where op(a) is a ("NO_TRANSPOSE"), a^T ("TRANSPOSE") or conj(a)^T ("ADJOINT"),
    batched over the leading dimensions (a's and b's batch dims broadcast, which equal ones
    trivially satisfy). Only a's `lower` triangle is read ("系统仅从 a 的下三角形/上三角形读取
    输入数据 ... 系统会忽略另一个三角形中的值"); with unit_diagonal the diagonal is taken as
    ones and not read ("如果为 true,则假定 a 的主对角线元素为 1,且不会被访问"). Computed by
    substitution in float64 / complex128 and cast to b's type; a zero diagonal gives inf /
    NaN, not an error. The result is the whole x (shape of b)."""
    a, b = np.asarray(a), np.asarray(b)
    wide = _wide(a.dtype, b.dtype)
    A, B = a.astype(wide), b.astype(wide)
    tri = np.tril(A) if lower else np.triu(A)
    if unit_diagonal:
        n = tri.shape[-1]
        tri = tri.copy()
        tri[..., np.arange(n), np.arange(n)] = 1
    kind = (transpose_a if isinstance(transpose_a, str)
            else getattr(transpose_a, "name", str(transpose_a)))
    kind = kind.upper().split(".")[-1]
    if kind == "NO_TRANSPOSE":
        m, m_lower = tri, bool(lower)
    elif kind == "TRANSPOSE":
        m, m_lower = np.swapaxes(tri, -1, -2), not lower
    elif kind == "ADJOINT":
        m, m_lower = np.swapaxes(tri, -1, -2).conj(), not lower
    else:
        raise ValueError(f"unknown transpose_a {transpose_a!r}")
    with np.errstate(all="ignore"):
        if left_side:
            x = _substitute(m, B, m_lower)
        else:  # x @ m = b  <=>  m^T @ x^T = b^T
            x = np.swapaxes(_substitute(np.swapaxes(m, -1, -2), np.swapaxes(B, -1, -2),
                                        not m_lower), -1, -2)
    return x.astype(b.dtype)


# -- BatchNorm ----------------------------------------------------------------------------

def _bn_setup(operand, feature_index, epsilon):
    x = np.asarray(operand)
    fi = int(feature_index)
    axes = tuple(d for d in range(x.ndim) if d != fi)
    shape = [1] * x.ndim
    shape[fi] = x.shape[fi]
    count = x.size // x.shape[fi] if x.shape[fi] else 0

    def bcast(v):
        return np.asarray(v).astype(np.float64).reshape(shape)

    # epsilon is an f32 attribute, used as constant(epsilon, element_type(operand))
    eps = float(np.float32(epsilon).astype(x.dtype).astype(np.float64))
    return x, x.astype(np.float64), axes, bcast, float(count), eps


def batch_norm_inference(operand, scale, offset, mean, variance, epsilon, feature_index):
    """result = scale * (operand - mean) / sqrt(variance + epsilon) + offset, the 1-D inputs
    broadcast along `feature_index` (StableHLO batch_norm_inference)."""
    x, x64, _, bcast, _, eps = _bn_setup(operand, feature_index, epsilon)
    with np.errstate(all="ignore"):
        y = bcast(scale) * ((x64 - bcast(mean)) / np.sqrt(bcast(variance) + eps)) + bcast(offset)
    return y.astype(x.dtype)


def batch_norm_training(operand, scale, offset, epsilon, feature_index):
    """(output, batch_mean, batch_var): per feature l, over every other dimension,
    mu_l = mean(x), sigma2_l = mean((x - mu_l)^2) (the biased variance: StableHLO's
    compute_variance divides by size(operand) / dim(operand, feature_index)), then
    output = batch_norm_inference(x, scale, offset, mu, sigma2, epsilon, feature_index)."""
    x, x64, axes, bcast, count, eps = _bn_setup(operand, feature_index, epsilon)
    with np.errstate(all="ignore"):
        mean = x64.sum(axis=axes) / count
        centered = x64 - bcast(mean)
        var = (centered * centered).sum(axis=axes) / count
        y = bcast(scale) * (centered / np.sqrt(bcast(var) + eps)) + bcast(offset)
    return y.astype(x.dtype), mean.astype(x.dtype), var.astype(x.dtype)


def batch_norm_grad(operand, scale, mean, variance, grad_output, epsilon, feature_index):
    """(grad_operand, grad_scale, grad_offset), StableHLO batch_norm_grad / XLA BatchNormGrad,
    with N = size(operand) / dim(operand, feature_index), sums over every dim but the feature:

      grad_operand = scale / sqrt(var + eps) / N
                     * (N * dy - sum(dy) - sum(dy * (x - mean)) * (x - mean) / (var + eps))
      grad_scale   = sum(dy * (x - mean) / sqrt(var + eps))
      grad_offset  = sum(dy)
    """
    x, x64, axes, bcast, count, eps = _bn_setup(operand, feature_index, epsilon)
    dy = np.asarray(grad_output).astype(np.float64)
    with np.errstate(all="ignore"):
        centered = x64 - bcast(mean)
        var_eps = bcast(variance) + eps
        stddev = np.sqrt(var_eps)
        sum_dy = dy.sum(axis=axes)
        sum_dy_xc = (dy * centered).sum(axis=axes)
        i6 = count * dy - bcast(sum_dy) - bcast(sum_dy_xc) * centered / var_eps
        grad_operand = bcast(scale) / stddev / count * i6
        grad_scale = (dy * (centered / stddev)).sum(axis=axes)
    return grad_operand.astype(x.dtype), grad_scale.astype(x.dtype), sum_dy.astype(x.dtype)
