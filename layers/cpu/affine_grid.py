"""F.affine_grid: the sampling grid of an affine transform, for F.grid_sample.

For a 2-D `size` (N, C, H, W) and theta (N, 2, 3), output pixel (h, w) gets the point

    grid[n, h, w] = theta[n] @ (x_w, y_h, 1)

where x_w and y_h are the pixel's own normalised coordinates in [-1, 1]: with align_corners the
first and last pixels' *centres* are -1 and 1, without it their outer *edges* are
(x_w = (2w + 1) / W - 1). A size of 1 puts the single pixel at 0. The 3-D form takes
(N, C, D, H, W) and theta (N, 3, 4) and gives (N, D, H, W, 3), z from the depth.

`size` is fixed in the file, but the batch comes from theta, so the model still runs when the
batch changes.
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer


def base_coordinates(size: int, align_corners: bool) -> np.ndarray:
    """The normalised coordinates of `size` pixels along one axis (float32, like torch)."""
    if size <= 1:
        return np.zeros(size, np.float32)
    coords = np.linspace(-1.0, 1.0, size, dtype=np.float32)
    if not align_corners:
        coords = coords * np.float32((size - 1) / size)
    return coords


@register("F.affine_grid", backend="cpu")
class AffineGrid(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.size = tuple(op.ints_param("size"))
        if len(layer.size) not in (4, 5):
            raise op.error(f"size={layer.size}: expected (N, C, H, W) or (N, C, D, H, W)")
        if min(layer.size) < 1:
            raise op.error(f"size={layer.size}: every entry must be >= 1")
        layer.align_corners = op.bool_param("align_corners", False)
        return layer

    @property
    def spatial(self) -> tuple[int, ...]:
        """(H, W) or (D, H, W)."""
        return self.size[2:]

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        theta = inputs[0].shape
        dims = len(self.spatial)
        if len(theta) != 3 or tuple(theta[1:]) != (dims, dims + 1):
            raise self.shape_error(f"theta should be (N, {dims}, {dims + 1}) for a {dims}-D "
                                   f"size {self.size}, got shape {tuple(theta)}")
        return [TensorSpec((theta[0], *self.spatial, dims), inputs[0].dtype)]

    def forward(self, inputs):
        theta = inputs[0].astype(np.float32, copy=False)
        dims = len(self.spatial)
        # one axis of coordinates per spatial dim, innermost (x, from W) first
        axes = [base_coordinates(n, self.align_corners) for n in reversed(self.spatial)]
        mesh = np.meshgrid(*axes[::-1], indexing="ij")  # each (D,) H, W
        points = np.stack([m.ravel() for m in mesh[::-1]] + [np.ones(mesh[0].size, np.float32)])
        grid = np.einsum("nkj,jp->npk", theta, points)  # (N, points, dims)
        return [grid.reshape(theta.shape[0], *self.spatial, dims).astype(inputs[0].dtype)]

    def flops(self, inputs, outputs):
        dims = len(self.spatial)
        return outputs[0].numel * 2 * (dims + 1)
