"""Lesson 5 exercise: a Sigmoid layer, under every name PNNX writes for it.

Fill in the class, then run `kuiper course check 5`. The test registers your class in place of
the framework's with `kuiper.core.registry.override` (a plain `@register` would refuse: the
framework's Sigmoid already owns those names) and runs it through the real loading path. The
answer is the engine's own Sigmoid, in layers/cpu/activation.py: try first, read it after.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np  # noqa: F401 - you will need it

from kuiper.layers.base import ElementwiseLayer


class Sigmoid(ElementwiseLayer):
    """y = 1 / (1 + exp(-x)), elementwise, in the input's dtype (float32).

    `infer` comes from ElementwiseLayer (one input; the output has its shape and dtype), and
    Sigmoid has no parameters, so `from_operator` needs no override either.
    """

    # Every PNNX operator type this layer answers to: nn.Sigmoid for the module, and the names
    # pnnx writes for the function forms (torch.sigmoid(x) and F.sigmoid(x) in a model).
    op_types: ClassVar[tuple[str, ...]] = ()

    def forward(self, inputs):
        """`inputs` is a list with one NumPy array; return a list with one array.

        Make it numerically stable: exp(-x) overflows float32 for x < -88, so never
        exponentiate a large positive number (hint: exp(-|x|) is always <= 1).
        """
        raise NotImplementedError("lesson 5: write Sigmoid.forward")
