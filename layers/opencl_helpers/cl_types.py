"""The OpenCL C type of each NumPy dtype: one table, read by every kernel built per dtype.

Kernels are written once with a type macro and built per dtype (`-DT=float`, `-DT=long` ...).
Which OpenCL type stands for a dtype depends on what the kernel does with the values:

- `arith_type`: the type with the same *meaning*, for kernels that compute or cast (to, pad,
  upsample, the generated expression kernels through `expression_codegen.ctype`);
- `cl_type`: the same, minus double, with an error naming the operator: for the kernels that do
  not enable the optional fp64 extension (reduce, cumsum, topk, where/compare);
- `move_type`: the type that copies an element bit for bit, for kernels that only move data
  (permute, slice, cat ...): only the size matters, so half and double move as 16/64-bit
  integers and need no device extension.
"""

from __future__ import annotations

import numpy as np

CL_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
            np.dtype(np.int64): "long", np.dtype(np.int32): "int",
            np.dtype(np.int16): "short", np.dtype(np.int8): "char",
            np.dtype(np.uint8): "uchar", np.dtype(np.bool_): "uchar"}  # bools are 0/1 bytes

# double is optional in OpenCL (cl_khr_fp64): only kernels that enable it may be built for it.
NEEDS_FP64 = {np.dtype(np.float64)}

_MOVE_TYPES = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong"}


def arith_type(dtype) -> str:
    """The OpenCL type with the same meaning as `dtype` (for arithmetic and casts)."""
    dtype = np.dtype(dtype)
    if dtype not in CL_TYPES:
        raise ValueError(f"no OpenCL type for dtype {dtype.name}")
    return CL_TYPES[dtype]


def cl_type(dtype, layer) -> str:
    """`arith_type` for a kernel without fp64, or an error naming the operator (float64 etc.)."""
    dtype = np.dtype(dtype)
    if dtype not in CL_TYPES or dtype in NEEDS_FP64:
        supported = sorted(d.name for d in CL_TYPES if d not in NEEDS_FP64)
        raise layer.op.error(f"the OpenCL layer does not handle {dtype.name} tensors "
                             f"(supported: {', '.join(supported)})")
    return CL_TYPES[dtype]


def move_type(dtype) -> str:
    """The OpenCL type that copies one element of `dtype` bit for bit."""
    size = np.dtype(dtype).itemsize
    if size not in _MOVE_TYPES:
        raise ValueError(f"cannot move elements of dtype {np.dtype(dtype).name} on OpenCL")
    return _MOVE_TYPES[size]
