"""F.pairwise_distance on OpenCL: one work-group per output row (clkernels/pairwise_distance.cl).

Broadcasting is by strides: each input gets a [shape, strides] table of the broadcast shape
(stride 0 along repeated dims), read with strided.h's `strided_offset`.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import pairwise_distance
from kuiper.layers.opencl.reduce import P_KINDS
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.buffers import broadcast_strides, keep_alive
from kuiper.layers.opencl_helpers.reduction import work_group_size


@register(backend="opencl")
class PairwiseDistance(OpenCLLayer, pairwise_distance.PairwiseDistance):
    def bind(self, inputs, outputs, in_specs, out_specs):
        if any(s.dtype != np.float32 for s in in_specs):
            raise self.op.error("the OpenCL F.pairwise_distance computes in float32, got "
                                f"{in_specs[0].dtype.name} and {in_specs[1].dtype.name}")
        shape = self.broadcast_shape(in_specs[0].shape, in_specs[1].shape)
        n = shape[-1]
        rows = out_specs[0].numel
        self.launches = []
        if rows == 0:
            return
        metas = [self.upload(np.asarray(list(shape) + broadcast_strides(s.shape, shape),
                                        dtype=np.int32)) for s in in_specs]
        keep_alive(self, metas)
        wg = work_group_size(n)
        kernel = self.kernel("pairwise_distance", [f"-DWG={wg}",
                                                   f"-DPKIND={P_KINDS.get(self.p, 'P_ANY')}"])
        kernel.set_args(inputs[0].data, inputs[1].data, outputs[0].data, metas[0].data,
                        metas[1].data, np.int32(len(shape)), np.int32(n), np.float32(self.p),
                        np.float32(self.eps))
        self.launches = [Launch(kernel, (rows * wg,), (wg,))]
