"""Concatenation on OpenCL: one block copy per input into its slot of the output.

Both cat and stack are "rows of the output are rows of the inputs side by side": with
`outer` = product of the output dims before the cat dim, input k is `outer` rows of `row_len`
elements, and its rows start at column `y_offset` of the output's rows.
"""

from __future__ import annotations

import numpy as np

from kuiper.layers.cpu import cat
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.cl_types import move_type
from kuiper.registry import register


class DeviceCat(OpenCLLayer):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out = out_specs[0]
        if any(spec.dtype != out.dtype for spec in in_specs):
            raise self.op.error("inputs of different dtypes "
                                f"({', '.join(s.dtype.name for s in in_specs)}) are not "
                                "supported on OpenCL: cast them to one dtype first")
        outer = int(np.prod(out.shape[:self.axis], dtype=np.int64))
        y_row = out.numel // outer if outer else 0
        self.launches, y_offset = [], 0
        for x, spec in zip(inputs, in_specs):
            n = spec.numel
            row_len = n // outer if outer else 0
            if n:
                kernel = self.kernel("block_copy", [f"-DT={move_type(out.dtype)}"])
                kernel.set_args(x.data, outputs[0].data, np.int32(row_len), np.int32(y_row),
                                np.int32(y_offset), np.int32(n))
                self.launches.append(Launch(kernel, (round_up(n, 64),)))
            y_offset += row_len


@register(backend="opencl")
class Cat(DeviceCat, cat.Cat):
    pass


@register(backend="opencl")
class Stack(DeviceCat, cat.Stack):
    pass
