"""Unfold and Fold on OpenCL: one work-item per output element, gathering (clkernels/fold.cl).

Fold is written as a gather too: each output pixel finds the (few) block positions and kernel
taps that land on it, so no two work-items write the same element and no atomics are needed.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import fold
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


class OpenCLSlidingBlocks(OpenCLLayer):
    kernel_name = ""

    def image_size(self, in_shape) -> tuple[int, int]:
        """(H, W) of the image side: the input of unfold, the output of fold."""
        raise NotImplementedError

    def bind(self, inputs, outputs, in_specs, out_specs):
        h, w = self.image_size(in_specs[0].shape)
        bh, bw = self.blocks((h, w))
        geometry = (*self.kernel_size, *self.stride, *self.padding, *self.dilation)
        kernel = self.kernel(self.kernel_name)
        kernel.set_args(inputs[0].data, outputs[0].data,
                        *(np.int32(v) for v in (h, w, bh, bw, *geometry)))
        # a 2-D range, (last output dim, all the others): see fold.cl
        row = bw if self.kernel_name == "unfold" else w
        n = out_specs[0].numel
        self.launches = [Launch(kernel, (round_up(row, 8), n // row))] if n else []


@register(backend="opencl")
class Unfold(OpenCLSlidingBlocks, fold.Unfold):
    kernel_name = "unfold"

    def image_size(self, in_shape):
        return tuple(in_shape[-2:])


@register(backend="opencl")
class Fold(OpenCLSlidingBlocks, fold.Fold):
    kernel_name = "fold"

    def image_size(self, in_shape):
        return self.output_size
