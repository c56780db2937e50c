"""RMSNorm on OpenCL: one work-group per row (RowNormOpenCL, rmsnorm.cl)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import rmsnorm
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_helpers.norm_launches import RowNormOpenCL


@register(backend="opencl")
class RMSNorm(RowNormOpenCL, OpenCLLayer, rmsnorm.RMSNorm):
    pass
