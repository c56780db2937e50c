"""Convolution on OpenCL: im2col + the GEMM of clkernels/gemm.h, or a direct depthwise kernel.

Everything is decided and bound once in `bind` (clkernels/conv2d.cl explains the kernels):
- general case: `im2col` into a column buffer allocated here, then one GEMM launch for all
  images and groups, straight into the NCHW output, bias added as it is stored;
- 1x1 kernel, stride 1, no padding: the input already is the column matrix, GEMM only;
- one input channel per group (depthwise): `depthwise`, one work-item per output row.
Padding (any mode) is read through small index tables made here (conv_geometry.source_indices).
The kernels are written for 3-D volumes; Conv1d and Conv3d (layers/opencl/conv1d.py, conv3d.py)
use the same binding, a 1-D or 2-D input being a volume with unit leading axes.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.common import conv_geometry
from kuiper.layers.cpu import conv2d
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.gemm import BIAS_PER_ROW, WeightBuffers, weight_gemm_launch
from kuiper.registry import register


def lift3(values, fill=1) -> tuple:
    """A 1-D or 2-D geometry as a 3-D one: unit (or `fill`) entries for the missing leading
    axes, so (H, W) becomes (1, H, W)."""
    values = tuple(values)
    return (fill,) * (3 - len(values)) + values


class ConvBind(WeightBuffers, OpenCLLayer):
    """bind() for ConvNd twins (ndim 1, 2 or 3): every call becomes a 3-D one."""

    def bind(self, inputs, outputs, in_specs, out_specs):
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        size, ksize, out = lift3(geo.size), lift3(geo.kernel), lift3(geo.out)
        stride, dilation = lift3(self.stride), lift3(self.dilation)
        pads = lift3(geo.pads, fill=(0, 0))
        n, c, cout, g = geo.n, geo.c, geo.cout, self.groups
        od, oh, ow = out
        p = od * oh * ow
        taps = int(np.prod(ksize))
        weight, bias = self.weight_buffers(inputs)
        x, y = inputs[0].data, outputs[0].data
        # where each padded depth / row / column reads from (layers/common/conv_geometry.py)
        self.src_tables = [self.upload(conv_geometry.source_indices(length, pad,
                                                                    self.padding_mode))
                           for length, pad in zip(size, pads)]
        tables = [t.data for t in self.src_tables]
        i32 = np.int32
        geometry = [i32(v) for v in (*ksize, *out, *stride, *dilation)]

        if geo.cin_g == 1 and g > 1:
            kernel = self.kernel("depthwise")
            kernel.set_args(x, weight, bias, i32(bias is not None), y, *tables, i32(c),
                            *(i32(v) for v in size), i32(cout), i32(cout // g), *geometry,
                            i32(n * cout))
            self.launches = [Launch(kernel, (od * oh, n * cout))]
            return

        k = geo.cin_g * taps
        self.launches = []
        if taps == 1 and set(stride) == {1} and not any(lo or hi for lo, hi in pads):
            cols = x
        else:
            self.cols = self.runtime.empty((n * c * taps * p,), np.float32)
            cols = self.cols.data
            kernel = self.kernel("im2col")
            kernel.set_args(x, cols, *tables, *(i32(v) for v in size), *geometry, i32(n * c))
            self.launches.append(Launch(kernel, (od * oh, n * c * taps)))
        cout_g = cout // g
        self.launches.append(weight_gemm_launch(self, cout_g, p, k, weight, cout_g * k, cols,
                                                k * p, y, cout_g * p, bias, BIAS_PER_ROW,
                                                groups=g, batch=n))


@register(backend="opencl")
class Conv2d(ConvBind, conv2d.Conv2d):
    pass
