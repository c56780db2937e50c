"""Lesson 6 exercises: the output size of a convolution, and im2col.

Fill in the functions, then run `kuiper course check 6`. Loops are fine: correctness first
The answers are the engine's own: layers/common/conv_geometry.py, and
layers/cpu_helpers/im2col.py, the fast version with one strided copy: try first, read them
after.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def conv_output_size(size: int, kernel: int, stride: int, pad: tuple[int, int],
                     dilation: int) -> int:
    """Output length of one spatial axis of a convolution.

    The input has `size` elements plus pad[0] before and pad[1] after; a window covers
    dilation*(kernel-1)+1 of them and windows start `stride` apart. How many fit?
    """
    raise NotImplementedError("lesson 6: write conv_output_size")


def im2col(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int],
           dilation: Sequence[int], out_size: Sequence[int], groups: int = 1,
           ones_row: bool = False) -> np.ndarray:
    """The column matrix of an ALREADY PADDED input x (N, C, H, W), for a 2-D convolution.

    Returns cols of shape (N, G, K, P) with G = groups, K = C/G * kh * kw, P = OH * OW, where

        cols[n, g, (c, i, j), (y, x)] = x[n, g*C/G + c, y*sh + i*dh, x*sw + j*dw]

    (c, i, j) and (y, x) are flattened in row-major order: k = (c*kh + i)*kw + j and
    p = y*OW + x. Then the convolution of group g is one matrix product,
    weight[g] (Cout/G, K) @ cols[n, g] (K, P). `kernel`, `stride`, `dilation` and `out_size`
    are (height, width) pairs. Keep x's dtype.

    With `ones_row=True`, append one more row of ones to each group's matrix (K + 1 rows): then
    [weight | bias] @ [cols; 1] = weight @ cols + bias, and the GEMM adds the bias for free.
    """
    raise NotImplementedError("lesson 6: write im2col")
