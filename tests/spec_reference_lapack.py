"""Independent numpy references for the LAPACK routines jax exports as custom calls, written
from LAPACK's documentation (not from hlogen's rewrites):

- ?potrf: the Cholesky factor of the Hermitian matrix read from the `uplo` triangle, written
  into that triangle; the other triangle keeps the input's values; info = i > 0 when the
  leading minor of order i is not positive definite (the factor's values are then left to
  the routine);
- ?getrf: A = P L U by Gaussian elimination with partial pivoting (?getf2): at step j the row
  of largest |a[i, j]|, i >= j (?amax: |re| + |im| for complex, the first of equals), is
  interchanged with row j (whole rows); ipiv[j] is that row, 1-based; L (unit diagonal, below
  the diagonal) and U share the result; info = j + 1 for the first zero pivot.
Computed in float64 / complex128 and cast back.
"""
from __future__ import annotations

import numpy as np

from tests import spec_reference_linalg as ref


def _wide(a: np.ndarray) -> np.ndarray:
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def potrf(a, lower: bool):
    """(factor in the uplo triangle and the input elsewhere, info), batched."""
    a = np.asarray(a)
    factor = ref.cholesky(a, lower)
    keep = np.tril(np.ones(a.shape[-2:], bool)) if lower else np.triu(np.ones(a.shape[-2:], bool))
    out = np.where(keep, factor, a).astype(a.dtype)
    info = np.zeros(a.shape[:-2], np.int32)
    wide = _wide(a)
    for idx in np.ndindex(*a.shape[:-2]):
        m = wide[idx]
        hermitian = np.tril(m) + np.tril(m, -1).conj().T if lower else \
            np.triu(m) + np.triu(m, 1).conj().T
        for order in range(1, m.shape[0] + 1):
            if np.any(np.linalg.eigvalsh(hermitian[:order, :order]) <= 0):
                info[idx] = order
                break
    return out, info


def getrf(a):
    """(lu, ipiv (1-based), info), batched over the leading dimensions."""
    a = np.asarray(a)
    m, n = a.shape[-2:]
    lu = _wide(a).copy()
    ipiv = np.zeros(a.shape[:-2] + (min(m, n),), np.int32)
    info = np.zeros(a.shape[:-2], np.int32)
    for idx in np.ndindex(*a.shape[:-2]):
        x = lu[idx]
        for j in range(min(m, n)):
            size = np.abs(x[j:, j].real) + np.abs(x[j:, j].imag)
            p = j + int(np.argmax(size))  # the first of equals
            ipiv[idx + (j,)] = p + 1
            x[[j, p]] = x[[p, j]]
            if x[j, j] == 0:
                if info[idx] == 0:
                    info[idx] = j + 1
                continue
            x[j + 1:, j] *= 1 / x[j, j]
            x[j + 1:, j + 1:] -= np.outer(x[j + 1:, j], x[j, j + 1:])
    return lu.astype(a.dtype), ipiv, info
