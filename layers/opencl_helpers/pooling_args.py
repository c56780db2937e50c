"""Pooling windows as OpenCL kernel arguments.

The window arithmetic itself is shared with NumPy in layers/common/pooling.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kuiper.layers.common.pooling import Window


def window_params(windows: Sequence[Window]) -> list[np.int32]:
    """The kernel sizes, then the strides, the paddings and the dilations, one per axis, as
    OpenCL int arguments (the kernels' argument order): for (H, W) windows
    kh, kw, sh, sw, ph, pw, dh, dw; for (D, H, W) windows twelve values, kd first."""
    return [np.int32(getattr(w, field)) for field in ("kernel", "stride", "pad", "dilation")
            for w in windows]
