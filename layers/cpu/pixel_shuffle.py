"""PixelShuffle, PixelUnshuffle, ChannelShuffle: reshape, permute, reshape.

None of them computes anything; each is a fixed rearrangement that is easiest to see as a
transpose of a higher-dimensional view of the same buffer (r = the factor, B = leading dims):

    PixelShuffle    (B, C*r*r, H, W)  as (B, C, r, r, H, W) -> permute (0,1,4,2,5,3)
                                                            -> (B, C, H*r, W*r)
    PixelUnshuffle  (B, C, H*r, W*r)  as (B, C, H, r, W, r) -> permute (0,1,3,5,2,4)
                                                            -> (B, C*r*r, H, W)
    ChannelShuffle  (N, C, *)         as (N, g, C/g, rest)  -> permute (0,2,1,3) -> (N, C, *)

Each class only works out that `plan`; NumPy does the moves, and the OpenCL twin turns the
same plan into one strided copy.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer


class ShuffleLayer(Layer):
    """Subclasses implement `plan(shape) -> (view_shape, perm, out_shape)`."""

    def plan(self, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...],
                                                     tuple[int, ...]]:
        raise NotImplementedError(f"{type(self).__name__}.plan")

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        self.view_shape, self.perm, out_shape = self.plan(tuple(x.shape))
        return [TensorSpec(out_shape, x.dtype)]

    def forward(self, inputs):
        x = inputs[0].reshape(self.view_shape).transpose(self.perm)
        return [np.ascontiguousarray(x).reshape(self.out_shape)]

    def positive_factor(self, key: str) -> int:
        value = self.op.int_param(key)
        if value <= 0:
            raise self.op.error(f"{key}={value} should be a positive integer")
        return value

    def leading(self, shape, what: str) -> int:
        if len(shape) < 3:
            raise self.shape_error(f"{what} expects at least a 3-D input (..., C, H, W), got "
                                   f"shape {shape}")
        return int(np.prod(shape[:-3], dtype=np.int64))


@register("nn.PixelShuffle", "F.pixel_shuffle", backend="cpu")
class PixelShuffle(ShuffleLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.r = layer.positive_factor("upscale_factor")
        return layer

    def plan(self, shape):
        b, r = self.leading(shape, "pixel_shuffle"), self.r
        c, h, w = shape[-3:]
        if c % (r * r):
            raise self.shape_error(f"channels ({c}, dim -3 of {shape}) must be divisible by "
                                   f"upscale_factor^2 = {r * r}")
        self.out_shape = shape[:-3] + (c // (r * r), h * r, w * r)
        return (b, c // (r * r), r, r, h, w), (0, 1, 4, 2, 5, 3), self.out_shape


@register("nn.PixelUnshuffle", "F.pixel_unshuffle", backend="cpu")
class PixelUnshuffle(ShuffleLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.r = layer.positive_factor("downscale_factor")
        return layer

    def plan(self, shape):
        b, r = self.leading(shape, "pixel_unshuffle"), self.r
        c, h, w = shape[-3:]
        if h % r or w % r:
            raise self.shape_error(f"height and width ({h}x{w} in {shape}) must be divisible "
                                   f"by downscale_factor={r}")
        self.out_shape = shape[:-3] + (c * r * r, h // r, w // r)
        return (b, c, h // r, r, w // r, r), (0, 1, 3, 5, 2, 4), self.out_shape


@register("nn.ChannelShuffle", "F.channel_shuffle", "aten::channel_shuffle", backend="cpu")
class ChannelShuffle(ShuffleLayer):
    """`F.channel_shuffle(x, g)` exports as `aten::channel_shuffle` with g as input 1 (a
    constant), nn.ChannelShuffle as a `groups` parameter."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.groups = layer.positive_factor("groups") if op.has("groups") else None
        return layer

    def infer(self, inputs):
        if self.groups is None:
            self.expect_inputs(inputs, 2)
            if not inputs[1].known or np.size(inputs[1].value) != 1:
                raise self.op.error("needs a `groups` parameter or a constant groups input, "
                                    f"got {inputs[1]}")
            self.groups = int(np.asarray(inputs[1].value).reshape(-1)[0])
            if self.groups <= 0:
                raise self.op.error(f"groups={self.groups} should be a positive integer")
        return super().infer(inputs[:1])

    def forward(self, inputs):
        return super().forward(inputs[:1])

    def plan(self, shape):
        g = self.groups
        if len(shape) < 3:
            raise self.shape_error(f"channel_shuffle expects at least a 3-D input (N, C, ...), "
                                   f"got shape {shape}")
        n, c = shape[:2]
        if c % g:
            raise self.shape_error(f"channels ({c} in {shape}) must be divisible by "
                                   f"groups={g}")
        rest = int(np.prod(shape[2:], dtype=np.int64))
        self.out_shape = shape
        return (n, g, c // g, rest), (0, 2, 1, 3), shape
