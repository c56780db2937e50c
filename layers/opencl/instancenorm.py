"""InstanceNorm on OpenCL: one work-group per (sample, channel) plane; with running statistics
it is a folded per-channel scale and shift (batchnorm.cl's channel_affine)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import instancenorm
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_helpers.norm_launches import RowNormOpenCL, bind_channel_affine


@register(backend="opencl")
class InstanceNorm(RowNormOpenCL, OpenCLLayer, instancenorm.InstanceNorm):
    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.running is None:
            return super().bind(inputs, outputs, in_specs, out_specs)
        shape = in_specs[0].shape
        self._weights = [self.upload(v) for v in self.running]
        self.launches = [bind_channel_affine(self, inputs[0], outputs[0], *self._weights, shape,
                                             axis=self.channel_axis(shape))]
