"""Small helpers every OpenCL twin with mixed dtypes or broadcasting needs.

(The OpenCL C type of each dtype, for kernels built per dtype, is in cl_types.py.)

- `keep_alive`: device arrays bound as kernel arguments must outlive the kernel.
- `broadcast_strides`: NumPy broadcasting expressed as element strides, with stride 0 along the
  dims an operand is repeated over; a kernel then finds each operand's element by decomposing
  the output index once (see clkernels/where_compare.cl).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


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
