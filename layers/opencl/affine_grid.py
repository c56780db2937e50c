"""F.affine_grid on OpenCL: one work-item per grid value (clkernels/affine_grid.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import affine_grid
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class AffineGrid(OpenCLLayer, affine_grid.AffineGrid):
    def bind(self, inputs, outputs, in_specs, out_specs):
        if in_specs[0].dtype != np.float32:
            raise self.op.error(f"the OpenCL F.affine_grid computes in float32, got "
                                f"{in_specs[0].dtype.name}")
        n = out_specs[0].numel
        d, h, w = (1,) * (5 - len(self.size)) + self.spatial  # a 2-D grid has depth 1
        kernel = self.kernel("affine_grid")
        kernel.set_args(inputs[0].data, outputs[0].data,
                        *(np.int32(v) for v in (n, len(self.spatial), d, h, w,
                                                self.align_corners)))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []
