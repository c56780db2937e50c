"""What shape inference passes around: the shape and dtype of a value, and sometimes the value.

Most operands are tensors whose contents are only known when the model runs. Some are known as
soon as the input *shapes* are: `size(@0,0)` in an expression, a list `[size(@0,0),-1]` feeding a
reshape, a `pnnx.Attribute` constant. Carrying such values in `value` lets every backend fold them
at build time (the OpenCL backend never has to read a shape back from the device).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: np.dtype
    value: Any = None  # known at build time (host scalar, list or small ndarray), else None
    # A data-dependent size (torch.masked_select, torch.arange of run-time values): `shape` is
    # then an upper bound (the buffer to allocate), and the run says how much of it is used.
    dynamic: bool = False

    @staticmethod
    def of(shape, dtype=np.float32, value: Any = None) -> TensorSpec:
        return TensorSpec(tuple(int(d) for d in shape), np.dtype(dtype), value)

    @staticmethod
    def of_value(value: Any) -> TensorSpec:
        """Spec of a host value (Python scalar, list/tuple, or ndarray)."""
        if isinstance(value, np.ndarray):
            return TensorSpec(tuple(value.shape), value.dtype, value)
        if isinstance(value, (list, tuple)):
            return TensorSpec((len(value),), np.dtype(np.int64) if all(
                isinstance(v, (int, np.integer)) for v in value) else np.dtype(object), value)
        if isinstance(value, (bool, np.bool_)):
            return TensorSpec((), np.dtype(np.bool_), value)
        if isinstance(value, (int, np.integer)):
            return TensorSpec((), np.dtype(np.int64), value)
        if isinstance(value, (float, np.floating)):
            return TensorSpec((), np.dtype(np.float32), value)
        return TensorSpec((), np.dtype(object), value)

    @property
    def known(self) -> bool:
        return self.value is not None

    @property
    def numel(self) -> int:
        return math.prod(self.shape)  # a Python int: np.prod would overflow int64 silently

    def __str__(self) -> str:
        dims = "x".join(str(d) for d in self.shape) or "scalar"
        if self.dynamic:  # an upper bound, or no bound at all (kuiper/core/dynamic_shapes.py)
            dims = f"<={dims}" if self.numel else "?"
        return f"{dims} {self.dtype.name}"
