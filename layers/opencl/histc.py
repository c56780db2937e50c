"""torch.histc on OpenCL: one work-group per bin (clkernels/histc.cl)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import histc
from kuiper.layers.opencl_base import Launch, OpenCLLayer
from kuiper.layers.opencl_helpers.reduction import work_group_size


@register(backend="opencl")
class Histc(OpenCLLayer, histc.Histc):
    def bind(self, inputs, outputs, in_specs, out_specs):
        x = in_specs[0]
        self.launches = []
        if np.dtype(x.dtype) != np.float32 or "cl_khr_fp64" not in self.runtime.device.extensions:
            why = ("float64 values" if np.dtype(x.dtype) != np.float32 else
                   "the device has no cl_khr_fp64, which the kernel's exact bin edges need")
            return self.fall_back_to_host(inputs, outputs, in_specs, out_specs, why)
        wg = work_group_size(x.numel)
        auto = self.low == self.high   # the data's own range, found by the kernel
        options = [f"-DWG={wg}", f"-DBINS={self.bins}", f"-DAUTO_RANGE={int(auto)}"]
        kernel = self.kernel("histc", options)
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(x.numel),
                        np.float32(self.low), np.float32(self.high))
        self.launches = [Launch(kernel, (self.bins * wg,), (wg,))]
