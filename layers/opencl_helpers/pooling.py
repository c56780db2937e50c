"""Pooling windows as OpenCL kernel arguments.

The window arithmetic itself is shared with NumPy in layers/common/pooling.py.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.common.pooling import Window


def window_params(windows: tuple[Window, Window]) -> list[np.int32]:
    """kh, kw, sh, sw, ph, pw, dh, dw as OpenCL int arguments (the kernels' argument order)."""
    wy, wx = windows
    return [np.int32(v) for v in (wy.kernel, wx.kernel, wy.stride, wx.stride, wy.pad, wx.pad,
                                  wy.dilation, wx.dilation)]
