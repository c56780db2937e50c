"""Pooling on NumPy: every tap of the window as one strided slice of the padded planes.

The window arithmetic itself (sizes, ceil_mode, padding) is shared with OpenCL in
layers/common/pooling.py.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.common.pooling import Window
from kuiper.layers.cpu_helpers.im2col import pad_input


def window_taps(planes: np.ndarray, windows: tuple[Window, Window], oh: int, ow: int,
                fill: float):
    """Yield (rows, cols, values) for every tap (ky, kx) of the window, vectorised over outputs.

    `planes` is (P, H, W). It is padded once with `fill` (-inf for max, 0 for average) so that
    every window, including a ceil_mode window hanging over the right edge, can be read with a
    plain strided slice: `values[p, i, j]` is the tap's input at output (i, j), and
    `rows[i]`, `cols[j]` are its unpadded input coordinates (out of range inside padding).
    """
    wy, wx = windows
    _, h, w = planes.shape
    need_h = (oh - 1) * wy.stride + wy.span  # padded length the last window reaches
    need_w = (ow - 1) * wx.stride + wx.span
    # into a reused workspace, only the borders filled (see im2col.pad_input)
    padded = pad_input(planes, [(wy.pad, max(0, need_h - wy.pad - h)),
                                (wx.pad, max(0, need_w - wx.pad - w))], value=fill)
    row0, col0 = wy.starts(oh), wx.starts(ow)
    for ky in range(wy.kernel):
        y0 = ky * wy.dilation
        for kx in range(wx.kernel):
            x0 = kx * wx.dilation
            values = padded[:, y0:y0 + (oh - 1) * wy.stride + 1:wy.stride,
                            x0:x0 + (ow - 1) * wx.stride + 1:wx.stride]
            yield row0 + y0, col0 + x0, values
