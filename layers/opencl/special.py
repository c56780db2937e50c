"""lgamma on OpenCL (the built-in lgamma); positive as a view of its input."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import special
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class LGamma(OpenCLLayer, special.LGamma):
    def bind(self, inputs, outputs, in_specs, out_specs):
        n = out_specs[0].numel
        if in_specs[0].dtype != np.float32:
            raise self.op.error(f"the OpenCL lgamma takes float32, got {in_specs[0].dtype.name}")
        kernel = self.kernel("lgamma_f")
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []


@register(backend="opencl")
class Positive(OpenCLLayer, special.Positive):
    view_of_input = 0  # +x is x: nothing to compute or copy

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches = []
