"""Resizing: nn.Upsample and friends, F.interpolate / F.upsample*.

Modes: nearest, nearest-exact, linear (3-D input), bilinear and bicubic (4-D), trilinear (5-D).
All of them are *separable*: resizing an image is resizing every row along W, then every
column of that result along H. So each spatial dim gets a small table, computed once when the
shapes are known: for each output index, which input indices to read (`taps` of them: 1 for
nearest, 2 for linear, 4 for cubic) and with which weights. The forward pass is then one
gather-and-weigh per dim, last dim first, which is also the order PyTorch sums in.

The tables follow PyTorch's CPU kernels to the last float32 rounding (the coordinate maths is
done in float32, as there), because a nearest-neighbour index one off is a wrong pixel, not a
rounding error:

- output size: `size`, else floor(in * scale_factor);
- coordinate scale in/out: (in-1)/(out-1) with align_corners; else 1/scale_factor when the
  model gave a scale factor (and did not ask to recompute it); else in/out;
- nearest: src = floor(dst * scale), except that an unchanged size copies and a doubled
  size repeats each pixel twice; nearest-exact: floor((dst + 0.5) * scale);
- linear: src = (dst + 0.5) * scale - 0.5, clamped at 0, or dst * scale with align_corners;
  weights 1 - frac and frac of its two neighbours;
- cubic: the same src without the clamp, Keys' cubic convolution with A = -0.75 on the four
  neighbours floor(src) - 1 .. floor(src) + 2, indices clamped to the edge.
"""

from __future__ import annotations

import math

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

# mode -> number of spatial dims it works on (None: any of 1, 2, 3)
MODES = {"nearest": None, "nearest-exact": None, "linear": 1, "bilinear": 2, "bicubic": 2,
         "trilinear": 3}
TAPS = {"nearest": 1, "nearest-exact": 1, "linear": 2, "bilinear": 2, "trilinear": 2,
        "bicubic": 4}
CUBIC_A = np.float32(-0.75)
F32 = np.float32


def coordinate_scale(n_in: int, n_out: int, scale: float | None, align_corners: bool
                     ) -> np.float32:
    """Input pixels per output pixel, as PyTorch computes it (in float32)."""
    if align_corners:
        return F32(n_in - 1) / F32(n_out - 1) if n_out > 1 else F32(0)
    if scale is not None and scale > 0:
        return F32(1.0 / scale)
    return F32(n_in) / F32(n_out)


def _cubic_weights(t: np.ndarray) -> np.ndarray:
    """Keys' cubic convolution weights of the 4 neighbours at fractional offset t."""
    a = CUBIC_A

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    one = F32(1)
    return np.stack([far(t + one), near(t), near(one - t), far(one - t + one)], axis=1)


