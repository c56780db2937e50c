"""Transposed convolution on OpenCL: the weight GEMM into a column buffer, then `col2im`.

Both launches are bound once here (clkernels/conv_transpose2d.cl explains them). The column
buffer holds Cout*KH*KW values per input pixel and is allocated at bind time.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.cpu import conv_transpose2d
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.gemm import BIAS_NONE, WeightBuffers, weight_gemm_launch
from kuiper.registry import register


@register(backend="opencl")
class ConvTranspose2d(WeightBuffers, OpenCLLayer, conv_transpose2d.ConvTranspose2d):
    def bind(self, inputs, outputs, in_specs, out_specs):
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        (h, w), (kh, kw), (oh, ow) = geo.size, geo.kernel, geo.out
        n, cout, g = geo.n, geo.cout, self.groups
        weight, bias = self.weight_buffers(inputs)
        # 1. cols[n][g] (Cout/G*KH*KW x H*W) = W[g]^T @ x[n][g]
        m, k, hw = cout // g * kh * kw, geo.cin_g, h * w
        self.cols = self.runtime.empty((n * cout * kh * kw * hw,), np.float32)
        gemm = weight_gemm_launch(self, m, hw, k, weight, k * m, inputs[0].data, k * hw,
                                  self.cols.data, m * hw, None, BIAS_NONE, groups=g, batch=n)
        # 2. every output pixel gathers its patch values (+ bias)
        i32 = np.int32
        col2im = self.kernel("col2im")
        col2im.set_args(self.cols.data, bias, i32(bias is not None), outputs[0].data, i32(cout),
                        i32(h), i32(w), i32(kh), i32(kw), i32(oh), i32(ow),
                        *(i32(v) for v in (*self.stride, *self.padding, *self.dilation)),
                        i32(n * cout))
        self.launches = [gemm, Launch(col2im, (oh, n * cout))]
