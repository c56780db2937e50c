"""GLU on OpenCL: one work-item per output element reads its two halves."""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import glu
from kuiper.layers.opencl_base import Launch, OpenCLLayer, round_up


@register(backend="opencl")
class GLU(OpenCLLayer, glu.GLU):
    def bind(self, inputs, outputs, in_specs, out_specs):
        shape = out_specs[0].shape
        half = shape[self.axis]
        inner = int(np.prod(shape[self.axis + 1:], dtype=np.int64))
        n = out_specs[0].numel
        kernel = self.kernel("glu")
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(half), np.int32(inner),
                        np.int32(n))
        self.launches = [Launch(kernel, (round_up(n, 64),))] if n else []
