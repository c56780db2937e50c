"""Softmax family on OpenCL: one work-group per row, reductions in local memory.

The CPU layer decided the axis; the tensor is then (outer, len, inner) and there are
outer * inner rows. The work-group size is the smallest power of two covering the row, capped
by what the device allows (and at 256: longer rows are walked in strides).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import softmax
from kuiper.layers.opencl_base import Launch, OpenCLLayer

MAX_GROUP = 256


class OpenCLSoftmax(OpenCLLayer):
    def bind(self, inputs, outputs, in_specs, out_specs):
        outer, length, inner = self.split(in_specs[0].shape)
        rows = outer * inner
        if rows * length == 0:
            self.launches = []
            return
        options = (["-DLOG"] if self.log else []) + (["-DNEGATE"] if self.negate else [])
        kernel = self.kernel("softmax", options)
        cl = self.runtime.cl
        limit = min(MAX_GROUP, self.group_limit(kernel))
        group = 1
        while group < length and group * 2 <= limit:
            group *= 2
        kernel.set_args(inputs[0].data, outputs[0].data, np.int32(length), np.int32(inner),
                        cl.LocalMemory(4 * group))
        self.launches = [Launch(kernel, (rows * group,), (group,))]


@register(backend="opencl")
class Softmax(OpenCLSoftmax, softmax.Softmax):
    pass


@register(backend="opencl")
class LogSoftmax(OpenCLSoftmax, softmax.LogSoftmax):
    pass


@register(backend="opencl")
class Softmin(OpenCLSoftmax, softmax.Softmin):
    pass


@register(backend="opencl")
class Softmax2d(OpenCLSoftmax, softmax.Softmax2d):
    pass
