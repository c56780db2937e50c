"""1-D transposed convolution on OpenCL: conv_transpose2d's binding (its kernels are written
for volumes; a 1-D input is one with unit depth and height)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import conv_transpose1d
from kuiper.layers.opencl.conv_transpose2d import ConvTransposeBind


@register(backend="opencl")
class ConvTranspose1d(ConvTransposeBind, conv_transpose1d.ConvTranspose1d):
    pass
