"""BatchNorm on OpenCL: per-channel scale and shift, folded on the host (nn.*) or, for
F.batch_norm with statistics computed in the graph, by a small kernel on the device."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import batchnorm
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.norm_launches import bind_channel_affine


@register(backend="opencl")
class BatchNorm(OpenCLLayer, batchnorm.BatchNorm):
    def bind(self, inputs, outputs, in_specs, out_specs):
        shape = in_specs[0].shape
        if self.scale is not None:  # folded at load time
            self._weights = (self.upload(self.scale), self.upload(self.shift))
            self.launches = [bind_channel_affine(self, inputs[0], outputs[0], *self._weights,
                                                 shape)]
            return
        channels = shape[1]
        arg = {name: inputs[i] for name, i in self.slots.items()}
        # A missing weight is ones and a missing bias zeros, so one fold kernel serves all.
        weight = arg.get("weight")
        if weight is None:
            weight = self.upload(np.ones(channels, np.float32))
        bias = arg.get("bias")
        if bias is None:
            bias = self.upload(np.zeros(channels, np.float32))
        scale = self.runtime.empty((channels,))
        shift = self.runtime.empty((channels,))
        self._weights = (weight, bias, scale, shift)  # keep the device buffers alive
        fold = self.kernel("fold_batchnorm")
        fold.set_args(arg["running_mean"].data, arg["running_var"].data, weight.data, bias.data,
                      scale.data, shift.data, np.int32(channels), np.float32(self.eps))
        self.launches = [Launch(fold, (round_up(channels, 64),)),
                         bind_channel_affine(self, inputs[0], outputs[0], scale, shift, shape)]
