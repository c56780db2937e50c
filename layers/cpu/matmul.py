"""Matrix products: torch.matmul / mm / bmm, and addmm / baddbmm (beta*input + alpha*a@b).

torch.matmul is the general one: 1-D operands act as a row (left) or column (right) vector,
leading dims broadcast. mm and bmm are the strict 2-D and 3-D special cases, checked as such so
that a model that relies on their stricter rules fails loudly rather than silently broadcasting.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer, finish_output
from kuiper.layers.common.matmul_shapes import MatmulShapes, matmul_shapes


@register("torch.matmul", "torch.mm", "torch.bmm", "torch.addmm", "torch.baddbmm", backend="cpu")
class Matmul(Layer):
    # The rank both operands must have in the strict variants (torch.matmul accepts any).
    STRICT_RANKS: ClassVar[dict[str, int]] = {"torch.mm": 2, "torch.addmm": 2, "torch.bmm": 3,
                                              "torch.baddbmm": 3}
    accepts_epilogue = True  # a following activation / residual add runs on the fresh output

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        # addmm/baddbmm take (input, mat1, mat2): the product operands come last.
        layer.has_input = op.type in ("torch.addmm", "torch.baddbmm")
        layer.alpha = op.float_param("alpha", 1.0) if layer.has_input else 1.0
        layer.beta = op.float_param("beta", 1.0) if layer.has_input else 0.0
        return layer

    def _shapes(self, a: tuple[int, ...], b: tuple[int, ...]) -> MatmulShapes:
        rank = self.STRICT_RANKS.get(self.type)
        if rank is not None and (len(a) != rank or len(b) != rank):
            raise self.shape_error(f"both operands should be {rank}-D, got {a} and {b}")
        if rank == 3 and a[0] != b[0]:
            raise self.shape_error(f"bmm needs equal batch sizes, got {a} and {b} "
                                   "(use torch.matmul to broadcast)")
        try:
            return matmul_shapes(a, b)
        except ValueError as e:
            raise self.shape_error(str(e)) from None

    def infer(self, inputs):
        self.expect_inputs(inputs, 3 if self.has_input else 2)
        a, b = inputs[-2], inputs[-1]
        shapes = self._shapes(a.shape, b.shape)
        dtype = np.result_type(a.dtype, b.dtype)
        if self.has_input:
            bias = inputs[0].shape
            try:
                if np.broadcast_shapes(bias, shapes.out) != shapes.out:
                    raise ValueError
            except ValueError:
                raise self.shape_error(f"input {bias} does not broadcast to the product's shape "
                                       f"{shapes.out}") from None
        self.shapes = shapes
        return [TensorSpec.of(shapes.out, dtype)]

    def forward(self, inputs, epilogue=None, residual=None):
        a, b = inputs[-2], inputs[-1]
        out = np.matmul(a, b)
        if self.has_input:
            if self.alpha != 1.0:
                out = out * out.dtype.type(self.alpha)
            # As in torch: beta == 0 ignores `input` entirely (NaN/inf in it do not leak).
            if self.beta != 0.0:
                out = out + inputs[0] * out.dtype.type(self.beta)
        out = np.asarray(out, dtype=np.result_type(a.dtype, b.dtype))
        return [finish_output(out, inputs, epilogue, residual)]

    def flops(self, inputs, outputs):
        s = matmul_shapes(inputs[-2].shape, inputs[-1].shape)
        return 2 * int(np.prod(s.batch, dtype=np.int64)) * s.m * s.n * s.k
