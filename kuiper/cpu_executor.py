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
from collections.abc import Sequence

import numpy as np

from kuiper.dynamic_shapes import dynamic_readers, reinfer
from kuiper.errors import MALFORMED, KuiperError
from kuiper.ir import Observer, operator_failure
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
    `threads=N` limits NumPy's BLAS (the matrix products of convolutions and linear layers) to
    N threads while this graph runs (see blas_threads); None leaves BLAS as it is.
    """

    def __init__(self, graph, fuse: bool = True, threads: int | None = None):
        keep_freed_memory()
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or threads < 1):
            raise KuiperError(f"threads={threads!r}: expected a whole number of threads, at "
                              "least 1 (or None to leave NumPy's BLAS as it is)")
        self.graph = graph
        self.fuse = fuse
        self.threads = threads
        self._blas = blas_libraries() if threads is not None else None
        self.fallbacks: list = []  # every operator runs its own (CPU) layer here
        self.rebuild()

    def rebuild(self) -> None:
        """Plan again for the graph's current shapes (the graph calls this after a resize)."""
        graph, fuse = self.graph, self.fuse
        self.steps = [op for op in graph.order if op.layer is not None]
        # Readers of data-dependent sizes infer again per run (kuiper/dynamic_shapes.py)
        self.dynamic = dynamic_readers(self.steps, graph.specs)
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

    def run(self, inputs: list[np.ndarray], observer: Observer | None = None,
            outputs: Sequence[str] | None = None) -> list:
        """Run once; returns the values of the graph outputs, or of the operands named in
        `outputs` (any operand: ncnn's extract). With an `observer`, every operator runs on its
        own (no fusion), so each one's output is exactly what the model defines: what
        `kuiper compare` checks."""
        if self._blas is None:
            return self._run(inputs, observer, outputs)
        with self._blas.limit(limits=self.threads):  # restored when the run ends
            return self._run(inputs, observer, outputs)

    def _run(self, inputs, observer, outputs) -> list:
        graph = self.graph
        values: dict[str, object] = {}
        for op, x in zip(graph.input_ops, inputs):
            values[op.outputs[0].name] = x
        remaining = dict(self.uses)
        fusions = self.fusions if observer is None else {}
        if outputs is None:
            outputs = [o.name for o in graph.output_operands]
        else:  # asked-for values must survive: not freed after their last read, not fused into
            for name in outputs:
                remaining[name] = remaining.get(name, 0) + 1
            fusions = unfused(fusions, set(outputs))
        fused_away = {act.name for _, act in fusions.values()}
        for op in self.steps:
            args = [values[o.name] for o in op.inputs]
            start = time.perf_counter()
            try:
                if op.name in self.dynamic:
                    reinfer(op.layer, args, [graph.specs[o.name] for o in op.inputs])
                if op.name in fusions:
                    outs = op.layer.forward(args, activate=fusions[op.name][0])
                elif op.name in fused_away:
                    outs = args  # done by its producer: the output is the producer's
                else:
                    outs = op.layer.forward(args)
            except Exception as e:  # a plugin's layer: the error names the plugin
                try:
                    reraise(op, op.layer, "forward", e)
                except MALFORMED:  # a bare error of Kuiper's own layer: name the operator
                    raise operator_failure(op, "running", e, graph.specs) from e
            if observer is not None:
                observer(op, list(outs), time.perf_counter() - start)
            for operand, value in zip(op.outputs, outs):
                values[operand.name] = value
            for operand in op.inputs:
                remaining[operand.name] -= 1
                if remaining[operand.name] == 0:
                    values.pop(operand.name, None)
        return [values[name] for name in outputs]

    def close(self) -> None:
        """Drop the plan (its operators hold the layers, whose weights map the .pnnx.bin)."""
        self.steps, self.fusions, self.fused_away, self.uses = [], {}, set(), {}


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


def unfused(fusions: dict[str, tuple], wanted: set[str]) -> dict[str, tuple]:
    """`fusions` without the pairs whose producer output is in `wanted`: that raw value is
    asked for, and a fused producer writes the activated one in its place."""
    return {name: pair for name, pair in fusions.items()
            if pair[1].inputs[0].name not in wanted}


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
