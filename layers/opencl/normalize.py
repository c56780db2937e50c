"""F.normalize on OpenCL: one work-group per vector (clkernels/normalize.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import normalize
from kuiper.layers.opencl.reduce import P_KINDS
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.reduction import work_group_size


@register(backend="opencl")
class Normalize(OpenCLLayer, normalize.Normalize):
    def bind(self, inputs, outputs, in_specs, out_specs):
        x = in_specs[0]
        if x.dtype != np.float32:
            raise self.op.error(f"the OpenCL F.normalize computes in float32, got {x.dtype.name}")
        n = x.shape[self.axis]
        inner = int(np.prod(x.shape[self.axis + 1:], dtype=np.int64))
        vectors = x.numel // n if n else 0
        self.launches = []
        if vectors == 0:
            return
        wg = work_group_size(n)
        kernel = self.kernel("normalize_lp", [f"-DWG={wg}",
                                           f"-DPKIND={P_KINDS.get(self.p, 'P_ANY')}"])
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n), np.int32(inner),
                        np.float32(self.p), np.float32(self.eps))
        self.launches = [Launch(kernel, (vectors * wg,), (wg,))]
