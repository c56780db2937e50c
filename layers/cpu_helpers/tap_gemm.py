"""Convolution as one GEMM per kernel tap, reading the padded input in place (no im2col).

im2col (layers/cpu_helpers/im2col.py) copies the input kh*kw times into a column matrix so that
the whole convolution is one GEMM. For a 3x3 convolution over 64 channels of 56x56 that matrix
is 7 MB, and writing then reading it back costs a quarter to a third of the GEMM's own time
inside ResNet-18 on a 2-core machine. This module skips the copy. Split the sum over the kernel into
its taps (i, j):

    out[o, y, x] = sum over (i, j) of  sum over c of  w[o, c, i, j] * in[c, y + i, x + j]

For one tap the inner sum is a matrix product `W_ij (Cout, C) @ X_ij (C, pixels)`, where X_ij is
the padded input *shifted* by (i, j). The trick that makes X_ij free: compute the output on a
grid as wide as the padded input (Wp columns instead of W; the extra columns are garbage, cut off
at the end). Then output pixel (y, x) sits at flat position y*Wp + x, and its input at flat
position (y+i)*Wp + (x+j) = y*Wp + x + (i*Wp + j): one constant offset. So X_ij is simply the
flat padded input starting at offset i*Wp + j, a plain view that BLAS reads with a row stride
(its "leading dimension"), and the convolution is kh*kw GEMMs adding into one output (BLAS's
beta = 1, see layers/cpu_helpers/blas.py). Cost: (Wp - W)/W extra columns of arithmetic, 4% at
56x56.

Strides: an input row read with stride s is not a shifted view. Split the padded input into
s*s *phases*, phase (a, b) = in[a::s, b::s] (one copy of the input, not kh*kw). Tap (i, j) then
reads phase (i % s, j % s) shifted by (i // s, j // s) with stride 1, as above. Dilation d just
multiplies the tap's offset: (i*d, j*d).

The GEMMs have K = C (channels) instead of C*kh*kw, so this pays off for many channels and
large images; layers/cpu/conv2d.py chooses between the two lowerings (see `prefer_taps`).

Depthwise convolutions (one input channel per group, MobileNet's) use the same grid, in one of
two ways (`depthwise_taps`):
- "taps": each tap is one multiply and one add of a shifted view scaled by a per-channel
  weight, no GEMM at all. On the grid every such view is one long contiguous run per channel,
  which NumPy vectorises better than the short strided rows of the unpadded output: up to 1.5x
  faster on MobileNetV2's large early layers.
- "columns": the kh*kw shifted views are copied into a small column matrix per channel, and
  one batched matmul (weights (M, kh*kw) @ columns (kh*kw, positions) per channel) does every
  multiply-add. Two NumPy passes per tap (the taps' way) cost little on long rows, but on
  small planes each pass is hundreds of short inner loops, one per channel; the copies are
  cheaper than that, and BLAS adds the nine products in registers. The channels go through
  in blocks whose columns fill about `COLUMN_BLOCK_BYTES`: a whole large layer's columns (11 MB
  for 96 channels of 112 x 112 at stride 2) would be written to memory and read back.
"auto" is "columns" (`COLUMN_BLOCK_BYTES` says why, with the measurements).
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.base import Activate
from kuiper.layers.cpu_helpers import blas
from kuiper.layers.cpu_helpers.im2col import workspace


def available() -> bool:
    """Tap GEMMs need BLAS's accumulate (beta = 1), which only the direct BLAS call has."""
    return blas.available()


