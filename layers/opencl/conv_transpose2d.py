"""Transposed convolution on OpenCL: the weight GEMM into a column buffer, then `col2im`.

Both launches are bound once here (clkernels/conv_transpose2d.cl explains them). The column
buffer holds Cout*KD*KH*KW values per input voxel: a workspace, shared with other layers. The GEMM's
parameter set is the one `kuiper tune` measured fastest for this shape, else the cost model's
(layers/opencl_gemm/selection.py), as for a linear layer; `kuiper info` shows which and why. The
kernels are written for 3-D volumes; ConvTranspose1d and ConvTranspose3d
(layers/opencl/conv_transpose1d.py, conv_transpose3d.py) use the same binding, a 1-D or 2-D input
being a volume with unit leading axes.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import conv_transpose2d
from kuiper.layers.opencl.conv2d import lift3
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_gemm.launch import (
    BIAS_NONE,
    WeightBuffers,
    weight_dtype,
    weight_gemm_launch,
)
from kuiper.layers.opencl_gemm.parameter_sets import computes_in
from kuiper.layers.opencl_gemm.selection import select_gemm


class ConvTransposeBind(WeightBuffers, OpenCLLayer):
    """bind() for ConvTransposeNd twins (ndim 1, 2 or 3): every call becomes a 3-D one."""

    reduced_precision = True    # its weight GEMM computes in the plan's precision
    algorithm: str = ""
    algorithm_params: dict | None = None
    algorithm_reason: str = ""
    computes: str = "fp32"      # what the bound kernels compute in (`kuiper info`)

    def gemm_shape(self, in_specs) -> tuple[int, int, int, int]:
        """(M, N, K, Z) of the weight GEMM: Cout/G*taps rows, one column per input voxel,
        Cin/G deep, batch*groups products (the weight is read transposed: TRANS_A)."""
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        taps, voxels = int(np.prod(lift3(geo.kernel))), int(np.prod(lift3(geo.size)))
        return geo.cout // self.groups * taps, voxels, geo.cin_g, geo.n * self.groups

    def workspace_shapes(self, in_specs, out_specs, *, precision="fp32"):
        m, voxels, _, z = self.gemm_shape(in_specs)
        return [((z * m * voxels,), np.float32)]   # the column buffer, batch x groups of them

    def bind(self, inputs, outputs, in_specs, out_specs, *, workspaces=(), precision="fp32"):
        geo = self.geometry(in_specs[0].shape, self.weight_of(in_specs))
        size, kernel, out = lift3(geo.size), lift3(geo.kernel), lift3(geo.out)
        n, cout, g = geo.n, geo.cout, self.groups
        dtype = weight_dtype(precision) if self.weight is not None else np.float32
        weight, bias = self.weight_buffers(inputs, dtype=dtype)
        # 1. cols[n][g] (Cout/G*KD*KH*KW x D*H*W) = W[g]^T @ x[n][g]
        m, voxels, k, z = self.gemm_shape(in_specs)
        params, reason = select_gemm(self.runtime.device, m, voxels, k, z, trans_a=True,
                                     precision=precision)
        self.algorithm, self.algorithm_params, self.algorithm_reason = "gemm", params, reason
        self.computes = computes_in(params, half_weight=dtype == np.float16)
        (self.cols,) = workspaces or self.own_workspaces(in_specs, out_specs)
        gemm = weight_gemm_launch(self, m, voxels, k, weight, k * m, inputs[0].data, k * voxels,
                                  self.cols.data, m * voxels, None, BIAS_NONE, groups=g, batch=n,
                                  params=params, half_a=dtype == np.float16)
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
