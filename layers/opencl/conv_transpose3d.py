"""3-D transposed convolution on OpenCL: conv_transpose2d's binding, whose kernels are written
for volumes."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import conv_transpose3d
from kuiper.layers.opencl.conv_transpose2d import ConvTransposeBind


@register(backend="opencl")
class ConvTranspose3d(ConvTransposeBind, conv_transpose3d.ConvTranspose3d):
    pass
