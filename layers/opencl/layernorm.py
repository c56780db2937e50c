"""LayerNorm on OpenCL (layernorm.cl), two ways:

- on GPUs, one work-group per row with tree reductions in local memory (RowNormOpenCL, shared
  with GroupNorm and InstanceNorm);
- on CPU devices, one work-item per row (`layernorm_rows`): PoCL runs a work-group's work-items
  one after the other between barriers, and for the short rows of ConvNeXt and transformers
  (96 to 1024 values) the barriers cost more than the row itself.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import layernorm
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.norm_launches import RowNormOpenCL
from kuiper.opencl.device.runtime import is_cpu

ROWS_LOCAL = 16   # layernorm_rows: rows per work-group (PoCL's task size)
# None: one work-item per row on CPU devices, a work-group per row elsewhere; True or False
# forces one way (the tests run both kernels on every device).
ROW_PER_WORK_ITEM: bool | None = None


@register(backend="opencl")
class LayerNorm(RowNormOpenCL, OpenCLLayer, layernorm.LayerNorm):
    def bind(self, inputs, outputs, in_specs, out_specs):
        per_item = ROW_PER_WORK_ITEM
        if per_item is None:
            per_item = is_cpu(self.runtime.device)
        if not per_item:
            return super().bind(inputs, outputs, in_specs, out_specs)
        lay = self.layout(in_specs[0].shape)
        gamma, beta = self.affine_buffers(inputs, lay)
        vec = 8 if lay.length % 8 == 0 else 1
        kernel = self.kernel("layernorm_rows", [f"-DVEC={vec}"])
        kernel.set_args(inputs[0].data, outputs[0].data, gamma.data, beta.data,
                        np.int32(lay.length), np.int32(lay.rows), np.float32(self.eps))
        self.launches = ([Launch(kernel, (round_up(lay.rows, ROWS_LOCAL),), (ROWS_LOCAL,))]
                         if lay.rows else [])
