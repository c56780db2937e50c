"""Models in a row on one OpenCL device, with no trip through the host between them.

    backbone = kuiper.load("backbone.pnnx.param", backend="opencl")
    head = kuiper.load("head.pnnx.param", backend="opencl")
    scores = run_on_device([backbone, head], x)      # = head(backbone(x)), one upload, one download

Two graphs loaded for one device share one runtime (`OpenCLRuntime.shared`: one context, one
queue), so a pyopencl array one graph returns (`device_outputs=True`) is an input the next one
reads where it is: the executor copies it on the device, after the kernel that wrote it
(kuiper/opencl/execution/executor.py, `run`). Only the first input goes up and the last
output comes down; nothing waits on the host in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kuiper.core.errors import KuiperError


def run_on_device(graphs: Sequence[Any], x: Any, device_outputs: bool = False) -> Any:
    """`x` through each graph of `graphs` in turn, every intermediate result left on the device.

    `graphs`: OpenCL graphs (`kuiper.load(..., backend="opencl")`) of one device; `x`: the
    first graph's input, a NumPy array or a pyopencl array. Every graph but the last returns
    pyopencl arrays (`device_outputs=True`), which the next graph takes as its inputs (a graph
    with several outputs feeds a graph with as many inputs, in order). The last graph's
    outputs come back as NumPy arrays, or stay on the device with `device_outputs=True`.
    The result equals the host-to-host chain `graphs[-1](...graphs[0](x))`, bit for bit."""
    if not graphs:
        raise KuiperError("run_on_device: `graphs` is empty; give the graphs to chain, first "
                          "to last")
    value = x
    for i, graph in enumerate(graphs):
        on_device = device_outputs or i < len(graphs) - 1
        value = graph(*value, device_outputs=on_device) if isinstance(value, tuple) \
            else graph(value, device_outputs=on_device)
    return value
