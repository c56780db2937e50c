"""The one BLAS call np.matmul cannot make: `C += A @ B` into an existing array.

`np.matmul(a, b, out=c)` always *overwrites* `c` (BLAS's beta = 0). The tap-by-tap convolution
(layers/cpu_helpers/tap_gemm.py) needs to add nine products into one output, and a temporary
plus `c += tmp` costs an extra pass over the output per product: on ResNet-18 that ate most of
the gain.
BLAS's `sgemm` itself can accumulate (beta = 1), so we call it directly.

We call the BLAS that NumPy is already using (NumPy's wheels ship OpenBLAS), found among the
libraries this process has loaded, through `ctypes`. Using the same library means the same
thread pool, so `threadpoolctl` limits and NumPy's own matmuls stay consistent with ours.

Safety: `sgemm` receives raw pointers. Every operand here is a NumPy array or view, so NumPy
already guarantees that its elements lie inside the buffer; `_blas_layout` only accepts views
BLAS can read as they are (unit stride along rows, leading dimension >= row length), so nothing
outside an operand's own elements is ever touched.

If no usable BLAS is found (not Linux, a NumPy built against an unknown library, or a found
`sgemm` that fails a tiny self-check at import), or KUIPER_DIRECT_BLAS=0 is set, `available()`
is False and callers use their NumPy-only path.
"""

from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

# (symbol, integer type): scipy-openblas as bundled in NumPy >= 2 wheels (64-bit integers),
# then the usual names of OpenBLAS/MKL builds.
_SYMBOLS = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
            ("cblas_sgemm", ctypes.c_int))
_ROW_MAJOR, _NO_TRANS = 101, 111  # CBLAS enum values


def _loaded_blas_paths() -> list[str]:
    """Shared libraries with 'blas' or 'mkl' in their name that this process has mapped,
    NumPy's own first (other packages may have loaded a BLAS of their own)."""
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "/" in line}
    except OSError:
        return []
    names = [p for p in paths if any(s in os.path.basename(p) for s in ("blas", "mkl_rt"))]
    numpy_dir = os.path.dirname(os.path.dirname(np.__file__))
    return sorted(names, key=lambda p: (not p.startswith(os.path.join(numpy_dir, "numpy")), p))


def _find_sgemm():
    if not sys.platform.startswith("linux") or os.environ.get("KUIPER_DIRECT_BLAS") == "0":
        return None
    for path in _loaded_blas_paths():
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: dlopen returns the same handle
        except OSError:
            continue
        for symbol, int_t in _SYMBOLS:
            fn = getattr(lib, symbol, None)
            if fn is None:
                continue
            fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, int_t, int_t, int_t,
                           ctypes.c_float, ctypes.c_void_p, int_t, ctypes.c_void_p, int_t,
                           ctypes.c_float, ctypes.c_void_p, int_t]
            fn.restype = None
            if _self_check(fn):
                return fn
    return None


def _self_check(fn) -> bool:
    """One 2x3 @ 3x2 product, accumulated: a wrong integer size or argument order shows here."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    c = np.ones((2, 2), np.float32)
    fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, 2, 2, 3, 1.0, a.ctypes.data, 3, b.ctypes.data, 2,
       1.0, c.ctypes.data, 2)
    return bool(np.array_equal(c, a @ b + 1))


_sgemm = _find_sgemm()


def available() -> bool:
    return _sgemm is not None


def _blas_layout(a: np.ndarray, what: str) -> int:
    """The leading dimension (row stride in elements) of a 2-D float32 view BLAS can read."""
    if a.dtype != np.float32 or a.ndim != 2:
        raise ValueError(f"{what} must be a 2-D float32 array, got {a.ndim}-D {a.dtype}")
    rows, cols = a.shape
    row_stride, col_stride = a.strides
    if cols > 1 and col_stride != 4:
        raise ValueError(f"{what} must have contiguous rows, got strides {a.strides}")
    lead = row_stride // 4 if rows > 1 else cols
    if row_stride % 4 or lead < cols:
        raise ValueError(f"{what} rows overlap or are misaligned (strides {a.strides}, "
                         f"shape {a.shape})")
    return max(lead, 1)


def gemm_into(a: np.ndarray, b: np.ndarray, c: np.ndarray, accumulate: bool) -> None:
    """c = a @ b, or c += a @ b with `accumulate`; a (M, K), b (K, N), c (M, N) float32 views."""
    if _sgemm is None:
        raise RuntimeError("no direct BLAS: check layers.blas.available() first")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or c.shape != (m, n):
        raise ValueError(f"shapes {a.shape} @ {b.shape} -> {c.shape} do not match")
    if not c.flags.writeable:
        raise ValueError("the output must be writeable")
    lda, ldb, ldc = _blas_layout(a, "a"), _blas_layout(b, "b"), _blas_layout(c, "c")
    _sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, lda,
           b.ctypes.data, ldb, 1.0 if accumulate else 0.0, c.ctypes.data, ldc)
