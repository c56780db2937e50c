"""LayerNorm on OpenCL: one work-group per row (norm_util.RowNormOpenCL, clkernels/layernorm.cl)."""

from __future__ import annotations

from kuiper.opencl.layer import OpenCLLayer
from kuiper.registry import register
from layers.cpu import layernorm
from layers.norm_util import RowNormOpenCL


@register("nn.LayerNorm", "F.layer_norm", backend="opencl")
class LayerNorm(RowNormOpenCL, OpenCLLayer, layernorm.LayerNorm):
    pass
