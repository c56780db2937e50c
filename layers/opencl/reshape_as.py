"""reshape_as on OpenCL: a view of the input's buffer, like every reshape."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import reshape_as
from kuiper.layers.opencl.reshape import DeviceView


@register(backend="opencl")
class ReshapeAs(DeviceView, reshape_as.ReshapeAs):
    pass
