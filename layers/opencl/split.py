"""Splitting on OpenCL: every output is a strided copy of its piece of the input."""

from __future__ import annotations

from kuiper.layers.cpu import split
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View
from kuiper.registry import register


class DeviceSplit(StridedCopyLayer):
    def output_views(self, in_specs, out_specs):
        whole = View.of(in_specs[0].shape)
        # Only the pieces the model has operands for; extra pieces are never materialised.
        return [whole.index(self.index(item)) for item in self.items[:len(out_specs)]]


@register(backend="opencl")
class Split(DeviceSplit, split.Split):
    pass


@register(backend="opencl")
class Chunk(DeviceSplit, split.Chunk):
    pass


@register(backend="opencl")
class TensorSplit(DeviceSplit, split.TensorSplit):
    pass


@register(backend="opencl")
class Unbind(DeviceSplit, split.Unbind):
    pass
