"""Dtype casts and copies: Tensor.to, Tensor.type_as, Tensor.contiguous, torch.clone.

A cast converts every element (float -> long truncates toward zero, anything -> bool is
"!= 0", bool -> number is 0/1), exactly as PyTorch does for values in range. `contiguous`,
`clone` and a `to` that keeps the dtype change nothing an inference engine can see: NumPy
returns the input and the OpenCL twin a view of the same buffer (nothing writes into a tensor
in place after it is produced, so sharing is safe).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import TORCH_DTYPES, DataMovementLayer


@register("Tensor.to", "Tensor.type", "Tensor.type_as", "Tensor.contiguous", "torch.clone",
          "Tensor.clone", "Tensor.detach", "torch.detach", backend="cpu")
class To(DataMovementLayer):
    """`dtype=torch.long` (Tensor.to / Tensor.type), the dtype of input 1 (type_as, or `to`
    with a tensor argument), or no dtype at all (contiguous, clone, detach)."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dtype = None
        if op.has("dtype") and op.param("dtype") is not None:
            name = op.str_param("dtype")
            if name not in TORCH_DTYPES:
                raise op.error(f"dtype={name} is not supported; expected one of "
                               f"{', '.join(TORCH_DTYPES)}")
            layer.dtype = TORCH_DTYPES[name]
        # copy=True asks PyTorch for a fresh tensor; with no in-place ops that is the same.
        layer.copy = op.bool_param("copy", False)
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 1, 2)
        x = inputs[0]
        dtype = self.dtype
        if dtype is None and len(inputs) == 2:
            dtype = inputs[1].dtype  # type_as(other) and to(other) take other's dtype
        return [TensorSpec(x.shape, x.dtype if dtype is None else dtype)]

    def forward(self, inputs):
        out_dtype = self.dtype
        if out_dtype is None and len(inputs) == 2:
            out_dtype = np.asarray(inputs[1]).dtype
        x = np.asarray(inputs[0])
        if out_dtype is None or out_dtype == x.dtype:
            return [x]
        if out_dtype == np.dtype(np.bool_):
            return [x != 0]
        with np.errstate(invalid="ignore"):  # NaN -> int is undefined in C and in PyTorch
            return [x.astype(out_dtype)]
