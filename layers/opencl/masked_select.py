"""masked_select on OpenCL: one work-group compacts the selected elements (a prefix sum), and
the executor reads back how many there are (kuiper/opencl/execution/dynamic.py)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import masked_select
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.broadcast import broadcast_meta
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import move_type

LOCAL = 128  # work-items of the one work-group; every OpenCL device allows at least this


@register(backend="opencl")
class MaskedSelect(OpenCLLayer, masked_select.MaskedSelect):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.out = outputs[0]
        self.count = self.runtime.empty((1,), np.int32)
        keep_alive(self, [self.count])
        n = out_specs[0].numel
        self.launches = []
        if n == 0:
            return
        meta = broadcast_meta(self, self.shape, [in_specs[0].shape, in_specs[1].shape])
        kernel = self.kernel("masked_select", [f"-DT={move_type(out_specs[0].dtype)}",
                                               f"-DLOCAL={LOCAL}"])
        kernel.set_args(inputs[0].data, inputs[1].data, outputs[0].data, self.count.data,
                        meta.data, np.int32(len(self.shape)), np.int32(n))
        self.launches = [Launch(kernel, (LOCAL,), (LOCAL,))]

    def dynamic_outputs(self, queue):
        """After the launch has finished: the used part of the output (a device view)."""
        used = int(self.count.get(queue)[0]) if self.launches else 0
        return [self.out[:used]]
