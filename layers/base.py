"""The Layer interface every operator implements.

A layer is created once per operator when the graph is built:

    layer = LayerClass.from_operator(op)   # read params/weights; fail early and clearly
    specs = layer.infer(input_specs)       # output shapes/dtypes for *these* input shapes
    outs  = layer.forward(inputs)          # compute (NumPy arrays on the CPU backend)

`infer` is separate from `forward` so the graph knows every shape before it runs anything: that
is what lets the OpenCL backend allocate every buffer and bind every kernel argument up front,
and what lets a model exported at 1x3x224x224 run at 4x3x160x160.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from kuiper.core import limits
from kuiper.core.errors import ShapeError
from kuiper.core.ir import RuntimeOperator
from kuiper.core.tensor_spec import TensorSpec

Activate = Callable[[np.ndarray, np.ndarray], object]


def finish_output(y: Any, inputs: Sequence[Any], epilogue: Any = None, residual: Any = None,
                  out: np.ndarray | None = None) -> Any:
    """A producer's result, with its fused epilogue applied and in `out` when one is given.

    The epilogue (kuiper/passes/epilogue.py) works in place, which needs an array of the
    layer's own: one that shares no memory with an input (an expression like `@0` returns its
    input itself, and the input may still be needed), else it works on a copy. `out` is a
    preallocated output (the CPU workspace, for layers whose class sets `writes_into`); a layer
    that could not compute straight into it lands there with one copy.
    """
    if out is not None:
        if not np.may_share_memory(y, out):  # else the layer computed straight into it
            np.copyto(out, np.asarray(y).reshape(out.shape))
        y = out
    elif epilogue:
        y = np.asarray(y)
        owned = y.ndim > 0 and y.flags.writeable and not any(
            isinstance(x, np.ndarray) and np.may_share_memory(y, x) for x in inputs)
        if not owned:
            y = y.copy()
    if epilogue:
        epilogue.apply(y, residual)
    return y


class Layer:
    op_types: ClassVar[tuple[str, ...]] = ()
    backend: ClassVar[str] = "cpu"
    # Epilogue fusion (kuiper/passes/fuse_epilogues.py): an activation or a residual add right
    # after a convolution need not be a separate pass over memory. A layer that sets
    # `accepts_epilogue` has one output and takes `forward(inputs, epilogue=e, residual=r)`,
    # applying the Epilogue `e` (kuiper/passes/epilogue.py) to its output as it writes it
    # (`finish_output` does it for most). An activation that may be fused that way sets
    # `fusable_activation`: its `in_place_form()` or `forward` computes it on the CPU, its
    # OpenCL twin's `expr` on the device.
    accepts_epilogue: ClassVar[bool] = False
    fusable_activation: ClassVar[bool] = False
    # A layer that sets `writes_into` takes `forward(inputs, out=array)`: a preallocated output
    # of the right shape and dtype (the CPU workspace of the memory planner), written in place.
    writes_into: ClassVar[bool] = False

    def __init__(self, op: RuntimeOperator):
        self.op = op
        self.name = op.name
        self.type = op.type

    @classmethod
    def from_operator(cls, op: RuntimeOperator) -> Layer:
        """Read parameters and weights. Subclasses override and call `cls(op)` themselves."""
        return cls(op)

    def infer(self, inputs: Sequence[TensorSpec]) -> list[TensorSpec]:
        raise NotImplementedError(f"{type(self).__name__}.infer")

    def forward(self, inputs: Sequence[Any]) -> list[Any]:
        raise NotImplementedError(f"{type(self).__name__}.forward")

    def flops(self, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> int:
        """Multiply-adds counted as 2 FLOPs; 0 for data movement. Used by summary()."""
        return 0

    def in_place_form(self) -> Activate | None:
        """`f(x, out)` computing this layer's output into `out` (may be `x`), or None."""
        return None

    # --- helpers for subclasses ---------------------------------------------------------------
    def shape_error(self, message: str) -> ShapeError:
        return self.op.error(message, ShapeError)  # type: ignore[return-value]

    def check_budget(self, shape: Sequence[int], dtype: Any) -> None:
        """Refuse a tensor above the memory budget (kuiper/core/limits.py) before building anything
        for it: for layers whose `infer` allocates tables sized by the output (Upsample)."""
        limits.current().check_tensor(shape, np.dtype(dtype).itemsize,
                                      f"operator '{self.name}' ({self.type})")

    def expect_inputs(self, inputs: Sequence[Any], *counts: int) -> None:
        if len(inputs) not in counts:
            want = " or ".join(str(c) for c in counts)
            raise self.op.error(f"expected {want} input(s), got {len(inputs)}")


class ElementwiseLayer(Layer):
    """One input, one output of the same shape and dtype: activations and friends."""

    def infer(self, inputs: Sequence[TensorSpec]) -> list[TensorSpec]:
        self.expect_inputs(inputs, 1)
        return [TensorSpec(inputs[0].shape, inputs[0].dtype)]

    def flops(self, inputs, outputs) -> int:
        return outputs[0].numel
