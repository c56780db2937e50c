"""Average pooling on OpenCL: one work-item per output, same plane view as the CPU layer."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.pooling import check_pool_input, pooled_sizes
from kuiper.layers.cpu import avgpool
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.pooling_args import window_params


@register(backend="opencl")
class AvgPool(OpenCLLayer, avgpool.AvgPool):
    def bind(self, inputs, outputs, in_specs, out_specs):
        _, size = check_pool_input(self, in_specs[0].shape, self.rank)
        out = pooled_sizes(self, self.windows, size)
        n = out_specs[0].numel
        kernel = self.kernel("avgpool")
        # window_params ends with the dilations, which average pooling does not have.
        kernel.set_args(inputs[0].data, outputs[0].data,
                        *(np.int32(v) for v in (n, *size, *out)),
                        *window_params(self.windows)[:9],
                        np.int32(self.count_include_pad), np.int32(self.divisor_override))
        self.launches = [Launch(kernel, (round_up(n, 64),))]
