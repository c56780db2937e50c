"""Convolution geometry both backends share: padding, output sizes, padded-axis index tables.

The NumPy layers pad their input (layers/cpu_helpers/im2col.py); the OpenCL kernels read the
unpadded input through `source_indices` tables instead. Both agree on the sizes because both
compute them here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

# PyTorch's padding_mode -> np.pad's mode.
PAD_MODES = {"zeros": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def resolve_padding(padding: str | Sequence[tuple[int, int]], kernel: Sequence[int],
                    dilation: Sequence[int]) -> list[tuple[int, int]]:
    """(before, after) padding of each spatial axis, from pairs or 'same' / 'valid'.

    'valid' is no padding. 'same' keeps the size (stride 1 only) and, like PyTorch, puts the
    odd extra element of an even kernel *after*: total d*(k-1), before = total // 2.
    """
    if padding == "valid":
        return [(0, 0)] * len(kernel)
    if padding == "same":
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            pads.append((total // 2, total - total // 2))
        return pads
    return [(int(lo), int(hi)) for lo, hi in padding]


def conv_output_size(size: int, kernel: int, stride: int, pad: tuple[int, int],
                     dilation: int) -> int:
    """Output length of one axis: how many windows of extent d*(k-1)+1 fit, s apart."""
    return (size + pad[0] + pad[1] - dilation * (kernel - 1) - 1) // stride + 1


def source_indices(size: int, pad: tuple[int, int], mode: str = "zeros") -> np.ndarray:
    """For each coordinate of a padded axis, the input coordinate it copies (-1: a zero).

    Padding an index vector shows what every padding mode does:
    size 4, pad (2, 2): zeros [-1 -1 0 1 2 3 -1 -1], reflect [2 1 0 1 2 3 2 1],
    replicate [0 0 0 1 2 3 3 3], circular [2 3 0 1 2 3 0 1]. The OpenCL kernels read the input
    through such tables instead of padding it.
    """
    index = np.arange(size, dtype=np.int32)
    if mode == "zeros":
        return np.pad(index, pad, mode="constant", constant_values=-1)
    return np.pad(index, pad, mode=PAD_MODES[mode])
