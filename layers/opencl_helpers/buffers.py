"""Small helpers every OpenCL twin with mixed dtypes or broadcasting needs.

- `cl_type`: the OpenCL C name of a NumPy dtype, so one kernel source is built per dtype with
  `-DT=float`, `-DT=long` ... instead of being written once per type.
- `keep_alive`: device arrays bound as kernel arguments must outlive the kernel.
- `broadcast_strides`: NumPy broadcasting expressed as element strides, with stride 0 along the
  dims an operand is repeated over; a kernel then finds each operand's element by decomposing
  the output index once (see clkernels/where_compare.cl).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# OpenCL C type names of the NumPy dtypes kernels may be built for.
CL_TYPES = {np.dtype(np.float32): "float", np.dtype(np.int64): "long",
            np.dtype(np.int32): "int", np.dtype(np.bool_): "uchar", np.dtype(np.uint8): "uchar",
            np.dtype(np.int8): "char", np.dtype(np.int16): "short"}


def cl_type(dtype: np.dtype, layer) -> str:
    """The OpenCL C name of `dtype`, or an error naming the operator (float64 etc.)."""
    name = CL_TYPES.get(np.dtype(dtype))
    if name is None:
        raise layer.op.error(f"the OpenCL layer does not handle {np.dtype(dtype).name} tensors "
                             f"(supported: {', '.join(sorted(d.name for d in CL_TYPES))})")
    return name


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous `shape` read as if broadcast to `out_shape`."""
    shape, out_shape = tuple(shape), tuple(out_shape)
    padded = (1,) * (len(out_shape) - len(shape)) + shape
    strides, step = [0] * len(out_shape), 1
    for i in range(len(out_shape) - 1, -1, -1):
        strides[i] = 0 if padded[i] == 1 and out_shape[i] != 1 else step
        step *= padded[i]
    return strides


def keep_alive(layer, arrays: Sequence[Any]) -> None:
    """Hold device arrays bound as kernel arguments for as long as the layer lives.

    clSetKernelArg does not take a reference: a table that Python garbage-collects after bind
    would leave the kernel reading freed memory.
    """
    layer.__dict__.setdefault("bound_arrays", []).extend(arrays)
