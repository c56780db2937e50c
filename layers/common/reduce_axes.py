"""Which axes a reduction (sum, mean, max, norm, softmax ...) runs over, on both backends.

PyTorch's `dim` may be one int, a list, negative, or absent (every axis); `keepdim` keeps the
reduced axes as size 1; `torch.max(x, dim)` has two outputs, of which pnnx may keep one. These
helpers settle all of that once, so every reduction layer reads it the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type hints only: no import cycle with layers.base at run time
    from kuiper.core.ir import RuntimeOperator
    from kuiper.layers.base import Layer


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


