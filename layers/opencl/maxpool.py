"""Max pooling on OpenCL: one work-item per output, plane view shared with the CPU layer.

1-D and 2-D pools bind `maxpool`, whose (planes, H, W) arguments lesson 10 of the course
teaches; 3-D pools bind `maxpool3d`. Both run the same window walk (clkernels/maxpool.cl).
On a CPU device, 1-D and 2-D pools without indices bind `maxpool_runs` instead: 8 outputs of a
row per work-item, from vector loads (ResNet-18's pool under PoCL: 1.6 ms to 0.25), unless a
run's windows span more than RUNS_SPAN_MAX inputs. `KERNEL` forces one of the two for tests:
"maxpool" (per output) or "maxpool_runs" (where the span allows it).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.pooling import check_pool_input, pooled_sizes
from kuiper.layers.cpu import maxpool
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.pooling_args import window_params
from kuiper.opencl.device.runtime import is_cpu

RUNS_WIDTH = 8  # outputs per work-item of maxpool_runs
# The most inputs a run's windows may span (maxpool_runs keeps them in a private row, with
# unrolled loops): wider windows take the per-output kernel.
RUNS_SPAN_MAX = 64
RUNS_GROUP = 64  # work-items per group of maxpool_runs (fewer where the kernel allows fewer)

# None: maxpool_runs where it can run on a CPU device, maxpool elsewhere. Tests force either.
KERNEL: str | None = None


@register(backend="opencl")
class MaxPool(OpenCLLayer, maxpool.MaxPool):
    def bind(self, inputs, outputs, in_specs, out_specs):
        _, size = check_pool_input(self, in_specs[0].shape, self.rank)
        out = pooled_sizes(self, self.windows, size)
        n = out_specs[0].numel
        if self._runs_kernel():
            self._bind_runs(inputs, outputs, size, out, n)
            return
        buffers = [inputs[0].data, outputs[0].data]
        options = []
        if self.with_indices:
            buffers.append(outputs[1].data)
            options.append("-DWITH_INDICES")
        axes = slice(0, 3) if self.rank == 3 else slice(1, 3)  # (D,) H, W
        kernel = self.kernel("maxpool3d" if self.rank == 3 else "maxpool", options)
        kernel.set_args(*buffers, *(np.int32(v) for v in (n, *size[axes], *out[axes])),
                        *window_params(self.windows[axes]))
        self.launches = [Launch(kernel, (round_up(n, 64),))]

    def _runs_kernel(self) -> bool:
        """maxpool_runs: 1-D/2-D, no indices, windows of a run spanning at most RUNS_SPAN_MAX
        inputs, and a CPU device (or forced)."""
        if self.rank == 3 or self.with_indices or KERNEL == "maxpool":
            return False
        wx = self.windows[2]
        span = (RUNS_WIDTH - 1) * wx.stride + (wx.kernel - 1) * wx.dilation + 1
        if span > RUNS_SPAN_MAX:
            return False
        return KERNEL == "maxpool_runs" or is_cpu(self.runtime.device)

    def _bind_runs(self, inputs, outputs, size, out, n):
        (h, w), (oh, ow) = size[1:3], out[1:3]
        wy, wx = self.windows[1:3]
        planes = n // (oh * ow) if n else 0
        options = [f"-DRUN={RUNS_WIDTH}", f"-DSW={wx.stride}", f"-DKW={wx.kernel}",
                   f"-DDW={wx.dilation}"]
        kernel = self.kernel("maxpool_runs", options)
        kernel.set_args(inputs[0].data, outputs[0].data,
                        *(np.int32(v) for v in (planes, h, w, oh, ow, wy.kernel, wy.stride,
                                                wy.pad, wx.pad, wy.dilation)))
        items = planes * oh * -(-ow // RUNS_WIDTH)
        group = min(RUNS_GROUP, self.group_limit(kernel))
        self.launches = [Launch(kernel, (round_up(items, group),), (group,))] if items else []
