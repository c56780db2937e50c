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

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.dynamic_shapes import dynamic_readers
from kuiper.errors import KuiperError
from kuiper.ir import Observer, RuntimeOperator, operator_failure
from kuiper.layers.opencl_base import HostFallback, OpenCLLayer
from kuiper.log import warn
from kuiper.opencl.dynamic import DynamicHostStep, has_device_dynamic_outputs
from kuiper.opencl.element_types import misread, oversized
from kuiper.opencl.runtime import OpenCLRuntime
from kuiper.plugins import call, reraise
from kuiper.tensor_spec import TensorSpec

logger = logging.getLogger(__name__)  # "kuiper.opencl.executor", under the "kuiper" logger


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
        self._warned: list[str] = []  # the fallbacks last warned about (see _warn_fallbacks)
        # The first build compiles the kernels (seconds on PoCL; the runtime caches them, so a
        # rebuild or a second graph is fast): say so, for a status line under -v.
        kernels = sum(isinstance(op.layer, OpenCLLayer) and not all(
            graph.specs[o.name].known for o in op.outputs) for op in graph.order)  # not folded
        logger.info("building OpenCL kernels for %d operators on %s...", kernels,
                    self.runtime.name)
        start = time.perf_counter()
        self.rebuild()
        logger.debug("OpenCL build done in %.2f s", time.perf_counter() - start)

    def rebuild(self) -> None:
        """Allocate and bind again for the graph's current shapes (after a resize)."""
        self.arrays: dict[str, Any] = {}   # operand name -> device array (None: host-only value)
        self.folded: set[str] = set()      # operators whose outputs are all known constants
        self.steps: list[tuple[RuntimeOperator, Any]] = []
        self.last_events: dict[str, list] = {}
        self.dynamic_values: dict[str, Any] = {}  # this run's data-dependent operands (host)
        self._bind_all()
        # Operators without an OpenCL layer, run on the host between a download and an upload,
        # and those whose layer fell back to the host for these shapes (fall_back_to_host)
        self.fallbacks = [op for op, runner in self.steps if isinstance(runner, HostFallback)
                          or getattr(runner, "host_fallback", None) is not None
                          or isinstance(runner, DynamicHostStep)]
        self._warn_fallbacks()

    def _warn_fallbacks(self) -> None:
        """A KuiperWarning naming the operators that run on the host, once per build: each
        costs a download and an upload per run, which a user moving to OpenCL should know.
        A rebuild for a new input size warns again only if the list changed."""
        names = [f"{op.name} ({op.type})" for op in self.fallbacks]
        if not names or names == self._warned:
            return
        self._warned = names
        shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10
                                         else "")
        warn(f"{len(names)} operator(s) of {self.graph.param_path} run on the host (CPU) "
             f"instead of OpenCL, with a download and an upload each: {shown} (`kuiper info "
             "--backend opencl` marks them with *)")

    def _bind_all(self) -> None:
        graph, rt = self.graph, self.runtime
        specs = graph.specs
        readers = dynamic_readers(graph.order, specs)  # kuiper/opencl/dynamic.py
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
            if op.name in readers or (any(s.dynamic for s in out_specs)
                                      and not has_device_dynamic_outputs(layer)):
                self.steps.append((op, DynamicHostStep(op, layer, self)))
                continue
            in_specs = [specs[o.name] for o in op.inputs]
            inputs = [self.arrays[o.name] for o in op.inputs]
            if isinstance(layer, OpenCLLayer):
                outputs = self._bind_layer(op, layer, inputs, in_specs, out_specs)
                runner = layer
            else:
                outputs = [rt.empty(s.shape, s.dtype) for s in out_specs]
                runner = HostFallback(layer, rt)
                runner.bind(inputs, outputs, in_specs, out_specs)
            for operand, array in zip(op.outputs, outputs):
                self.arrays[operand.name] = array
            self.steps.append((op, runner))

    def _bind_layer(self, op, layer, inputs, in_specs, out_specs) -> list:
        """allocate_outputs + bind, guarded (kuiper/opencl/element_types.py).

        A tensor too large for the kernels' 32-bit indices is refused (an OperatorError). When
        a kernel would read or write an operand's buffer with another element type than its
        dtype's (a float kernel on a uint8 input runs past the buffer), the operator runs its
        CPU layer instead, as the CPU backend would (graph.fallbacks lists it,
        layer.fallback_reason says why)."""
        layer.attach(self.runtime)
        described = [(f"input {i} ('{o.name}')", s) for i, (o, s) in enumerate(zip(op.inputs,
                                                                                    in_specs))]
        described += [(f"output {i} ('{o.name}')", s)
                      for i, (o, s) in enumerate(zip(op.outputs, out_specs))]
        too_large = oversized(layer, described)
        if too_large is not None:  # refused before anything of that size is allocated
            raise op.error(f"{too_large}: run the model on the cpu backend")
        try:
            outputs = call(op, layer, "allocate_outputs", layer.allocate_outputs, inputs,
                           in_specs, out_specs)
            call(op, layer, "bind", layer.bind, inputs, outputs, in_specs, out_specs)
            arrays = list(inputs) + list(outputs)
            why = misread(layer, [(what, array, spec.dtype) for (what, spec), array
                                  in zip(described, arrays)])
            if why is not None:
                layer.fall_back_to_host(inputs, outputs, in_specs, out_specs, why)
        except KuiperError:
            raise
        except Exception as e:  # every failure must name the operator
            raise operator_failure(op, "binding its OpenCL kernels", e, self.graph.specs) from e
        return outputs

    def run(self, inputs: list[np.ndarray], observer: Observer | None = None,
            outputs: Sequence[str] | None = None) -> list:
        """Run once; returns the graph outputs, or the operands named in `outputs` (any
        operand: every one has its own device array, or is a view or a folded constant)."""
        cl, queue, graph = self.runtime.cl, self.runtime.queue, self.graph
        events: dict[str, list] = {}
        self.dynamic_values = {}
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
                try:
                    if isinstance(runner, HostFallback):
                        reraise(op, runner.layer, "forward", e)
                    reraise(op, runner, "enqueue", e)
                except KuiperError:
                    raise
                except Exception:  # a bare error of Kuiper's own layer: name the operator
                    raise operator_failure(op, "running on OpenCL", e, graph.specs) from e
            for operand in op.outputs:
                events[operand.name] = done
            if has_device_dynamic_outputs(runner) and any(
                    graph.specs[o.name].dynamic for o in op.outputs):
                # A data-dependent size: wait, and keep the used part of each output (host)
                cl.wait_for_events(done) if done else queue.finish()
                for operand, array in zip(op.outputs, runner.dynamic_outputs(queue)):
                    self.dynamic_values[operand.name] = array.get(queue)
            if observer is not None:  # debugging/compare path: synchronise per operator
                cl.wait_for_events(done) if done else queue.finish()
                seconds = time.perf_counter() - start
                outs = [self._host(o.name) for o in op.outputs]
                observer(op, outs, seconds)
        self.last_events = events
        if outputs is None:
            outputs = [o.name for o in graph.output_operands]
        results = [self._download(name, events.get(name, [])) for name in outputs]
        queue.finish()  # the one host wait of the inference
        return results

    def close(self) -> None:
        """Drop every device array of this graph (their buffers are freed with them; the
        shared runtime and its built programs stay, for other graphs)."""
        self.arrays, self.steps, self.folded = {}, [], set()
        self.last_events, self.dynamic_values = {}, {}

    def operator_events(self) -> list[tuple[RuntimeOperator, list]]:
        """Each operator's OpenCL events of the last run, in execution order.

        On a queue made with `profiling=True`, `event.profile.start/end` (ns) time every kernel
        on the device (`kuiper bench`). A CPU fallback lists only its upload copies.
        """
        return [(op, list(runner.events) if hasattr(runner, "events") else
                 list(self.last_events.get(op.outputs[0].name, []) if op.outputs else []))
                for op, runner in self.steps]

    def _download(self, name: str, wait_for: list):
        if name in self.dynamic_values:
            return self.dynamic_values[name]
        array = self.arrays.get(name)
        spec = self.graph.specs[name]
        if array is None or spec.known:  # folded: the very value the CPU backend returns
            return spec.value
        host = np.empty(spec.shape, spec.dtype)
        if host.size:  # base_data and offset: a view (reshape, a byte view) may start inside
            self.runtime.cl.enqueue_copy(self.runtime.queue, host, array.base_data,
                                         src_offset=array.offset, wait_for=wait_for or None,
                                         is_blocking=False)
        return host

    def _host(self, name: str):
        if name in self.dynamic_values:
            return self.dynamic_values[name]
        array = self.arrays.get(name)
        return self.graph.specs[name].value if array is None else array.get(self.runtime.queue)
