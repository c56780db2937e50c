"""1-D convolution on OpenCL: conv2d's binding with the input seen as (N, C, 1, L)."""

from __future__ import annotations

from kuiper.registry import register
from layers.cpu import conv1d
from layers.opencl.conv2d import ConvBind


@register("nn.Conv1d", "F.conv1d", backend="opencl")
class Conv1d(ConvBind, conv1d.Conv1d):
    pass
