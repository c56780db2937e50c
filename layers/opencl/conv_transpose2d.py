"""Transposed convolution on OpenCL: the weight GEMM into a column buffer, then `col2im`.

Both launches are bound once here (clkernels/conv_transpose2d.cl explains them). The column
buffer holds Cout*KD*KH*KW values per input voxel and is allocated at bind time. The kernels are
written for 3-D volumes; ConvTranspose1d and ConvTranspose3d (layers/opencl/conv_transpose1d.py,
conv_transpose3d.py) use the same binding, a 1-D or 2-D input being a volume with unit leading
axes.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.cpu import conv_transpose2d
from kuiper.layers.opencl.conv2d import lift3
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.gemm import BIAS_NONE, WeightBuffers, weight_gemm_launch
from kuiper.registry import register


class ConvTransposeBind(WeightBuffers, OpenCLLayer):
    """bind() for ConvTransposeNd twins (ndim 1, 2 or 3): every call becomes a 3-D one."""

    def bind(self, inputs, outputs, in_specs, out_specs):
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        size, kernel, out = lift3(geo.size), lift3(geo.kernel), lift3(geo.out)
        n, cout, g = geo.n, geo.cout, self.groups
        weight, bias = self.weight_buffers(inputs)
        # 1. cols[n][g] (Cout/G*KD*KH*KW x D*H*W) = W[g]^T @ x[n][g]
        taps, voxels = int(np.prod(kernel)), int(np.prod(size))
        m, k = cout // g * taps, geo.cin_g
        self.cols = self.workspace((n * cout * taps * voxels,), np.float32)
        gemm = weight_gemm_launch(self, m, voxels, k, weight, k * m, inputs[0].data, k * voxels,
                                  self.cols.data, m * voxels, None, BIAS_NONE, groups=g, batch=n)
        # 2. every output value gathers its patch values (+ bias)
        i32 = np.int32
        col2im = self.kernel("col2im")
        col2im.set_args(self.cols.data, bias, i32(bias is not None), outputs[0].data, i32(cout),
                        *(i32(v) for v in (*size, *kernel, *out, *lift3(self.stride),
                                           *lift3(self.padding, fill=0),
                                           *lift3(self.dilation))),
                        i32(n * cout))
        values = n * cout * int(np.prod(out))
        self.launches = [gemm, Launch(col2im, (round_up(values, 64),))]


@register(backend="opencl")
class ConvTranspose2d(ConvTransposeBind, conv_transpose2d.ConvTranspose2d):
    pass
