"""Basic indexing on OpenCL: the CPU layer's index tuple applied to a `View`, then one
strided copy."""

from __future__ import annotations

from kuiper.registry import register
from layers.cpu import slice as cpu_slice
from layers.strided_util import StridedCopyLayer, View


class DeviceIndex(StridedCopyLayer):
    def output_views(self, in_specs, out_specs):
        return [View.of(in_specs[0].shape).index(self.index)]


@register("Tensor.slice", backend="opencl")
class Slice(DeviceIndex, cpu_slice.Slice):
    pass


@register("Tensor.select", "torch.select", backend="opencl")
class Select(DeviceIndex, cpu_slice.Select):
    pass


@register("torch.narrow", "Tensor.narrow", backend="opencl")
class Narrow(DeviceIndex, cpu_slice.Narrow):
    pass
