"""GroupNorm on OpenCL: one work-group per group (norm_util.RowNormOpenCL, groupnorm.cl)."""

from __future__ import annotations

from kuiper.opencl.layer import OpenCLLayer
from kuiper.registry import register
from layers.cpu import groupnorm
from layers.norm_util import RowNormOpenCL


@register("nn.GroupNorm", "F.group_norm", backend="opencl")
class GroupNorm(RowNormOpenCL, OpenCLLayer, groupnorm.GroupNorm):
    pass
