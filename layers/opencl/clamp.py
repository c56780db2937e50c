"""torch.clamp on OpenCL: the activation kernel with ACT = clamp between p0 and p1.

keep_nan (clkernels/activation.cl): fmin/fmax would replace a NaN by the bound, PyTorch keeps it.
"""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import clamp
from kuiper.layers.opencl.activation import OpenCLActivation

CLAMP = "keep_nan(x,fmin(fmax(x,p0),p1))"


@register(backend="opencl")
class Clamp(OpenCLActivation, clamp.Clamp):
    expr = CLAMP


@register(backend="opencl")
class ClampMin(OpenCLActivation, clamp.ClampMin):
    expr = CLAMP


@register(backend="opencl")
class ClampMax(OpenCLActivation, clamp.ClampMax):
    expr = CLAMP
