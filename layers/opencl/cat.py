"""Concatenation on OpenCL: the inputs' blocks copied into their slots of the output, four
inputs per launch (clkernels/cat.cl says why).

Both cat and stack are "rows of the output are rows of the inputs side by side": with
`outer` = product of the output dims before the cat dim, input k is `outer` rows of `len_k`
elements, and its rows start at column (len_0 + ... + len_k-1) of the output's rows.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import cat
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_helpers.blocks import blocks_launches


class DeviceCat(OpenCLLayer):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out = out_specs[0]
        if any(spec.dtype != out.dtype for spec in in_specs):
            raise self.op.error("inputs of different dtypes "
                                f"({', '.join(s.dtype.name for s in in_specs)}) are not "
                                "supported on OpenCL: cast them to one dtype first")
        outer = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        y_row = out.numel // outer if outer else 0
        lengths = [spec.numel // outer if outer else 0 for spec in in_specs]
        self.launches = (blocks_launches(self, "cat4", outputs[0], inputs, lengths, y_row,
                                         outer, out.dtype) if outer else [])


@register(backend="opencl")
class Cat(DeviceCat, cat.Cat):
    pass


@register(backend="opencl")
class Stack(DeviceCat, cat.Stack):
    pass
