"""The one BLAS call np.matmul cannot make: `C += A @ B` into an existing array.

`np.matmul(a, b, out=c)` always *overwrites* `c` (BLAS's beta = 0). The tap-by-tap convolution
(layers/cpu_helpers/tap_gemm.py) needs to add nine products into one output, and a temporary
plus `c += tmp` costs an extra pass over the output per product: on ResNet-18 that ate most of
the gain.
BLAS's `sgemm` itself can accumulate (beta = 1), so we call it directly.

We call the BLAS that NumPy is already using (NumPy's wheels ship OpenBLAS), through `ctypes`.
`threadpoolctl.threadpool_info()` tells us which BLAS libraries this process has loaded, and
where, on Linux, macOS and Windows alike; importing NumPy (above) guarantees its own is among
them. Other packages may have loaded a BLAS of their own (torch, a system OpenBLAS), so NumPy's
own library, the one under NumPy's install folder (numpy.libs/, numpy/.dylibs/), is tried first.
Using the same library means the same thread pool, so `threadpoolctl` limits (`kuiper bench
--threads`) apply to NumPy's matmuls and to ours alike.

Safety: `sgemm` receives raw pointers. Every operand here is a NumPy array or view, so NumPy
already guarantees that its elements lie inside the buffer; `_blas_layout` only accepts views
BLAS can read as they are (unit stride along rows, leading dimension >= row length), so nothing
outside an operand's own elements is ever touched.

If no usable BLAS is found (threadpoolctl lists none, e.g. NumPy's macOS arm64 wheels use
Apple's Accelerate, which it does not know; a library without any of the `sgemm` names below;
or a found `sgemm` that fails a tiny self-check at import), or KUIPER_DIRECT_BLAS=0 is set,
`available()` is False and callers use their NumPy-only path.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import threadpoolctl

# (symbol, integer type): scipy-openblas as bundled in NumPy >= 2 wheels (64-bit integers),
# then the usual names of OpenBLAS/MKL builds.
_SYMBOLS = (("scipy_cblas_sgemm64_", ctypes.c_int64), ("cblas_sgemm64_", ctypes.c_int64),
            ("cblas_sgemm", ctypes.c_int))
_ROW_MAJOR, _NO_TRANS = 101, 111  # CBLAS enum values


def _is_numpys(path: str) -> bool:
    """Whether `path` lies in NumPy's own install: numpy/ (macOS: numpy/.dylibs/) or the
    numpy.libs/ folder beside it (Linux and Windows wheels)."""
    site = os.path.dirname(os.path.dirname(os.path.realpath(np.__file__)))
    path = os.path.normcase(os.path.realpath(path))
    return any(path.startswith(os.path.normcase(os.path.join(site, folder)) + os.sep)
               for folder in ("numpy", "numpy.libs"))


def _blas_paths(libraries: list[dict]) -> list[str]:
    """The files of the BLAS libraries in threadpoolctl's `libraries` (dicts with "user_api"
    and "filepath"), NumPy's own first."""
    paths = {lib["filepath"] for lib in libraries
             if lib.get("user_api") == "blas" and lib.get("filepath")}
    return sorted(paths, key=lambda p: (not _is_numpys(p), p))


def _find_sgemm() -> tuple[str, object] | tuple[None, None]:
    """(library file, its checked sgemm) of the first loaded BLAS that has one, else Nones."""
    if os.environ.get("KUIPER_DIRECT_BLAS") == "0":
        return None, None
    for path in _blas_paths(threadpoolctl.threadpool_info()):
        try:
            lib = ctypes.CDLL(path)  # already loaded by NumPy: the same library, not a copy
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
                return path, fn
    return None, None


def _self_check(fn) -> bool:
    """One 2x3 @ 3x2 product, accumulated: a wrong integer size or argument order shows here."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2) - 2
    c = np.ones((2, 2), np.float32)
    fn(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, 2, 2, 3, 1.0, a.ctypes.data, 3, b.ctypes.data, 2,
       1.0, c.ctypes.data, 2)
    return bool(np.array_equal(c, a @ b + 1))


_library, _sgemm = _find_sgemm()


def available() -> bool:
    """Whether gemm_into can be called (else callers use their NumPy-only path)."""
    return _sgemm is not None


def library() -> str | None:
    """The file of the BLAS library whose sgemm gemm_into calls (None when not available())."""
    return _library


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
        raise RuntimeError("no direct BLAS: check blas.available() first")
    (m, k), (k2, n) = a.shape, b.shape
    if k != k2 or c.shape != (m, n):
        raise ValueError(f"shapes {a.shape} @ {b.shape} -> {c.shape} do not match")
    if not c.flags.writeable:
        raise ValueError("the output must be writeable")
    lda, ldb, ldc = _blas_layout(a, "a"), _blas_layout(b, "b"), _blas_layout(c, "c")
    _sgemm(_ROW_MAJOR, _NO_TRANS, _NO_TRANS, m, n, k, 1.0, a.ctypes.data, lda,
           b.ctypes.data, ldb, 1.0 if accumulate else 0.0, c.ctypes.data, ldc)
