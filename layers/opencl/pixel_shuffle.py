"""Pixel/channel shuffles on OpenCL: the CPU layer's plan as one strided copy.

`View.of(view_shape).permute(perm)` describes, for every element of the output in row-major
order, where it sits in the input; `strided_copy` (clkernels/strided.h, shared with permute)
gathers it. The output buffer is contiguous, so its final reshape is free.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import pixel_shuffle
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View, strided_copy


class OpenCLShuffle(StridedCopyLayer):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches, self.keep_alive = [], []
        view = View.of(self.view_shape).permute(self.perm)
        self.launches = strided_copy(self, inputs[0], outputs[0], view, out_specs[0].dtype)


@register(backend="opencl")
class PixelShuffle(OpenCLShuffle, pixel_shuffle.PixelShuffle):
    pass


@register(backend="opencl")
class PixelUnshuffle(OpenCLShuffle, pixel_shuffle.PixelUnshuffle):
    pass


@register(backend="opencl")
class ChannelShuffle(OpenCLShuffle, pixel_shuffle.ChannelShuffle):
    pass
