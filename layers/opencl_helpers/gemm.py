"""Batched matrix products shared by matmul, attention and the recurrent layers.

Two ideas carry all of it:

1. *Shapes* follow torch.matmul: the last two dims are the matrix, the leading dims are a batch
   that broadcasts like NumPy (`(2,1,4,5) @ (3,5,6) -> (2,3,4,6)`), and a 1-D operand is a
   row (left) or a column (right) vector whose dim disappears from the result.
2. *Memory* is described, not rearranged. `strided(shape, target)` says where element
   (b, r, c) of a broadcast view lives in the flat buffer: `offsets[b] + r*row + c*col`.
   The OpenCL `bgemm` kernel (clkernels/matmul.cl) reads every operand through such a view, so
   broadcasting, transposes and attention heads inside a bigger tensor cost no copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.opencl.layer import Launch, round_up

TILE = 16  # must match TS in clkernels/matmul.cl (passed as -DTS)


@dataclass
class Strided:
    """A batch of matrices inside a flat buffer: element (b, r, c) at offsets[b] + r*row + c*col."""

    array: Any                 # device array, or None (bias absent)
    offsets: np.ndarray        # int32, one per batch entry
    row: int
    col: int


def strided(shape: Sequence[int], target: Sequence[int], array: Any = None) -> Strided:
    """The view of a C-contiguous `shape` tensor broadcast to `target` (batch..., rows, cols).

    Trick: number the elements 0..size-1, broadcast that index array with NumPy, and read the
    offsets and strides straight off the result (broadcast dims get stride 0 for free).
    """
    index = np.arange(int(np.prod(tuple(shape), dtype=np.int64)), dtype=np.int64)
    return strided_index(index.reshape(tuple(shape)), target, array)


def strided_index(index: np.ndarray, target: Sequence[int], array: Any = None) -> Strided:
    """Like `strided`, from an index array that may already be rearranged with NumPy
    (np.repeat of K/V heads for grouped-query attention, a transpose ...)."""
    view = np.broadcast_to(index, tuple(target))
    if view.size == 0:
        return Strided(array, np.zeros(1, np.int32), 0, 0)
    corner = view[(...,) + (0, 0)].reshape(-1)
    # Strides of the last two dims, measured on the data (np.repeat leaves no plain strides).
    rows, cols = view.shape[-2:]
    row = int(view[(0,) * (view.ndim - 2) + (1, 0)] - view.flat[0]) if rows > 1 else 0
    col = int(view[(0,) * (view.ndim - 2) + (0, 1)] - view.flat[0]) if cols > 1 else 0
    return Strided(array, corner.astype(np.int32), row, col)


def explicit(array: Any, offsets: Sequence[int], row: int, col: int) -> Strided:
    """A view given by hand (attention heads, transposed weights)."""
    return Strided(array, np.asarray(offsets, dtype=np.int32).reshape(-1), row, col)


def transposed(view: Strided) -> Strided:
    return Strided(view.array, view.offsets, view.col, view.row)


def gemm_launch(layer, m: int, n: int, k: int, a: Strided, b: Strided, c: Strided,
                bias: Strided | None = None, alpha: float = 1.0, beta: float = 1.0) -> Launch:
    """Bind one `bgemm` launch: c[b] = alpha * a[b] @ b[b] (+ beta * bias[b]).

    `layer` is the OpenCL layer that owns the launch (its runtime builds the program once and
    uploads the offset tables). Call at bind time only.
    """
    batch = len(c.offsets)
    for view in (a, b) + ((bias,) if bias is not None else ()):
        if len(view.offsets) != batch:
            raise ValueError(f"gemm views disagree on the batch: {len(view.offsets)} vs {batch}")
    options = [f"-DTS={TILE}", f"-DHAS_BIAS={int(bias is not None)}"]
    kernel = layer.kernel("bgemm", options, stem="matmul")
    d = bias if bias is not None else Strided(None, np.zeros(1, np.int32), 0, 0)
    tables = [layer.upload(v.offsets) for v in (a, b, c, d)]
    keep_alive(layer, tables)
    i32, f32 = np.int32, np.float32
    kernel.set_args(i32(m), i32(n), i32(k),
                    a.array.data, tables[0].data, i32(a.row), i32(a.col),
                    b.array.data, tables[1].data, i32(b.row), i32(b.col),
                    c.array.data, tables[2].data, i32(c.row), i32(c.col),
                    None if d.array is None else d.array.data, tables[3].data,
                    i32(d.row), i32(d.col), f32(alpha), f32(beta))
    return Launch(kernel, (round_up(max(n, 1), TILE), round_up(max(m, 1), TILE), max(batch, 1)),
                  (TILE, TILE, 1))
