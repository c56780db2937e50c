"""torch.diag on OpenCL: embed a vector or extract a diagonal (clkernels/diag.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import diag
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import move_type


@register(backend="opencl")
class Diag(OpenCLLayer, diag.Diag):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out, x = out_specs[0], in_specs[0]
        self.launches = []
        if out.numel == 0:
            return
        if len(x.shape) == 1:
            kernel = self.kernel("diag_embed", [f"-DT={move_type(out.dtype)}"])
            size = out.shape[0]
        else:
            kernel = self.kernel("diag_extract", [f"-DT={move_type(out.dtype)}"])
            size = x.shape[1]
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(size), np.int32(self.k),
                        np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]
