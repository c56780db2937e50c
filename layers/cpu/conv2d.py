"""Convolution (nn.Conv2d, F.conv2d; conv1d and conv3d subclass this): im2col + one batched GEMM.

    out[n, o] = bias[o] + sum over c in o's group, (i, j) of w[o, c, i, j] * x[n, c, y*s+i*d, ...]

How it runs (layers/cpu_helpers/im2col.py explains the column matrix):
- pad the input (zeros, reflect, replicate or circular) unless the padding is 0;
- build `cols (N, G, K, P)` with one strided copy, then `W (G, Cout/G, K) @ cols` with
  np.matmul, which calls BLAS once per (image, group) and lands directly in NCHW order;
- a 1x1 kernel with stride 1 needs no im2col: the input already is the column matrix;
- with many channels and large images, one GEMM per kernel tap reading the padded input in
  place beats building the column matrix (layers/cpu_helpers/tap_gemm.py; `lowering` picks the
  method);
- with one input channel per group (depthwise) one GEMM over all channels does not exist (each
  channel has its own weights), so we work on tap_gemm's wide grid, where each shifted view
  is contiguous: add up kh*kw shifted views, each scaled by its weight, or (the default) copy
  them into a per-channel column matrix, a block of channels at a time, for one batched matmul
  (`depthwise_lowering`).

PNNX writes `nn.Conv2d` with `@weight` (Cout, Cin/groups, kh, kw) and `@bias`; a BatchNorm after
a conv is already folded into them (`convbn2d_N`). `F.conv2d` takes the weight (and bias) as
extra inputs and has no in/out_channels. `padding` is a list, or the string 'same' / 'valid'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer, finish_output
from kuiper.layers.common import conv_geometry
from kuiper.layers.common.input_dtypes import expect_floats
from kuiper.layers.cpu_helpers import im2col, tap_gemm

PADDING_MODES = tuple(conv_geometry.PAD_MODES)


@dataclass(frozen=True)
class ConvGeometry:
    """The shapes of one convolution call, checked once (shared with the OpenCL twin)."""

    batched: bool                # False: an unbatched (C, *size) input, as PyTorch allows
    n: int                       # batch
    c: int                       # input channels
    size: tuple[int, ...]        # input spatial size
    cout: int                    # output channels
    cin_g: int                   # input channels per group
    kernel: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]  # (before, after) per spatial axis
    out: tuple[int, ...]         # output spatial size

    @property
    def out_shape(self) -> tuple[int, ...]:
        shape = (self.n, self.cout, *self.out)
        return shape if self.batched else shape[1:]


class ConvNd(Layer):
    """N-d convolution; subclasses fix `ndim` (2 here, 1 for Conv1d, 3 for Conv3d)."""

    ndim = 2
    # How a general (not pointwise, not depthwise) convolution becomes GEMMs: "im2col" (one
    # GEMM over a column matrix), "taps" (one GEMM per kernel tap, 2-D only, needs direct BLAS),
    # or "auto" (tap_gemm.prefer_taps decides per shape). Tests set it to check both.
    lowering = "auto"
    # How a depthwise convolution runs on tap_gemm's grid: "taps", "columns" or "auto"
    # (tap_gemm.depthwise_taps); tests set it to check both.
    depthwise_lowering = "auto"
    accepts_epilogue = True  # a following activation / residual add is applied as it writes
    writes_into = True       # forward(..., out=) computes into a preallocated output

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        nd = cls.ndim
        layer.stride = op.ints_param("stride", nd, default=1)
        layer.dilation = op.ints_param("dilation", nd, default=1)
        layer.groups = op.int_param("groups", 1)
        layer.padding = layer.read_padding(op)
        layer.padding_mode = op.str_param("padding_mode", "zeros", choices=PADDING_MODES)
        if min(layer.stride) < 1 or min(layer.dilation) < 1 or layer.groups < 1:
            raise op.error(f"stride {layer.stride}, dilation {layer.dilation} and groups "
                           f"{layer.groups} must all be >= 1")
        if layer.padding == "same" and max(layer.stride) > 1:
            raise op.error(f"padding='same' needs stride 1 (as in PyTorch), got {layer.stride}")
        layer.weight = layer.bias = None
        if op.type.startswith("nn."):
            layer.read_module_weights(op)
        else:  # F.convNd: weight/bias are inputs, or attributes when pnnx folded them in
            layer.weight = op.weight("weight", optional=True)
            layer.bias = op.weight("bias", optional=True)
            if layer.weight is not None:
                layer.check_weights(op)
        if layer.weight is not None:
            layer.wmat, layer.bvec = layer.gemm_weights(layer.weight, layer.bias)
        return layer

    def check_weights(self, op) -> None:
        """The weight and bias as attributes: an F.convNd's folded ones are not checked
        against in/out_channels by read_module_weights, so at least against each other."""
        w, b, nd = self.weight, self.bias, self.ndim
        if w.ndim != nd + 2 or w.shape[0] % self.groups:
            raise op.error(f"@weight {tuple(w.shape)} should be {nd + 2}-D "
                           f"{self.weight_shape_text}, its first axis divisible by "
                           f"groups={self.groups}")
        cout = self.out_channels_of(w.shape)
        if b is not None and tuple(b.shape) != (cout,):
            raise op.error(f"@bias {tuple(b.shape)} should hold one value per output channel "
                           f"of @weight {tuple(w.shape)}: ({cout},)")

    weight_shape_text = "(out_channels, in_channels / groups, kernel...)"

    def out_channels_of(self, w_shape) -> int:
        return w_shape[0]

    def read_padding(self, op) -> str | list[tuple[int, int]]:
        """'same', 'valid', or (before, after) per spatial axis.

        pnnx writes one number per axis, except when it fused a BatchNorm into a 'same' conv
        with an even kernel: then the padding is asymmetric and comes in F.pad's order, last
        axis first: `padding=(left,right,top,bottom)`.
        """
        nd = self.ndim
        if isinstance(op.param("padding", 0), str):
            return op.str_param("padding", choices=("same", "valid"))
        values = op.ints_param("padding", default=0)
        if values and min(values) < 0:   # (an empty list is refused by the count below)
            raise op.error(f"padding {values} must be >= 0")
        if len(values) == 2 * nd:
            return [(values[2 * a], values[2 * a + 1]) for a in reversed(range(nd))]
        return [(p, p) for p in op.ints_param("padding", nd, default=0)]

    def read_module_weights(self, op) -> None:
        """nn.ConvNd: check the weight against in/out_channels, groups and kernel_size."""
        cin, cout = op.int_param("in_channels"), op.int_param("out_channels")
        kernel = op.ints_param("kernel_size", self.ndim)
        g = self.groups
        if cin < 1 or cout < 1:
            raise op.error(f"in_channels={cin} and out_channels={cout} must both be >= 1")
        if cin % g or cout % g:
            raise op.error(f"in_channels={cin} and out_channels={cout} must both be divisible "
                           f"by groups={g}")
        self.weight = op.weight("weight", self.weight_shape(cin, cout, kernel))
        if op.bool_param("bias", True):
            self.bias = op.weight("bias", (cout,))

    def weight_shape(self, cin: int, cout: int, kernel) -> tuple[int, ...]:
        return (cout, cin // self.groups, *kernel)

    def gemm_weights(self, w: np.ndarray, b: np.ndarray | None
                     ) -> tuple[np.ndarray, np.ndarray | None]:
        """The GEMM's left operand `[W | b]`, (G, Cout/G, Cin/G*prod(k) [+1]).

        W is a free reshape of PyTorch's (Cout, Cin/G, *k) layout; the bias, if any, becomes one
        more column (see im2col's `ones_row`). Made once in from_operator for module weights.
        """
        g = self.groups
        wmat = np.asarray(w, dtype=np.float32).reshape(g, w.shape[0] // g, -1)
        if b is not None:
            b = np.ascontiguousarray(b, dtype=np.float32)
            wmat = np.concatenate([wmat, b.reshape(g, -1, 1)], axis=2)
        return np.ascontiguousarray(wmat), b

    # --- shapes ---------------------------------------------------------------------------------
    def weight_of(self, inputs) -> tuple[int, ...]:
        """Shape of the weight: the module's, or that of the second input for F.convNd."""
        if self.weight is not None:
            return tuple(self.weight.shape)
        if len(inputs) < 2:
            raise self.op.error("the weight is neither an attribute (@weight) nor an input")
        return tuple(inputs[1].shape)

    def split_input(self, x_shape) -> tuple[bool, int, int, tuple[int, ...]]:
        """(batched, N, C, spatial size); rank ndim+1 is an unbatched sample."""
        nd = self.ndim
        if len(x_shape) not in (nd + 1, nd + 2):
            raise self.shape_error(f"input should be {nd + 1}-D (C, L...) or {nd + 2}-D "
                                   f"(N, C, L...), got shape {tuple(x_shape)}")
        batched = len(x_shape) == nd + 2
        n, c, *size = x_shape if batched else (1, *x_shape)
        return batched, n, c, tuple(size)

    def geometry(self, x_shape, w_shape) -> ConvGeometry:
        batched, n, c, size = self.split_input(x_shape)
        if len(w_shape) != self.ndim + 2:
            raise self.shape_error(f"weight should be {self.ndim + 2}-D, got {tuple(w_shape)}")
        cout, cin_g, *kernel = w_shape
        g = self.groups
        if cout % g:
            raise self.shape_error(f"weight {tuple(w_shape)} has {cout} output channels, not "
                                   f"divisible by groups={g}")
        if c != cin_g * g:
            raise self.shape_error(f"input has {c} channels but the weight {tuple(w_shape)} with "
                                   f"groups={g} expects {cin_g * g}")
        if c == 0:
            raise self.shape_error(f"input {tuple(x_shape)} has no channels: a convolution "
                                   "needs at least one")
        pads = conv_geometry.resolve_padding(self.padding, kernel, self.dilation)
        out = [conv_geometry.conv_output_size(*a)
               for a in zip(size, kernel, self.stride, pads, self.dilation)]
        if min(out) < 1:
            raise self.shape_error(f"input {tuple(x_shape)} is too small for kernel {kernel} with "
                                   f"dilation {self.dilation} and padding {pads}")
        if self.padding_mode in ("reflect", "circular"):
            limit = "smaller than" if self.padding_mode == "reflect" else "at most"
            for s, (lo, hi) in zip(size, pads):
                if max(lo, hi) > s or (self.padding_mode == "reflect" and max(lo, hi) == s):
                    raise self.shape_error(f"{self.padding_mode} padding {pads} must be {limit} "
                                           f"the input size {size}")
        return ConvGeometry(batched, n, c, size, cout, cin_g, tuple(kernel), tuple(pads),
                            tuple(out))

    def call_geometry(self, inputs) -> ConvGeometry:
        """geometry() of a forward call, kept for the last shapes seen (it costs more Python
        time than a small convolution's arithmetic)."""
        key = (inputs[0].shape, self.weight_of(inputs))
        if getattr(self, "_geo_key", None) != key:
            self._geo, self._geo_key = self.geometry(*key), key
        return self._geo

    def infer(self, inputs):
        self.expect_inputs(inputs, 1, 2, 3)
        expect_floats(self, inputs)  # the input, and an F.convNd's weight and bias
        geo = self.geometry(inputs[0].shape, self.weight_of(inputs))
        if len(inputs) == 3 and tuple(inputs[2].shape) != (geo.cout,):
            raise self.shape_error(f"bias should have shape ({geo.cout},), got "
                                   f"{tuple(inputs[2].shape)}")
        return [TensorSpec.of(geo.out_shape, inputs[0].dtype)]

    def flops(self, inputs, outputs):
        # every output element is a dot product over Cin/G * prod(kernel) terms
        return 2 * outputs[0].numel * int(np.prod(self.weight_of(inputs)[1:]))

    # --- compute --------------------------------------------------------------------------------
    def forward(self, inputs, epilogue=None, residual=None, out=None):
        x = inputs[0]
        geo = self.call_geometry(inputs)
        if self.weight is None:  # F.convNd: the weight arrives as an input, reshape it per call
            wmat, bias = self.gemm_weights(inputs[1], inputs[2] if len(inputs) > 2 else None)
        else:
            wmat, bias = self.wmat, self.bvec
        if geo.n == 0:   # a batch of no images: an empty output (PyTorch's)
            y = np.empty(geo.out_shape, np.float32)
            return [finish_output(y, inputs, epilogue, residual, out)]
        x = np.asarray(x, dtype=np.float32).reshape(geo.n, geo.c, *geo.size)
        xp = im2col.pad_input(x, geo.pads, self.padding_mode)
        g, k = self.groups, geo.cin_g * int(np.prod(geo.kernel))
        # `into`: where the GEMM may write directly (the caller's `out`, as (N, Cout, pixels))
        into = None if out is None else out.reshape(geo.n, geo.cout, -1)
        if geo.cin_g == 1 and g > 1 and self.ndim <= 2:  # tap_gemm works on planes
            # the epilogue rides on the copy that cuts the output grid (tap_gemm.cut_grid)
            y = self._depthwise(xp, wmat[..., :k], bias, geo, epilogue, residual, out)
            epilogue = None
        elif all(kk == 1 for kk in geo.kernel) and all(s == 1 for s in self.stride):
            # pointwise: the (padded) input already is the column matrix, no copy at all
            cols = np.ascontiguousarray(xp).reshape(geo.n, g, k, -1)
            y = gemm(wmat[..., :k], cols, into).reshape(geo.n, geo.cout, -1)
            if bias is not None:
                y += bias[:, None]
        elif self.use_taps(geo):
            write = epilogue.writer(residual) if epilogue else None
            y = tap_gemm.conv2d_taps(xp, self.taps_of(inputs), bias, geo.kernel, self.stride,
                                     self.dilation, geo.out, write, out)
            epilogue = None
        else:
            cols = im2col.im2col(xp, geo.kernel, self.stride, self.dilation, geo.out, g,
                                 ones_row=bias is not None)
            y = gemm(wmat, cols, into)  # [W | b] @ [cols; 1]: the bias comes with the product
        return [finish_output(y.reshape(geo.out_shape), inputs, epilogue, residual, out)]

    def use_taps(self, geo: ConvGeometry) -> bool:
        if self.lowering == "im2col" or self.ndim != 2:
            return False
        if self.lowering == "taps":
            return tap_gemm.available()
        return tap_gemm.prefer_taps(geo.cin_g, geo.kernel, self.stride, geo.out)

    def taps_of(self, inputs) -> np.ndarray:
        """The weight as one matrix per kernel tap, made once for a module's own weight."""
        if self.weight is None:
            return tap_gemm.tap_weights(inputs[1], self.groups)
        if getattr(self, "_taps", None) is None:
            self._taps = tap_gemm.tap_weights(self.weight, self.groups)
        return self._taps

    def _depthwise(self, xp: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                   geo: ConvGeometry, epilogue, residual, out) -> np.ndarray:
        """One input channel per group: tap_gemm's grid with a multiply-add per tap.

        A 1-D convolution is the 2-D one of a single row: add a unit height axis."""
        lift = (1,) * (2 - len(geo.out))
        xp = xp.reshape(geo.n, geo.c, *lift, *xp.shape[2:])
        write = None
        if epilogue:  # the residual as the grid's output is cut: (N, Cout, *lifted size)
            r = None if residual is None else residual.reshape(geo.n, geo.cout, *lift, *geo.out)
            write = epilogue.writer(r)
        target = None if out is None else out.reshape(geo.n, geo.cout, *lift, *geo.out)
        y = tap_gemm.depthwise_taps(xp, w, bias, lift + geo.kernel, lift + tuple(self.stride),
                                    lift + tuple(self.dilation), lift + geo.out, write, target,
                                    self.depthwise_lowering)
        return y.reshape(geo.n, geo.cout, *geo.out)


def gemm(w: np.ndarray, cols: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(G, M, K) @ (N, G, K, P) -> (N, G, M, P): one BLAS call per (image, group).

    `out`, when given, is a contiguous (N, G*M, P) array the product is written into."""
    if w.shape[0] == 1:  # no groups: (M, K) @ (N, K, P), the weight broadcast over images
        return np.matmul(w[0], cols[:, 0], out=out)
    if out is not None:
        return np.matmul(w, cols, out=out.reshape(cols.shape[0], w.shape[0], w.shape[1], -1))
    return np.matmul(w, cols)


@register("nn.Conv2d", "F.conv2d", backend="cpu")
class Conv2d(ConvNd):
    ndim = 2
