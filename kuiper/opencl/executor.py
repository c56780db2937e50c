"""The OpenCL executor: the whole graph resident on the device.

At build time (once per input shape):
- every operand gets a device array (a view for reshape-like layers),
- constants known from shapes alone (pnnx.Attribute, `size(...)` arithmetic) are folded: their
  operators never run, numeric ones are uploaded once,
- every layer creates its kernels and binds their arguments.

Per inference: one upload per graph input, one enqueue batch per operator, each waiting on the
events of the operators that produce its inputs (so an out-of-order queue runs it correctly and
may overlap independent branches), one download per graph output, and a single host wait.
An operator without an OpenCL twin runs its CPU layer between a download and an upload (the
registry's fallback rule, carried out by a HostFallback); `fallbacks` names every such operator.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from kuiper.ir import Observer, RuntimeOperator
from kuiper.layers.opencl_base import HostFallback, OpenCLLayer
from kuiper.opencl.runtime import OpenCLRuntime
from kuiper.plugins import call, reraise
from kuiper.tensor_spec import TensorSpec


def _is_numeric(spec: TensorSpec) -> bool:
    return spec.dtype != np.dtype(object)


class OpenCLExecutor:
    """Runs a built RuntimeGraph (`graph`) on one OpenCL device.

    Options: `device` ("P:D" or part of a name, as PYOPENCL_CTX), `out_of_order` (an
    out-of-order queue), `profiling` (events carry device timestamps), or a `runtime` to share.
    """

    def __init__(self, graph, device: str | None = None, out_of_order: bool = False,
                 profiling: bool = False, runtime: OpenCLRuntime | None = None):
        # One runtime per device and queue kind per process: programs are built once for every
        # graph; a rebuild for a new input size keeps it too.
        self.runtime = runtime or OpenCLRuntime.shared(device, out_of_order, profiling)
        self.graph = graph
        self.rebuild()

    def rebuild(self) -> None:
        """Allocate and bind again for the graph's current shapes (after a resize)."""
        self.arrays: dict[str, Any] = {}   # operand name -> device array (None: host-only value)
        self.folded: set[str] = set()      # operators whose outputs are all known constants
        self.steps: list[tuple[RuntimeOperator, Any]] = []
        self.last_events: dict[str, list] = {}
        self._bind_all()
        # Operators without an OpenCL layer, run on the host between a download and an upload
        self.fallbacks = [op for op, runner in self.steps if isinstance(runner, HostFallback)]

    def _bind_all(self) -> None:
        graph, rt = self.graph, self.runtime
        specs = graph.specs
        for op in graph.input_ops:
            spec = specs[op.outputs[0].name]
            self.arrays[op.outputs[0].name] = rt.empty(spec.shape, spec.dtype)
        for op in graph.order:
            layer = op.layer
            if layer is None:
                continue
            out_specs = [specs[o.name] for o in op.outputs]
            if all(s.known for s in out_specs):
                self.folded.add(op.name)
                for operand, spec in zip(op.outputs, out_specs):
                    self.arrays[operand.name] = (rt.to_device(np.asarray(spec.value, spec.dtype))
                                                 if _is_numeric(spec) else None)
                continue
            in_specs = [specs[o.name] for o in op.inputs]
            inputs = [self.arrays[o.name] for o in op.inputs]
            if isinstance(layer, OpenCLLayer):
                layer.attach(rt)
                outputs = call(op, layer, "allocate_outputs", layer.allocate_outputs, inputs,
                               in_specs, out_specs)
                call(op, layer, "bind", layer.bind, inputs, outputs, in_specs, out_specs)
                runner = layer
            else:
                outputs = [rt.empty(s.shape, s.dtype) for s in out_specs]
                runner = HostFallback(layer, rt)
                runner.bind(inputs, outputs, in_specs, out_specs)
            for operand, array in zip(op.outputs, outputs):
                self.arrays[operand.name] = array
            self.steps.append((op, runner))

    def run(self, inputs: list[np.ndarray], observer: Observer | None = None) -> list:
        cl, queue, graph = self.runtime.cl, self.runtime.queue, self.graph
        events: dict[str, list] = {}
        for op, x in zip(graph.input_ops, inputs):
            name = op.outputs[0].name
            if x.size:  # an empty tensor has no buffer to copy into
                events[name] = [cl.enqueue_copy(queue, self.arrays[name].data, x,
                                                is_blocking=False)]
        for op, runner in self.steps:
            wait_for = []
            for operand in op.inputs:
                for event in events.get(operand.name, ()):
                    if event not in wait_for:
                        wait_for.append(event)
            start = time.perf_counter()
            try:
                done = runner.enqueue(queue, wait_for)
            except Exception as e:  # a plugin's layer (or the CPU one a HostFallback runs)
                if isinstance(runner, HostFallback):
                    reraise(op, runner.layer, "forward", e)
                reraise(op, runner, "enqueue", e)
            for operand in op.outputs:
                events[operand.name] = done
            if observer is not None:  # debugging/compare path: synchronise per operator
                cl.wait_for_events(done) if done else queue.finish()
                seconds = time.perf_counter() - start
                outs = [self._host(o.name) for o in op.outputs]
                observer(op, outs, seconds)
        self.last_events = events
        results = []
        for operand in graph.output_operands:
            results.append(self._download(operand.name, events.get(operand.name, [])))
        queue.finish()  # the one host wait of the inference
        return results

    def operator_events(self) -> list[tuple[RuntimeOperator, list]]:
        """Each operator's OpenCL events of the last run, in execution order.

        On a queue made with `profiling=True`, `event.profile.start/end` (ns) time every kernel
        on the device (`kuiper bench`). A CPU fallback lists only its upload copies.
        """
        return [(op, list(runner.events) if hasattr(runner, "events") else
                 list(self.last_events.get(op.outputs[0].name, []) if op.outputs else []))
                for op, runner in self.steps]

    def _download(self, name: str, wait_for: list):
        array = self.arrays.get(name)
        spec = self.graph.specs[name]
        if array is None:
            return spec.value
        host = np.empty(spec.shape, spec.dtype)
        if host.size:
            self.runtime.cl.enqueue_copy(self.runtime.queue, host, array.data,
                                         wait_for=wait_for or None, is_blocking=False)
        return host

    def _host(self, name: str):
        array = self.arrays.get(name)
        return self.graph.specs[name].value if array is None else array.get(self.runtime.queue)
