"""The CPU executor: run NumPy layers in topological order, freeing values after their last use.

It carries out the graph's plan (kuiper/passes/): folded operators never run (their known
values are handed to their readers), dead operators and no-ops have no step (a no-op's output
*is* its input), and a producer with a fused epilogue gets it as `forward(inputs,
epilogue=..., residual=...)`, so the activation after a convolution is applied in place on
the convolution's fresh output and the activation's step disappears.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Sequence

import numpy as np

from kuiper.core.dynamic_shapes import dynamic_readers, reinfer
from kuiper.core.errors import MALFORMED, ArgumentError
from kuiper.core.ir import Observer, operator_failure
from kuiper.core.plugins import reraise, results
from kuiper.cpu.arena import HostArena
from kuiper.memory import DEFAULT_STRATEGY, check_strategy
from kuiper.memory.plan_memory import graph_lifetimes

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # the largest value glibc accepts on 64-bit


def keep_freed_memory() -> bool:
    """Ask glibc to keep freed activation memory for reuse instead of returning it to the OS.

    By default glibc serves every allocation above a threshold (128 KiB to start with) with a
    fresh mmap and unmaps it on free. An inference allocates and frees the same large arrays
    every run, so each run page-faults all of them in again: ~2,400 faults and ~10 ms of a 70 ms
    ResNet-18 on a 2-core machine. Raising the mmap threshold and disabling trimming keeps those
    pages in the heap, where the next run reuses them. This is process-wide (the memory stays
    with the process); set KUIPER_KEEP_FREED_MEMORY=0 to leave malloc alone. No-op off glibc.
    """
    if os.environ.get("KUIPER_KEEP_FREED_MEMORY", "1") == "0" or not sys.platform.startswith(
            "linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)
                    and libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to tune
        return False


# More BLAS threads than any machine has cores (the count goes to a C int: 10**40 failed there)
MAX_THREADS = 1 << 16


class CPUExecutor:
    """Runs a built RuntimeGraph (`graph`) with the NumPy layers, as its `plan` says.

    `fuse=False` runs every activation and residual add as its own step instead of in its
    producer: the plan without the fuse_epilogues pass.
    `threads=N` limits NumPy's BLAS (the matrix products of convolutions and linear layers) to
    N threads while this graph runs (see blas_threads); None leaves BLAS as it is.
    `memory`: the plan of the workspace that layers with `writes_into` compute into
    (kuiper/cpu/arena.py): "greedy_by_size" (default) or "greedy_in_order" reuse one arena
    every forward, "naive" allocates every result per forward.
    """

    def __init__(self, graph, fuse: bool = True, threads: int | None = None,
                 memory: str = DEFAULT_STRATEGY):
        self.memory = check_strategy(memory)
        keep_freed_memory()
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or not 1 <= threads <= MAX_THREADS):
            raise ArgumentError("threads", f"got {threads!r}, expected a whole number of "
                                           f"threads from 1 to {MAX_THREADS:,} (or None to "
                                           "leave NumPy's BLAS as it is)")
        self.graph = graph
        self.fuse = fuse
        self.threads = threads
        self._blas = blas_libraries() if threads is not None else None
        self.fallbacks: list = []  # every operator runs its own (CPU) layer here
        self.rebuild()

    def rebuild(self) -> None:
        """Plan again for the graph's current shapes (the graph calls this after a resize)."""
        graph = self.graph
        names = graph.passes if self.fuse else tuple(n for n in graph.passes
                                                      if n != "fuse_epilogues")
        self.plan = graph.plan_for(names)
        self.schedule = Schedule(graph, self.plan)
        self._unoptimized: Schedule | None = None  # for observers and raw values, lazily
        # the memory plan: tensors for `kuiper info --memory`, the arena for writes_into layers
        self.lifetimes = graph_lifetimes(graph, self.plan)
        self.arena = HostArena(graph, self.plan, self.memory if "plan_memory" in graph.passes
                               else "naive")

    @property
    def steps(self) -> list:
        """The operators that run, in order."""
        return [step.op for step in self.schedule.steps]

    @property
    def uses(self) -> dict[str, int]:
        """How many times each operand is read per run (graph outputs count once more)."""
        return self.schedule.uses

    def run(self, inputs: list[np.ndarray], observer: Observer | None = None,
            outputs: Sequence[str] | None = None) -> list:
        """Run once; returns the values of the graph outputs, or of the operands named in
        `outputs` (any operand: ncnn's extract). With an `observer`, or when `outputs` names a
        value the plan does not keep (a fused producer's raw output, a dead operator's), the
        graph runs its unoptimized plan: every operator on its own, so each one's output is
        exactly what the model defines (what `kuiper compare` checks)."""
        schedule = self.schedule
        if observer is not None or (outputs is not None and not self.plan.serves(outputs)):
            if self._unoptimized is None:
                self._unoptimized = Schedule(self.graph, self.graph.unoptimized_plan)
            schedule = self._unoptimized
        if self._blas is None:
            return self._run(schedule, inputs, observer, outputs)
        with self._blas.limit(limits=self.threads):  # restored when the run ends
            return self._run(schedule, inputs, observer, outputs)

    def _run(self, schedule: Schedule, inputs, observer, outputs) -> list:
        graph, resolve = self.graph, schedule.plan.resolve
        # The arena serves the plain run: an observer or an extract keeps values the plan
        # lets later steps overwrite.
        arena = self.arena if (schedule is self.schedule and observer is None
                               and outputs is None) else None
        values: dict[str, object] = dict(schedule.constants)
        for op, x in zip(graph.input_ops, inputs):
            values[op.outputs[0].name] = x
        remaining = dict(schedule.uses)
        if outputs is None:
            outputs = [o.name for o in graph.output_operands]
        else:  # asked-for values must survive: not freed after their last read
            for name in outputs:
                remaining[resolve(name)] = remaining.get(resolve(name), 0) + 1
        for step in schedule.steps:
            op = step.op
            args = [values[name] for name in step.inputs]
            start = time.perf_counter()
            try:
                if step.dynamic:
                    reinfer(op.layer, args, [graph.specs[o.name] for o in op.inputs])
                out = arena.out_for(op.name) if arena is not None else None
                into = {} if out is None else {"out": out}  # writes_into: its arena view
                if step.epilogue is None:
                    outs = op.layer.forward(args, **into)
                else:
                    residual = values[step.residual] if step.residual is not None else None
                    outs = op.layer.forward(args, epilogue=step.epilogue, residual=residual,
                                            **into)
                outs = results(op, op.layer, outs)  # one value per output
            except Exception as e:  # a plugin's layer: the error names the plugin
                try:
                    reraise(op, op.layer, "forward", e)
                except MALFORMED:  # a bare error of Kuiper's own layer: name the operator
                    raise operator_failure(op, "running", e, graph.specs) from e
            if observer is not None:
                observer(op, list(outs), time.perf_counter() - start)
            for operand, value in zip(op.outputs, outs):
                values[operand.name] = value
            for name in step.reads:
                remaining[name] -= 1
                if remaining[name] == 0:
                    values.pop(name, None)
        if arena is None:
            return [values[resolve(name)] for name in outputs]
        return [arena.detached(values[resolve(name)]) for name in outputs]  # never the arena

    def close(self) -> None:
        """Drop the plan (its operators hold the layers, whose weights map the .pnnx.bin)."""
        self.schedule = self._unoptimized = None
        self.plan = None


