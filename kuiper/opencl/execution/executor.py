"""The OpenCL executor: the whole graph resident on the device.

At build time (once per input shape):
- every operand gets a device array, as its producer declares (`output_kinds`: a view of an
  input for reshape-like layers; layers/opencl_base.py), placed by the memory plan,
- constants known from shapes alone (pnnx.Attribute, `size(...)` arithmetic) are folded: their
  operators never run, numeric ones are uploaded once,
- the graph's plan (kuiper/passes/) is carried out: dead operators and no-ops get no step (a
  no-op's output is its input's array), and a producer with a fused epilogue gets it as
  `bind(..., epilogue=, residual=)`, its absorbed operators no step (their output is the
  producer's array); a producer whose kernels do not apply it runs one more kernel
  (kuiper/opencl/execution/epilogue_step.py), and an operator whose outputs are all empty by
  their shapes (a batch of 0 images) gets no step either (`computes_nothing`),
- every layer says what scratch it needs (`workspace_shapes`), one shared scratch is sized for
  the largest, and every layer creates its kernels and binds their arguments, once
  (`bind_layer`), its workspaces passed as `bind(..., workspaces=)`.

Per inference: one upload per graph input, one enqueue batch per operator, each waiting on the
events of the operators that produce its inputs (so an out-of-order queue runs it correctly and
may overlap independent branches), one download per graph output, and a single host wait.
An operator without an OpenCL twin runs its CPU layer between a download and an upload (the
registry's fallback rule, carried out by a HostFallback); `fallbacks` names every such operator.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from kuiper.core.dynamic_shapes import dynamic_readers
from kuiper.core.errors import KuiperError
from kuiper.core.ir import Observer, RuntimeOperator, not_tensor_inputs, operator_failure
from kuiper.core.log import warn
from kuiper.core.plugins import call, reraise
from kuiper.core.progress import progress
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.opencl_base import FRESH, HostFallback, OpenCLLayer
from kuiper.memory import check_strategy, operand_lifetimes, plan
from kuiper.opencl.device.element_types import misread, oversized
from kuiper.opencl.device.runtime import OpenCLRuntime, compiles_to_native_cpu
from kuiper.opencl.execution.device_memory import (
    DeviceMemory,
    Workspaces,
    default_strategy,
    device_view,
    in_place_outputs,
)
from kuiper.opencl.execution.dynamic import DynamicHostStep, has_device_dynamic_outputs
from kuiper.opencl.execution.epilogue_step import epilogue_operand, with_epilogue
from kuiper.opencl.execution.unfused import unoptimized_view
from kuiper.opencl.execution.warm_up import offer_to_helpers, warm_up

logger = logging.getLogger(__name__)  # "kuiper.opencl.execution.executor", under "kuiper"
# set while an executor builds the unfused twin of another (_unoptimized_executor): its build
# is not announced again (per thread: graphs may be built in several at once)
_building = threading.local()


def _nothing(_n: int = 1) -> None:
    """The progress callback outside a build."""


def _is_numeric(spec: TensorSpec) -> bool:
    return spec.dtype != np.dtype(object)


def _step_reads(graph):
    """What a step reads, for the memory planner: with the graph's pass plan, its resolved
    inputs and a fused epilogue's residual (`plan.step_inputs`), else its inputs."""
    plan = getattr(graph, "plan", None)
    return plan.step_inputs if plan is not None else None


def precision_decision(layer, precision: str) -> dict:
    """{"precision": ...} for a layer that declares `reduced_precision`, else {}: the keyword
    its `workspace_shapes` and `bind` take (layers/opencl_base.py)."""
    return {"precision": precision} if getattr(layer, "reduced_precision", False) else {}


def computes_nothing(out_specs, kinds) -> bool:
    """Every output of the operator has a static shape with a 0 in it (a batch of 0 images):
    there is no value to compute, so the operator is neither sized nor bound and runs no step
    (kernels sized from the output would divide by 0 or launch an empty grid, which OpenCL
    refuses). A data-dependent size (spec.dynamic: its shape is a bound) and a host-only
    output (a value the layer hands over when it runs) still run."""
    return (bool(out_specs) and all(spec.numel == 0 and not spec.dynamic for spec in out_specs)
            and all(kind.kind != "host" for kind in kinds))


