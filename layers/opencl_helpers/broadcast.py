"""The `meta` buffer of clkernels/broadcast.h: an output shape and, per operand, its strides
as if broadcast to that shape (stride 0 along repeated dims)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kuiper.layers.opencl_helpers.buffers import broadcast_strides, keep_alive


def broadcast_meta(layer, out_shape: Sequence[int], shapes: Sequence[Sequence[int]]):
    """Upload [out_shape, strides of each of `shapes` broadcast to it] (int32) from bind()."""
    meta = list(out_shape)
    for shape in shapes:
        meta += broadcast_strides(shape, out_shape)
    buffer = layer.upload(np.asarray(meta or [0], dtype=np.int32))
    keep_alive(layer, [buffer])
    return buffer
