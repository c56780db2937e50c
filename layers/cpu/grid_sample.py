"""F.grid_sample: read the input at arbitrary points, given in normalised [-1, 1] coordinates.

For a 4-D input (N, C, H, W) and grid (N, Ho, Wo, 2), output pixel (h, w) of channel c reads
the input at the point grid[n, h, w] = (x, y); a 5-D input (N, C, D, H, W) takes a grid
(N, Do, Ho, Wo, 3) of (x, y, z). Three choices make up the operator, as in PyTorch:

* unnormalising: x in [-1, 1] becomes a pixel coordinate. With align_corners -1 and 1 are the
  centres of the first and last pixels, ix = (x + 1) / 2 * (W - 1); without it they are the
  outer edges, ix = ((x + 1) * W - 1) / 2.
* padding_mode, for points outside the input: `zeros` reads 0 there; `border` clamps the
  coordinate to the edge; `reflection` mirrors it back inside (about the edge pixels' centres
  with align_corners, about their outer edges without), then clamps.
* mode: `bilinear` (trilinear in 3-D) blends the 2^dims neighbouring pixels; `nearest` takes
  the closest one (a tie rounds to the even index, like C's nearbyint); `bicubic` (4-D only)
  blends a 4x4 neighbourhood with Keys' cubic (A = -0.75), and applies the padding to each of
  its 16 taps rather than to the point.

A 4-D input is computed as a 5-D one of depth 1 whose points all have z = 0, so one routine
(and one OpenCL kernel) serves both. Arithmetic is float32, as in PyTorch: a point that lands
exactly between two pixels must round the same way.
"""

from __future__ import annotations

import itertools

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")
CUBIC_A = -0.75  # Keys' cubic convolution parameter, PyTorch's choice


