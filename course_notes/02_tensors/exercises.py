"""Lesson 2 exercises: strides, broadcasting, padding and flattening by index arithmetic.

Fill in the functions, then run `kuiper course check 2`. Use plain Python loops and integer
arithmetic; NumPy arrays are fine for the result, but do not call np.pad, np.reshape or
np.broadcast_to: the point is to compute the indices yourself. The answers are the engine's
own functions of the same names, in layers/common/datamove.py, layers/opencl_helpers/buffers.py,
layers/cpu/pad.py and layers/cpu/reshape.py: try first, read them after.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major (C-contiguous) strides of `shape`, in ELEMENTS (not bytes).

        contiguous_strides((2, 3, 4)) -> (12, 4, 1)

    Element (i0, i1, i2) then lives at i0*12 + i1*4 + i2*1 in the flat buffer. The last dim
    moves fastest. Treat a dim of size 0 like size 1 (the strides of an empty tensor do not
    matter, but they must not all collapse to 0).
    """
    raise NotImplementedError("lesson 2: write contiguous_strides")


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides that read a C-contiguous tensor of `shape` as if broadcast to
    `out_shape` (NumPy's rules: align on the right, missing leading dims count as size 1).

        broadcast_strides((3, 1), (2, 3, 4)) -> [0, 1, 0]

    A dim that is repeated (size 1 in `shape`, more in `out_shape`, or missing) gets stride 0:
    every index along it reads the same element. Other dims get their contiguous stride.
    """
    raise NotImplementedError("lesson 2: write broadcast_strides")


def source_table(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each index of one padded dim, the input index it copies (-1 = the constant value).

    The input dim has length `size`; `before` / `after` elements are added at each end (a
    negative amount crops instead, and cropping happens first). `mode` is one of:

        constant   -1                          size 4, pad (2, 2): [-1 -1 0 1 2 3 -1 -1]
        reflect    mirror, edge not repeated                       [ 2  1 0 1 2 3  2  1]
        replicate  nearest edge element                            [ 0  0 0 1 2 3  3  3]
        circular   wrap around                                     [ 2  3 0 1 2 3  0  1]

    Returns an int64 array of length size + before + after.
    """
    raise NotImplementedError("lesson 2: write source_table")


def flatten_shape(shape: tuple[int, ...], start_dim: int = 0, end_dim: int = -1
                  ) -> tuple[int, ...]:
    """The shape torch.flatten(x, start_dim, end_dim) gives: dims start_dim..end_dim (both
    included, negative dims count from the end) merged into one.

        flatten_shape((2, 3, 4, 5), 1)      -> (2, 60)
        flatten_shape((2, 3, 4, 5), 1, 2)   -> (2, 12, 5)
        flatten_shape(())                   -> (1,)

    Raise ValueError when a dim is out of range or start_dim comes after end_dim.
    """
    raise NotImplementedError("lesson 2: write flatten_shape")
