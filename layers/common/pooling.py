"""Window arithmetic shared by the pooling layers (max, average, adaptive), on both backends.

Every pooling layer here works on a *plane view* of its input: all leading dims (batch,
channels, or just channels for an unbatched input) are flattened into `planes`, and the spatial
part is always three-dimensional, `(D, H, W)`. A 1-D or 2-D pool is a 3-D pool whose missing
leading axes have size 1 and a trivial window (kernel 1, stride 1, no padding), so one NumPy
routine and one OpenCL kernel body serve the 1-D, 2-D and 3-D operators alike.

PyTorch's output size for one axis (aten `pooling_output_shape`):

    out = floor((n + 2*pad - dilation*(kernel-1) - 1 + (stride-1 if ceil_mode else 0)) / stride) + 1
    if ceil_mode and (out-1)*stride >= n + pad: out -= 1   # last window must start inside

The second line is what makes ceil_mode subtle: rounding up may create a window that starts in
the right padding, covering no input at all, and PyTorch drops it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kuiper.core.ir import RuntimeOperator
from kuiper.core.tensor_spec import TensorSpec

# The plane view's spatial rank: every pool is seen as a 3-D one.
AXES = 3


def spatial_rank(op_type: str) -> int:
    """1, 2 or 3, from the PNNX type name (nn.MaxPool3d, F.adaptive_avg_pool1d, ...)."""
    return int(op_type[-2])


@dataclass(frozen=True)
class Window:
    """The pooling window along one spatial axis."""

    kernel: int = 1
    stride: int = 1
    pad: int = 0
    dilation: int = 1
    ceil_mode: bool = False

    @property
    def span(self) -> int:
        """How many input positions one window covers, dilation included."""
        return self.dilation * (self.kernel - 1) + 1

    def out_size(self, n: int) -> int:
        """PyTorch's output length for an input of length `n` (may be < 1: caller checks)."""
        extra = self.stride - 1 if self.ceil_mode else 0
        out = (n + 2 * self.pad - self.span + extra) // self.stride + 1  # // floors, like div_rtn
        if self.ceil_mode and (out - 1) * self.stride >= n + self.pad:
            out -= 1
        return out

    def starts(self, out: int) -> np.ndarray:
        """Input position of each window's first tap (negative inside the left padding)."""
        return np.arange(out, dtype=np.int64) * self.stride - self.pad


def _int_list(op: RuntimeOperator, key: str, rank: int, default: int | None) -> list[int]:
    """`key` as `rank` ints; absent or None means `default` (None = use the kernel size)."""
    if op.param(key, None) is None:
        return [default] * rank if default is not None else []
    return op.ints_param(key, rank)


Size3 = tuple[int, int, int]


def read_windows(op: RuntimeOperator, rank: int, dilation: bool = True
                 ) -> tuple[Window, Window, Window]:
    """Parse kernel_size/stride/padding/dilation/ceil_mode into (D, H, W) windows.

    Refuses what PyTorch refuses, with the same limits, so a bad file fails at load time
    rather than producing a silently different result.
    """
    kernel = op.ints_param("kernel_size", rank)
    stride = _int_list(op, "stride", rank, None) or kernel  # stride=None: PyTorch uses kernel
    pad = _int_list(op, "padding", rank, 0)
    dil = _int_list(op, "dilation", rank, 1) if dilation else [1] * rank
    ceil_mode = op.bool_param("ceil_mode", False)
    for name, values, low in (("kernel_size", kernel, 1), ("stride", stride, 1),
                              ("dilation", dil, 1), ("padding", pad, 0)):
        if any(v < low for v in values):
            raise op.error(f"{name}={tuple(values)}: every entry must be >= {low}")
    for k, p in zip(kernel, pad):
        if p > k // 2:  # PyTorch: "pad should be at most half of kernel size"
            raise op.error(f"padding={tuple(pad)} is more than half of kernel_size="
                           f"{tuple(kernel)}; PyTorch refuses this too (padding <= kernel // 2)")
    axes = [Window(k, s, p, d, ceil_mode) for k, s, p, d in zip(kernel, stride, pad, dil)]
    # trivial leading axes: a 1-D pool is a 3-D pool of depth and height 1
    return tuple([Window()] * (AXES - rank) + axes)  # type: ignore[return-value]


def check_pool_input(layer, shape: Sequence[int], rank: int) -> tuple[int, Size3]:
    """Validate the input rank and return the plane view: (planes, (D, H, W)).

    Batched (N, C, *spatial) and unbatched (C, *spatial) inputs are both accepted, as in
    PyTorch; everything before the spatial dims is one flat run of independent planes.
    """
    if len(shape) not in (rank + 1, rank + 2):
        raise layer.shape_error(f"input should be {rank + 1}-D (unbatched) or {rank + 2}-D "
                                f"(batched), got shape {tuple(shape)}")
    spatial = tuple(int(n) for n in shape[len(shape) - rank:])
    planes = int(np.prod(shape[:len(shape) - rank], dtype=np.int64))
    return planes, (1,) * (AXES - rank) + spatial  # type: ignore[return-value]


def output_shape(shape: Sequence[int], rank: int, out: Size3) -> tuple[int, ...]:
    """Input shape with its spatial dims replaced by the pooled sizes (the last `rank` of
    the plane view's three)."""
    return tuple(shape[:len(shape) - rank]) + tuple(out[AXES - rank:])


def pooled_spec(layer, spec):
    """The output spec of a one-window-per-output pool (avg, LP): `layer` has `rank` and
    `windows`; same dtype, spatial dims pooled."""
    _, size = check_pool_input(layer, spec.shape, layer.rank)
    out = pooled_sizes(layer, layer.windows, size)
    return TensorSpec(output_shape(spec.shape, layer.rank, out), spec.dtype)


def pooled_sizes(layer, windows: Sequence[Window], size: Size3) -> Size3:
    """Output (OD, OH, OW), or a ShapeError saying why the input is too small."""
    out = tuple(w.out_size(n) for w, n in zip(windows, size))
    if min(out) < 1:
        rank = getattr(layer, "rank", AXES)
        shown = "x".join(map(str, size[AXES - rank:]))
        raise layer.shape_error(f"input of spatial size {shown} is too small for this window "
                                f"(output would be {'x'.join(map(str, out[AXES - rank:]))}): "
                                "kernel, dilation and padding must fit inside the padded input")
    return out  # type: ignore[return-value]
