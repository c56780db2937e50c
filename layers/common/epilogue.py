"""A fused epilogue: what a convolution, linear or matmul does to its output as it writes it.

The epilogue-fusion pass (kuiper/passes/) decides once for the graph, the same way for both
backends, which operators after a producer fold into it: an activation, a residual add (an
operand of the output's shape), in the order they appear in the model. Each backend carries the
decision out:

- NumPy (`Epilogue.apply`): in place on the fresh output array, `y += r`, then the activation's
  own in-place formula (the CPU layer of the fused operator computes it: one formula, not two).
- OpenCL (`Epilogue.opencl_options`): build options for clkernels/epilogue.h, which the
  producer's kernel calls in its store; the activation is the expression of its OpenCL twin
  (layers/opencl/activation.py) with the parameters written in as literals.

The absorbed operators never run; their outputs are the producer's (fused) output.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Epilogue:
    """`activation`: the fused activation operator (a RuntimeOperator whose layer is an
    elementwise activation), or None. `residual`: the name of the operand added to the output,
    or None; `residual_first`: act(y + r) when True, act(y) + r when False. `absorbed`: the
    names of the operators this epilogue replaces, in model order."""

    activation: Any = None
    residual: str | None = None
    residual_first: bool = True
    absorbed: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.activation is not None or self.residual is not None

    def describe(self) -> str:
        """'+ add(res 12), relu' style text for `kuiper info --passes`."""
        parts = []
        act = self.activation.type if self.activation is not None else None
        if self.residual is not None and (self.residual_first or act is None):
            parts.append(f"+ residual '{self.residual}'")
        if act is not None:
            parts.append(act)
        if self.residual is not None and not self.residual_first and act is not None:
            parts.append(f"+ residual '{self.residual}'")
        return ", ".join(parts) or "nothing"

    # --- NumPy ----------------------------------------------------------------------------------
    def apply(self, y: np.ndarray, residual: np.ndarray | None = None) -> np.ndarray:
        """Carry the epilogue out on `y`, the producer's fresh output (modified in place)."""
        if self.residual is not None and self.residual_first:
            np.add(y, residual, out=y)
        if self.activation is not None:
            layer = self.activation.layer
            form = layer.in_place_form()
            if form is not None:
                form(y, y)
            else:
                y[...] = layer.forward([y])[0]
        if self.residual is not None and not self.residual_first:
            np.add(y, residual, out=y)
        return y

    # --- OpenCL ---------------------------------------------------------------------------------
    def opencl_options(self) -> list[str]:
        """Build options for clkernels/epilogue.h (none: the plain store)."""
        options = []
        if self.activation is not None:
            layer = self.activation.layer
            expr = getattr(layer, "expr", None) or _OPENCL_RELU
            values = list(getattr(layer, "values", ()))
            expr = re.sub(r"\bp([0-2])\b", lambda m: _literal(values[int(m.group(1))]), expr)
            options.append(f"-DEPI_ACT(x)=({expr})")
        if self.residual is not None:
            options += ["-DEPI_RESIDUAL=1", f"-DEPI_RESIDUAL_FIRST={int(self.residual_first)}"]
        return options


# ReLU has its own kernel file (clkernels/relu.cl), not an expression of activation.py.
_OPENCL_RELU = "x<0.0f?0.0f:x"


def _literal(value: float) -> str:
    """A float32 OpenCL literal without whitespace, exact (hexadecimal), inf and NaN included."""
    v = float(np.float32(value))
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    return f"({v.hex()}f)"
