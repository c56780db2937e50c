"""Base class of OpenCL layers, and HostFallback, which runs a CPU layer among them.

An OpenCL layer is the *twin* of a CPU layer: it subclasses it, so parameter reading,
`infer` and FLOP counting are shared. The executor (kuiper/opencl/execution/executor.py) drives
it in three steps, and everything it decides for the layer is an argument, never an attribute
set behind the layer's back:

    layer.attach(runtime)                                   # the device: context, queue, programs
    layer.bind(inputs, outputs, in_specs, out_specs)        # at build: kernels + set_args
    events = layer.enqueue(queue, wait_for)                 # per inference: only enqueues

`bind` runs once per input shape; `enqueue` is the hot path and does nothing but
`cl.enqueue_nd_range_kernel` (about 1.5 us each; `prg.name(...)` costs ~100x more).

What a layer declares, on its class, so that the executor can plan memory before anything is
allocated or bound:

- `output_kinds(in_specs, out_specs)`: per output, FRESH (bytes of its own, placed by the
  memory planner), view_of(i) (input i's bytes seen with the output's shape and dtype:
  reshape, flatten, view_as_real; set `view_of_input = i` for the common case) or HOST_ONLY
  (no device array: a value only the host knows, such as arange's data-dependent length).
- `writes_in_place`: its kernel reads x[i] and writes y[i] and nothing else, so its output may
  take the bytes of an input nobody reads afterwards (relu.cl, activation.cl).
- `workspace_shapes(in_specs, out_specs)`: the scratch arrays its bind needs, (shape, dtype)
  each. The executor sizes one shared scratch from every layer's list, then passes each layer
  its arrays as `bind(..., workspaces=[...])`, in that order, valid only during its launches.
- `epilogue_in_kernel`: its kernels store through a fused epilogue (kuiper/passes/epilogue.py),
  so bind takes `epilogue=` and `residual=` (the device array the epilogue adds, or None).
  Other producers are followed by one epilogue kernel instead.
- `reduced_precision`: its GEMMs may compute in tf32 or fp16 (kuiper/passes/
  plan_precision.py decides), so `workspace_shapes` and `bind` take `precision=` ("fp32",
  "tf32" or "fp16": the plan's decision for this operator).

A layer gets only the keyword arguments it declared; the plain case is the four arguments:

    @register(backend="opencl")            # the PNNX types of cpu_relu.ReLU
    class ReLU(OpenCLLayer, cpu_relu.ReLU):
        kernel_file = "relu"
        writes_in_place = True
        def bind(self, inputs, outputs, in_specs, out_specs):
            k = self.kernel("relu")
            k.set_args(inputs[0].data, outputs[0].data, np.int32(out_specs[0].numel))
            self.launches = [Launch(k, (out_specs[0].numel,))]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from kuiper.core.errors import KernelBuildError
from kuiper.core.plugins import results as checked_results
from kuiper.core.registry import cpu_base, is_kuipers
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer


@dataclass(frozen=True)
class OutputKind:
    """Where one output of a layer lives (see the module docstring): "fresh", "view" of input
    `input`, or "host" (no device array)."""

    kind: str
    input: int = -1


FRESH = OutputKind("fresh")
HOST_ONLY = OutputKind("host")


def view_of(index: int) -> OutputKind:
    """The output is input `index`'s bytes, with the output's own shape and dtype."""
    return OutputKind("view", index)


@dataclass
class Launch:
    """One kernel launch prepared at bind time. `step_arg`: inside `Steps`, the index of the
    kernel argument that takes the step number."""

    kernel: Any
    global_size: tuple[int, ...]
    local_size: tuple[int, ...] | None = None
    step_arg: int | None = None


@dataclass
class Steps:
    """`launches` enqueued `count` times in a row, each launch's argument `step_arg` set to the
    step (0, 1, ...) just before it is enqueued (OpenCL takes a kernel's arguments at enqueue
    time, so one kernel object serves every step). A recurrence (LSTM, GRU: layers/opencl/
    rnn.py) binds one kernel per kernel this way instead of one per time step: a
    100,000-step sequence took 175 s and 1 GB to bind with a kernel object per step."""

    launches: list[Launch]
    count: int


def _in_order(launches) -> Iterator[Launch]:
    """The launches as they are enqueued: a Steps' launches once per step, each with its step
    argument set just before it is handed out (and so just before it is enqueued)."""
    for item in launches:
        if not isinstance(item, Steps):
            yield item
            continue
        for step in range(item.count):
            number = np.int32(step)
            for launch in item.launches:
                if launch.step_arg is not None:
                    launch.kernel.set_arg(launch.step_arg, number)
                yield launch


def round_up(n: int, multiple: int) -> int:
    return (n + multiple - 1) // multiple * multiple


class OpenCLLayer(Layer):
    backend: ClassVar[str] = "opencl"
    kernel_file: ClassVar[str] = ""  # clkernels/<kernel_file>.cl; "" = the module's stem
    # A plugin's own kernels (kuiper/PLUGINS.md), instead of Kuiper's clkernels/: the path of a
    # .cl file (relative paths are relative to the layer's module file; the file's folder is on
    # the include path), or the OpenCL C source itself. Built and cached like Kuiper's own.
    kernel_path: ClassVar[str | os.PathLike | None] = None
    kernel_code: ClassVar[str | None] = None
    # The executor checks every kernel argument bound to an operand's buffer against the
    # operand's dtype (kuiper/opencl/device/element_types.py): `float` for float32, `uchar` for
    # uint8 or bool, `float2` for complex64 ... A layer whose kernels read a dtype another way says
    # so here, {"complex64": ("float",)} for complex numbers read as pairs of floats.
    element_types: ClassVar[dict[str, tuple[str, ...]]] = {}
    # Kernels index with int: tensors above 2**31 - 1 elements are refused, unless the layer's
    # kernels index with long (the generated pnnx.Expression kernels).
    wide_indices: ClassVar[bool] = False

    # --- declarations the executor reads before it allocates (see the module docstring) ---
    # output 0 is a view of this input (reshape-like layers), or None: every output is fresh
    view_of_input: ClassVar[int | None] = None
    # the kernel reads x[i] and writes y[i] only: the output may take its input's bytes
    writes_in_place: ClassVar[bool] = False
    # bind takes `epilogue=` and `residual=` and its kernels store through the epilogue
    epilogue_in_kernel: ClassVar[bool] = False
    # workspace_shapes and bind take `precision=` (its GEMMs may compute in tf32 / fp16)
    reduced_precision: ClassVar[bool] = False

    runtime: Any = None
    host_fallback: Any = None  # a HostFallback, see fall_back_to_host
    launches: list[Launch]

    def attach(self, runtime) -> None:
        """The device this layer runs on; called before each bind (and before the executor asks
        `workspace_shapes`, which may depend on the device)."""
        self.runtime = runtime
        self.launches = []
        self.host_fallback = None  # set by fall_back_to_host, for this input shape only
        # a new bind: the arrays the previous one kept alive (keep_alive) can go, else every
        # rebind (a new input size, a grown workspace) would hold on to the old buffers
        self.bound_arrays = []

    def fall_back_to_host(self, inputs: Sequence[Any], outputs: Sequence[Any],
                          in_specs: Sequence[TensorSpec], out_specs: Sequence[TensorSpec],
                          why: str) -> None:
        """From bind(): run this operator's CPU layer instead, for a case the twin cannot
        compute on the device (a complex literal in an expression, a float64 FFT ...).

        A model the CPU backend runs must not fail on OpenCL; the price (two copies and a host
        wait) is made visible: the executor lists the operator in `graph.fallbacks`, and `why`
        is kept in `fallback_reason`.
        """
        cpu = cpu_base(type(self)).from_operator(self.op)
        cpu.infer(in_specs)  # some CPU layers keep what infer worked out (axes) for forward
        self.host_fallback = HostFallback(cpu, self.runtime)
        self.host_fallback.bind(inputs, outputs, in_specs, out_specs)
        self.fallback_reason = why
        self.launches = []

    def falls_back_unless(self, dtypes: Sequence[Any], inputs: Sequence[Any],
                          outputs: Sequence[Any], in_specs: Sequence[TensorSpec],
                          out_specs: Sequence[TensorSpec]) -> bool:
        """From bind(): True, after falling back to the CPU layer, when an input or output is
        of a dtype outside `dtypes` (those this twin's kernels compute), so that a uint8 or
        float64 tensor gets the CPU backend's answer instead of a float kernel reading past
        its buffer. (The executor checks every kernel's arguments as well: element_types.py.)
        """
        wanted = {np.dtype(d) for d in dtypes}
        odd = [f"{s.dtype.name} {what} {i}" for what, specs in (("input", in_specs),
                                                                ("output", out_specs))
               for i, s in enumerate(specs) if np.dtype(s.dtype) not in wanted]
        if not odd:
            return False
        names = ", ".join(sorted(d.name for d in wanted))
        self.fall_back_to_host(inputs, outputs, in_specs, out_specs,
                               f"its OpenCL kernels compute {names}, not the {odd[0]}")
        return True

    # --- helpers --------------------------------------------------------------------------------
    @property
    def stem(self) -> str:
        return self.kernel_file or type(self).__module__.rsplit(".", 1)[-1]

    def kernel(self, name: str, options: Sequence[str] = (), stem: str | None = None):
        """A fresh cl.Kernel `name` of this layer's program, built with `options` (cached)."""
        if stem is None and self.kernel_code is not None:
            label = f"{type(self).__module__}.{type(self).__qualname__}.kernel_code"
            program = self.runtime.program_from_source(self.kernel_code, options, label)
            return self.runtime.kernel_of(program, name, label)
        if stem is None and self.kernel_path is not None:
            path = self._kernel_path()
            program = self.runtime.program_from_path(path, options)
            return self.runtime.kernel_of(program, name, str(path))
        if stem is None and not self.kernel_file and not is_kuipers(type(self)):
            raise KernelBuildError(f"{type(self).__module__}.{type(self).__qualname__}", [],
                                   "an OpenCL layer outside Kuiper needs kernel_path (its .cl "
                                   "file) or kernel_code (the source): Kuiper's own clkernels/ "
                                   "has no kernel of its name (kuiper/PLUGINS.md)")
        return self.runtime.kernel(stem or self.stem, name, options)

    def group_limit(self, kernel) -> int:
        """The most work-items a work-group of `kernel` may have on this layer's device (what
        its registers and local memory allow, at most the device's own limit)."""
        cl, device = self.runtime.cl, self.runtime.device
        return kernel.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, device)

    def _kernel_path(self) -> Path:
        """kernel_path, relative to the file of the class that set it (not of a subclass)."""
        path = Path(self.kernel_path)
        if path.is_absolute():
            return path
        owner = next(c for c in type(self).__mro__ if "kernel_path" in vars(c))
        return Path(sys.modules[owner.__module__].__file__).parent / path

    def upload(self, host):
        """A weight or constant to the device; call from bind(), never from enqueue()."""
        return self.runtime.to_device(host)

    # --- what the executor asks before it allocates anything ----------------------------------
    def output_kinds(self, in_specs: Sequence[TensorSpec],
                     out_specs: Sequence[TensorSpec]) -> list[OutputKind]:
        """Per output: FRESH, view_of(i) or HOST_ONLY. By default every output is fresh, but
        output 0 of a class that sets `view_of_input`. Override when it depends on the specs
        (a cast to the same dtype is a view)."""
        kinds = [FRESH] * len(out_specs)
        if self.view_of_input is not None and kinds:
            kinds[0] = view_of(self.view_of_input)
        return kinds

    def workspace_shapes(self, in_specs: Sequence[TensorSpec], out_specs: Sequence[TensorSpec],
                         **decisions: Any) -> list[tuple[tuple[int, ...], Any]]:
        """The scratch arrays `bind` will take as `workspaces=`, as (shape, dtype), in order:
        intermediate results valid only while this layer's launches run (im2col's column
        matrix, Winograd's transformed tiles, split-K's partial sums), so the memory planner
        hands the same bytes to every layer. None by default. A layer that declares
        `reduced_precision` gets `precision=` here too (its choice of kernels may depend on it).
        """
        return []

    def own_workspaces(self, in_specs: Sequence[TensorSpec], out_specs: Sequence[TensorSpec],
                       **decisions: Any) -> list[Any]:
        """Fresh device arrays for `workspace_shapes` (`decisions`: its keyword arguments, as
        `precision=`): for a layer bound by hand, outside an executor (tests, lessons)."""
        return [self.runtime.empty(tuple(shape), dtype)
                for shape, dtype in self.workspace_shapes(in_specs, out_specs, **decisions)]

    # --- the build step ---------------------------------------------------------------------
    def bind(self, inputs: Sequence[Any], outputs: Sequence[Any], in_specs: Sequence[TensorSpec],
             out_specs: Sequence[TensorSpec]) -> None:
        """Create the kernels and set their arguments (`self.launches`). `outputs` are the
        arrays the executor placed as `output_kinds` said (a view output is already the view;
        a HOST_ONLY one is None). Layers that declared them also get `workspaces=`,
        `epilogue=`/`residual=` and `precision=` (see the module docstring)."""
        raise NotImplementedError(f"{type(self).__name__}.bind")

    def enqueue(self, queue, wait_for: Sequence[Any]) -> list[Any]:
        """Enqueue the prepared launches; each waits on the previous one, the first on
        `wait_for` (the producers' events), so the layer is correct on an out-of-order queue."""
        if self.host_fallback is not None:
            return self.host_fallback.enqueue(queue, wait_for)
        enqueue = self.runtime.cl.enqueue_nd_range_kernel
        chain = self.runtime.out_of_order  # an in-order queue keeps the launches in order anyway
        events = list(wait_for)
        self.events = []  # every launch of this run: a profiling queue times them (kuiper bench)
        for launch in _in_order(self.launches):
            event = enqueue(queue, launch.kernel, launch.global_size, launch.local_size,
                            wait_for=events or None)
            self.events.append(event)
            events = [event] if chain else []
        return self.events[-1:] if self.events else list(wait_for)

    def forward(self, inputs):  # pragma: no cover - OpenCL layers run through enqueue
        raise NotImplementedError("OpenCL layers run through the OpenCL executor")


class HostFallback:
    """Runs a CPU layer inside an OpenCL graph: download inputs, forward, upload outputs.

    The registry's fallback rule (kuiper/core/registry.py, FALLBACK) gives an OpenCL graph the CPU
    layer of an operator that has no OpenCL twin; the executor wraps it in this, so it binds and
    enqueues like any OpenCL layer. It costs two copies and a host wait: `kuiper info` marks such
    operators, and `graph.fallbacks` lists them.
    """

    def __init__(self, layer, runtime):
        self.layer, self.runtime = layer, runtime

    def bind(self, inputs, outputs, in_specs, out_specs) -> None:
        self.inputs, self.outputs, self.in_specs = inputs, outputs, in_specs

    def enqueue(self, queue, wait_for) -> list:
        cl = self.runtime.cl
        if wait_for:
            cl.wait_for_events(list(wait_for))
        host = [spec.value if arr is None else arr.get(queue)
                for arr, spec in zip(self.inputs, self.in_specs)]
        results = checked_results(self.layer.op, self.layer, self.layer.forward(host))
        events = []
        for arr, value in zip(self.outputs, results):
            if arr is not None:
                events.append(cl.enqueue_copy(queue, arr.data,
                                              np.ascontiguousarray(value, dtype=arr.dtype),
                                              is_blocking=False))
        return events
