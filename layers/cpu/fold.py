"""Unfold (im2col) and Fold (col2im): sliding blocks of an image as columns, and back.

`F.unfold` is exactly the column matrix of a convolution (layers/cpu_helpers/im2col.py): for
an input (N, C, H, W) it returns (N, C*kh*kw, L), one column per position of the sliding
kh x kw block, L = bh * bw positions (the convolution output size for that kernel, stride,
padding and dilation). A convolution is then `weight.view(O, -1) @ unfold(x)`.

`F.fold` is the transpose: it takes such columns (N, C*kh*kw, L) and *adds* every column back
into an (N, C, *output_size) image at the positions its block covered. Overlapping blocks sum,
so fold(unfold(x)) is x times how many blocks cover each pixel, not x itself.

Both accept an unbatched input (one dim fewer), as PyTorch does.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.conv_geometry import conv_output_size
from kuiper.layers.cpu_helpers.im2col import col2im_add, im2col, pad_input


class SlidingBlocks(Layer):
    """The block geometry Fold and Unfold share: kernel, dilation, padding, stride (2 each)."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.kernel_size = tuple(op.ints_param("kernel_size", 2))
        layer.dilation = tuple(op.ints_param("dilation", 2, 1))
        layer.padding = tuple(op.ints_param("padding", 2, 0))
        layer.stride = tuple(op.ints_param("stride", 2, 1))
        for name, low in (("kernel_size", 1), ("dilation", 1), ("padding", 0), ("stride", 1)):
            if min(getattr(layer, name)) < low:
                raise op.error(f"{name}={getattr(layer, name)}: every entry must be >= {low}")
        return layer

    def blocks(self, size) -> tuple[int, int]:
        """(bh, bw): how many block positions fit along H and W of a `size` (H, W) image."""
        counts = tuple(conv_output_size(n, k, s, (p, p), d) for n, k, s, p, d in zip(
            size, self.kernel_size, self.stride, self.padding, self.dilation))
        if min(counts) < 1:
            raise self.shape_error(f"a spatial size of {tuple(size)} with padding "
                                   f"{self.padding} is too small for kernel_size "
                                   f"{self.kernel_size} with dilation {self.dilation}")
        return counts

    @property
    def taps(self) -> int:
        return self.kernel_size[0] * self.kernel_size[1]

    def flops(self, inputs, outputs):
        return 0  # data movement (fold also adds overlapping blocks: ignored)


@register("nn.Unfold", "F.unfold", backend="cpu")
class Unfold(SlidingBlocks):
    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        if len(shape) not in (3, 4):
            raise self.shape_error(f"unfold needs a 3-D (C, H, W) or 4-D (N, C, H, W) input, "
                                   f"got shape {tuple(shape)}")
        bh, bw = self.blocks(shape[-2:])
        out = (*shape[:-3], shape[-3] * self.taps, bh * bw)
        return [TensorSpec(out, inputs[0].dtype)]

    def forward(self, inputs):
        x = inputs[0]
        batched = x if x.ndim == 4 else x[None]
        blocks = self.blocks(x.shape[-2:])
        padded = pad_input(batched, [(p, p) for p in self.padding])
        cols = im2col(padded, self.kernel_size, self.stride, self.dilation, blocks)
        # im2col's (N, 1, C*kh*kw, L) lives in a reused workspace: copy it out
        # (the column count spelled out: reshape cannot infer a -1 from a batch of 0 images)
        rows = x.shape[-3] * self.taps
        return [cols.reshape(x.shape[:-3] + (rows, blocks[0] * blocks[1])).copy()]


@register("nn.Fold", "F.fold", backend="cpu")
class Fold(SlidingBlocks):
    @classmethod
    def from_operator(cls, op):
        layer = super().from_operator(op)
        layer.output_size = tuple(op.ints_param("output_size", 2))
        if min(layer.output_size) < 1:
            raise op.error(f"output_size={layer.output_size}: every entry must be >= 1")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        shape = inputs[0].shape
        bh, bw = self.blocks(self.output_size)
        if len(shape) not in (2, 3):
            raise self.shape_error(f"fold needs a 2-D (C*kh*kw, L) or 3-D (N, C*kh*kw, L) "
                                   f"input, got shape {tuple(shape)}")
        if shape[-2] % self.taps:
            raise self.shape_error(f"dim {len(shape) - 2} of the input ({shape[-2]}) must be "
                                   f"divisible by kh*kw = {self.taps} (kernel_size "
                                   f"{self.kernel_size})")
        if shape[-1] != bh * bw:
            raise self.shape_error(f"the last dim of the input ({shape[-1]}) must be the "
                                   f"number of blocks, {bh}*{bw} = {bh * bw} for output_size "
                                   f"{self.output_size}")
        out = (*shape[:-2], shape[-2] // self.taps, *self.output_size)
        return [TensorSpec(out, inputs[0].dtype)]

    def forward(self, inputs):
        cols = inputs[0]
        batched = cols if cols.ndim == 3 else cols[None]
        n, k = batched.shape[:2]
        channels = k // self.taps
        bh, bw = self.blocks(self.output_size)
        (ph, pw), (h, w) = self.padding, self.output_size
        image = np.zeros((n, channels, h + 2 * ph, w + 2 * pw), dtype=np.float32)
        col2im_add(batched.reshape(n, channels, *self.kernel_size, bh, bw), image,
                   self.stride, self.dilation)
        y = image[:, :, ph:ph + h, pw:pw + w].astype(cols.dtype)  # drop the padding
        return [y if cols.ndim == 3 else y[0]]