def bind_layer(op, layer, runtime, inputs, outputs, in_specs, out_specs, epilogue=None,
               residual=None, workspaces=(), specs=None, precision: str = "fp32") -> None:
    """attach + bind of one OpenCL layer, with what the executor decided for it as arguments
    (layers/opencl_base.py): `epilogue=`/`residual=` for a layer whose kernels store through
    it, `workspaces=` for one that declared scratch, `precision=` (the plan's) for one that
    declared `reduced_precision`. The one way a layer is bound: the executor and `kuiper tune`
    (tuner.py) both call it.

    A tensor too large for the kernels' 32-bit indices is refused (an OperatorError). When a
    kernel would read or write an operand's buffer with another element type than its dtype's
    (a float kernel on a uint8 input runs past the buffer), the operator runs its CPU layer
    instead, as the CPU backend would (graph.fallbacks lists it, layer.fallback_reason says
    why)."""
    layer.attach(runtime)
    described = OpenCLExecutor._refuse_oversized(op, layer, in_specs, out_specs)
    extras = {}
    if layer.epilogue_in_kernel:
        extras.update(epilogue=epilogue, residual=residual)
    if workspaces:
        extras["workspaces"] = list(workspaces)
    extras.update(precision_decision(layer, precision))
    try:
        call(op, layer, "bind", layer.bind, inputs, outputs, in_specs, out_specs, **extras)
        arrays = list(inputs) + list(outputs)
        why = misread(layer, [(what, array, spec.dtype) for (what, spec), array
                              in zip(described, arrays)])
        if why is not None:
            layer.fall_back_to_host(inputs, outputs, in_specs, out_specs, why)
    except KuiperError:
        raise
    except Exception as e:  # every failure must name the operator
        raise operator_failure(op, "binding its OpenCL kernels", e, specs or {}) from e


