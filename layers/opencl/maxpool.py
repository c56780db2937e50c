"""Max pooling on OpenCL: one work-item per output, plane view shared with the CPU layer.

1-D and 2-D pools bind `maxpool`, whose (planes, H, W) arguments lesson 10 of the course
teaches; 3-D pools bind `maxpool3d`. Both run the same window walk (clkernels/maxpool.cl).
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.common.pooling import check_pool_input, pooled_sizes
from kuiper.layers.cpu import maxpool
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.pooling import window_params
from kuiper.registry import register


@register(backend="opencl")
class MaxPool(OpenCLLayer, maxpool.MaxPool):
    def bind(self, inputs, outputs, in_specs, out_specs):
        _, size = check_pool_input(self, in_specs[0].shape, self.rank)
        out = pooled_sizes(self, self.windows, size)
        n = out_specs[0].numel
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
