"""Bitwise and logical operators: torch.bitwise_and/or/xor/not/left_shift/right_shift and
torch.logical_and/or/xor/not.

    bitwise_*   integer (or bool) tensors, bit by bit; the result has the promoted dtype
    logical_*   any dtype, "nonzero" is true; the result is bool

Both operands broadcast; pnnx writes a Python number as `other=` instead of a second input.
A shift by a negative count or by the bit width or more is defined as in PyTorch: a left shift
gives 0 and a right shift gives the sign (0 or -1), where C (and NumPy) leave it undefined.
The ONNX route writes logical_or for nn.Hardshrink (`|x| > lambda` as `x > l or x < -l`).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

BINARY = {"torch.bitwise_and": np.bitwise_and, "torch.bitwise_or": np.bitwise_or,
          "torch.bitwise_xor": np.bitwise_xor, "torch.bitwise_left_shift": "shift",
          "torch.bitwise_right_shift": "shift", "torch.logical_and": np.logical_and,
          "torch.logical_or": np.logical_or, "torch.logical_xor": np.logical_xor}
UNARY = {"torch.bitwise_not": np.invert, "torch.logical_not": np.logical_not}


def shift(x: np.ndarray, count: np.ndarray, left: bool) -> np.ndarray:
    """x << count or x >> count (arithmetic), with PyTorch's answer for counts out of range."""
    bits = x.dtype.itemsize * 8
    inside = (count >= 0) & (count < bits)
    safe = np.where(inside, count, 0).astype(x.dtype)
    if left:
        return np.where(inside, np.left_shift(x, safe), 0).astype(x.dtype)
    return np.where(inside, np.right_shift(x, safe), np.where(x < 0, -1, 0)).astype(x.dtype)


@register(*BINARY, *UNARY, backend="cpu")
class Bitwise(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.logical = op.type.startswith("torch.logical_")
        layer.unary = op.type in UNARY
        layer.other = op.param("other") if op.has("other") else None
        if layer.other is not None and not isinstance(layer.other, (bool, int, float)):
            raise op.error(f"parameter 'other' should be a number, got {layer.other!r}")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1 if self.unary or self.other is not None else 2)
        shapes = [s.shape for s in inputs]
        try:
            shape = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise self.shape_error(f"input shapes {', '.join(map(str, shapes))} do not "
                                   "broadcast together") from None
        dtypes = [s.dtype for s in inputs]
        if self.logical:
            self.dtype = np.dtype(np.bool_)
        else:
            if self.other is not None:  # a Python number does not widen the tensor's dtype
                if isinstance(self.other, float):
                    raise self.op.error(f"other={self.other} should be an integer")
            bad = [d.name for d in dtypes if d.kind not in "biu"]
            if bad or (self.type.endswith("shift") and "b" in [d.kind for d in dtypes]):
                raise self.op.error(f"{self.type} takes integer tensors"
                                    f"{'' if self.type.endswith('shift') else ' or bools'}, "
                                    f"got {', '.join(d.name for d in dtypes)}")
            self.dtype = np.result_type(*dtypes)
        return [TensorSpec(shape, self.dtype)]

    def operands(self, inputs) -> list[np.ndarray]:
        ops = [np.asarray(x) for x in inputs]
        if self.other is not None:
            ops.append(np.asarray(self.other, dtype=ops[0].dtype if not self.logical else None))
        return ops

    def forward(self, inputs):
        ops = self.operands(inputs)
        if self.unary:
            return [np.asarray(UNARY[self.type](ops[0]), dtype=self.dtype)]
        if self.logical:
            return [BINARY[self.type](*ops)]
        a, b = (o.astype(self.dtype, copy=False) for o in ops)
        if self.type.endswith("shift"):
            return [shift(*np.broadcast_arrays(a, b), left="left" in self.type)]
        return [BINARY[self.type](a, b)]

    def flops(self, inputs, outputs):
        return outputs[0].numel
