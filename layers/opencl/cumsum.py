"""cumsum / cumprod on OpenCL: one work-item per line (clkernels/cumsum.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import cumsum
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import cl_type


@register(backend="opencl")
class Cumulative(OpenCLLayer, cumsum.Cumulative):
    def bind(self, inputs, outputs, in_specs, out_specs):
        x = in_specs[0]
        self.launches = []
        if x.numel == 0:
            return
        n = x.shape[self.axis] if x.shape else 1
        inner = int(np.prod(x.shape[self.axis + 1:], dtype=np.int64))
        lines = x.numel // n
        options = [f"-DT={cl_type(x.dtype, self)}", f"-DOUT={cl_type(out_specs[0].dtype, self)}",
                   f"-DPRODUCT={int(self.product)}"]
        kernel = self.kernel("cumulative", options)
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n), np.int32(inner),
                        np.int32(lines))
        self.launches = [Launch(kernel, (round_up(lines, 64),))]
