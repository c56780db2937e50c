"""Tensors made from a few numbers: Tensor.fill (every element one value) and torch.arange.

    Tensor.fill   x.fill_(v): x's shape and dtype, every element v; v is `value=` or a
                  one-element tensor input (pnnx writes `x[:2].fill_(z[0])` that way)
    torch.arange  start, end, step: each a parameter or an input (pnnx names them $start,
                  $end, $step); dtype=None means int64 for integer arguments, else float32

arange's length, ceil((end - start) / step), depends on the *values* of start, end and step.
When they are known at build time (parameters, constants, shape arithmetic) the output is a
folded constant. When one is a tensor computed by the model (`torch.arange(x[0])`), the length
is data-dependent: the output spec is dynamic, with no upper bound (kuiper/core/dynamic_shapes.py).
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.datamove import TORCH_DTYPES, DataMovementLayer


@register("Tensor.fill", "Tensor.fill_", backend="cpu")
class Fill(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.value = op.param("value") if op.has("value") else None
        if layer.value is not None and not isinstance(layer.value, (bool, int, float)):
            raise op.error(f"parameter 'value' should be a number, got {layer.value!r}")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1 if self.value is not None else 2)
        x = inputs[0]
        if self.value is None and inputs[1].numel != 1:
            raise self.shape_error(f"the fill value should be one element, got shape "
                                   f"{inputs[1].shape}")
        if self.value is not None or inputs[1].known:
            value = self.value if self.value is not None else inputs[1].value
            return [TensorSpec(x.shape, x.dtype, np.full(x.shape, np.asarray(value).reshape(-1)[0]
                                                         if self.value is None else value,
                                                         dtype=x.dtype))]
        return [TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        value = self.value if self.value is not None else np.asarray(inputs[1]).reshape(-1)[0]
        return [np.full(np.shape(inputs[0]), value, dtype=np.asarray(inputs[0]).dtype)]


def arange_length(layer, start, end, step) -> int:
    """How many numbers torch.arange(start, end, step) gives, or a clear error."""
    if step == 0:
        raise layer.op.error("arange: step must not be 0")
    if (end - start) * step < 0:
        raise layer.op.error(f"arange: end={end} cannot be reached from start={start} with "
                             f"step={step}")
    n = max(0, math.ceil((end - start) / step))
    layer.check_budget((n,), np.float64)  # computed in double precision, then cast
    return n


@register("torch.arange", backend="cpu")
class Arange(Layer):
    ARGS = ("start", "end", "step")

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        names = list(op.input_names) + [None] * (len(op.inputs) - len(op.input_names))
        layer.slots = {}  # start/end/step -> ("input", position) or ("const", value)
        for arg in cls.ARGS:
            if arg in names:
                layer.slots[arg] = ("input", names.index(arg))
            elif op.has(arg):
                value = op.param(arg)
                if not isinstance(value, (bool, int, float)):
                    raise op.error(f"parameter '{arg}' should be a number, got {value!r}")
                layer.slots[arg] = ("const", value)
        # Inputs without a name (a hand-written model) fill the missing arguments in order,
        # except that a lone one is `end`, as in torch.arange(n).
        missing = [a for a in cls.ARGS if a not in layer.slots]
        unnamed = [k for k, n in enumerate(names) if n not in cls.ARGS]
        if len(unnamed) == 1 and "end" in missing:
            missing = ["end"]
        for arg, k in zip(missing, unnamed):
            layer.slots[arg] = ("input", k)
        if "end" not in layer.slots:
            raise op.error("torch.arange needs `end` (a parameter or an input)")
        layer.slots.setdefault("start", ("const", 0))
        layer.slots.setdefault("step", ("const", 1))
        dtype = op.param("dtype", None)
        if dtype not in (None, "None") and dtype not in TORCH_DTYPES:
            raise op.error(f"dtype={dtype} is not a dtype Kuiper knows "
                           f"({', '.join(TORCH_DTYPES)})")
        layer.dtype = None if dtype in (None, "None") else TORCH_DTYPES[dtype]
        return layer

    def arguments(self, values) -> list:
        """start, end, step as Python numbers, from constants and the given input values."""
        out = []
        for arg in self.ARGS:
            kind, v = self.slots[arg]
            v = values[v] if kind == "input" else v
            v = np.asarray(v).reshape(-1)
            if v.size != 1:
                raise self.shape_error(f"arange: {arg} should be one number, got {v.size}")
            out.append(v[0].item())
        return out

    def infer(self, inputs):
        self.expect_inputs(inputs, len([s for s in self.slots.values() if s[0] == "input"]))
        kinds = [inputs[v].dtype.kind if k == "input" else
                 ("f" if isinstance(v, float) else "i") for k, v in self.slots.values()]
        self.out_dtype = self.dtype or np.dtype(np.float32 if "f" in kinds else np.int64)
        if all(s.known for s in inputs):
            value = DataMovementLayer.host_forward(self, [s.value for s in inputs])[0]
            return [TensorSpec(value.shape, value.dtype, value)]
        return [TensorSpec((0,), self.out_dtype, dynamic=True)]

    def forward(self, inputs):
        start, end, step = self.arguments(inputs)
        n = arange_length(self, start, end, step)
        # torch computes start + i * step in double for float results, then rounds
        values = start + np.arange(n, dtype=np.float64 if self.out_dtype.kind == "f"
                                   else np.int64) * step
        return [values.astype(self.out_dtype)]
