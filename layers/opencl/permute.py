"""Permute-like operators on OpenCL: one strided copy through the permuted view.

The CPU layer computed `perm`; permuting a view permutes its shape and strides together, and
`strided_copy` gathers the elements in the output's row-major order.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import permute
from kuiper.layers.opencl_helpers.strided import StridedCopyLayer, View


class DevicePermute(StridedCopyLayer):
    def output_views(self, in_specs, out_specs):
        return [View.of(in_specs[0].shape).permute(self.perm)]


@register(backend="opencl")
class Permute(DevicePermute, permute.Permute):
    pass


@register(backend="opencl")
class Transpose(DevicePermute, permute.Transpose):
    pass


@register(backend="opencl")
class T(DevicePermute, permute.T):
    pass


@register(backend="opencl")
class MatrixT(DevicePermute, permute.MatrixT):
    pass


@register(backend="opencl")
class NumpyT(DevicePermute, permute.NumpyT):
    pass


@register(backend="opencl")
class MoveDim(DevicePermute, permute.MoveDim):
    pass
