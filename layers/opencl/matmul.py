"""Matrix products on OpenCL: one tiled `bgemm` launch over the whole broadcast batch."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import matmul
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_gemm.launch import strided, strided_gemm_launch


@register(backend="opencl")
class Matmul(OpenCLLayer, matmul.Matmul):
    def bind(self, inputs, outputs, in_specs, out_specs):
        self.bound_arrays = []   # a rebind (new input shape) releases the previous ones
        if any(s.dtype != np.float32 for s in in_specs):
            raise self.op.error("the OpenCL matmul computes in float32, got inputs "
                                f"{', '.join(s.dtype.name for s in in_specs)}")
        s = self.shapes
        self.launches = []
        if out_specs[0].numel == 0:
            return
        # Every operand is read through a broadcast view of the output's (batch, M, N) grid.
        a = strided(s.a_view, s.batch + (s.m, s.k), inputs[-2])
        b = strided(s.b_view, s.batch + (s.k, s.n), inputs[-1])
        c = strided(s.batch + (s.m, s.n), s.batch + (s.m, s.n), outputs[0])
        bias = None
        if self.has_input and self.beta != 0.0:
            # addmm/baddbmm operands are strictly 2-D/3-D, so the output is (batch..., M, N)
            # and `input` broadcasts to it like any NumPy operand.
            bias = strided(in_specs[0].shape, s.batch + (s.m, s.n), inputs[0])
        self.launches = [strided_gemm_launch(self, s.m, s.n, s.k, a, b, c, bias,
                                             alpha=self.alpha, beta=self.beta)]
