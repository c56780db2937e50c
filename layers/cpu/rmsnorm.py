"""RMSNorm: LayerNorm without the centring, as in T5 and LLaMA.

Every trailing block of prod(normalized_shape) values is one row (the same rows as LayerNorm,
whose layout this reuses); each is divided by its root mean square and multiplied by `weight`:

    y = x / sqrt(mean(x^2) + eps) * weight

There is no bias and no mean subtraction: half the reductions of LayerNorm. `eps=None` (the
default of nn.RMSNorm and F.rms_norm) means machine epsilon of the input's dtype,
torch.finfo(dtype).eps, not LayerNorm's 1e-5.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.common.norm import tensor_inputs
from kuiper.layers.cpu.layernorm import LayerNorm


@register("nn.RMSNorm", "F.rms_norm", backend="cpu")
class RMSNorm(LayerNorm):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.normalized = cls.normalized_shape(op)
        if op.param("eps", None) is None:
            layer.eps = float(np.finfo(np.float32).eps)  # the float32 models Kuiper runs
        else:
            layer.eps = op.float_param("eps")
        if op.type.startswith("F."):
            layer.slots = tensor_inputs(op, ("input", "weight"))  # a weight computed in the graph
        else:
            layer.expect_inputs(op.inputs, 1)
            affine = op.bool_param("elementwise_affine", True)
            layer.gamma = op.weight("weight", layer.normalized, optional=not affine)
        return layer

    def forward(self, inputs):
        x = inputs[0]
        lay = self.layout(x.shape)
        # float32, as the OpenCL kernel and PyTorch: a square past float32's maximum gives
        # inf there, and x / inf a zero, where float64 gave +-1 (layers/common/norm.py)
        dtype = np.result_type(x.dtype, np.float32)  # (float16 in float32, float64 as is)
        rows = x.reshape(lay.rows, lay.length).astype(dtype, copy=False)
        with np.errstate(over="ignore", invalid="ignore"):
            y = rows / np.sqrt((rows * rows).mean(axis=1, keepdims=True) + dtype.type(self.eps))
        gamma, _ = self.affine_params(inputs)
        if gamma is not None:
            y = y * np.ravel(gamma)
        return [y.reshape(x.shape).astype(x.dtype)]

    def flops(self, inputs, outputs):
        return 4 * inputs[0].numel  # square, sum, scale, weight
