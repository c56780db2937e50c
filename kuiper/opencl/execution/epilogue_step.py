"""The fused epilogue on OpenCL when the producer's own kernels do not carry it out.

The passes decide which activation / residual add fold into a producer (kuiper/passes/,
kuiper/passes/epilogue.py). A layer class that applies the epilogue in its store sets
`epilogue_in_kernel = True` (on the class, or on the instance in `bind` when only some of its
kernels can); for every other producer, and for one that fell back to the host, the executor
wraps the step in an `EpilogueStep`: the producer's launches, then one launch of
clkernels/epilogue.cl over its output, in place.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from kuiper.layers.opencl_base import HostFallback, Launch, round_up


def epilogue_operand(epilogue: Any, residual: Any, runtime: Any) -> tuple[Any, Any]:
    """(the epilogue, what its producer binds as `residual`): for an epilogue that adds no
    residual but has numbers, a copy of it that reads them as data (Epilogue.numbers_as_data)
    and a float32 device array of them (clkernels/epilogue.h, EPI_K), which the caller keeps
    alive; otherwise the epilogue and the residual operand's array (or None) as they are."""
    if epilogue and residual is None:
        constants = epilogue.opencl_constants()
        if constants:
            return (replace(epilogue, numbers_as_data=True),
                    runtime.to_device(np.asarray(constants, np.float32)))
    return epilogue, residual


def with_epilogue(runner: Any, epilogue: Any, output: Any, residual: Any, runtime: Any) -> Any:
    """`runner` itself when it applies `epilogue` in its own kernels (or there is none), else
    an EpilogueStep running it and then the epilogue kernel on `output` (a device array)."""
    if not epilogue:
        return runner
    in_kernel = getattr(runner, "epilogue_in_kernel", False) and getattr(
        runner, "host_fallback", None) is None and not isinstance(runner, HostFallback)
    if in_kernel:
        return runner
    n = int(np.prod(output.shape))
    kernel = runtime.kernel("epilogue", "epilogue", epilogue.opencl_options())
    kernel.set_args(output.data, None if residual is None else residual.data, np.int32(n))
    return EpilogueStep(runner, Launch(kernel, (round_up(n, 64),)) if n else None, runtime)


class EpilogueStep:
    """A producer's step followed by its epilogue kernel; enqueued like any layer."""

    def __init__(self, runner: Any, launch: Launch | None, runtime: Any):
        self.runner, self.launch, self.runtime = runner, launch, runtime
        self.events: list = []

    @property
    def host_fallback(self) -> Any:
        """The producer's host fallback, if it runs on the host (graph.fallbacks lists it)."""
        if isinstance(self.runner, HostFallback):
            return self.runner
        return getattr(self.runner, "host_fallback", None)

    @property
    def launches(self) -> list[Launch]:
        """The producer's launches and the epilogue's (what one run enqueues)."""
        inner = list(getattr(self.runner, "launches", ()) or ())
        return inner + ([self.launch] if self.launch is not None else [])

    def enqueue(self, queue, wait_for) -> list:
        done = self.runner.enqueue(queue, wait_for)
        self.events = list(getattr(self.runner, "events", ()))
        if self.launch is None:
            return done
        after = list(done) or list(wait_for)  # the residual's events are in wait_for
        event = self.runtime.cl.enqueue_nd_range_kernel(
            queue, self.launch.kernel, self.launch.global_size, None, wait_for=after or None)
        self.events.append(event)
        return [event]
