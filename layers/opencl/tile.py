"""torch.tile on OpenCL: the strided view of Tensor.repeat (layers/opencl/expand.py)."""

from __future__ import annotations

from kuiper.core.registry import register
from kuiper.layers.cpu import tile
from kuiper.layers.opencl.expand import Repeat


@register(backend="opencl")
class Tile(Repeat, tile.Tile):
    pass
