"""Dtype casts on OpenCL: one `cast` kernel per (source, destination) pair of dtypes; when the
dtype does not change the output is a view of the input and nothing runs."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import to
from kuiper.layers.opencl_base import FRESH, Launch, OpenCLLayer, round_up, view_of
from kuiper.layers.opencl_helpers.cl_types import arith_type


@register(backend="opencl")
class To(OpenCLLayer, to.To):
    def output_kinds(self, in_specs, out_specs):
        if in_specs[0].dtype == out_specs[0].dtype:
            return [view_of(0)]  # device arrays are always contiguous: nothing to do
        return [FRESH]

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches, n = [], out_specs[0].numel
        src, dst = in_specs[0].dtype, out_specs[0].dtype
        if src == dst or n == 0:
            return
        try:
            options = [f"-DSRC={arith_type(src)}", f"-DDST={arith_type(dst)}"]
        except ValueError as e:
            raise self.op.error(f"cast from {src.name} to {dst.name} on OpenCL: {e}") from None
        if dst == np.dtype(np.bool_):
            options.append("-DTO_BOOL")
        if np.dtype(np.float64) in (src, dst):
            options.append("-DUSE_FP64")
        kernel = self.kernel("cast", options)
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))]