def unnormalize(coord: np.ndarray, size: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return (coord + 1) / 2 * np.float32(size - 1)
    return ((coord + 1) * np.float32(size) - 1) / 2


def reflect(coord: np.ndarray, twice_low: int, twice_high: int) -> np.ndarray:
    """Mirror `coord` into [twice_low / 2, twice_high / 2] (bounds doubled to stay integers)."""
    if twice_low == twice_high:
        return np.zeros_like(coord)
    low = np.float32(twice_low / 2)
    span = np.float32((twice_high - twice_low) / 2)
    distance = np.abs(coord - low)
    extra = np.fmod(distance, span)
    flips = np.floor(distance / span)
    return np.where(flips % 2 == 0, extra + low, span - extra + low).astype(np.float32)


def pad_coordinate(coord: np.ndarray, size: int, padding_mode: str,
                   align_corners: bool) -> np.ndarray:
    """Where `padding_mode` sends a pixel coordinate (zeros: nowhere, reads outside are 0)."""
    if padding_mode == "reflection":
        coord = (reflect(coord, 0, 2 * (size - 1)) if align_corners
                 else reflect(coord, -1, 2 * size - 1))
    if padding_mode in ("border", "reflection"):
        coord = np.clip(coord, 0, size - 1)
    return coord


def cubic_weights(t: np.ndarray) -> list[np.ndarray]:
    """Weights of the taps at -1, 0, 1, 2 around a point at fraction t past tap 0."""
    a = np.float32(CUBIC_A)

    def near(x):  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


class Sampler:
    """Reads input values (N, C, D, H, W) at integer points, 0 outside: `read(z, y, x)` gives
    (N, P, C) for index arrays of shape (N, P)."""

    def __init__(self, x: np.ndarray):
        self.x = x
        self.sizes = x.shape[2:]
        self.batch = np.arange(x.shape[0])[:, None]

    def read(self, *coords: np.ndarray) -> np.ndarray:
        inside = np.ones(coords[0].shape, dtype=bool)
        clipped = []
        for c, size in zip(coords, self.sizes):
            inside &= (c >= 0) & (c < size)
            clipped.append(np.clip(c, 0, size - 1))
        values = self.x[(self.batch, slice(None), *clipped)]  # (N, P, C)
        return values * inside[..., None]


@register("F.grid_sample", backend="cpu")
class GridSample(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.mode = op.str_param("mode", "bilinear", MODES)
        layer.padding_mode = op.str_param("padding_mode", "zeros", PADDING_MODES)
        layer.align_corners = op.bool_param("align_corners", False)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 2)
        x, grid = inputs[0].shape, inputs[1].shape
        if len(x) not in (4, 5):
            raise self.shape_error(f"the input should be 4-D (N, C, H, W) or 5-D "
                                   f"(N, C, D, H, W), got shape {tuple(x)}")
        dims = len(x) - 2
        if len(grid) != len(x) or grid[0] != x[0] or grid[-1] != dims:
            raise self.shape_error(f"for an input of shape {tuple(x)} the grid should be "
                                   f"(N={x[0]}, {', '.join('out' for _ in range(dims))}, "
                                   f"{dims}), got shape {tuple(grid)}")
        if self.mode == "bicubic" and dims == 3:
            raise self.shape_error("mode='bicubic' works on 4-D inputs only (as in PyTorch), "
                                   f"got shape {tuple(x)}")
        return [TensorSpec((x[0], x[1], *grid[1:-1]), inputs[0].dtype)]

    def forward(self, inputs):
        x, grid = inputs
        dims = x.ndim - 2
        out_spatial = grid.shape[1:-1]
        points = grid.reshape(x.shape[0], -1, dims).astype(np.float32)
        volume = x if dims == 3 else x[:, :, None]  # a 4-D input is a volume of depth 1
        # pixel coordinates (z, y, x), each (N, P); a 4-D input's points all lie at z = 0
        sizes = volume.shape[2:]
        # grid component k is the coordinate along the k-th axis from the last: x, y, z
        coords = [unnormalize(points[..., 2 - axis], sizes[axis], self.align_corners)
                  for axis in range(3 - dims, 3)]
        if dims == 2:
            coords.insert(0, np.zeros_like(coords[0]))
        sampler = Sampler(volume)
        if self.mode == "bicubic":
            y = self._bicubic(sampler, coords[1:], sizes[1:])
        else:
            coords = [pad_coordinate(c, n, self.padding_mode, self.align_corners)
                      if axis >= 3 - dims else c
                      for axis, (c, n) in enumerate(zip(coords, sizes))]
            y = (self._nearest(sampler, coords) if self.mode == "nearest"
                 else self._linear(sampler, coords))
        y = np.moveaxis(y, -1, 1)  # (N, P, C) -> (N, C, P)
        return [y.reshape(x.shape[0], x.shape[1], *out_spatial).astype(x.dtype, copy=False)]

    @staticmethod
    def _nearest(sampler, coords):
        return sampler.read(*(np.rint(c).astype(np.int64) for c in coords))

    @staticmethod
    def _linear(sampler, coords):
        """Blend the 2^3 corners around each point (for depth 1, the z + 1 ones weigh 0)."""
        lows = [np.floor(c) for c in coords]
        fracs = [c - lo for c, lo in zip(coords, lows)]
        lows = [lo.astype(np.int64) for lo in lows]
        total = 0
        for corner in itertools.product((0, 1), repeat=3):
            weight = np.ones_like(fracs[0])
            for up, t in zip(corner, fracs):
                weight = weight * (t if up else 1 - t)
            total = total + weight[..., None] * sampler.read(
                *(lo + up for lo, up in zip(lows, corner)))
        return total

    def _bicubic(self, sampler, coords, sizes):
        """4x4 taps around each point; the padding moves each tap, not the point."""
        (fy, fx), (h, w) = coords, sizes
        y0, x0 = np.floor(fy), np.floor(fx)
        wy, wx = cubic_weights(fy - y0), cubic_weights(fx - x0)
        zero = np.zeros(fy.shape, np.int64)
        total = 0
        for i, j in itertools.product(range(4), range(4)):
            ty = pad_coordinate(y0 - 1 + i, h, self.padding_mode, self.align_corners)
            tx = pad_coordinate(x0 - 1 + j, w, self.padding_mode, self.align_corners)
            value = sampler.read(zero, ty.astype(np.int64), tx.astype(np.int64))
            total = total + (wy[i] * wx[j])[..., None] * value
        return total

    def flops(self, inputs, outputs):
        taps = {"nearest": 1, "bilinear": 2 ** (len(inputs[0].shape) - 2), "bicubic": 16}
        return outputs[0].numel * 2 * taps[self.mode]
