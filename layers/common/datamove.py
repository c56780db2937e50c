"""Shared pieces of the data-movement layers (reshape, permute, cat, split, slice, gather,
expand, flip, to).

These operators never compute anything: they only decide *which input element lands where*.
What they share is the bookkeeping around that decision:

- normalising PyTorch dims (`-1` means the last dim; a bad dim must fail with a clear message);
- reading a list of ints that comes either as a parameter or as a second input whose value is
  known when the model is built (`Tensor.reshape` fed by `[size(@0,0),-1]`);
- constant folding: when every input is known at build time (a shape list, a `pnnx.Attribute`),
  the output is known too, so no backend ever has to run the operator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

# pnnx writes INT_MAX for "open end" in slices and "no select" in multi-dim slices.
INT_MAX = 2147483647

# dtype parameters of Tensor.to arrive as strings (`dtype=torch.long`).
TORCH_DTYPES: dict[str, np.dtype] = {
    "torch.float": np.dtype(np.float32), "torch.float32": np.dtype(np.float32),
    "torch.double": np.dtype(np.float64), "torch.float64": np.dtype(np.float64),
    "torch.half": np.dtype(np.float16), "torch.float16": np.dtype(np.float16),
    "torch.long": np.dtype(np.int64), "torch.int64": np.dtype(np.int64),
    "torch.int": np.dtype(np.int32), "torch.int32": np.dtype(np.int32),
    "torch.short": np.dtype(np.int16), "torch.int16": np.dtype(np.int16),
    "torch.int8": np.dtype(np.int8), "torch.uint8": np.dtype(np.uint8),
    "torch.bool": np.dtype(np.bool_),
}


def normalize_dim(layer: Layer, dim: int, rank: int, what: str = "dim") -> int:
    """`dim` in [-rank, rank) -> [0, rank). PyTorch treats a 0-D tensor as having one dim."""
    bound = max(rank, 1)
    if not -bound <= dim < bound:
        raise layer.shape_error(f"{what}={dim} is out of range for a {rank}-D input "
                                f"(expected {-bound}..{bound - 1})")
    return dim % bound


def normalize_dims(layer: Layer, dims: Sequence[int], rank: int, what: str = "dims") -> list[int]:
    """Several dims at once; a dim named twice is an error, as in PyTorch."""
    out = [normalize_dim(layer, d, rank, what) for d in dims]
    if len(set(out)) != len(out):
        raise layer.op.error(f"{what}={list(dims)} names the same dim twice")
    return out


def known_ints(layer: Layer, spec: TensorSpec, what: str) -> list[int]:
    """A list of ints carried by an input whose value is known at build time.

    pnnx feeds shapes computed from other shapes (`[size(@0,0),-1]`) as a second input; shape
    inference folds that expression, so its value is already here. A shape that depends on
    tensor *contents* cannot be supported: every buffer is sized before the model runs.
    """
    if not spec.known:
        raise layer.op.error(f"the {what} input is not known when the model is built (it "
                             "depends on tensor values, not only on shapes); only constant or "
                             "shape-derived lists are supported")
    value = spec.value
    flat = np.asarray(value).reshape(-1) if not isinstance(value, (list, tuple)) else value
    try:
        return [int(v) for v in flat]
    except (TypeError, ValueError):
        raise layer.op.error(f"the {what} input should be a list of integers, got "
                             f"{value!r}") from None


def ints_from_param_or_input(layer: Layer, key: str, inputs: Sequence[TensorSpec],
                             what: str | None = None) -> list[int]:
    """The list in parameter `key`, or else the known value of the second input."""
    op = layer.op
    if op.has(key):
        value = op.param(key)
        if value is None:  # pnnx writes an empty tuple as None (`shape=None` = 0-D)
            return []
        return op.ints_param(key)
    if len(inputs) >= 2:
        return known_ints(layer, inputs[1], what or key)
    raise op.error(f"parameter '{key}' is missing and there is no second input giving it")


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements: the last dim moves fastest."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


class DataMovementLayer(Layer):
    """Base of the data-movement layers: `infer_specs` + constant folding.

    Subclasses implement `infer_specs(inputs) -> out specs (without values)` and `forward`.
    When every input value is known, `infer` runs `forward` on those values so the outputs are
    known too: the OpenCL executor then never binds the operator at all.
    """

    def infer_specs(self, inputs: Sequence[TensorSpec]) -> list[TensorSpec]:
        raise NotImplementedError(f"{type(self).__name__}.infer_specs")

    def infer(self, inputs: Sequence[TensorSpec]) -> list[TensorSpec]:
        outs = self.infer_specs(inputs)
        if not inputs or not all(s.known for s in inputs):
            return outs
        values: list[Any] = [s.value if s.dtype == np.dtype(object)
                             else np.asarray(s.value, dtype=s.dtype) for s in inputs]
        results = self.host_forward(values)
        return [TensorSpec(o.shape, o.dtype, np.ascontiguousarray(r, dtype=o.dtype))
                for o, r in zip(outs, results)]

    def host_forward(self, inputs: Sequence[Any]) -> list[Any]:
        """The NumPy `forward`, even on an OpenCL twin (whose own `forward` only enqueues).

        The twin subclasses the CPU layer, so the CPU `forward` is further along the MRO: take
        the first one defined by a class of the "cpu" backend.
        """
        for cls in type(self).__mro__:
            if "forward" in cls.__dict__ and getattr(cls, "backend", "cpu") == "cpu":
                return cls.forward(self, inputs)
        raise NotImplementedError(f"{type(self).__name__} has no NumPy forward")
