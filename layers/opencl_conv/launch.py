"""Small helpers the convolution algorithms share when they bind their kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kuiper.layers.opencl_base import Launch, round_up
from kuiper.opencl.device.runtime import compiles_to_native_cpu

# Steps of k a kernel's loop asks for its weights ahead (the kernels' PREFETCH_STEPS), on
# PoCL's CPU devices. A layer's weights are read once per run of the model, so they come from
# main memory, and the hardware prefetcher alone left the loops waiting on them: ResNet-18's
# 512-channel direct layers took 1.3-1.5 ms in the model (0.75 with the weight in cache), 1.1
# with this; its 256-channel Winograd F(4x4) products 0.93 -> 0.57 ms. 8 to 64 steps did
# equally well.
PREFETCH_STEPS = 16


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


def prefetch_options(device: Any) -> list[str]:
    """["-DPREFETCH_STEPS=16"] where the kernels can prefetch (PoCL's CPU devices, through
    Clang's __builtin_prefetch), else []."""
    return [f"-DPREFETCH_STEPS={PREFETCH_STEPS}"] if compiles_to_native_cpu(device) else []
