"""Reductions over a set of axes, seen the way an OpenCL kernel needs them.

An element of `x` is addressed by two independent parts: which output it contributes to (the
kept axes) and where it sits inside its reduction (the reduced axes). Because a C-contiguous
offset is a sum of `index * stride` terms, it splits exactly into

    offset = base[output] + inner[r]      (r = position inside the reduction, in C order)

`reduction_tables` computes both tables with NumPy at bind time, for any set of axes, so one
kernel handles "reduce dim 1 of NCHW", "reduce (0, 2)" and "reduce everything" alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # for type hints only: no import cycle with layers.base at run time
    from kuiper.ir import RuntimeOperator
    from layers.base import Layer


def normalize_axes(dims: Sequence[int] | None, rank: int) -> tuple[int, ...] | None:
    """Wrap negative dims, check the range and duplicates; None means every axis.

    Raises ValueError with the reason (callers turn it into an operator error)."""
    if dims is None:
        return None
    axes = []
    for d in dims:
        lo, hi = (-rank, rank - 1) if rank else (-1, 0)  # a 0-d tensor accepts dim 0 / -1
        if not lo <= d <= hi:
            raise ValueError(f"dim {d} is out of range for a {rank}-D input "
                             f"(expected {lo}..{hi})")
        axes.append(d % rank if rank else 0)
    if len(set(axes)) != len(axes):
        raise ValueError(f"dims {list(dims)} name the same axis twice")
    return tuple(sorted(axes)) if rank else ()


def single_axis(layer: Layer, dim: int, rank: int) -> int:
    """One `dim` -> its axis in [0, rank) (0 for a 0-D input); out of range is a shape error."""
    try:
        (axis,) = normalize_axes([dim], rank) or (0,)
    except ValueError as e:
        raise layer.shape_error(str(e)) from None
    return axis


def kept_outputs(op: RuntimeOperator) -> list[str]:
    """Which of ("values", "indices") an operator returning both still has.

    pnnx keeps only the outputs that are used; with a single output, its declared dtype (i64 or
    not) says whether it is the values or the indices."""
    kept = ["values", "indices"][:max(1, len(op.outputs))]
    declared = op.source.output_shapes if op.source is not None else []
    if len(op.outputs) == 1 and declared and declared[0] and declared[0][1] == "i64":
        kept = ["indices"]
    return kept


def reduced_shape(shape: Sequence[int], axes: tuple[int, ...], keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


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
