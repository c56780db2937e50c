"""flip and roll on OpenCL. A flip is a view with negative strides (strided copy); a roll
wraps around, so it runs the `roll` kernel of clkernels/flip.cl."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.datamove import contiguous_strides
from kuiper.layers.cpu import flip
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import move_type
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View


@register(backend="opencl")
class Flip(StridedCopyLayer, flip.Flip):
    def output_views(self, in_specs, out_specs):
        backwards = slice(None, None, -1)
        items = [backwards if d in self.axes else slice(None)
                 for d in range(len(in_specs[0].shape))]
        return [View.of(in_specs[0].shape).index(items)]


@register(backend="opencl")
class Roll(OpenCLLayer, flip.Roll):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches, n = [], out_specs[0].numel
        if n == 0:
            return
        shape, shifts = self.rolled_shape(in_specs[0].shape)
        meta = np.array(list(shape) + list(contiguous_strides(shape)) + shifts or [0],
                        dtype=np.int32)
        self.keep_alive = [self.upload(meta)]
        kernel = self.kernel("roll", [f"-DT={move_type(out_specs[0].dtype)}"])
        kernel.set_args(inputs[0].data, outputs[0].data, self.keep_alive[0].data,
                        np.int32(len(shape)), np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))]
