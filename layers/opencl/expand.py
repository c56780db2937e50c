"""Repeating data on OpenCL: expand, repeat and repeat_interleave as strided views.

A dim of stride 0 reads the same elements again, which is all three need:

    expand              broadcast_to: new and size-1 dims get stride 0
    repeat(r0, r1)      view (r0, s0, r1, s1) with strides (0, t0, 0, t1); its row-major order
                        is exactly the (r0*s0, r1*s1) output
    repeat_interleave   view (..., s, r, ...) with strides (..., t, 0, ...)

Only repeat_interleave with a *list* of counts is no view: it gathers rows by a constant index
(0, 0, 1, 2, 2, 2, ...) with the `index_select` kernel.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.cpu import expand
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View, index_select


@register(backend="opencl")
class Expand(StridedCopyLayer, expand.Expand):
    def output_views(self, in_specs, out_specs):
        return [View.of(in_specs[0].shape).broadcast_to(self.shape)]


@register(backend="opencl")
class Repeat(StridedCopyLayer, expand.Repeat):
    def output_views(self, in_specs, out_specs):
        shape = (1,) * (len(self.reps) - len(in_specs[0].shape)) + in_specs[0].shape
        view = View.of(shape)
        for d in reversed(range(len(shape))):  # right to left: earlier positions stay valid
            view = view.insert(d, self.reps[d])
        # Dims (r0, s0, r1, s1, ...): row-major, the same order as the (r0*s0, ...) output.
        return [view]


@register(backend="opencl")
class RepeatInterleave(StridedCopyLayer, expand.RepeatInterleave):
    def output_views(self, in_specs, out_specs):
        shape = in_specs[0].shape if self.dim is not None else (in_specs[0].numel,)
        view = View.of(shape or (1,))
        return [view.insert(self.axis + 1, self.counts[0] if self.counts else 1)]

    def bind(self, inputs, outputs, in_specs, out_specs):
        if len(set(self.counts)) <= 1:  # the same count everywhere: a strided view
            return super().bind(inputs, outputs, in_specs, out_specs)
        index = np.repeat(np.arange(len(self.counts)), self.counts).astype(np.int32)
        buffer = self.upload(index)
        self.keep_alive = [buffer]
        shape = in_specs[0].shape if self.dim is not None else (in_specs[0].numel,)
        self.launches = index_select(self, inputs[0], buffer, outputs[0], shape or (1,),
                                     self.axis, index.size, index.dtype, out_specs[0].dtype)
