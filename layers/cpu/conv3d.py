"""3-D convolution (nn.Conv3d, F.conv3d): the N-d convolution of conv2d.py with three spatial
axes (depth, height, width), as in video or volumetric (CT, MRI) models.

Everything (padding modes, 'same'/'valid', groups, im2col + GEMM) is shared: the column matrix
of a (N, C, D, H, W) input is (N, G, C/G*kd*kh*kw, OD*OH*OW), built by the same strided view.
Depthwise 3-D convolutions also go through im2col (one GEMM per group with K = kd*kh*kw); the
shifted-view shortcut of conv2d.py is written for planes.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu.conv2d import ConvNd


@register("nn.Conv3d", "F.conv3d", backend="cpu")
class Conv3d(ConvNd):
    ndim = 3
