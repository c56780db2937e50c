"""Lesson 11 exercises: per-operator profiles, on the CPU and from OpenCL events.

Fill in the functions, then run `kuiper course check 11`. The answers are the engine's own
functions of the same names, in kuiper/bench/columns.py: try first, read them after.
"""

from __future__ import annotations

import statistics  # noqa: F401 - statistics.median

import numpy as np

from kuiper.bench.timing import PROFILE_RUNS  # noqa: F401 - how many runs to take the median of


def cpu_profile(graph, inputs: list[np.ndarray]) -> dict[str, float]:
    """Median wall time, in seconds, of every operator's forward() over PROFILE_RUNS runs.

    Run `graph.forward(*inputs, observer=observe)` PROFILE_RUNS times; the graph calls
    `observe(op, outputs, seconds)` after each operator. Return {op.name: median seconds}.
    """
    raise NotImplementedError("lesson 11: write cpu_profile")


def opencl_profile(graph, inputs: list[np.ndarray]) -> dict[str, float]:
    """Median DEVICE time, in seconds, of every operator's kernels over PROFILE_RUNS runs.

    The graph was loaded with profiling=True. After each `graph.forward(*inputs)`,
    `graph.executor.operator_events()` lists (op, events) for the operators of that run; an
    operator's time is the sum over its events of `event.profile.end - event.profile.start`
    (nanoseconds). Return {op.name: median seconds}.
    """
    raise NotImplementedError("lesson 11: write opencl_profile")
