"""ReLU on OpenCL: the model for elementwise twins (subclass the CPU layer, bind once)."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import relu
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class ReLU(OpenCLLayer, relu.ReLU):
    # What ReLU is inside a producer's fused epilogue (kuiper/passes/epilogue.py), as the
    # activations of activation.py say it: a C expression of x. NaN takes the branch that
    # returns x, so NaN stays NaN as in PyTorch (fmax(x, 0) would return 0).
    expr = "x<0.0f?0.0f:x"
    writes_in_place = True  # relu.cl reads x[i], writes y[i]: it may overwrite a dead input

    def bind(self, inputs, outputs, in_specs, out_specs):
        if self.falls_back_unless([np.float32], inputs, outputs, in_specs, out_specs):
            return  # uint8, float64 ...: the CPU layer computes them (the kernel reads floats)
        n = out_specs[0].numel
        kernel = self.kernel("relu")
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))]
