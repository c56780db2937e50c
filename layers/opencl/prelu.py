"""PReLU on OpenCL: one work-item per element, slopes uploaded once (or an input, F.prelu)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.norm import channel_layout
from kuiper.layers.cpu import prelu
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class PReLU(OpenCLLayer, prelu.PReLU):
    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.weight is not None:
            slopes, count = self.upload(self.weight), self.weight.size
        else:
            slopes, count = inputs[1], in_specs[1].numel
        self._slopes = slopes  # keep the device buffer alive with the layer
        n = in_specs[0].numel
        channels, inner = channel_layout(in_specs[0].shape)
        kernel = self.kernel("prelu")
        kernel.set_args(inputs[0].data, outputs[0].data, slopes.data, np.int32(n),
                        np.int32(channels), np.int32(inner), np.int32(count))
        self.launches = [Launch(kernel, (round_up(max(n, 1), 64),))]
