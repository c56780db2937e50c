"""Concatenation: torch.cat / torch.concat along an existing dim, torch.stack along a new one.

The same operand may appear several times (`torch.cat 3 1 0 0 1 ...` is `cat([x, x, y])`):
inputs are simply a list, nothing assumes they differ.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import DataMovementLayer, normalize_dim


@register("torch.cat", "torch.concat", "torch.concatenate", backend="cpu")
class Cat(DataMovementLayer):
    stack = False  # torch.stack: every input gains a new size-1 dim first

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim", 0)
        return layer

    def infer_specs(self, inputs):
        if not inputs:
            raise self.op.error("expected at least one input tensor")
        first = inputs[0].shape
        for k, spec in enumerate(inputs):
            if len(spec.shape) != len(first) or (self.stack and spec.shape != first):
                raise self.shape_error(f"input {k} has shape {spec.shape}, expected "
                                       f"{'the same shape as' if self.stack else 'the rank of'}"
                                       f" input 0 {first}")
        rank = len(first) + (1 if self.stack else 0)
        if rank == 0:
            raise self.shape_error("cannot concatenate 0-D tensors (use torch.stack)")
        self.axis = normalize_dim(self, self.dim, rank)
        if self.stack:
            shape = first[:self.axis] + (len(inputs),) + first[self.axis:]
        else:
            for k, spec in enumerate(inputs):
                if any(a != b for d, (a, b) in enumerate(zip(spec.shape, first))
                       if d != self.axis):
                    raise self.shape_error(f"input {k} has shape {spec.shape}, which differs "
                                           f"from input 0 {first} outside dim {self.axis}")
            size = sum(spec.shape[self.axis] for spec in inputs)
            shape = first[:self.axis] + (size,) + first[self.axis + 1:]
        # torch promotes mixed dtypes (cat of int and float is float); NumPy's rule agrees for
        # the combinations a model produces.
        dtype = np.result_type(*[spec.dtype for spec in inputs])
        return [TensorSpec(shape, dtype)]

    def forward(self, inputs):
        join = np.stack if self.stack else np.concatenate
        return [join(inputs, axis=self.axis)]


@register("torch.stack", backend="cpu")
class Stack(Cat):
    stack = True