class Step:
    """One operator run by the CPU executor: what it reads, and its fused epilogue."""

    def __init__(self, op, plan, dynamic: bool):
        self.op, self.dynamic = op, dynamic
        self.inputs = [plan.resolve(o.name) for o in op.inputs]
        self.epilogue = plan.epilogues.get(op.name)
        self.residual = None
        if self.epilogue is not None and self.epilogue.residual is not None:
            self.residual = plan.resolve(self.epilogue.residual)
        self.reads = plan.step_inputs(op)  # inputs and residual: freed after the last read


class Schedule:
    """A plan made runnable: the steps, the folded constants, and how many times each value
    will still be read (at zero its array is dropped, which keeps peak memory near the widest
    point of the graph rather than its sum)."""

    def __init__(self, graph, plan):
        self.plan = plan
        specs = graph.specs
        order = [op for op in graph.order if op.layer is not None]
        # infer again per run (kuiper/core/dynamic_shapes.py)
        dynamic = dynamic_readers(order, specs)
        self.steps = [Step(op, plan, op.name in dynamic) for op in plan.steps]
        self.constants = {o.name: specs[o.name].value for op in order if op.name in plan.folded
                          for o in op.outputs}
        self.uses: dict[str, int] = {}
        for step in self.steps:
            for name in step.reads:
                self.uses[name] = self.uses.get(name, 0) + 1
        for operand in graph.output_operands:
            name = plan.resolve(operand.name)
            self.uses[name] = self.uses.get(name, 0) + 1


def blas_libraries():
    """The BLAS libraries loaded in this process (NumPy's), as a threadpoolctl controller.

    Its `limit(limits=N)` sets their thread count for a `with` block and restores it on exit;
    OMP_NUM_THREADS or OPENBLAS_NUM_THREADS would come too late, as OpenBLAS reads them once
    when NumPy is imported. Made once per executor: finding the libraries scans every loaded
    one (~60 us, a third of a small model's run); limiting them then costs ~2 us. The limit is
    process-wide while it lasts: another thread's NumPy work runs with it too.
    """
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")
