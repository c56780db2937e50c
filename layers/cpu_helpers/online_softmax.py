"""The online softmax: attention over keys one block at a time, the score matrix never whole.

softmax(s) v over a row of S scores needs the row's maximum (subtracted so that no exp
overflows) and the sum of the exponentials (the divisor) before the first weight is known: a
two-pass softmax keeps the whole row. The online softmax (Milakov & Gimelshein, 2018) keeps
three running values per row instead, and folds each new block of scores into them:

    m' = max(m, max_j s_j)                              the largest score so far
    t' = t * e^(m - m') + sum_j e^(s_j - m')             the sum of exponentials, relative to m'
    a' = a * e^(m - m') + sum_j e^(s_j - m') v_j         the weighted sum of values, relative to m'

(t is the papers' l, spelled out so it cannot be read as a 1.) When the maximum grows,
everything summed so far was relative to the old one: e^(m - m') rescales it. After the last
block, a / t is exactly softmax(s) v. Every exponent is <= 0, so
nothing overflows, whatever the magnitude of the scores.

This is what clkernels/attention_fused.cl does per query row, in registers, over tiles of
keys in local memory; the CPU layer of the fused attention (layers/cpu/attention.py,
FusedAttention) runs `streaming_attention` below. It is also the answer to lesson 16's
exercises (course_notes/16_attention): read it after yours passes.
"""

from __future__ import annotations

import numpy as np


def online_softmax_update(m: np.ndarray, total: np.ndarray, acc: np.ndarray, scores: np.ndarray,
                          values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold one block of keys into the running softmax of every row; returns (m', total',
    acc').

    m (..., rows) is the running maximum, total (..., rows) the running sum of exponentials,
    acc (..., rows, dv) the running weighted sum of values; the first block starts from
    m = -inf, total = 0, acc = 0. scores (..., rows, block) are the rows' scores against the
    block's keys, values (..., block, dv) the block's values.
    """
    m_new = np.maximum(m, scores.max(axis=-1))
    # A row whose keys so far are all masked (-inf) keeps m = -inf: subtracting -inf from -inf
    # would be NaN, so such a row subtracts 0 instead and adds e^-inf = 0 to total and acc.
    shift = np.where(np.isneginf(m_new), 0, m_new)
    correction = np.exp(m - shift)                  # e^(m - m'): 0 on the first block
    p = np.exp(scores - shift[..., None])           # the block's weights, relative to m'
    total_new = total * correction + p.sum(axis=-1)
    acc_new = acc * correction[..., None] + p @ values
    return m_new, total_new, acc_new


def streaming_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, block: int,
                        mask: np.ndarray | None = None) -> np.ndarray:
    """softmax(q k^T * scale + mask) v, computed `block` keys at a time.

    q (..., L, E), k (..., S, E), v (..., S, Ev) with batch dims that broadcast; `mask` None
    or an additive mask that broadcasts to the scores (..., L, S). Scores exist for one block
    of keys at a time, (..., L, block): never the (..., L, S) matrix. A row whose every score
    is -inf gives NaN, as torch.softmax makes it.
    """
    source = k.shape[-2]
    rows = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2]) + q.shape[-2:-1]
    dtype = np.result_type(q, k, v)
    m = np.full(rows, -np.inf, dtype)
    total = np.zeros(rows, dtype)
    acc = np.zeros(rows + v.shape[-1:], dtype)
    if mask is not None:   # a view with S columns, so that every block can slice its own
        mask = np.broadcast_to(mask, mask.shape[:-1] + (source,))
    for s0 in range(0, source, block):
        keys = slice(s0, s0 + block)
        scores = (q @ np.swapaxes(k[..., keys, :], -1, -2)) * dtype.type(scale)
        if mask is not None:
            scores = scores + mask[..., keys].astype(dtype, copy=False)
        m, total, acc = online_softmax_update(m, total, acc, scores, v[..., keys, :])
    with np.errstate(invalid="ignore", divide="ignore"):   # 0 / 0: a fully masked row
        return acc / total[..., None]
