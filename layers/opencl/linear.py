"""Linear on OpenCL: one launch of the GEMM of clkernels/gemm.h.

The input's leading axes are the GEMM's rows, so `x (rows, in) @ W^T` needs no reshaping on the
device; the weight stays in PyTorch's (out, in) layout and the kernel reads it transposed
(clkernels/linear.cl sets TRANS_B). The bias is added as the results are stored. The launch is
bound by `weight_gemm_launch` (layers/opencl_helpers/gemm.py), like the convolutions' GEMM.
"""

from __future__ import annotations

from kuiper.layers.cpu import linear
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_helpers.gemm import BIAS_PER_COLUMN, WeightBuffers, weight_gemm_launch
from kuiper.registry import register


@register(backend="opencl")
class Linear(WeightBuffers, OpenCLLayer, linear.Linear):
    def bind(self, inputs, outputs, in_specs, out_specs):
        n_out, n_in = self.weight_of(in_specs)
        rows = out_specs[0].numel // n_out if n_out else 0
        self.launches = []
        if rows == 0 or n_out == 0:
            return
        w, b = self.weight_buffers(inputs)
        self.launches = [weight_gemm_launch(self, rows, n_out, n_in, inputs[0].data, 0, w, 0,
                                            outputs[0].data, 0, b, BIAS_PER_COLUMN)]
