"""Lesson 18 exercises: models chained on the device, and a Ray job's results put back in order.

Fill in the functions, then run `kuiper course check 18`. The first needs an OpenCL device (PoCL
on your CPU is one); the second runs without one, and on a local Ray if Ray is installed.
The answers are the engine's own functions of the same names: `run_on_device` in
kuiper/batch/pipeline.py, `collect` in kuiper/batch/ray_job.py. Try first, read them after.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def run_on_device(graphs: Sequence[Any], x: Any, device_outputs: bool = False) -> Any:
    """`x` through each graph of `graphs` in turn, every intermediate result left on the device.

    `graphs` are OpenCL graphs of one device (`kuiper.load(..., backend="opencl")`); `x` is
    the first graph's input, a NumPy array or a pyopencl array.

    1. Every graph but the last is called with `device_outputs=True`: it returns pyopencl
       arrays, which the next graph takes as they are (never call `.get()`, never let a graph
       return NumPy arrays in the middle: the test watches the downloads).
    2. A graph with several outputs returns a tuple: pass its items to the next graph as that
       many inputs, in order (`graph(*value, ...)`).
    3. The last graph returns NumPy arrays, unless `device_outputs=True` was asked for: then
       its outputs stay on the device too.

    The result must equal the host-to-host chain, e.g. `head(backbone(x))`, bit for bit.
    """
    raise NotImplementedError("lesson 18: write run_on_device")


def collect(dataset, files: Sequence[str]) -> dict[str, np.ndarray]:
    """Every row of a Ray dataset of results as columns, stacked in the order of `files`.

    `dataset.take_all()` returns the rows, one dict per input file: {"path": the file,
    "out0": its first output, "out1": ...}. Ray Data may hand them back in another order than
    the files went in. Sort the rows by the position of str(row["path"]) in `files`, then
    stack each column (`np.stack`) into one array: {"path": (N,), "out0": (N, ...), ...}.
    No rows (no files): return an empty dict.
    """
    raise NotImplementedError("lesson 18: write collect")
