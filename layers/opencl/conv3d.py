"""3-D convolution on OpenCL: conv2d's binding, whose kernels are written for volumes."""

from __future__ import annotations

from kuiper.layers.cpu import conv3d
from kuiper.layers.opencl.conv2d import ConvBind
from kuiper.core.registry import register


@register(backend="opencl")
class Conv3d(ConvBind, conv3d.Conv3d):
    pass
