"""Fully connected layer (nn.Linear, F.linear): y = x @ W^T + b over the last axis.

The input may have any number of leading axes (batch, sequence, ...): they are flattened into
the rows of one matrix, so the whole layer is a single GEMM `(rows, in) @ (in, out)`. The weight
is stored (out, in) as in PyTorch; we keep its transpose (in, out) contiguous, made once in
from_operator, so the GEMM reads both operands row by row.

`nn.Linear` carries `@weight`/`@bias` (a BatchNorm after it may be folded in); `F.linear` takes
them as extra inputs (or attributes when pnnx folded them).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer, finish_output
from kuiper.layers.common.input_dtypes import expect_floats


@register("nn.Linear", "F.linear", backend="cpu")
class Linear(Layer):
    accepts_epilogue = True  # a following activation / residual add runs on the fresh output
    writes_into = True       # forward(..., out=) computes into a preallocated output

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        if op.type == "nn.Linear":
            n_in, n_out = op.int_param("in_features"), op.int_param("out_features")
            if n_in < 1 or n_out < 1:
                raise op.error(f"in_features={n_in} and out_features={n_out} must be >= 1")
            layer.weight = op.weight("weight", (n_out, n_in))
            layer.bias = op.weight("bias", (n_out,)) if op.bool_param("bias", True) else None
        else:
            layer.weight = op.weight("weight", optional=True)
            layer.bias = op.weight("bias", optional=True)
        if layer.weight is not None:
            if layer.weight.ndim != 2:
                raise op.error(f"weight should be 2-D (out, in), got {layer.weight.shape}")
            layer.weight_t = np.ascontiguousarray(np.asarray(layer.weight, np.float32).T)
        return layer

    def weight_of(self, inputs) -> tuple[int, ...]:
        if self.weight is not None:
            return tuple(self.weight.shape)
        if len(inputs) < 2:
            raise self.op.error("the weight is neither an attribute (@weight) nor an input")
        return tuple(inputs[1].shape)

    def infer(self, inputs):
        self.expect_inputs(inputs, 1, 2, 3)
        expect_floats(self, inputs)  # the input, and an F.linear's weight and bias
        x = inputs[0].shape
        w = self.weight_of(inputs)
        if len(w) != 2:
            raise self.shape_error(f"weight should be 2-D (out, in), got shape {w}")
        if len(x) < 1 or x[-1] != w[1]:
            raise self.shape_error(f"input {x} should end in in_features={w[1]} (weight {w})")
        bias = self.bias.shape if self.bias is not None else (
            inputs[2].shape if len(inputs) > 2 else None)
        if bias is not None and tuple(bias) != (w[0],):
            raise self.shape_error(f"bias should have shape ({w[0]},), got {tuple(bias)}")
        return [TensorSpec.of((*x[:-1], w[0]), inputs[0].dtype)]

    def flops(self, inputs, outputs):
        return 2 * outputs[0].numel * self.weight_of(inputs)[1]

    def forward(self, inputs, epilogue=None, residual=None, out=None):
        x = np.asarray(inputs[0], dtype=np.float32)
        if self.weight is None:
            weight_t = np.asarray(inputs[1], dtype=np.float32).T  # a view: BLAS reads it as is
            bias = inputs[2] if len(inputs) > 2 else None
        else:
            weight_t, bias = self.weight_t, self.bias
        rows = None if out is None else out.reshape(-1, weight_t.shape[1])
        y = np.matmul(x.reshape(-1, x.shape[-1]), weight_t, out=rows)
        if bias is not None:
            y += bias
        return [finish_output(y.reshape(*x.shape[:-1], weight_t.shape[1]), inputs, epilogue,
                              residual, out)]
