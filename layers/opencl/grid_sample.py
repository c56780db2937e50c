"""F.grid_sample on OpenCL: one work-item per output point, looping over the channels
(clkernels/grid_sample.cl). The mode and padding mode are build options, so each of the nine
combinations compiles to a kernel without branches on them."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import grid_sample
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class GridSample(OpenCLLayer, grid_sample.GridSample):
    def bind(self, inputs, outputs, in_specs, out_specs):
        if any(s.dtype != np.float32 for s in in_specs):
            raise self.op.error(f"the OpenCL F.grid_sample computes in float32, got "
                                f"{in_specs[0].dtype.name} and {in_specs[1].dtype.name}")
        x = in_specs[0].shape
        dims = len(x) - 2
        d, h, w = (1,) * (3 - dims) + tuple(x[2:])  # a 4-D input is a volume of depth 1
        out_spatial = int(np.prod(out_specs[0].shape[2:], dtype=np.int64))
        points = x[0] * out_spatial
        options = [f"-DMODE={grid_sample.MODES.index(self.mode)}",
                   f"-DPADDING={grid_sample.PADDING_MODES.index(self.padding_mode)}"]
        kernel = self.kernel("grid_sample", options)
        kernel.set_args(inputs[0].data, inputs[1].data, outputs[0].data,
                        *(np.int32(v) for v in (points, out_spatial, x[1], dims, d, h, w,
                                                self.align_corners)))
        self.launches = [Launch(kernel, (round_up(points, 64),))] if points else []
