"""Reshape-like operators on OpenCL: views of the input buffer, no kernel at all.

Every device array Kuiper allocates is C-contiguous, and these operators keep the row-major
element order, so the output *is* the input buffer with another shape. `allocate_outputs`
returns that view and `bind` has nothing to launch.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import reshape
from kuiper.layers.opencl_base import OpenCLLayer


class DeviceView(OpenCLLayer):
    """Mixin for OpenCL twins whose output is a reshaped view of input 0."""

    view_of_input = 0  # the executor hands bind the input's bytes with the output's shape

    def bind(self, inputs, outputs, in_specs, out_specs):
        self.launches = []


@register(backend="opencl")
class Reshape(DeviceView, reshape.Reshape):
    pass


@register(backend="opencl")
class Flatten(DeviceView, reshape.Flatten):
    pass


@register(backend="opencl")
class Squeeze(DeviceView, reshape.Squeeze):
    pass


@register(backend="opencl")
class Unsqueeze(DeviceView, reshape.Unsqueeze):
    pass


@register(backend="opencl")
class Unflatten(DeviceView, reshape.Unflatten):
    pass
