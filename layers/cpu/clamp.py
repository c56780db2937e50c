"""torch.clamp / torch.clip: y = min(max(x, min), max), either bound optional.

It is an activation with two parameters (a Hardtanh whose bounds may be missing), so it shares
the `Activation` base; a missing bound is an infinite one. pnnx writes `min=None` for a missing
bound and ints where floats are meant (`max=1 min=-1`).

`x.clamp_min(0.1)` / `clamp_max` arrive as `aten::clamp_min` / `aten::clamp_max` whose bound is
a second input: a constant, known when the graph is built, so it is read from its spec.
"""

from __future__ import annotations

import math
from typing import ClassVar

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.cpu.activation import Activation


@register("torch.clamp", "torch.clip", backend="cpu")
class Clamp(Activation):
    int_inputs = True  # PyTorch clamps integer tensors (bools: refused)
    params: ClassVar[dict[str, float | None]] = {"min": -math.inf, "max": math.inf}

    def read_param(self, name, default):
        if self.op.param(name, None) is None:
            return default
        return self.op.float_param(name)

    def compute(self, x, low, high):
        # In this order, as PyTorch: with min > max every element becomes max. (Python floats
        # keep a float32 array float32; an integer tensor is clamped in float, then cast back.)
        return np.minimum(np.maximum(x, low), high)


class ClampBoundInput(Clamp):
    """clamp_min / clamp_max: the bound is input 1, a build-time constant."""

    bound = ""  # "min" or "max"

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.values = [-math.inf, math.inf]
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        spec = inputs[1]
        if not spec.known or np.size(spec.value) != 1:
            raise self.op.error(f"the {self.bound} bound (input 1) should be a scalar known "
                                f"when the model is built, got {spec}")
        value = float(np.asarray(spec.value).reshape(-1)[0])
        self.values[0 if self.bound == "min" else 1] = value
        self.accept_input(inputs[0])
        return [TensorSpec(inputs[0].shape, inputs[0].dtype)]

    def forward(self, inputs):
        return super().forward(inputs[:1])


@register("aten::clamp_min", backend="cpu")
class ClampMin(ClampBoundInput):
    bound = "min"


@register("aten::clamp_max", backend="cpu")
class ClampMax(ClampBoundInput):
    bound = "max"
