"""LayerNorm on OpenCL: one work-group per row (RowNormOpenCL, layernorm.cl)."""

from __future__ import annotations

from kuiper.layers.cpu import layernorm
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_helpers.norm import RowNormOpenCL
from kuiper.registry import register


@register(backend="opencl")
class LayerNorm(RowNormOpenCL, OpenCLLayer, layernorm.LayerNorm):
    pass
