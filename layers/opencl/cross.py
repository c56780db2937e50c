"""torch.cross on OpenCL: one work-item per output element (clkernels/cross.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import cross
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.broadcast import broadcast_meta
from kuiper.layers.opencl_helpers.cl_types import cl_type


@register(backend="opencl")
class Cross(OpenCLLayer, cross.Cross):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out = out_specs[0]
        self.launches = []
        if any(s.dtype != out.dtype for s in in_specs):
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs, "mixed dtypes")
            return
        if out.numel == 0:
            return
        meta = broadcast_meta(self, out.shape, [s.shape for s in in_specs])
        inner = int(np.prod(out.shape[self.axis + 1:], dtype=np.int64))
        kernel = self.kernel("cross_product", [f"-DT={cl_type(out.dtype, self)}"])
        kernel.set_args(inputs[0].data, inputs[1].data, outputs[0].data, meta.data,
                        np.int32(len(out.shape)), np.int32(inner), np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]
