"""LayerNorm: normalise each sample over its trailing `normalized_shape` dims.

For x of shape (..., *normalized_shape) every trailing block of prod(normalized_shape) values is
one row: subtract its mean, divide by sqrt(variance + eps), then (elementwise_affine) multiply by
`weight` and add `bias`, both of shape normalized_shape. Transformers apply it to (N, T, E) with
normalized_shape = (E,). The row machinery is shared with GroupNorm/InstanceNorm
(layers/common/norm.py).
"""

from __future__ import annotations

import math

from kuiper.core.registry import register
from kuiper.layers.common.norm import RowLayout, RowNorm


@register("nn.LayerNorm", "F.layer_norm", backend="cpu")
class LayerNorm(RowNorm):
    @staticmethod
    def normalized_shape(op) -> tuple[int, ...]:
        """The trailing dims normalised over (RMSNorm reads them the same way)."""
        normalized = tuple(op.ints_param("normalized_shape"))
        if any(d < 1 for d in normalized):
            raise op.error(f"normalized_shape={normalized}: every dim must be >= 1")
        return normalized

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.normalized = cls.normalized_shape(op)
        # pnnx writes elementwise_affine=False for LayerNorm(bias=False) yet may keep @weight;
        # read_affine takes whatever weights the operator carries.
        affine = op.bool_param("elementwise_affine", True) and not op.type.startswith("F.")
        layer.read_affine(op, affine, layer.normalized)
        return layer

    def layout(self, shape):
        k = len(self.normalized)
        if len(shape) < k or tuple(shape[len(shape) - k:]) != self.normalized:
            raise self.shape_error(f"input shape {tuple(shape)} should end with "
                                   f"normalized_shape {self.normalized}")
        length = math.prod(self.normalized)   # (math.prod: a tenth of np.prod's call cost)
        rows = math.prod(shape) // length
        return RowLayout(rows=rows, length=length, groups=1, inner=1, n_params=length)
