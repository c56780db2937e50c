"""aten::_grouped_mm on OpenCL: one work-item per output value (clkernels/grouped_mm.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import grouped_mm
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import cl_type

LOCAL = (16, 4, 1)


@register(backend="opencl")
class GroupedMM(OpenCLLayer, grouped_mm.GroupedMM):
    def bind(self, inputs, outputs, in_specs, out_specs):
        x, w = in_specs[0], in_specs[1]
        groups, k, n = w.shape
        m = x.shape[-2]
        self.launches = []
        if out_specs[0].numel == 0:
            return
        offs_type = "int" if self.batched else cl_type(in_specs[2].dtype, self)
        options = [f"-DOFFS={int(not self.batched)}", f"-DOFFS_T={offs_type}"]
        kernel = self.kernel("grouped_mm", options)
        offs = None if self.batched else inputs[2].data
        kernel.set_args(inputs[0].data, inputs[1].data, offs, outputs[0].data, np.int32(m),
                        np.int32(n), np.int32(k), np.int32(groups))
        size = (round_up(n, LOCAL[0]), round_up(m, LOCAL[1]), groups if self.batched else 1)
        self.launches = [Launch(kernel, size, LOCAL)]
