"""How Kuiper stores complex tensors, and the dtype pairs of real and complex values.

A complex tensor is a NumPy complex64 (or complex128) array on the CPU. On OpenCL the device
buffer holds the very same bytes: NumPy lays a complex64 element out as two float32 values,
real part first, so a kernel reads the buffer as `float2` (`.x` real, `.y` imaginary) and a
buffer of n complex64 elements is 8n bytes. Nothing is converted on upload or download.

PyTorch pairs float32 with complex64 and float64 with complex128 (complex32 has no NumPy dtype).
"""

from __future__ import annotations

import numpy as np

COMPLEX_OF = {np.dtype(np.float32): np.dtype(np.complex64),
              np.dtype(np.float64): np.dtype(np.complex128)}
REAL_OF = {c: r for r, c in COMPLEX_OF.items()}


def is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def complex_of(layer, dtype, what: str = "input") -> np.dtype:
    """The complex dtype a real or complex `dtype` becomes (float32 -> complex64).

    Integers and bools become complex64, as PyTorch's FFTs promote them; float16 has no NumPy
    complex partner (complex32), so it is an error naming the operator.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return dtype
    if dtype in COMPLEX_OF:
        return COMPLEX_OF[dtype]
    if dtype.kind in "biu":
        return np.dtype(np.complex64)
    raise layer.op.error(f"the {what} is {dtype.name}: expected float32, float64 or a complex "
                         "dtype (float16 would need complex32, which NumPy does not have)")


def real_of(layer, dtype, what: str = "input") -> np.dtype:
    """The real dtype of the parts of a complex `dtype` (complex64 -> float32; a real dtype
    gives the precision it computes in: float64 -> float64, int64 -> float32)."""
    return REAL_OF[complex_of(layer, dtype, what)]


def require_complex(layer, dtype, what: str = "input") -> None:
    if not is_complex(dtype):
        raise layer.op.error(f"the {what} is {np.dtype(dtype).name}: expected a complex tensor "
                             "(complex64 or complex128)")


def require_real_float(layer, dtype, what: str = "input") -> None:
    if np.dtype(dtype) not in COMPLEX_OF:
        raise layer.op.error(f"the {what} is {np.dtype(dtype).name}: expected float32 or "
                             "float64")
