"""GroupNorm on OpenCL: one work-group per group (RowNormOpenCL, groupnorm.cl)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import groupnorm
from kuiper.layers.opencl_base import OpenCLLayer
from kuiper.layers.opencl_helpers.norm_launches import RowNormOpenCL


@register(backend="opencl")
class GroupNorm(RowNormOpenCL, OpenCLLayer, groupnorm.GroupNorm):
    pass
