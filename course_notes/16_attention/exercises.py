"""Lesson 16 exercises: the online softmax, and the tile loop of a fused attention.

Fill in the functions, then run `kuiper course check 16`. NumPy only: no OpenCL device needed.
The answers are the engine's own functions of the same names, in
layers/cpu_helpers/online_softmax.py (the CPU layer of the fused attention runs them): try
first, read that file after.
"""

from __future__ import annotations

import numpy as np


def online_softmax_update(m: np.ndarray, total: np.ndarray, acc: np.ndarray, scores: np.ndarray,
                          values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold one block of keys into the running softmax of every row; return (m', total', acc').

    The running state of each row, relative to the largest score seen so far:
        m      (..., rows)       that largest score (-inf before the first block)
        total  (..., rows)       sum of e^(s - m) over the scores seen so far (0 at first)
        acc    (..., rows, dv)   sum of e^(s - m) * v over the same keys (0 at first)
    One block of keys:
        scores (..., rows, block)  each row's scores against the block's keys
        values (..., block, dv)    the block's values

    New maximum m' = max(m, the block's largest score per row). Rescale what was summed so far
    by e^(m - m'), then add the block: e^(s - m') per score to total, and those weights times
    the values (a matrix product) to acc. Return new arrays (do not modify the inputs).

    Careful: a row whose scores so far are all -inf (masked keys) has m' = -inf, and
    e^(-inf - (-inf)) is NaN in floating point. Such a row must stay m' = -inf, total 0, acc 0,
    with no NaN: subtract 0 instead of m' for it.
    """
    raise NotImplementedError("lesson 16: write online_softmax_update")


def streaming_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, block: int,
                        mask: np.ndarray | None = None) -> np.ndarray:
    """softmax(q @ k^T * scale + mask) @ v, `block` keys at a time: the fused kernel's tile loop.

    q (..., L, E), k (..., S, E), v (..., S, Ev), float32, batch dims that broadcast; `mask`
    None or an additive float mask of shape (..., L, S) (-inf hides a key from a query).

    1. Start each of the L rows from m = -inf, total = 0, acc = 0 (shapes as in
       online_softmax_update; the batch dims are those of q, k and v broadcast together,
       `np.broadcast_shapes`), float32 like the inputs.
    2. For each block of keys s0 .. s0+block-1 (the last one may be shorter): the block's
       scores q @ k_block^T * scale, plus the mask's columns of that block, then call
       online_softmax_update(m, total, acc, scores, v_block). Never compute all S scores at
       once: the test checks that every call sees at most `block` keys.
    3. Return acc / total (a row whose every key is masked gives NaN, as torch does).
    """
    raise NotImplementedError("lesson 16: write streaming_attention")
