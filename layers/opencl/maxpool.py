"""Max pooling on OpenCL: one work-item per output, plane view shared with the CPU layer."""

from __future__ import annotations

import numpy as np

from kuiper.layers.common.pooling import check_pool_input
from kuiper.layers.cpu import maxpool
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.pooling import window_params
from kuiper.registry import register


@register(backend="opencl")
class MaxPool(OpenCLLayer, maxpool.MaxPool):
    def bind(self, inputs, outputs, in_specs, out_specs):
        _, h, w = check_pool_input(self, in_specs[0].shape, self.rank)
        _, oh, ow = check_pool_input(self, out_specs[0].shape, self.rank)
        n = out_specs[0].numel
        buffers = [inputs[0].data, outputs[0].data]
        options = []
        if self.with_indices:
            buffers.append(outputs[1].data)
            options.append("-DWITH_INDICES")
        kernel = self.kernel("maxpool", options)
        kernel.set_args(*buffers, *(np.int32(v) for v in (n, h, w, oh, ow)),
                        *window_params(self.windows))
        self.launches = [Launch(kernel, (round_up(n, 64),))]
