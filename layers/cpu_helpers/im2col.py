"""im2col: how a convolution becomes one matrix multiplication.

A 2-D convolution computes, for every output channel `o` and output pixel `p = (y, x)`,

    out[o, p] = sum over (c, i, j) of  weight[o, c, i, j] * in[c, y*s + i*d, x*s + j*d]

(s = stride, d = dilation, `in` already padded). Read `(c, i, j)` as one index `k` of length
K = C*kh*kw and that is a matrix product `out (Cout, P) = W (Cout, K) @ cols (K, P)` where

    cols[(c, i, j), (y, x)] = in[c, y*s + i*d, x*s + j*d]

`cols` is the *column matrix* (im2col = "image to columns"). Building it copies every input
value kh*kw times, but then the whole convolution is one call to a BLAS GEMM, which runs near the
machine's peak speed: far faster than any loop over pixels we could write in Python.

The trick that makes building `cols` cheap in NumPy: `cols` is a regular *strided view* of the
padded input. Its axes (c, i, j, y, x) step through memory by (C-stride, d*row, d*col, s*row,
s*col), so `np.lib.stride_tricks.as_strided` describes it without copying anything, and a single
`np.copyto` lays it out densely for the GEMM. The same function handles 1-D and 2-D (and N-D):
each spatial axis contributes one kernel axis and one output axis.

Layout choice: we keep the batch (and group) axes *outside*, `cols (N, G, K, P)`, so that
`W (G, Cout/G, K) @ cols` gives `(N, G, Cout/G, P)`, which is already NCHW memory order: no
transpose after the GEMM. For a 1x1 kernel with stride 1 the (padded) input itself is the
column matrix, and the layer skips im2col.

The transposed convolution runs the other way (`col2im`): GEMM first, giving one column per input
pixel, then every column is *added* into the output at its kernel offsets. See `col2im_add`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from kuiper.layers.common.conv_geometry import PAD_MODES


def pad_input(x: np.ndarray, pads: Sequence[tuple[int, int]], mode: str = "zeros",
              value: float = 0.0) -> np.ndarray:
    """Pad the trailing len(pads) axes of `x` (no copy at all without padding).

    Constant padding ("zeros", with `value` as the constant: max pooling pads with -inf) writes
    into a reused workspace: the input goes in the middle and only the thin borders are filled,
    which costs a third of np.pad's time on ResNet-sized inputs.
    """
    if not any(lo or hi for lo, hi in pads):
        return x
    if mode != "zeros":
        widths = [(0, 0)] * (x.ndim - len(pads)) + list(pads)
        return np.pad(x, widths, mode=PAD_MODES[mode])
    lead = x.ndim - len(pads)
    shape = (*x.shape[:lead], *(n + lo + hi for n, (lo, hi) in zip(x.shape[lead:], pads)))
    out = workspace("padded", shape, x.dtype)
    out[(Ellipsis, *(slice(lo, lo + n) for n, (lo, _) in zip(x.shape[lead:], pads)))] = x
    for axis, (lo, hi) in enumerate(pads, start=lead):
        border = [slice(None)] * out.ndim
        border[axis] = slice(0, lo)
        out[tuple(border)] = value
        border[axis] = slice(out.shape[axis] - hi, out.shape[axis])
        out[tuple(border)] = value
    return out


def windows(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int],
            dilation: Sequence[int], out_size: Sequence[int]) -> np.ndarray:
    """The strided view (N, C, *kernel, *out) of a padded input (N, C, *spatial): no copy.

    view[n, c, i, j, y, x] = x[n, c, y*s0 + i*d0, x*s1 + j*d1] (for 2-D).
    """
    lead = x.strides[:2]
    spatial = x.strides[2:]
    strides = (*lead, *(st * d for st, d in zip(spatial, dilation)),
               *(st * s for st, s in zip(spatial, stride)))
    shape = (*x.shape[:2], *kernel, *out_size)
    return as_strided(x, shape, strides, writeable=False)


_scratch = threading.local()


def workspace(name: str, shape: Sequence[int], dtype=np.float32) -> np.ndarray:
    """A reusable scratch array per `name` (and per thread): padded inputs, column matrices.

    Both are large (a column matrix is kh*kw times the input) and die right after the GEMM.
    Allocating fresh ones per layer makes the OS map and zero new pages again and again; one
    buffer per purpose, grown when needed, stays warm. The result is only valid until the next
    call with the same name: never return it from a layer.
    """
    buffers = getattr(_scratch, "buffers", None)
    if buffers is None:
        buffers = _scratch.buffers = {}
    n = int(np.prod(shape))
    buf = buffers.get(name)
    if buf is None or buf.size < n or buf.dtype != dtype:
        buf = buffers[name] = np.empty(max(n, 1), dtype)
    return buf[:n].reshape(shape)


def im2col(x: np.ndarray, kernel: Sequence[int], stride: Sequence[int],
           dilation: Sequence[int], out_size: Sequence[int], groups: int = 1,
           ones_row: bool = False) -> np.ndarray:
    """Column matrix (N, G, C/G*prod(kernel) [+1], prod(out)) of a padded input: one copy.

    `ones_row` appends a row of ones to each group's matrix. With the bias appended to the
    weight as one more column, `[W | b] @ [cols; 1] = W @ cols + b`: the GEMM adds the bias
    for free instead of a separate pass over the output.
    The result lives in the workspace (see `workspace`).
    """
    n, c = x.shape[:2]
    cin_g = c // groups
    k = cin_g * int(np.prod(kernel))
    p = int(np.prod(out_size))
    cols = workspace("cols", (n, groups, k + ones_row, p), x.dtype)
    # The dense (c, i, j) rows of each group, seen with the view's axes (splitting axes of an
    # array never needs a copy, even for a slice like this one).
    dense = cols[:, :, :k].reshape(n, groups, cin_g, *kernel, *out_size)
    view = windows(x, kernel, stride, dilation, out_size)
    np.copyto(dense, view.reshape(n, groups, cin_g, *kernel, *out_size))
    if ones_row:
        cols[:, :, k] = 1.0
    return cols


def col2im_add(cols: np.ndarray, out: np.ndarray, stride: Sequence[int],
               dilation: Sequence[int]) -> None:
    """Add columns (N, C, *kernel, *in_size) into `out` (N, C, *full): the transposed im2col.

    Input pixel `y` with kernel offset `i` lands on output row y*s + i*d. For one fixed kernel
    offset, all input pixels land on a regular strided grid, so we loop over the (few) kernel
    offsets and add a whole slice at a time: kh*kw vectorised adds instead of np.add.at's
    scatter over every element.
    """
    nd = len(stride)
    kernel = cols.shape[2:2 + nd]
    size = cols.shape[2 + nd:]
    for offset in np.ndindex(*kernel):
        where = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                      for o, d, n, s in zip(offset, dilation, size, stride))
        out[(Ellipsis, *where)] += cols[(slice(None), slice(None), *offset)]
