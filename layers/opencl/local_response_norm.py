"""Local response normalisation on OpenCL: one work-item per element walks its channel window."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.norm import channel_layout
from kuiper.layers.cpu import local_response_norm
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class LocalResponseNorm(OpenCLLayer, local_response_norm.LocalResponseNorm):
    def bind(self, inputs, outputs, in_specs, out_specs):
        n = out_specs[0].numel
        channels, inner = channel_layout(in_specs[0].shape)
        before, after = self.window()
        # with k > 0 and alpha >= 0 the base of the power is positive: a faster power applies
        positive = int(self.k > 0 and self.alpha >= 0)
        kernel = self.kernel("local_response_norm", [f"-DPOSITIVE_BASE={positive}"])
        kernel.set_args(inputs[0].data, outputs[0].data,
                        *(np.int32(v) for v in (n, channels, inner, before, after)),
                        np.float32(self.alpha / self.size), np.float32(self.beta),
                        np.float32(self.k))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []
