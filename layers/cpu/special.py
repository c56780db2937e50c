"""Special elementwise functions: torch.lgamma (log |Gamma(x)|) and torch.positive (y = x).

NumPy has no lgamma, so the CPU layer computes it the classic way, in float64:

- the Lanczos approximation (g = 7, 9 coefficients, as in Numerical Recipes) for x >= 0.5:
  Gamma(x) = sqrt(2 pi) t^(x - 1/2) e^-t A(x), t = x + g - 1/2, in logs;
- the reflection formula for x < 0.5: Gamma(x) Gamma(1 - x) = pi / sin(pi x), so
  lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x).

At 0 and the negative integers Gamma has poles: lgamma is +inf there, as in PyTorch.
The OpenCL twin uses OpenCL's built-in lgamma.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.layers.base import ElementwiseLayer

LANCZOS_G = 7.0
LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
           -176.61503916999185, 12.507343278686905, -0.13857109526572012,
           9.9843695780195716e-6, 1.5056327351493116e-7)


def lgamma(x: np.ndarray) -> np.ndarray:
    """log |Gamma(x)| elementwise, computed in float64."""
    x = np.asarray(x, dtype=np.float64)
    reflect = x < 0.5
    z = np.where(reflect, 1.0 - x, x) - 1.0  # Lanczos is written for Gamma(z + 1)
    series = np.full_like(z, LANCZOS[0])
    for k, c in enumerate(LANCZOS[1:], start=1):
        series += c / (z + k)
    t = z + LANCZOS_G + 0.5
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        right = 0.5 * np.log(2 * np.pi) + (z + 0.5) * np.log(t) - t + np.log(series)
        sin = np.abs(np.sin(np.pi * x))
        left = np.log(np.pi / sin) - right
        y = np.where(reflect, left, right)
    poles = (x <= 0) & (x == np.floor(x))
    y = np.where(poles | np.isinf(x), np.inf, y)
    return np.where(np.isnan(x), np.nan, y)


@register("torch.lgamma", "Tensor.lgamma", backend="cpu")
class LGamma(ElementwiseLayer):
    def infer(self, inputs):
        specs = super().infer(inputs)
        if inputs[0].dtype.kind != "f":
            raise self.op.error(f"lgamma takes a float tensor, got {inputs[0].dtype.name}")
        return specs

    def forward(self, inputs):
        return [lgamma(inputs[0]).astype(inputs[0].dtype)]

    def flops(self, inputs, outputs):
        return 40 * outputs[0].numel  # a logarithm, a series of 8 terms and a sine


@register("torch.positive", "Tensor.positive", backend="cpu")
class Positive(ElementwiseLayer):
    """+x: the input itself (PyTorch returns it without a copy); bool tensors are refused,
    as in PyTorch."""

    def infer(self, inputs):
        specs = super().infer(inputs)
        if inputs[0].dtype == np.bool_:
            raise self.op.error("torch.positive does not take a bool tensor")
        return specs

    def forward(self, inputs):
        return [inputs[0]]

    def flops(self, inputs, outputs):
        return 0