class OpenCLExecutor:
    """Runs a built RuntimeGraph (`graph`) on one OpenCL device.

    Options: `device` ("P:D" or part of a name, as PYOPENCL_CTX), `out_of_order` (an
    out-of-order queue), `profiling` (events carry device timestamps), or a `runtime` to share.
    `memory`: how operands share device memory (kuiper/memory/: "greedy_by_size", one arena;
    "greedy_in_order", pooled buffers; "naive", a buffer each; None, the device's default:
    greedy_by_size on CPUs, greedy_in_order elsewhere, kuiper/opencl/execution/device_memory.py says
    why). An out-of-order queue may run independent operators at once, and data-dependent sizes are
    read on the host later: both keep "naive", whatever is asked (`memory_strategy` says which
    ran).
    """

    def __init__(self, graph, device: str | None = None, out_of_order: bool = False,
                 profiling: bool = False, runtime: OpenCLRuntime | None = None,
                 memory: str | None = None, device_outputs: bool = False):
        # One runtime per device and queue kind per process: programs are built once for every
        # graph; a rebuild for a new input size keeps it too.
        self.runtime = runtime or OpenCLRuntime.shared(device, out_of_order, profiling)
        self.memory = (check_strategy(memory) if memory is not None
                       else default_strategy(self.runtime.device))
        self.graph = graph
        if not isinstance(device_outputs, bool):
            raise KuiperError(f"device_outputs={device_outputs!r}: expected True (outputs as "
                              "pyopencl arrays on the device) or False (NumPy arrays)")
        self.device_outputs = device_outputs   # the default of run(device_outputs=None)
        self._warned: list[str] = []  # the fallbacks last warned about (see _warn_fallbacks)
        # The first build compiles the kernels (seconds to minutes on PoCL with a cold cache):
        # it says so once, as a progress bar or a status line (kuiper/core/progress.py). A
        # rebuild for a new size, and the unfused twin of an observed run, say so under -v.
        self._announce = not getattr(_building, "quietly", False)
        self.rebuild()
        self._announce = False

    def _progress(self):
        """The progress of one build: a bar on a terminal, else one line (INFO for a graph's
        first build, DEBUG for the others), counting the operators bound and, where kernels
        are compiled at their first launch, the operators of the warm-up run."""
        kernels = sum(isinstance(op.layer, OpenCLLayer) and not all(
            self.graph.specs[o.name].known for o in op.outputs)
            for op in self.graph.order)  # not folded
        total = self._operators() * (2 if self.warms_up else 1)
        what = (f"building OpenCL kernels for {kernels} operators on {self.runtime.name}"
                if self._announce else f"binding OpenCL kernels for {kernels} operators")
        return progress(what, total, unit="steps", log=logger,
                        level=logging.INFO if self._announce else logging.DEBUG,
                        label=f"OpenCL kernels ({kernels} operators)")

    def _operators(self) -> int:
        """The graph's operators with a layer: what a build's progress counts, twice with a
        warm-up (bound, then run)."""
        return sum(1 for op in self.graph.order if op.layer is not None)

    @property
    def warms_up(self) -> bool:
        """Whether a build ends with a run on zeros (warm_up.py): where the device compiles a
        kernel at its first launch (PoCL's CPU devices)."""
        return compiles_to_native_cpu(self.runtime.device)

    @staticmethod
    def default_memory(options: dict) -> str:
        """The memory strategy of a graph loaded with `options` that names none (the
        plan_memory pass reports it before the executor exists)."""
        runtime = options.get("runtime") or OpenCLRuntime.shared(
            options.get("device"), options.get("out_of_order", False),
            options.get("profiling", False))
        return default_strategy(runtime.device)

    def rebuild(self) -> None:
        """Allocate and bind again for the graph's current shapes (after a resize)."""
        self._unoptimized: OpenCLExecutor | None = None  # made by the first observed run
        self.arrays: dict[str, Any] = {}   # operand name -> device array (None: host-only value)
        self.folded: set[str] = set()      # operators whose outputs are all known constants
        self.steps: list[tuple[RuntimeOperator, Any]] = []
        self.last_events: dict[str, list] = {}
        self.dynamic_values: dict[str, Any] = {}  # this run's data-dependent operands (host)
        self.lifetimes: list = []                 # what the memory planner placed
        self.memory_plan = None                   # its plan (None: naive, a buffer each)
        self.memory_strategy = "naive"
        self.in_place: dict[str, str] = {}        # output -> the input whose bytes it takes
        self._epilogue_constants: list = []       # device arrays of fused epilogues' numbers
        self._offered = False                     # steps handed to JIT helpers (warm_up.py)
        self._free_memory()  # the old blocks go before the new ones are allocated
        with self._progress() as advance:
            self._advance = advance
            try:
                self._bind_all()
                advance(self._operators() - len(self.steps))  # folded, fused: nothing to bind
                if self.warms_up:
                    warm_up(self, advance)
            finally:
                self._advance = _nothing
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
        readers = dynamic_readers(graph.order, specs)  # kuiper/opencl/execution/dynamic.py
        todo = []  # (operator, DynamicHostStep or None), in order; folded ones are done here
        plan = graph.plan  # what the passes decided (kuiper/passes/)
        for op in map(plan.step, graph.order):   # an operator a pass replaced: its replacement
            layer = op.layer
            if layer is None:
                continue
            out_specs = [specs[o.name] for o in op.outputs]
            if op.name in plan.folded:
                self.folded.add(op.name)
                for operand, spec in zip(op.outputs, out_specs):
                    self.arrays[operand.name] = (rt.to_device(np.asarray(spec.value, spec.dtype))
                                                 if _is_numeric(spec) else None)
                continue
            if not plan.runs(op):  # dead, a no-op, or fused into its producer: no step
                continue
            if op.name in readers or (any(s.dynamic for s in out_specs)
                                      and not has_device_dynamic_outputs(layer)):
                todo.append((op, DynamicHostStep(op, layer, self)))
                continue
            self._refuse_oversized(op, layer, [specs[o.name] for o in op.inputs], out_specs)
            if isinstance(layer, OpenCLLayer):
                layer.attach(rt)  # before it is asked what it needs: that may depend on it
            todo.append((op, None))
        kinds = self._output_kinds(todo)
        memory = self._plan_memory(todo, kinds)
        self._device_memory = memory
        self._request_workspaces(todo, kinds)

        def new_array(name, spec):  # where the plan placed the operand, else a buffer of its own
            if memory is not None and name in memory.plan.offsets:
                return memory.array(name, spec.shape, spec.dtype)
            return rt.empty(spec.shape, spec.dtype)

        for op in graph.input_ops:
            name = op.outputs[0].name
            self.arrays[name] = new_array(name, specs[name])
        for step, (op, dynamic_step) in enumerate(todo):
            if dynamic_step is not None:
                self.steps.append((op, dynamic_step))
                self._advance(1)
                continue
            layer = op.layer
            out_specs = [specs[o.name] for o in op.outputs]
            in_specs = [specs[o.name] for o in op.inputs]
            inputs = [self.arrays[plan.resolve(o.name)] for o in op.inputs]
            epilogue = plan.epilogues.get(op.name)
            epilogue, residual = epilogue_operand(
                epilogue, self.arrays[epilogue.residual] if epilogue and epilogue.residual
                else None, rt)
            if epilogue and epilogue.numbers_as_data:
                self._epilogue_constants.append(residual)  # bound by the kernels: keep it
            outputs = []
            for operand, spec, kind in zip(op.outputs, out_specs, kinds.get(op.name, ())):
                if operand.name in self.in_place:      # the bytes of a dead input
                    outputs.append(device_view(rt, self.arrays[self.in_place[operand.name]],
                                               spec.shape, spec.dtype))
                elif kind.kind == "view":
                    outputs.append(device_view(rt, inputs[kind.input], spec.shape, spec.dtype))
                elif kind.kind == "host":
                    outputs.append(None)
                elif not _is_numeric(spec):   # a value with no numbers (expr=abc) has no bytes
                    raise op.error(f"output '{operand.name}' is not a tensor of numbers "
                                   f"({spec.dtype.name}): it cannot live on the OpenCL "
                                   f"device{not_tensor_inputs(op, specs)}")
                else:
                    outputs.append(new_array(operand.name, spec))
            if computes_nothing(out_specs, kinds.get(op.name, ())):   # no step: arrays only
                for operand, array in zip(op.outputs, outputs):
                    self.arrays[operand.name] = array
                self._advance(1)
                continue
            if isinstance(layer, OpenCLLayer):
                bind_layer(op, layer, rt, inputs, outputs, in_specs, out_specs, epilogue,
                           residual, self.workspaces.arrays(step), graph.specs,
                           plan.precision_of(op))
                runner = layer
            else:
                runner = HostFallback(layer, rt)
                runner.bind(inputs, outputs, in_specs, out_specs)
            for operand, array in zip(op.outputs, outputs):
                self.arrays[operand.name] = array
            # a producer whose kernels do not apply its fused epilogue: one more launch
            runner = with_epilogue(runner, epilogue, outputs[0] if outputs else None, residual, rt)
            self.steps.append((op, runner))
            self._advance(1)
            if self.warms_up:  # kernels compile at first launch: helpers (on a cold cache)
                offer_to_helpers(self, runner)
        for name in plan.aliases:  # a no-op's output is its input, a fused chain's its producer's
            self.arrays[name] = self.arrays.get(plan.resolve(name))
        # what each step waits for: its inputs (resolved) and its epilogue's residual
        self.reads = {op.name: plan.step_inputs(op) for op, _ in self.steps}
        # the steps whose outputs have a data-dependent size, computed on the device
        self.device_dynamic = {op.name for op, runner in self.steps
                               if has_device_dynamic_outputs(runner)
                               and any(self.graph.specs[o.name].dynamic for o in op.outputs)}

    def _output_kinds(self, todo) -> dict:
        """{operator: the OutputKind of each output}, as each layer declares them
        (layers/opencl_base.py: fresh, a view of an input, or host-only); a CPU layer run on
        the host has fresh outputs."""
        specs = self.graph.specs
        kinds = {}
        for op, dynamic in todo:
            if dynamic is not None:
                continue
            in_specs = [specs[o.name] for o in op.inputs]
            out_specs = [specs[o.name] for o in op.outputs]
            if isinstance(op.layer, OpenCLLayer):
                kinds[op.name] = call(op, op.layer, "output_kinds", op.layer.output_kinds,
                                      in_specs, out_specs)
            else:
                kinds[op.name] = [FRESH] * len(out_specs)
        return kinds

    def _request_workspaces(self, todo, kinds) -> None:
        """What every layer declared it needs as scratch (`workspace_shapes`), asked before any
        layer binds, so the shared scratch is sized once and each layer binds once, into it."""
        specs = self.graph.specs
        for step, (op, dynamic) in enumerate(todo):
            layer = op.layer
            if dynamic is not None or not isinstance(layer, OpenCLLayer):
                continue
            in_specs = [specs[o.name] for o in op.inputs]
            out_specs = [specs[o.name] for o in op.outputs]
            if computes_nothing(out_specs, kinds.get(op.name, ())):
                continue
            try:
                shapes = call(op, layer, "workspace_shapes", layer.workspace_shapes, in_specs,
                              out_specs, **precision_decision(
                                  layer, self.graph.plan.precision_of(op)))
            except KuiperError:
                raise
            except Exception as e:  # every failure must name the operator
                raise operator_failure(op, "sizing its OpenCL workspaces", e, specs) from e
            self.workspaces.request(step, shapes)
        self.workspaces.allocate()

    def _plan_memory(self, todo, kinds) -> DeviceMemory | None:
        """Lifetimes of the operands and the plan of `self.memory` for them (kuiper/memory/);
        None when every operand gets a buffer of its own (naive).

        A view takes no bytes and keeps its base alive; a host-only output takes none either.
        Lifetimes are kept for `kuiper info --memory` even when the plan is naive."""
        graph, rt = self.graph, self.runtime
        self.memory_strategy = "naive"
        # several operators at once on an out-of-order queue: no shared scratch either
        self.workspaces.naive = self.memory == "naive" or rt.out_of_order
        # no sub-buffers for the tensors (greedy_in_order), none for the scratch either
        self.workspaces.pooled = self.memory == "greedy_in_order"
        if any(dynamic is not None for _, dynamic in todo):
            return None  # host steps read device operands later than the order says
        # a no-op's or a fused operator's output is another operand: a view that owns no bytes
        views, unplanned = {name: graph.plan.resolve(name) for name in graph.plan.aliases}, set()
        for op, _ in todo:
            for operand, kind in zip(op.outputs, kinds[op.name]):
                if kind.kind == "view":
                    views[operand.name] = op.inputs[kind.input].name
                elif kind.kind == "host":
                    unplanned.add(operand.name)
        steps = [op for op, _ in todo]
        inputs = [op.outputs[0].name for op in graph.input_ops]
        outputs = [o.name for o in graph.output_operands]

        def lifetimes():
            return [t for t in operand_lifetimes(steps, graph.specs, inputs, outputs, views,
                                                 _step_reads(graph))
                    if t.name not in unplanned]

        self.lifetimes = lifetimes()
        if self.workspaces.naive or "plan_memory" not in getattr(graph, "passes",
                                                                 ("plan_memory",)):
            return None  # --no-pass plan_memory: a buffer per operand, as before the planner
        self.memory_strategy = self.memory
        # an elementwise step whose input nobody reads afterwards writes over that input
        ports = set(inputs) | {graph.plan.resolve(name) for name in outputs}
        self.in_place = in_place_outputs(
            steps, self.lifetimes, views, ports,
            lambda layer: getattr(layer, "writes_in_place", False)
            and all(k.kind == "fresh" for k in kinds[layer.name]))
        if self.in_place:
            views.update(self.in_place)
            self.lifetimes = lifetimes()
        self.memory_plan = plan(self.lifetimes, self.memory, rt.base_alignment)
        return DeviceMemory(rt, self.memory_plan)

    @staticmethod
    def _refuse_oversized(op, layer, in_specs, out_specs) -> list:
        """(what, spec) of the operator's operands, after refusing (an OperatorError) a tensor
        too large for the kernels' 32-bit indices: called before the memory plan allocates
        anything of that size, and again at each bind."""
        described = [(f"input {i} ('{o.name}')", s) for i, (o, s) in enumerate(zip(op.inputs,
                                                                                    in_specs))]
        described += [(f"output {i} ('{o.name}')", s)
                      for i, (o, s) in enumerate(zip(op.outputs, out_specs))]
        too_large = oversized(layer, described)
        if too_large is not None:
            raise op.error(f"{too_large}: run the model on the cpu backend")
        return described

    def run(self, inputs: list, observer: Observer | None = None,
            outputs: Sequence[str] | None = None, device_outputs: bool | None = None,
            _hooks=None) -> list:
        """Run once; returns the graph outputs, or the operands named in `outputs` (any
        operand: every one has its own device array, or is a view or a folded constant).

        `inputs` are NumPy arrays, or pyopencl arrays of this runtime's context (copied on the
        device, with no trip through the host). `device_outputs` (None: the executor's
        default) returns pyopencl arrays, fresh for every run, without waiting for the device:
        each carries the event of its copy, and a later kernel on the same queue, or
        `array.get()`, waits for it. Otherwise NumPy arrays, after the one host wait.

        With an observer, or when `outputs` names a value the plan does not keep (a fused
        producer's raw output), the run uses a second binding without the optimizing passes
        (kuiper/opencl/execution/unfused.py), made on the first such run."""
        cl, queue, graph = self.runtime.cl, self.runtime.queue, self.graph
        plan = graph.plan
        on_device = self.device_outputs if device_outputs is None else device_outputs
        if plan.skips_anything and (observer is not None
                                    or (outputs is not None and not plan.serves(outputs))):
            results = self._unoptimized_executor().run(inputs, observer, outputs)
            return [self.runtime.to_device(r, pooled=True) for r in results] if on_device \
                else results
        if outputs is not None:  # a no-op's or a fused chain's output is another operand
            outputs = [plan.resolve(name) for name in outputs]
        events: dict[str, list] = {}
        self.dynamic_values = {}
        early = self._early_downloads(outputs)
        for op, x in zip(graph.input_ops, inputs):
            name = op.outputs[0].name
            if x.size and isinstance(x, np.ndarray):  # empty: no buffer to copy into
                events[name] = [cl.enqueue_copy(queue, self.arrays[name].data, x,
                                                is_blocking=False)]
            elif x.size:   # a device array: copied on the device, after its producer
                events[name] = [cl.enqueue_copy(queue, self.arrays[name].data, x.base_data,
                                                byte_count=x.nbytes, src_offset=x.offset,
                                                wait_for=list(x.events) or None)]
            if name in early:
                early[name] = self._download(name, events.get(name, []))
        # An in-order queue runs its commands one after the other: a kernel never starts
        # before its producers end, so no event lists are needed (building and passing them
        # cost about as much as the launch itself; at batch 1 on a GPU the launches are most
        # of the time). An out-of-order queue needs them to be correct.
        in_order = not self.runtime.out_of_order
        for op, runner in self.steps:
            wait_for = []
            if not in_order:
                for name in self.reads[op.name]:
                    for event in events.get(name, ()):
                        if event not in wait_for:
                            wait_for.append(event)
            if _hooks is not None:  # the warm-up: a JIT helper's job taken back (warm_up.py)
                _hooks[0](runner)
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
                if operand.name in early:  # before a later operator reuses its bytes
                    early[operand.name] = self._download(operand.name, done)
            if op.name in self.device_dynamic:
                # A data-dependent size: wait, and keep the used part of each output (host)
                cl.wait_for_events(done) if done else queue.finish()
                for operand, array in zip(op.outputs, runner.dynamic_outputs(queue)):
                    self.dynamic_values[operand.name] = array.get(queue)
            if observer is not None:  # debugging/compare path: synchronise per operator
                cl.wait_for_events(done) if done else queue.finish()
                seconds = time.perf_counter() - start
                outs = [self._host(o.name) for o in op.outputs]
                observer(op, outs, seconds)
            if _hooks is not None:  # the warm-up's progress (warm_up.py)
                _hooks[1]()
        self.last_events = events
        if outputs is None:
            outputs = [plan.resolve(o.name) for o in graph.output_operands]
        if on_device:   # no host wait: the copies carry their events
            return [self.runtime.to_device(early[name], pooled=True)
                    if early.get(name) is not None
                    else self._device_copy(name, events.get(name, [])) for name in outputs]
        results = [early[name] if early.get(name) is not None
                   else self._download(name, events.get(name, [])) for name in outputs]
        queue.finish()  # the one host wait of the inference
        return results

    def _device_copy(self, name: str, wait_for: list):
        """A fresh device array (from the runtime's pool) holding operand `name`: a copy, so
        that the next run, which reuses the operand's bytes, cannot change what was returned."""
        value = self.dynamic_values.get(name)
        array = self.arrays.get(name)
        spec = self.graph.specs[name]
        if value is not None or array is None or spec.known:   # a host value: upload it
            host = value if value is not None else np.asarray(spec.value, spec.dtype)
            return self.runtime.to_device(host, pooled=True)
        result = self.runtime.empty(spec.shape, spec.dtype, pooled=True)
        if result.nbytes:
            event = self.runtime.cl.enqueue_copy(self.runtime.queue, result.data,
                                                 array.base_data, byte_count=result.nbytes,
                                                 src_offset=array.offset,
                                                 wait_for=wait_for or None)
            result.add_event(event)
        return result

    def _early_downloads(self, outputs) -> dict:
        """Operands asked for by name that are not graph outputs: with a memory plan, a later
        operator may reuse their bytes, so each is downloaded as soon as it is written (its
        slot is filled then). Graph outputs live to the end and are downloaded last."""
        if outputs is None or self._device_memory is None:
            return {}
        last = {self.graph.plan.resolve(o.name) for o in self.graph.output_operands}
        return {name: None for name in outputs if name not in last}

    def launch_count(self) -> int:
        """Kernel launches per inference (host steps count none): what the passes save."""
        return sum(getattr(item, "count", 1) * len(getattr(item, "launches", None) or [item])
                   for _, runner in self.steps for item in getattr(runner, "launches", ()) or ())

    def _unoptimized_executor(self) -> OpenCLExecutor:
        """The second binding, without the optimizing passes
        (kuiper/opencl/execution/unfused.py)."""
        if self._unoptimized is None:
            options = {"runtime": self.runtime}
            if "memory" in inspect.signature(type(self)).parameters:
                options["memory"] = "naive"  # every operand keeps its value to the end
            with warnings.catch_warnings():  # its host fallbacks were warned about already
                warnings.simplefilter("ignore")
                _building.quietly = True  # its kernels are the graph's: said once already
                try:
                    self._unoptimized = type(self)(unoptimized_view(self.graph), **options)
                finally:
                    _building.quietly = False
        return self._unoptimized

    def close(self) -> None:
        """Drop every device array of this graph (their buffers are freed with them; the
        shared runtime and its built programs stay, for other graphs)."""
        if getattr(self, "_unoptimized", None) is not None:
            self._unoptimized.close()
            self._unoptimized = None
        self.arrays, self.steps, self.folded = {}, [], set()
        self.last_events, self.dynamic_values = {}, {}
        self._epilogue_constants = []
        self._free_memory()

    def _free_memory(self) -> None:
        """Release the memory plan's blocks and the shared scratch, sub-buffers first
        (kuiper/opencl/execution/device_memory.py says why), and start a fresh scratch."""
        if getattr(self, "_device_memory", None) is not None:
            self._device_memory.release()
        if getattr(self, "workspaces", None) is not None:
            self.workspaces.free()
        self._device_memory = None  # the arena or pooled blocks of the memory plan
        self.workspaces = Workspaces(self.runtime, self.runtime.base_alignment)

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
