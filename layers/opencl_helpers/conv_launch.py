"""Two small helpers the convolution algorithms share when they bind their kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kuiper.layers.opencl_base import Launch, round_up


def buffer_of(array: Any) -> Any:
    """The cl.Buffer behind a pyopencl array (ConvOperands holds arrays for x and y, buffers
    for the weight, bias and residual), the buffer itself, or None (a NULL argument)."""
    return getattr(array, "data", array)


def grouped_launch(kernel: Any, global_size: Sequence[int],
                   local: Sequence[int] | None) -> Launch:
    """A launch in work-groups of `local` (None: the driver's choice). OpenCL 1.2 wants the
    global size a multiple of the work-group's, so it is rounded up: the kernel must return
    early past its range."""
    if local is None:
        return Launch(kernel, tuple(global_size))
    local = tuple(int(v) for v in local)
    return Launch(kernel, tuple(round_up(g, q) for g, q in zip(global_size, local)), local)
