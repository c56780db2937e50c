"""Pooling on NumPy: every tap of the window as one strided slice of the padded planes.

The window arithmetic itself (sizes, ceil_mode, padding) is shared with OpenCL in
layers/common/pooling.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

import numpy as np

from kuiper.layers.common.pooling import Window
from kuiper.layers.cpu_helpers.im2col import pad_input


def window_taps(planes: np.ndarray, windows: Sequence[Window], out: Sequence[int], fill: float
                ) -> Iterator[tuple[tuple[np.ndarray, ...], np.ndarray]]:
    """Yield (coords, values) for every tap of the window, vectorised over outputs.

    `planes` is (P, D, H, W) and `windows`/`out` give one Window / output length per spatial
    axis. The planes are padded once with `fill` (-inf for max, 0 for average) so that every
    window, including a ceil_mode window hanging over the far edge, can be read with a plain
    strided slice: `values[p, z, y, x]` is the tap's input at output (z, y, x), and
    `coords[a][o]` is its unpadded input coordinate along axis `a` at output `o` along that axis
    (out of range inside padding). Taps come in row-major order (last axis fastest), which
    is the order PyTorch breaks ties in.
    """
    pads = [(w.pad, max(0, (o - 1) * w.stride + w.span - w.pad - n))  # how far windows reach
            for w, o, n in zip(windows, out, planes.shape[1:])]
    # into a reused workspace, only the borders filled (see im2col.pad_input)
    padded = pad_input(planes, pads, value=fill)
    starts = [w.starts(o) for w, o in zip(windows, out)]
    for tap in itertools.product(*(range(w.kernel) for w in windows)):
        offsets = [t * w.dilation for t, w in zip(tap, windows)]
        cut = tuple(slice(first, first + (o - 1) * w.stride + 1, w.stride)
                    for first, o, w in zip(offsets, out, windows))
        yield tuple(s + first for s, first in zip(starts, offsets)), padded[(slice(None), *cut)]
