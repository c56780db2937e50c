"""Permute-like operators on OpenCL: one strided copy through the permuted view.

The CPU layer computed `perm`; permuting a view permutes its shape and strides together, and
`strided_copy` gathers the elements in the output's row-major order.
"""

from __future__ import annotations

from kuiper.layers.cpu import permute
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View
from kuiper.registry import register


class DevicePermute(StridedCopyLayer):
    def output_views(self, in_specs, out_specs):
        return [View.of(in_specs[0].shape).permute(self.perm)]


@register("Tensor.permute", "torch.permute", backend="opencl")
class Permute(DevicePermute, permute.Permute):
    pass


@register("torch.transpose", "Tensor.transpose", backend="opencl")
class Transpose(DevicePermute, permute.Transpose):
    pass


@register("torch.t", "Tensor.t", backend="opencl")
class T(DevicePermute, permute.T):
    pass


@register("aten::mT", backend="opencl")
class MatrixT(DevicePermute, permute.MatrixT):
    pass


@register("aten::numpy_T", backend="opencl")
class NumpyT(DevicePermute, permute.NumpyT):
    pass


@register("aten::movedim", backend="opencl")
class MoveDim(DevicePermute, permute.MoveDim):
    pass
