"""OpenCL binds shared by the normalisation layers (see layers/common/norm.py for the maths).

`bind_channel_affine` launches the per-channel affine kernel (BatchNorm, InstanceNorm with
running stats); `RowNormOpenCL` is the bind of every row normalisation (LayerNorm, GroupNorm,
InstanceNorm): one work-group per row, tree reductions in local memory.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kuiper.layers.common.norm import channel_layout
from kuiper.layers.opencl_base import Launch, round_up


def bind_channel_affine(layer, x, y, scale, shift, shape: Sequence[int], axis: int = 1) -> Launch:
    """One launch of clkernels/batchnorm.cl's `channel_affine` (used by several layers)."""
    n = int(np.prod(shape, dtype=np.int64))
    channels, inner = channel_layout(shape, axis)
    vec = next((v for v in (8, 4) if inner % v == 0), 1)   # batchnorm.cl says why
    kernel = layer.kernel("channel_affine", [f"-DVEC={vec}"], stem="batchnorm")
    kernel.set_args(x.data, y.data, scale.data, shift.data, np.int32(n), np.int32(channels),
                    np.int32(inner))
    return Launch(kernel, (round_up(max(n // vec, 1), 64),))


class RowNormOpenCL:
    """OpenCL bind for a RowNorm: one work-group per row, tree reductions in local memory.

    Mix in before OpenCLLayer: `class LayerNorm(RowNormOpenCL, OpenCLLayer, cpu.LayerNorm)`.
    The kernel (named like the stem) takes x, y, gamma, beta, length, groups, inner, eps and a
    local scratch array of one float per work-item.
    """

    MAX_LOCAL = 256

    def bind(self, inputs, outputs, in_specs, out_specs):
        lay = self.layout(in_specs[0].shape)
        gamma, beta = self.affine_buffers(inputs, lay)
        kernel = self.kernel(self.stem)
        local = self._local_size(kernel, lay.length)
        kernel.set_args(inputs[0].data, outputs[0].data, gamma.data, beta.data,
                        np.int32(lay.length), np.int32(lay.groups), np.int32(lay.inner),
                        np.float32(self.eps), self.runtime.cl.LocalMemory(4 * local))
        self.launches = [Launch(kernel, (lay.rows * local,), (local,))] if lay.rows else []

    def affine_buffers(self, inputs, lay) -> tuple:
        """The device arrays of the weight and bias, kept alive with the layer. A missing
        weight is a weight of ones, a missing bias zeros: one kernel serves both."""
        gamma, beta = self.affine_params(inputs)
        if _on_host(gamma):
            gamma = self.upload(np.ones(lay.n_params, np.float32) if gamma is None else gamma)
        if _on_host(beta):
            beta = self.upload(np.zeros(lay.n_params, np.float32) if beta is None else beta)
        self._weights = (gamma, beta)
        return gamma, beta

    def _local_size(self, kernel, length: int) -> int:
        """A power of two (the tree reduction halves it), no larger than the row needs."""
        limit = min(self.MAX_LOCAL, self.runtime.device.max_work_group_size,
                    self.group_limit(kernel))
        local = 1
        while local * 2 <= limit and local < length:
            local *= 2
        return local


def _on_host(value) -> bool:
    return value is None or isinstance(value, np.ndarray)
