"""Convolution on OpenCL: im2col + the GEMM of clkernels/gemm.h, or a direct depthwise kernel.

Everything is decided and bound once in `bind` (clkernels/conv2d.cl explains the kernels):
- general case: `im2col` into a column buffer allocated here, then one GEMM launch for all
  images and groups, straight into the NCHW output, bias added as it is stored;
- 1x1 kernel, stride 1, no padding: the input already is the column matrix, GEMM only;
- one input channel per group (depthwise): `depthwise`, one work-item per output row.
Padding (any mode) is read through small index tables made here (conv_geometry.source_indices).
Conv1d (layers/opencl/conv1d.py) uses the same binding with the input seen as (N, C, 1, L).
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.common import conv_geometry
from kuiper.layers.cpu import conv2d
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.gemm import BIAS_PER_ROW, WeightBuffers, weight_gemm_launch
from kuiper.registry import register


class ConvBind(WeightBuffers, OpenCLLayer):
    """bind() for ConvNd twins (ndim 1 or 2): every call becomes a 2-D one."""

    def bind(self, inputs, outputs, in_specs, out_specs):
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        lift = 2 - self.ndim  # a 1-D conv is a 2-D one over a (1, L) image
        (h, w), (kh, kw) = (1,) * lift + geo.size, (1,) * lift + geo.kernel
        (oh, ow), (sh, sw) = (1,) * lift + geo.out, (1,) * lift + tuple(self.stride)
        (dh, dw) = (1,) * lift + tuple(self.dilation)
        pads = ((0, 0),) * lift + geo.pads
        n, c, cout, g = geo.n, geo.c, geo.cout, self.groups
        p = oh * ow
        weight, bias = self.weight_buffers(inputs)
        x, y = inputs[0].data, outputs[0].data
        # where each padded row / column reads from (layers/common/conv_geometry.py)
        self.src_y, self.src_x = (
            self.upload(conv_geometry.source_indices(size, pad, self.padding_mode))
            for size, pad in zip((h, w), pads))
        tables = (self.src_y.data, self.src_x.data)
        i32 = np.int32
        geometry = [i32(v) for v in (kh, kw, oh, ow, sh, sw, dh, dw)]

        if geo.cin_g == 1 and g > 1:
            kernel = self.kernel("depthwise")
            kernel.set_args(x, weight, bias, i32(bias is not None), y, *tables, i32(c), i32(h),
                            i32(w), i32(cout), i32(cout // g), *geometry, i32(n * cout))
            self.launches = [Launch(kernel, (oh, n * cout))]
            return

        k = geo.cin_g * kh * kw
        self.launches = []
        if (kh, kw, sh, sw) == (1, 1, 1, 1) and not any(lo or hi for lo, hi in pads):
            cols = x
        else:
            self.cols = self.runtime.empty((n * c * kh * kw * p,), np.float32)
            cols = self.cols.data
            kernel = self.kernel("im2col")
            kernel.set_args(x, cols, *tables, i32(h), i32(w), *geometry, i32(n * c))
            self.launches.append(Launch(kernel, (oh, n * c * kh * kw)))
        cout_g = cout // g
        self.launches.append(weight_gemm_launch(self, cout_g, p, k, weight, cout_g * k, cols,
                                                k * p, y, cout_g * p, bias, BIAS_PER_ROW,
                                                groups=g, batch=n))


@register(backend="opencl")
class Conv2d(ConvBind, conv2d.Conv2d):
    pass
