"""3-D convolution on OpenCL: conv2d's binding, whose kernels are written for volumes."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import conv3d
from kuiper.layers.opencl.conv2d import ConvBind


@register(backend="opencl")
class Conv3d(ConvBind, conv3d.Conv3d):
    pass
