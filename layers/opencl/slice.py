"""Basic indexing on OpenCL: the CPU layer's index tuple applied to a `View`, then one
strided copy."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import slice as cpu_slice
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View


class DeviceIndex(StridedCopyLayer):
    def output_views(self, in_specs, out_specs):
        return [View.of(in_specs[0].shape).index(self.index)]


@register(backend="opencl")
class Slice(DeviceIndex, cpu_slice.Slice):
    pass


@register(backend="opencl")
class Select(DeviceIndex, cpu_slice.Select):
    pass


@register(backend="opencl")
class Narrow(DeviceIndex, cpu_slice.Narrow):
    pass
