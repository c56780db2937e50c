"""Selection and comparison: torch.where, torch.gt/lt/ge/le/eq/ne, Tensor.masked_fill.

All three are "elementwise over broadcast operands", and any operand may be a Python scalar
that pnnx moved into a parameter instead of an input:

    torch.where  cond x y              (3 inputs)
    torch.where  cond x   other=0.0    (y is a scalar)     cond y input=1.0   (x is a scalar)
    torch.gt     a b                   torch.gt a other=0.5
    Tensor.masked_fill  x mask value=-inf

The layer turns every case into one list of operands, each an input or a constant, so the
forward pass (and the OpenCL kernel) has a single shape to deal with.

Dtypes follow torch: a Python scalar does not widen a tensor (float32 stays float32), but a
float scalar next to integer tensors makes the result float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.parser.values import as_float

COMPARE = {"torch.gt": np.greater, "torch.lt": np.less, "torch.ge": np.greater_equal,
           "torch.le": np.less_equal, "torch.eq": np.equal, "torch.ne": np.not_equal}


@dataclass
class Operand:
    """An input (by position) or a constant scalar pnnx wrote as a parameter."""

    input: int | None = None
    value: Any = None


def promote(dtypes: list[np.dtype], scalars: list[Any]) -> np.dtype:
    """torch's result dtype for tensors of `dtypes` combined with Python `scalars`."""
    dt = np.result_type(*dtypes) if dtypes else None
    for s in scalars:
        kind = "b" if isinstance(s, (bool, np.bool_)) else "i" if isinstance(s, int) else "f"
        if dt is None:
            dt = np.dtype({"b": np.bool_, "i": np.int64, "f": np.float32}[kind])
        elif kind == "f" and dt.kind in "biu":
            dt = np.dtype(np.float32)
        elif kind == "i" and dt.kind == "b":
            dt = np.dtype(np.int64)
    return dt


@register("torch.where", "Tensor.masked_fill", *COMPARE, backend="cpu")
class WhereCompare(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        n = len(op.inputs)
        if op.type == "torch.where":
            layer.mode = "where"
            if n == 1 and not (op.has("input") or op.has("other")):
                raise op.error("torch.where(condition) with one argument returns the indices "
                               "of nonzero elements (a data-dependent shape); it is not supported")
            slots = [Operand(0)]
            i = 1
            for key in ("input", "other"):
                if op.has(key):
                    slots.append(Operand(value=_scalar(op, key)))
                else:
                    slots.append(Operand(i))
                    i += 1
            expected = i
        elif op.type == "Tensor.masked_fill":
            layer.mode = "masked_fill"
            value = Operand(2) if n == 3 else Operand(value=_scalar(op, "value"))
            slots = [Operand(1), value, Operand(0)]  # where(mask, value, x)
            expected = 3 if n == 3 else 2
        else:
            layer.mode = "compare"
            other = Operand(value=_scalar(op, "other")) if op.has("other") else Operand(1)
            slots = [Operand(0), other]
            expected = 1 if op.has("other") else 2
        if n != expected:
            raise op.error(f"expected {expected} input(s) for these parameters, got {n}")
        layer.slots = slots
        return layer

    def infer(self, inputs):
        shapes = [inputs[s.input].shape for s in self.slots if s.input is not None]
        try:
            out = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise self.shape_error(f"input shapes {', '.join(map(str, shapes))} do not "
                                   "broadcast together") from None
        if self.mode == "masked_fill":
            x = inputs[0]
            if out != x.shape:
                raise self.shape_error(f"mask {inputs[1].shape} does not broadcast to the input "
                                       f"shape {x.shape}")
            if len(inputs) == 3 and inputs[2].shape != ():
                raise self.shape_error(f"value should be a 0-dim tensor, got {inputs[2].shape}")
        values = self.slots if self.mode == "compare" else self.slots[1:]
        tensors = [inputs[s.input].dtype for s in values if s.input is not None]
        scalars = [s.value for s in values if s.input is None]
        if self.mode == "masked_fill":
            self.dtype = inputs[0].dtype   # the value is cast to the input's dtype
        else:
            self.dtype = promote(tensors, scalars)
        out_dtype = np.bool_ if self.mode == "compare" else self.dtype
        return [TensorSpec.of(out, out_dtype)]

    def operands(self, inputs) -> list[np.ndarray]:
        """Every slot as an array: inputs as given, constants as 0-d arrays of the op's dtype."""
        return [np.asarray(inputs[s.input]) if s.input is not None
                else np.asarray(s.value, dtype=self.dtype) for s in self.slots]

    def forward(self, inputs):
        ops = self.operands(inputs)
        if self.mode == "compare":
            a, b = (o.astype(self.dtype, copy=False) for o in ops)
            return [COMPARE[self.type](a, b)]
        cond, a, b = ops
        y = np.where(cond.astype(bool, copy=False), a.astype(self.dtype, copy=False),
                     b.astype(self.dtype, copy=False))
        return [np.asarray(y, dtype=self.dtype)]

    def flops(self, inputs, outputs):
        return outputs[0].numel


def _scalar(op, key: str):
    """A scalar parameter: bool, int or float (pnnx writes inf/-inf/nan as strings)."""
    value = op.param(key)
    if isinstance(value, (bool, int, float)):
        return value
    try:
        return as_float(value)
    except ValueError:
        raise op.error(f"parameter '{key}' should be a number, got {value!r}") from None
