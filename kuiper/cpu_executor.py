"""The CPU executor: run NumPy layers in topological order, freeing values after their last use.

One optimisation on top: *activation fusion*. In `conv -> relu`, the ReLU reads the whole
convolution output and writes a new array of the same size. When the ReLU is the only reader of
that output, the convolution can apply it while writing its output (or in place right after),
and the ReLU step disappears. `fusions` pairs each such producer with its activation; the
ReLU's output name then simply refers to the producer's (fused) output.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time

import numpy as np

from kuiper.ir import Observer
from kuiper.plugins import reraise

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


class CPUExecutor:
    """Runs a built RuntimeGraph (`graph`) with the NumPy layers.

    `fuse=False` runs every ReLU as its own step instead of in its producer (see find_fusions).
    """

    def __init__(self, graph, fuse: bool = True):
        keep_freed_memory()
        self.graph = graph
        self.fuse = fuse
        self.fallbacks: list = []  # every operator runs its own (CPU) layer here
        self.rebuild()

    def rebuild(self) -> None:
        """Plan again for the graph's current shapes (the graph calls this after a resize)."""
        graph, fuse = self.graph, self.fuse
        self.steps = [op for op in graph.order if op.layer is not None]
        keep = {o.name for o in graph.output_operands}
        self.fusions = find_fusions(self.steps, keep, graph.specs) if fuse else {}
        self.fused_away = {act.name for _, act in self.fusions.values()}
        # How many times each operand will still be read; at zero its array can be dropped,
        # which keeps peak memory near the widest point of the graph rather than its sum.
        self.uses = {}
        for op in self.steps:
            for operand in op.inputs:
                self.uses[operand.name] = self.uses.get(operand.name, 0) + 1
        for name in keep:
            self.uses[name] = self.uses.get(name, 0) + 1

    def run(self, inputs: list[np.ndarray], observer: Observer | None = None) -> list:
        """Run once. With an `observer`, every operator runs on its own (no fusion), so each
        one's output is exactly what the model defines: what `kuiper compare` checks."""
        graph = self.graph
        values: dict[str, object] = {}
        for op, x in zip(graph.input_ops, inputs):
            values[op.outputs[0].name] = x
        remaining = dict(self.uses)
        fusions = self.fusions if observer is None else {}
        for op in self.steps:
            args = [values[o.name] for o in op.inputs]
            start = time.perf_counter()
            try:
                if op.name in fusions:
                    outs = op.layer.forward(args, activate=fusions[op.name][0])
                elif observer is None and op.name in self.fused_away:
                    outs = args  # done by its producer: the output is the producer's
                else:
                    outs = op.layer.forward(args)
            except Exception as e:  # a plugin's layer: the error names the plugin
                reraise(op, op.layer, "forward", e)
            if observer is not None:
                observer(op, list(outs), time.perf_counter() - start)
            for operand, value in zip(op.outputs, outs):
                values[operand.name] = value
            for operand in op.inputs:
                remaining[operand.name] -= 1
                if remaining[operand.name] == 0:
                    values.pop(operand.name, None)
        return [values[o.name] for o in graph.output_operands]


def find_fusions(steps, keep: set[str], specs) -> dict[str, tuple]:
    """{producer name: (activate, activation operator)} for every fusable pair.

    A pair fuses when the activation has an in-place form, its producer accepts one, and the
    producer's output is a float tensor read by nothing else (not even as a model output):
    otherwise someone would see the activated values where they expect the raw ones.
    """
    fusions = {}
    for op in steps:
        activate = op.layer.in_place_form()
        if activate is None or len(op.inputs) != 1:
            continue
        source = op.inputs[0]
        producer = source.producer
        if (producer is None or producer.layer is None or len(producer.outputs) != 1
                or not producer.layer.accepts_activation or producer.name in fusions
                or source.name in keep or len(source.consumers) != 1):
            continue
        spec = specs.get(source.name)
        if spec is None or not np.issubdtype(spec.dtype, np.floating) or len(spec.shape) == 0:
            continue
        fusions[producer.name] = (activate, op)
    return fusions
