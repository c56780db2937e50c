"""Softmax, LogSoftmax and Softmin along one dim (any dim, negative counts from the end).

    softmax(x)_i     = exp(x_i - m) / sum_j exp(x_j - m)        with m = max_j x_j
    log_softmax(x)_i = x_i - m - log(sum_j exp(x_j - m))
    softmin(x)       = softmax(-x)

Subtracting the maximum changes nothing mathematically (it cancels in the quotient) but keeps
every exponent <= 0, so exp never overflows: softmax([1000, 1000]) is [0.5, 0.5], not NaN.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import normalize_dim


class SoftmaxBase(Layer):
    log = False     # log_softmax
    negate = False  # softmin

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim", None) if op.param("dim", None) is not None else None
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        rank = len(x.shape)
        if self.dim is None:
            # nn.Softmax(dim=None): PyTorch's legacy rule picks dim 0 for 0-, 1- and 3-D inputs.
            self.axis = 0 if rank in (0, 1, 3) else 1
        else:
            self.axis = normalize_dim(self, self.dim, rank)
        return [TensorSpec(x.shape, x.dtype)]

    def split(self, shape) -> tuple[int, int, int]:
        """(outer, length, inner): the input seen as 3-D with the softmax dim in the middle."""
        shape = tuple(shape) or (1,)
        outer = int(np.prod(shape[:self.axis], dtype=np.int64))
        inner = int(np.prod(shape[self.axis + 1:], dtype=np.int64))
        return outer, shape[self.axis], inner

    def forward(self, inputs):
        x = -inputs[0] if self.negate else inputs[0]
        axis = self.axis if x.ndim else None
        with np.errstate(invalid="ignore"):  # a row with +inf is NaN, as in PyTorch
            shifted = x - np.max(x, axis=axis, keepdims=True)
            e = np.exp(shifted)
            total = np.sum(e, axis=axis, keepdims=True)
            y = shifted - np.log(total) if self.log else e / total
        return [y.astype(x.dtype, copy=False)]

    def flops(self, inputs, outputs):
        return 4 * outputs[0].numel  # max, subtract, exp, sum/divide


@register("nn.Softmax", "F.softmax", "torch.softmax", backend="cpu")
class Softmax(SoftmaxBase):
    pass


@register("nn.LogSoftmax", "F.log_softmax", "torch.log_softmax", backend="cpu")
class LogSoftmax(SoftmaxBase):
    log = True


@register("nn.Softmin", "F.softmin", backend="cpu")
class Softmin(SoftmaxBase):
    negate = True


@register("nn.Softmax2d", backend="cpu")
class Softmax2d(SoftmaxBase):
    """Softmax over the channels of every pixel: dim -3 of a (C, H, W) or (N, C, H, W) input."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = -3
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        if len(inputs[0].shape) not in (3, 4):
            raise self.shape_error(f"Softmax2d needs a 3-D (C, H, W) or 4-D (N, C, H, W) "
                                   f"input, got shape {tuple(inputs[0].shape)}")
        return super().infer(inputs)
