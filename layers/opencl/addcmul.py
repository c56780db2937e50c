"""torch.addcmul on OpenCL: one broadcasting elementwise kernel (clkernels/addcmul.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import addcmul
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up
from kuiper.layers.opencl_helpers.broadcast import broadcast_meta
from kuiper.layers.opencl_helpers.buffers import keep_alive
from kuiper.layers.opencl_helpers.cl_types import cl_type


@register(backend="opencl")
class AddCMul(OpenCLLayer, addcmul.AddCMul):
    def bind(self, inputs, outputs, in_specs, out_specs):
        out = out_specs[0]
        self.launches = []
        if out.numel == 0:
            return
        shapes = [s.shape for s in in_specs[:3]]
        # `value`: the parameter, or a fourth input known at build time (pnnx's folded
        # expression), as a one-element buffer of the kernel's type; else the input itself
        known = self.value if self.value is not None else (
            self.scalar([None, None, None, in_specs[3].value]) if in_specs[3].known else None)
        runtime_value = known is None and in_specs[3].dtype != self.dtype
        if runtime_value or any(s.dtype != self.dtype for s in in_specs[:3]):
            self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                                   "operands of different dtypes (the kernel reads one type)")
            return
        if known is not None:
            value = self.upload(np.asarray([known], dtype=self.dtype))
            keep_alive(self, [value])
        else:
            value = inputs[3]
        meta = broadcast_meta(self, out.shape, shapes)
        options = [f"-DT={cl_type(self.dtype, self)}",
                   f"-DFLAT={int(all(s == out.shape for s in shapes))}"]
        kernel = self.kernel("addcmul", options)
        kernel.set_args(inputs[0].data, inputs[1].data, inputs[2].data, value.data,
                        outputs[0].data, meta.data, np.int32(len(out.shape)),
                        np.int32(out.numel))
        self.launches = [Launch(kernel, (round_up(out.numel, 64),))]
