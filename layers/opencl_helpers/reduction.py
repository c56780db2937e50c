"""Reductions on OpenCL: offset tables for any set of axes, and work-group sizes.

An element of `x` is addressed by two independent parts: which output it contributes to (the
kept axes) and where it sits inside its reduction (the reduced axes). Because a C-contiguous
offset is a sum of `index * stride` terms, it splits exactly into

    offset = base[output] + inner[r]      (r = position inside the reduction, in C order)

`reduction_tables` computes both tables with NumPy at bind time, for any set of axes, so one
kernel handles "reduce dim 1 of NCHW", "reduce (0, 2)" and "reduce everything" alike.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def reduction_tables(shape: Sequence[int], axes: Sequence[int]
                     ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(base, inner, contiguous): int32 offset tables for `shape` reduced over `axes`.

    `contiguous` is True when inner[r] == r (the reduced axes are the trailing ones), so a
    kernel can skip reading the inner table.
    """
    shape = tuple(shape)
    index = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    kept = [i for i in range(len(shape)) if i not in axes]
    moved = np.transpose(index, kept + list(axes))
    n_kept = len(kept)
    base = moved[(Ellipsis,) + (0,) * len(axes)].reshape(-1) if moved.size else np.zeros(0)
    inner = moved[(0,) * n_kept].reshape(-1) if moved.size else np.zeros(0)
    contiguous = bool(np.array_equal(inner, np.arange(inner.size)))
    return base.astype(np.int32), inner.astype(np.int32), contiguous


def work_group_size(n: int, limit: int = 256) -> int:
    """The power of two (tree reductions need one) closest above `n`, at most `limit`."""
    size = 1
    while size < min(n, limit):
        size *= 2
    return size
