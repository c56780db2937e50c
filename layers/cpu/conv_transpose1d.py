"""1-D transposed convolution (nn.ConvTranspose1d, F.conv_transpose1d): the N-d transposed
convolution of conv_transpose2d.py with one spatial axis, as in the upsampling half of audio
models (a WaveNet-style vocoder, a 1-D U-Net).

GEMM then col2im, output_padding, groups and dilation are all shared; the weight is
(Cin, Cout/groups, k).
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu.conv_transpose2d import ConvTransposeNd


@register("nn.ConvTranspose1d", "F.conv_transpose1d", backend="cpu")
class ConvTranspose1d(ConvTransposeNd):
    ndim = 1
