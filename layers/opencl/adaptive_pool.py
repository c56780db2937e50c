"""Adaptive pooling on OpenCL: one work-item per output walks its (uneven) window."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.pooling import check_pool_input
from kuiper.layers.cpu import adaptive_pool
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class AdaptivePool(OpenCLLayer, adaptive_pool.AdaptivePool):
    def bind(self, inputs, outputs, in_specs, out_specs):
        _, size = check_pool_input(self, in_specs[0].shape, self.rank)
        n = out_specs[0].numel
        buffers = [inputs[0].data, outputs[0].data]
        options = []
        if self.with_indices:
            buffers.append(outputs[1].data)
            options.append("-DWITH_INDICES")
        name = "adaptive_maxpool" if self.is_max else "adaptive_avgpool"
        kernel = self.kernel(name, options)
        kernel.set_args(*buffers, *(np.int32(v) for v in (n, *size, *self.out_size(size))))
        self.launches = [Launch(kernel, (round_up(n, 64),))]
