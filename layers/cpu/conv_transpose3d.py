"""3-D transposed convolution (nn.ConvTranspose3d, F.conv_transpose3d): the N-d transposed
convolution of conv_transpose2d.py with three spatial axes, as in the decoder of a 3-D U-Net.

GEMM then col2im, output_padding, groups and dilation are all shared; the weight is
(Cin, Cout/groups, kd, kh, kw).
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu.conv_transpose2d import ConvTransposeNd


@register("nn.ConvTranspose3d", "F.conv_transpose3d", backend="cpu")
class ConvTranspose3d(ConvTransposeNd):
    ndim = 3