def axis_table(mode: str, n_in: int, n_out: int, scale: float | None,
               align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each of shape (n_out, taps): the recipe for one spatial dim."""
    s = coordinate_scale(n_in, n_out, scale, align_corners)
    dst = np.arange(n_out)
    if mode in ("nearest", "nearest-exact"):
        # PyTorch special-cases these two sizes whatever the scale factor said: a copy, and
        # every input pixel twice.
        if mode == "nearest" and n_out == n_in:
            src = dst
        elif mode == "nearest" and n_out == 2 * n_in:
            src = dst // 2
        elif mode == "nearest":
            src = np.floor(dst.astype(F32) * s)
        else:
            src = np.floor((dst.astype(F32) + F32(0.5)) * s)
        idx = np.minimum(src.astype(np.int64), n_in - 1)
        return idx[:, None], np.ones((n_out, 1), F32)
    if align_corners:
        real = s * dst.astype(F32)
    else:
        real = s * (dst.astype(F32) + F32(0.5)) - F32(0.5)
    if mode == "bicubic":
        base = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
        t = np.clip(real - base.astype(F32), F32(0), F32(1)).astype(F32)
        idx = np.clip(base[:, None] + np.arange(-1, 3), 0, n_in - 1)
        return idx, _cubic_weights(t).astype(F32)
    # linear: two neighbours. PyTorch copies straight through when the size is unchanged.
    if n_out == n_in:
        return np.stack([dst, dst], axis=1), np.tile(np.array([1, 0], F32), (n_out, 1))
    real = np.maximum(real, F32(0))
    i0 = np.minimum(np.floor(real).astype(np.int64), n_in - 1)
    frac = np.clip(real - i0.astype(F32), F32(0), F32(1)).astype(F32)
    i1 = i0 + (i0 < n_in - 1)
    return np.stack([i0, i1], axis=1), np.stack([F32(1) - frac, frac], axis=1)


def is_identity(n_in: int, idx: np.ndarray, weights: np.ndarray) -> bool:
    """True when a table copies its input unchanged (that pass can be skipped)."""
    return bool(idx.shape[0] == n_in and np.array_equal(idx[:, 0], np.arange(n_in))
                and np.all(weights[:, 0] == 1) and np.all(weights[:, 1:] == 0))


def _as_scale(value) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0
            or not math.isfinite(value)):
        raise ValueError(value)
    return float(value)


@register("nn.Upsample", "F.upsample", "F.interpolate", backend="cpu")
class Upsample(Layer):
    """Every resize operator; subclasses only fix the defaults pnnx leaves out."""

    default_mode = "nearest"
    default_align_corners = False

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.mode = op.str_param("mode", cls.default_mode, choices=tuple(MODES))
        ac = op.param("align_corners", None)
        layer.align_corners = cls.default_align_corners if ac is None else \
            op.bool_param("align_corners")
        if layer.align_corners and TAPS[layer.mode] == 1:
            raise op.error(f"align_corners=True only applies to the interpolating modes "
                           f"(linear, bilinear, bicubic, trilinear), not mode={layer.mode}")
        size, scale = op.param("size", None), op.param("scale_factor", None)
        if (size is None) == (scale is None):
            raise op.error("exactly one of 'size' and 'scale_factor' must be given, got "
                           f"size={size!r} scale_factor={scale!r}")
        layer.size = None if size is None else op.ints_param("size")
        layer.scale_factor = None
        if scale is not None:
            scales = scale if isinstance(scale, list) else [scale]
            try:
                layer.scale_factor = [_as_scale(s) for s in scales]
            except ValueError:
                raise op.error("parameter 'scale_factor' should be positive finite numbers, "
                               f"got {scale!r}") from None
        recompute = op.param("recompute_scale_factor", None)
        layer.recompute = False if recompute is None else op.bool_param("recompute_scale_factor")
        return layer

    def spatial(self, what: str, values: list, n: int) -> list:
        if len(values) == 1:
            return values * n
        if len(values) != n:
            raise self.shape_error(f"{what}={tuple(values)} has {len(values)} values for the "
                                   f"{n} spatial dim(s) of the input")
        return list(values)

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        n = len(x.shape) - 2
        want = MODES[self.mode]
        if n < 1 or n > 3 or (want is not None and n != want):
            dims = f"{want + 2}-D" if want else "3-D, 4-D or 5-D"
            raise self.shape_error(f"mode={self.mode} resizes a {dims} input (N, C, spatial...), "
                                   f"got shape {x.shape}")
        n_in = list(x.shape[2:])
        if self.size is not None:
            n_out = self.spatial("size", self.size, n)
            scales = [None] * n
        else:
            scales = self.spatial("scale_factor", self.scale_factor, n)
            n_out = [math.floor(i * s) for i, s in zip(n_in, scales)]
            if self.recompute:
                scales = [None] * n  # the kernel then uses in/out, as PyTorch does
        if min(n_in) <= 0 or min(n_out) <= 0:
            raise self.shape_error(f"cannot resize input {x.shape} to spatial size "
                                   f"{tuple(n_out)}: it is empty (size or scale_factor too "
                                   "small, or an empty input)")
        out_shape = tuple(x.shape[:2]) + tuple(n_out)
        self.check_budget(out_shape, x.dtype)  # the tables below grow with the output size
        # (axis, indices, weights) per spatial dim that changes anything, last dim first.
        self.passes = []
        for d in reversed(range(n)):
            idx, w = axis_table(self.mode, n_in[d], n_out[d], scales[d], self.align_corners)
            if not is_identity(n_in[d], idx, w):
                self.passes.append((2 + d, idx, w))
        return [TensorSpec(out_shape, x.dtype)]

    def forward(self, inputs):
        y = inputs[0]
        for axis, idx, w in self.passes:
            acc = np.take(y, idx[:, 0], axis=axis)
            if idx.shape[1] > 1:
                shape = [1] * y.ndim
                shape[axis] = -1
                acc = acc * w[:, 0].reshape(shape)
                for k in range(1, idx.shape[1]):
                    acc += np.take(y, idx[:, k], axis=axis) * w[:, k].reshape(shape)
            y = acc
        return [np.ascontiguousarray(y, dtype=inputs[0].dtype)]

    def flops(self, inputs, outputs):
        return 2 * TAPS[self.mode] * outputs[0].numel



@register("nn.UpsamplingNearest2d", "F.upsample_nearest", backend="cpu")
class UpsampleNearest(Upsample):
    @classmethod
    def from_operator(cls, op):
        if op.param("mode", "nearest") != "nearest":
            raise op.error(f"{op.type} is nearest-neighbour only, got mode={op.param('mode')}")
        return super().from_operator(op)


@register("nn.UpsamplingBilinear2d", "F.upsample_bilinear", backend="cpu")
class UpsampleBilinear(Upsample):
    default_mode = "bilinear"
    default_align_corners = True  # these two always align corners