def tap_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """(Cout, C/G, kh, kw) -> (kh*kw, G, Cout/G, C/G): one contiguous matrix per tap and group."""
    cout, cin_g = w.shape[:2]
    per_group = np.asarray(w, np.float32).reshape(groups, cout // groups, cin_g, -1)
    return np.ascontiguousarray(per_group.transpose(3, 0, 1, 2))


def prefer_taps(cin_g: int, kernel, stride, out_size) -> bool:
    """Use tap GEMMs where im2col's copy is expensive and the small-K GEMMs still run fast.

    Measured inside ResNet-18 (1x3x224x224, 2-core AMD EPYC, OpenBLAS, both lowerings
    interleaved in one process): 3x3 stride-1 convolutions run 1.1-1.3x faster by taps at
    56x56 and 28x28, 1.1x at 14x14, but 0.85x at 7x7 (the GEMMs get too thin). With stride 2
    the phase copy costs what it saves (0.8-1.0x), and the 3-channel stem with its K = 3 per
    tap runs at half speed: im2col for those.
    """
    return (available() and len(kernel) == 2 and int(np.prod(kernel)) > 1
            and tuple(stride) == (1, 1) and cin_g >= 32 and int(np.prod(out_size)) >= 100)


def phase_planes(xp: np.ndarray, stride: tuple[int, int]) -> np.ndarray:
    """(N, s_h*s_w, C, Hq*Wq): the stride phases of the padded input, flattened per channel.

    With stride 1 this is the input itself (a free reshape). Positions a short phase lacks
    (when the size is not a multiple of the stride) are zeroed: only garbage columns read them,
    but uninitialised memory could hold NaNs or denormals that slow the GEMM down.
    """
    n, c, hp, wp = xp.shape
    sh, sw = stride
    if (sh, sw) == (1, 1):
        return np.ascontiguousarray(xp).reshape(n, 1, c, hp * wp)
    hq, wq = -(-hp // sh), -(-wp // sw)
    planes = workspace("tap_phases", (n, sh, sw, c, hq, wq), xp.dtype)
    for a in range(sh):
        for b in range(sw):
            part = xp[:, :, a::sh, b::sw]
            rows, cols = part.shape[2:]
            planes[:, a, b, :, :rows, :cols] = part
            planes[:, a, b, :, rows:, :] = 0
            planes[:, a, b, :, :, cols:] = 0
    return planes.reshape(n, sh * sw, c, hq * wq)


def wide_grid(xp: np.ndarray, stride: tuple[int, int], out_size: tuple[int, int]
              ) -> tuple[np.ndarray, int, int]:
    """(phase planes, grid row length Wq, grid positions up to the last real output pixel)."""
    wq = -(-xp.shape[3] // stride[1])  # the row length of every phase
    return phase_planes(xp, stride), wq, (out_size[0] - 1) * wq + out_size[1]


def tap_offsets(kernel, stride, dilation, wq: int):
    """(tap index, phase, start) of every kernel tap on a grid of row length `wq`."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    for t in range(kh * kw):
        ri, cj = (t // kw) * dh, (t % kw) * dw  # the tap's offset in the padded input
        yield t, (ri % sh) * sw + cj % sw, (ri // sh) * wq + cj // sw


def cut_grid(grid: np.ndarray, ho: int, wq: int, wo: int, write: Activate | None,
             out: np.ndarray | None = None) -> np.ndarray:
    """The real (N, C, Ho, Wo) output out of a (N, ..., Ho*Wq) grid, in a fresh array (or in
    `out`, the caller's preallocated output).

    `write(x, out)` (a fused epilogue, Epilogue.writer) rides on this copy: a lone ReLU costs
    nothing extra.
    """
    n = grid.shape[0]
    valid = grid.reshape(n, -1, ho, wq)[..., :wo]
    y = np.empty(valid.shape, np.float32) if out is None else out.reshape(valid.shape)
    if write is None:
        np.copyto(y, valid)
    else:
        write(valid, y)
    return y


def conv2d_taps(xp: np.ndarray, taps: np.ndarray, bias: np.ndarray | None,
                kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
                out_size: tuple[int, int], write: Activate | None = None,
                into: np.ndarray | None = None) -> np.ndarray:
    """Convolve a padded input (N, C, Hp, Wp) with tap weights from `tap_weights`.

    Returns a new (N, Cout, Ho, Wo) array (or `into`), through `write` if given (`cut_grid`).
    """
    n = xp.shape[0]
    ho, wo = out_size
    n_taps, groups, m, cin_g = taps.shape
    planes, wq, length = wide_grid(xp, stride, out_size)
    grid = workspace("tap_grid", (n, groups, m, ho * wq), np.float32)
    if bias is not None:
        # start from the bias and let every tap accumulate: cheaper than adding it while
        # cutting the grid (a broadcast over short rows)
        np.copyto(grid, bias.reshape(groups, m, 1))
    for image in range(n):
        for g in range(groups):
            out = grid[image, g, :, :length]
            channels = slice(g * cin_g, (g + 1) * cin_g)
            for t, phase, start in tap_offsets(kernel, stride, dilation, wq):
                shifted = planes[image, phase, channels, start:start + length]
                blas.gemm_into(taps[t, g], shifted, out, accumulate=t > 0 or bias is not None)
    return cut_grid(grid, ho, wq, wo, write, into)


# The column matrix of one block of channels (depthwise_taps' "columns"). Measured on
# MobileNetV2's layers (2-core AMD EPYC Zen 3, OpenBLAS, one process, medians of 40
# runs, ms taps -> columns): 384 channels of 14x14 (222 positions) 0.99 -> 0.34, 960 of 7x7 (61)
# 0.62 -> 0.41, 192 of 28x28 (838) 1.20 -> 0.60, stride 2 from 56x56 (811) 1.18 -> 0.68; taps
# ahead on long rows with every channel's columns at once: stride 2 from 112x112 (3,191) 2.60
# -> 3.03, 144 of 56x56 (3,246) 1.16 -> 2.65, 32 of 112x112 (12,766) 1.10 -> 1.63 (the column
# matrix leaves the caches). In blocks of channels (COLUMN_BLOCK_BYTES) columns win there too
# (2-core AMD EPYC Zen 5, medians of 15 interleaved runs, ms taps / all columns / blocks): 1.01
# / 1.24 / 0.93, 0.84 / 1.25 / 0.71, 0.76 / 1.10 / 0.71 (blocks of 1-4 MB within 10% of each
# other); so "auto" takes columns everywhere. MobileNetV2 whole, the tree before and after in
# alternating processes, eight pairs: new faster in seven, 0.92x the time at the median.
COLUMN_BLOCK_BYTES = 2 << 20


def depthwise_taps(xp: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                   kernel: tuple[int, int], stride: tuple[int, int],
                   dilation: tuple[int, int], out_size: tuple[int, int],
                   write: Activate | None = None, into: np.ndarray | None = None,
                   method: str = "auto") -> np.ndarray:
    """Depthwise convolution of a padded input (N, G, Hp, Wp): one input channel per group.

    `w` is (G, M, kh*kw), M output channels per group (a channel multiplier); `bias` (G*M,).
    Every tap adds `w[g, m, t] * shifted input channel g` into output channel (g, m), by
    `method` "taps" or "columns" (the module's docstring), or "auto" (columns).
    The result is a new array, or `into` (see `cut_grid`).
    """
    n, g = xp.shape[:2]
    m = w.shape[1]
    ho, wo = out_size
    planes, wq, length = wide_grid(xp, stride, out_size)
    grid = workspace("tap_grid", (n, g, m, ho * wq), np.float32)
    out = grid[..., :length]
    taps = list(tap_offsets(kernel, stride, dilation, wq))
    if method in ("auto", "columns"):
        # one image at a time: a block of channels of a whole batch would outgrow the caches
        block = max(1, min(g, COLUMN_BLOCK_BYTES // (4 * len(taps) * length)))
        columns = workspace("tap_columns", (block, len(taps), length), np.float32)
        for image in range(n):
            for c0 in range(0, g, block):
                c1 = min(g, c0 + block)
                cols = columns[:c1 - c0]
                for t, phase, start in taps:
                    cols[:, t] = planes[image, phase, c0:c1, start:start + length]
                # (M, T) @ (T, length) for each channel of the block: one BLAS call each
                np.matmul(w[c0:c1], cols, out=out[image, c0:c1])
    else:
        product = workspace("tap_product", out.shape, np.float32)
        for t, phase, start in taps:
            shifted = planes[:, phase, :, None, start:start + length]  # (N, G, 1, length)
            if t == 0:
                np.multiply(shifted, w[:, :, t:t + 1], out=out)
            else:
                np.multiply(shifted, w[:, :, t:t + 1], out=product)
                out += product
    if bias is not None:
        out += bias.reshape(g, m, 1)
    return cut_grid(grid, ho, wq, wo, write, into)
