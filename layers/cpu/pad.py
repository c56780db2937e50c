"""Padding: F.pad (constant, reflect, replicate, circular) and the nn.*Pad modules.

`pad` lists (before, after) pairs starting from the LAST dim: (left, right, top, bottom, ...).
A negative amount crops. PyTorch crops first and then pads what is left, so a reflection or a
wrap-around only ever sees the cropped tensor.

Both backends work from the same per-dim *source tables*: for every output index along a
padded dim, the input index it copies, or -1 for "the constant value". With them every mode
is the same gather, `y[o0, o1] = x[t0[o0], t1[o1]]`; the modes differ only in how a position
outside the input folds back inside (n = the cropped length):

    constant   -1 (filled with `value`)
    replicate  the nearest edge element            ... a a | a b c d | d d ...
    reflect    mirrored, without repeating the edge ... c b | a b c d | c b ...
    circular   wrapped around                       ... c d | a b c d | a b ...
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer

MODES = ("constant", "reflect", "replicate", "circular")


def source_table(size: int, before: int, after: int, mode: str) -> np.ndarray:
    """Input index (or -1) for each output index along one dim of length `size`."""
    lo, hi = max(0, -before), size - max(0, -after)  # the part left after cropping
    n = hi - lo
    s = np.arange(size + before + after, dtype=np.int64) - max(before, 0)  # cropped coords
    if mode == "constant":
        return np.where((s >= 0) & (s < n), s + lo, -1)
    if mode == "replicate":
        s = np.clip(s, 0, n - 1)
    elif mode == "reflect":
        s = np.abs(s)                        # left of the start: mirror at 0
        s = np.where(s >= n, 2 * (n - 1) - s, s)  # right of the end: mirror at n - 1
    else:  # circular
        s = s % n
    return s + lo


class PadLayer(Layer):
    """Subclasses set `pads` (flat torch order), `mode` and `value` in from_operator."""

    pads: list[int]
    mode: str = "constant"
    value: float = 0.0

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        shape, k = tuple(x.shape), len(self.pads) // 2
        if len(self.pads) % 2:
            raise self.op.error(f"pad={tuple(self.pads)} should have an even length: "
                                "(before, after) pairs from the last dim backwards")
        if k > len(shape):
            raise self.shape_error(f"pad={tuple(self.pads)} pads {k} dims but the input "
                                   f"{shape} has only {len(shape)}")
        if self.mode != "constant" and (k > 3 or len(shape) not in (k + 1, k + 2)):
            raise self.shape_error(f"{self.mode} padding of {k} dim(s) needs a {k + 1}-D or "
                                   f"{k + 2}-D input (pad has 2, 4 or 6 values), got shape "
                                   f"{shape}")
        out = list(shape)
        for i in range(k):
            axis = len(shape) - 1 - i
            before, after = self.pads[2 * i], self.pads[2 * i + 1]
            self.check_amounts(shape, axis, before, after)
            out[axis] = shape[axis] + before + after
        self.check_budget(out, x.dtype)  # the tables below grow with the output size
        self.tables = []  # (axis, source table), last dim first as in `pad`
        for i in range(k):
            axis = len(shape) - 1 - i
            before, after = self.pads[2 * i], self.pads[2 * i + 1]
            self.tables.append((axis, source_table(shape[axis], before, after, self.mode)))
        return [TensorSpec(tuple(out), x.dtype)]

    def check_amounts(self, shape, axis, before, after):
        size = shape[axis]
        kept = size - max(0, -before) - max(0, -after)
        where = f"dim {axis} of input {shape} (pad {before}, {after})"
        if kept < 0 or size + before + after < 0:
            raise self.shape_error(f"cropping more than the whole {where}")
        need = {"reflect": (kept - 1, "smaller than"), "circular": (kept, "at most"),
                "replicate": (None, "")}.get(self.mode)
        if need is None:
            return
        if kept == 0 and (before > 0 or after > 0):
            raise self.shape_error(f"{self.mode} padding of an empty {where}")
        limit, words = need
        if limit is not None and max(before, after) > limit:
            raise self.shape_error(f"{self.mode} padding must be {words} the (cropped) size "
                                   f"{kept} of {where}")

    def forward(self, inputs):
        y = inputs[0]
        for axis, table in self.tables:
            y = np.take(y, np.maximum(table, 0), axis=axis)
        if self.mode == "constant":
            keep = np.ones((1,) * y.ndim, dtype=bool)
            for axis, table in self.tables:
                shape = [1] * y.ndim
                shape[axis] = table.size
                keep = keep & (table >= 0).reshape(shape)
            y = np.where(keep, y, np.asarray(self.value).astype(y.dtype))
        return [np.ascontiguousarray(y)]


@register("F.pad", backend="cpu")
class Pad(PadLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.pads = op.ints_param("pad")
        layer.mode = op.str_param("mode", "constant", choices=MODES)
        # pnnx writes value=None when F.pad was called without one.
        layer.value = 0.0 if op.param("value", None) is None else op.float_param("value")
        return layer


class ModulePad(PadLayer):
    """nn.<Mode>Pad<N>d(padding): `padding` is N pairs (pnnx expands an int to all of them)."""

    dims = 2

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.pads = op.ints_param("padding", 2 * cls.dims)
        if cls.mode == "constant":
            layer.value = op.float_param("value", 0.0)
        return layer


def _module_pad(name: str, mode: str, dims: int) -> type:
    cls = type(name, (ModulePad,), {"mode": mode, "dims": dims, "__module__": __name__,
                                    "__doc__": f"nn.{name}: {mode} padding of the last "
                                               f"{dims} dim(s)."})
    return register(f"nn.{name}", backend="cpu")(cls)


# nn.ZeroPad2d, nn.ConstantPad1d, nn.ReflectionPad3d, ... (ZeroPad reads no `value`: 0).
for _prefix, _mode in (("Zero", "constant"), ("Constant", "constant"), ("Reflection", "reflect"),
                       ("Replication", "replicate"), ("Circular", "circular")):
    for _dims in (1, 2, 3):
        globals()[f"{_prefix}Pad{_dims}d"] = _module_pad(f"{_prefix}Pad{_dims}d", _mode, _dims)
