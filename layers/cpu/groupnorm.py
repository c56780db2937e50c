"""GroupNorm: split the C channels of each sample into G groups and normalise each group.

For x of shape (N, C, *spatial) with C divisible by G, a row is one group of C/G channels of
one sample (contiguous in memory), normalised by its mean and variance; then each channel gets
its own `weight` and `bias`. G = 1 normalises the whole sample; G = C is InstanceNorm with a
per-channel affine. Shared row machinery: RowNorm (layers/common/norm.py).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.norm import RowLayout, RowNorm


@register("nn.GroupNorm", "F.group_norm", backend="cpu")
class GroupNorm(RowNorm):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.num_groups = op.int_param("num_groups")
        if layer.num_groups < 1:
            raise op.error(f"num_groups={layer.num_groups} must be >= 1")
        # pnnx leaves out num_channels when affine=False: then the input decides.
        layer.channels = op.int_param("num_channels") if op.has("num_channels") else None
        if layer.channels is not None and layer.channels % layer.num_groups:
            raise op.error(f"num_channels={layer.channels} is not divisible by num_groups="
                           f"{layer.num_groups}")
        affine = op.bool_param("affine", True) and not op.type.startswith("F.")
        layer.read_affine(op, affine, (layer.channels,) if layer.channels else None)
        return layer

    def layout(self, shape):
        if len(shape) < 2:
            raise self.shape_error(f"input should be (N, C, ...), got shape {tuple(shape)}")
        n, channels, groups = shape[0], shape[1], self.num_groups
        if self.channels is not None and channels != self.channels:
            raise self.shape_error(f"input has {channels} channels, expected {self.channels}")
        if channels % groups:
            raise self.shape_error(f"input has {channels} channels, not divisible by "
                                   f"num_groups={groups}")
        inner = int(np.prod(shape[2:], dtype=np.int64))
        if n * (channels // groups) * inner == 1:  # PyTorch's _verify_batch_size, eval too
            raise self.shape_error(f"input shape {tuple(shape)} with {groups} groups has 1 "
                                   "value per group over the batch; PyTorch expects more than "
                                   "1 value")
        return RowLayout(rows=n * groups, length=channels // groups * inner, groups=groups,
                         inner=inner, n_params=channels)
