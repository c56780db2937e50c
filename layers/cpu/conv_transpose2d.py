"""Transposed convolution (nn.ConvTranspose2d, F.conv_transpose2d; the 1-D and 3-D ones
subclass ConvTransposeNd): GEMM, then col2im.

A transposed convolution is the backward pass of a convolution with respect to its input: every
input pixel *scatters* a kh x kw patch of weights into the output, s pixels apart,

    out[n, o, y*s + i*d - p, x*s + j*d - p] += x[n, c, y, x] * w[c, o, i, j]

That is the convolution's im2col run backwards:
1. GEMM: `cols (N, G, Cout/G*kh*kw, H*W) = W^T (G, Cout/G*kh*kw, Cin/G) @ x (N, G, Cin/G, H*W)`,
   one column of patch values per input pixel;
2. col2im: add every column into the output at its kernel offsets (col2im_add in
   layers/cpu_helpers/im2col.py), on a canvas big enough for all patches; the output is the
   canvas cropped by `padding`.

`output_padding` only makes the output longer on the far side (to pick one of the several input
sizes a strided convolution maps to the same output size); the extra rows receive patches where
they exist and otherwise just the bias. The weight is (Cin, Cout/groups, kh, kw): note the order.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.base import finish_output
from kuiper.layers.cpu.conv2d import ConvGeometry, ConvNd
from kuiper.layers.cpu_helpers import im2col


class ConvTransposeNd(ConvNd):
    @classmethod
    def from_operator(cls, op):
        if isinstance(op.param("padding", 0), str):
            raise op.error(f"padding must be a list of integers for a transposed convolution, "
                           f"got '{op.param('padding')}'")
        op.str_param("padding_mode", "zeros", choices=("zeros",))  # all PyTorch supports
        layer = super().from_operator(op)
        layer.padding = op.ints_param("padding", cls.ndim, default=0)  # symmetric only
        if min(layer.padding) < 0:
            raise op.error(f"padding {layer.padding} must be >= 0")
        layer.output_padding = op.ints_param("output_padding", cls.ndim, default=0)
        for op_, s, d in zip(layer.output_padding, layer.stride, layer.dilation):
            if op_ < 0 or op_ >= max(s, d):
                raise op.error(f"output_padding {layer.output_padding} must be >= 0 and smaller "
                               f"than stride {layer.stride} or dilation {layer.dilation}")
        return layer

    def weight_shape(self, cin: int, cout: int, kernel) -> tuple[int, ...]:
        return (cin, cout // self.groups, *kernel)

    weight_shape_text = "(in_channels, out_channels / groups, kernel...)"

    def out_channels_of(self, w_shape) -> int:
        return w_shape[1] * self.groups

    def gemm_weights(self, w: np.ndarray, b: np.ndarray | None
                     ) -> tuple[np.ndarray, np.ndarray | None]:
        """W^T per group: (Cin, Cout/G, *k) -> (G, Cout/G*prod(k), Cin/G), made contiguous once."""
        g = self.groups
        w = np.asarray(w, dtype=np.float32).reshape(g, w.shape[0] // g, -1)
        wmat = np.ascontiguousarray(w.transpose(0, 2, 1))
        return wmat, None if b is None else np.ascontiguousarray(b, dtype=np.float32)

    def geometry(self, x_shape, w_shape) -> ConvGeometry:
        batched, n, c, size = self.split_input(x_shape)
        if len(w_shape) != self.ndim + 2:
            raise self.shape_error(f"weight should be {self.ndim + 2}-D, got {tuple(w_shape)}")
        cin, cout_g, *kernel = w_shape
        g = self.groups
        if cin % g:
            raise self.shape_error(f"weight {tuple(w_shape)} has {cin} input channels, not "
                                   f"divisible by groups={g}")
        if c != cin:
            raise self.shape_error(f"input has {c} channels but the weight {tuple(w_shape)} "
                                   f"expects {cin}")
        if c == 0:
            raise self.shape_error(f"input {tuple(x_shape)} has no channels: a transposed "
                                   "convolution needs at least one")
        out = [(s - 1) * st - 2 * p + d * (k - 1) + op + 1 for s, st, p, d, k, op in
               zip(size, self.stride, self.padding, self.dilation, kernel, self.output_padding)]
        if min(out) < 1:
            raise self.shape_error(f"input {tuple(x_shape)} gives an empty output {out} with "
                                   f"padding {self.padding}")
        return ConvGeometry(batched, n, c, size, cout_g * g, cin // g, tuple(kernel),
                            tuple((p, p) for p in self.padding), tuple(out))

    def flops(self, inputs, outputs):
        # every input element meets Cout/G * prod(kernel) weights
        w = self.weight_of(inputs)
        return 2 * int(np.prod(inputs[0].shape)) * int(np.prod(w[1:]))

    def forward(self, inputs, epilogue=None, residual=None, out=None):
        x = inputs[0]
        geo = self.call_geometry(inputs)
        if self.weight is None:
            wmat, bias = self.gemm_weights(inputs[1], inputs[2] if len(inputs) > 2 else None)
        else:
            wmat, bias = self.wmat, self.bvec
        g = self.groups
        pixels = int(np.prod(geo.size))   # (not -1: an empty batch has no size to infer)
        x = np.asarray(x, dtype=np.float32).reshape(geo.n, g, geo.cin_g, pixels)
        # 1. (G, Cout/G*K, Cin/G) @ (N, G, Cin/G, HW) -> one patch column per input pixel
        cols = np.matmul(wmat, x).reshape(geo.n, geo.cout, *geo.kernel, *geo.size)
        # 2. scatter the patches onto a canvas that holds them all (and the output window)
        full = [max((s - 1) * st + d * (k - 1) + 1, p + o) for s, st, d, k, (p, _), o in
                zip(geo.size, self.stride, self.dilation, geo.kernel, geo.pads, geo.out)]
        canvas = np.zeros((geo.n, geo.cout, *full), np.float32)
        im2col.col2im_add(cols, canvas, self.stride, self.dilation)
        crop = tuple(slice(p, p + o) for (p, _), o in zip(geo.pads, geo.out))
        y = np.ascontiguousarray(canvas[(Ellipsis, *crop)])
        if bias is not None:
            y += bias.reshape(-1, *(1,) * self.ndim)
        # a fused epilogue (ConvNd.accepts_epilogue) runs in place on this fresh array
        return [finish_output(y.reshape(geo.out_shape), inputs, epilogue, residual, out)]


@register("nn.ConvTranspose2d", "F.conv_transpose2d", backend="cpu")
class ConvTranspose2d(ConvTransposeNd):
    ndim = 2
