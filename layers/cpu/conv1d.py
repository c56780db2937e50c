"""1-D convolution (nn.Conv1d, F.conv1d): the N-d convolution of conv2d.py with one spatial axis.

Everything (padding modes, 'same'/'valid', groups, depthwise, im2col + GEMM) is shared: the
column matrix of a (N, C, L) input is (N, G, C/G*k, L_out), built by the same strided view.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu.conv2d import ConvNd


@register("nn.Conv1d", "F.conv1d", backend="cpu")
class Conv1d(ConvNd):
    ndim = 1
