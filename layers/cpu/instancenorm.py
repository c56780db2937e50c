"""InstanceNorm: normalise every channel of every sample over its spatial positions.

A row is one (sample, channel) plane of `prod(spatial)` values; with `affine` each channel then
gets a weight and a bias. Unbatched inputs (C, *spatial) are accepted like in PyTorch.

With `track_running_stats=True` an exported (eval-mode) InstanceNorm does *not* use the input's
statistics but the stored running ones, exactly like BatchNorm: then it is folded into a
per-channel scale and shift at load time.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.norm import RowLayout, RowNorm, channel_affine, fold_stats

SPATIAL_DIMS = {"nn.InstanceNorm1d": 1, "nn.InstanceNorm2d": 2, "nn.InstanceNorm3d": 3}


@register("nn.InstanceNorm1d", "nn.InstanceNorm2d", "nn.InstanceNorm3d", "F.instance_norm",
          backend="cpu")
class InstanceNorm(RowNorm):
    running: tuple[np.ndarray, np.ndarray] | None = None  # folded (scale, shift)

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.spatial = SPATIAL_DIMS.get(op.type)  # None for F.instance_norm: all dims after C
        layer.features = op.int_param("num_features") if op.has("num_features") else None
        functional = op.type.startswith("F.")
        if functional and not op.bool_param("use_input_stats", True):
            raise op.error("use_input_stats=False (normalising with running statistics) is "
                           "not supported for F.instance_norm; use nn.InstanceNorm with "
                           "track_running_stats=True")
        affine = op.bool_param("affine", False) and not functional
        shape = (layer.features,) if layer.features else None
        # F.instance_norm also lists running_mean/var; with use_input_stats they do not matter.
        layer.read_affine(op, affine, shape, ("input", "running_mean", "running_var", "weight",
                                              "bias"))
        if not functional and op.bool_param("track_running_stats", False):
            mean = op.weight("running_mean", shape)
            var = op.weight("running_var", mean.shape)
            layer.running = fold_stats(mean, var, layer.eps, layer.gamma, layer.beta)
        return layer

    def channel_axis(self, shape) -> int:
        if self.spatial is None:
            if len(shape) < 3:
                raise self.shape_error(f"input should be (N, C, *spatial), got shape "
                                       f"{tuple(shape)}")
            return 1
        if len(shape) not in (self.spatial + 1, self.spatial + 2):
            raise self.shape_error(f"input should be {self.spatial + 1}-D (unbatched) or "
                                   f"{self.spatial + 2}-D (batched), got shape {tuple(shape)}")
        return len(shape) - self.spatial - 1

    def layout(self, shape):
        axis = self.channel_axis(shape)
        channels = int(shape[axis])
        uses_features = self.gamma is not None or self.beta is not None or self.running
        if self.features and uses_features and channels != self.features:
            raise self.shape_error(f"input has {channels} channels (dim {axis}), expected "
                                   f"num_features={self.features}")
        inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
        if inner == 1 and not self.running:   # (0: an empty input, an empty output)
            raise self.shape_error(f"input shape {tuple(shape)} has 1 spatial element per "
                                   "channel; instance statistics need more than 1 (PyTorch "
                                   "refuses this too)")
        rows = int(np.prod(shape, dtype=np.int64)) // max(inner, 1)
        return RowLayout(rows=rows, length=inner, groups=channels, inner=inner,
                         n_params=channels)

    def forward(self, inputs):
        if self.running is None:
            return super().forward(inputs)
        x = inputs[0]
        return [channel_affine(x, *self.running, axis=self.channel_axis(x.shape))]
