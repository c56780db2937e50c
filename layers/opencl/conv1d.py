"""1-D convolution on OpenCL: conv2d's binding with the input seen as (N, C, 1, 1, L)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import conv1d
from kuiper.layers.opencl.conv2d import ConvBind


@register(backend="opencl")
class Conv1d(ConvBind, conv1d.Conv1d):
    pass
