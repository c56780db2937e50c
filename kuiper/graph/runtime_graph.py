"""RuntimeGraph: from a parsed PNNX model to something you can call.

States, as in KuiperInfer:

    NEED_INIT  --init()-->  NEED_BUILD  --build()-->  COMPLETE  --forward()...
                                                          --close()-->  CLOSED (Kuiper's own)

init():  read .param/.bin, make one RuntimeOperand per operand and one RuntimeOperator per
         operator, link producers and consumers *by operand*, check for dangling operands.
build(): order the operators (topological sort), create one layer per operator from the
         registry, infer every operand's shape for the given input shapes, run the graph
         passes (kuiper/passes/: folding, dead and no-op elimination, epilogue fusion, memory
         planning) into one `plan`, then hand the ordered, shape-checked graph and its plan to
         the backend's executor (NumPy or OpenCL), which carries the plan out.

The graph is backend-neutral: it names its backend, and the registry says which layer class
serves each operator there (including the OpenCL -> CPU fallback) and which executor runs it.
Everything a backend keeps for itself (an OpenCL context, device buffers, which operators fall
back to the host) lives in that executor, `graph.executor`.
"""

from __future__ import annotations

import difflib
import enum
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kuiper.core import limits as kuiper_limits
from kuiper.core import plugins as kuiper_plugins
from kuiper.core import registry
from kuiper.core.errors import (
    MALFORMED,
    ArgumentError,
    GraphError,
    InputError,
    KuiperError,
    ShapeError,
    UnsupportedOperatorError,
)
from kuiper.core.ir import Observer, RuntimeOperand, RuntimeOperator, operator_failure
from kuiper.core.log import warn
from kuiper.core.precision import checked_precision
from kuiper.core.tensor_spec import TensorSpec
from kuiper.graph import arguments, named_io, pipeline, topo
from kuiper.graph.backends import executor_class
from kuiper.graph.summary import summarize
from kuiper.graph.tuple_unpack import splice_tuple_unpacks
from kuiper.graph.unsupported import unsupported_error
from kuiper.parser.binfile import WeightArchive
from kuiper.parser.param import read_param
from kuiper.parser.values import DTYPES
from kuiper.passes.plan import Plan

# Operators the graph handles itself instead of a layer.
INPUT, OUTPUT, TUPLE = "pnnx.Input", "pnnx.Output", "prim::TupleConstruct"
GRAPH_OPS = (INPUT, OUTPUT, TUPLE)


class GraphState(enum.Enum):
    NEED_INIT = "need_init"
    NEED_BUILD = "need_build"
    COMPLETE = "complete"
    CLOSED = "closed"  # close(): weights and device buffers released, no more runs


@dataclass(frozen=True)
class Port:
    """A graph input or output as the user sees it: its pnnx operand name ("0") and the alias
    it also answers to ("in0", "out0"; kuiper/graph/named_io.py)."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype
    alias: str | None = None

    @property
    def label(self) -> str:
        """'0 (in0)': the name, and the alias when there is another one."""
        return f"{self.name} ({self.alias})" if self.alias and self.alias != self.name \
            else self.name

    def __str__(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {dims} {self.dtype.name}"


def _pnnx_hint(op: RuntimeOperator) -> str:
    """What a load-time failure of a layer usually means: a damaged or hand-edited file."""
    return (f" -- are the operator's {len(op.inputs)} input(s) and its parameters what pnnx "
            f"writes for {op.type}?")


def is_device_array(x: Any) -> bool:
    """A pyopencl array (without importing pyopencl: the cpu backend runs without it)."""
    return type(x).__module__.startswith("pyopencl") and hasattr(x, "base_data")


def _np_dtype(suffix: str | None) -> np.dtype:
    dt = DTYPES.get(suffix or "f32")
    return np.dtype(np.float32) if dt is None or suffix == "bf16" else dt


class RuntimeGraph:
    """A model as Kuiper runs it. `kuiper.load()` makes one and takes it through both states.

    `plugins`: modules or files that register layers for types Kuiper does not know (see
    kuiper/core/plugins.py); installed plugins (entry points) are loaded anyway. `params`: per PNNX
    type, parameters the file does not carry, `{"mymods.Swish2": {"beta": 2}}` (pnnx writes a
    kept module's tensors, not its plain Python attributes); the file's own values win.
    `backend_options` are the executor's keyword arguments, checked by name. `limits` caps
    the memory a model may ask for (kuiper/core/limits.py; default: from the environment).
    `passes`: the graph passes to run (kuiper/passes/; None: all of them). `precision`: "fp32"
    (the default), "tf32" or "fp16", where the GEMM-based operators may compute
    (kuiper/passes/plan_precision.py).

    Threads: one graph may be called from several threads. Calls are serialised by a lock (a
    call with a new input size rebuilds the graph, which the other calls must not see half
    done), so they are safe but do not run in parallel: for parallel inference, load one graph
    per thread.
    """

    def __init__(self, param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None,
                 backend: str = "cpu", plugins: Sequence[str | os.PathLike] = (),
                 params: Mapping[str, Mapping[str, Any]] | None = None,
                 limits: kuiper_limits.Limits | None = None,
                 passes: Sequence[str] | None = None, precision: str = "fp32",
                 **backend_options: Any):
        self.param_path = arguments.path("param_path", param_path)
        bin_path = arguments.optional_path("bin_path", bin_path)
        self.bin_path = bin_path or bin_beside(self.param_path)
        if not isinstance(backend, str) or backend not in registry.BACKENDS:
            raise ArgumentError("backend", f"unknown backend {backend!r}, expected one of "
                                           f"{', '.join(registry.BACKENDS)}")
        self.backend = backend
        self.backend_options = arguments.backend_options(backend, executor_class(backend),
                                                         backend_options)
        self.params = arguments.params(params)
        self.limits = arguments.limits(limits) or kuiper_limits.Limits.from_environment()
        # unknown names: a KuiperError listing the passes
        self.passes = pipeline.checked_names(arguments.passes(passes))
        self.precision = checked_precision(precision)
        if self.backend_options.get("fuse") is False:  # the CPU option from before the passes
            self.passes = tuple(n for n in self.passes if n != "fuse_epilogues")
        self.plan: Plan | None = None  # what the passes decided, made by build()
        self._plans: dict[tuple[str, ...], Plan] = {}  # other pass sets, lazily
        self._lock = threading.RLock()  # forward/build from several threads: one at a time
        self._cast_warned: set[str] = set()  # inputs already warned about (_check_inputs)
        self._built_shapes: list[tuple[int, ...]] | None = None  # input shapes of the last build
        kuiper_plugins.load_all(arguments.plugins(plugins))
        self.state = GraphState.NEED_INIT
        self.operators: list[RuntimeOperator] = []
        self.operands: dict[str, RuntimeOperand] = {}
        self.order: list[RuntimeOperator] = []
        self.specs: dict[str, TensorSpec] = {}
        self.input_ops: list[RuntimeOperator] = []
        self.output_operands: list[RuntimeOperand] = []
        self.executor: Any = None  # the backend's executor, made by build()

    # --- init -----------------------------------------------------------------------------------
    def init(self) -> RuntimeGraph:
        model = read_param(self.param_path)
        self._check_params_match(model)
        needs_weights = any(d.attributes for d in model.operators)
        archive = WeightArchive(self.bin_path) if needs_weights else None
        try:
            self._link(model, archive)
        finally:  # the weights own their memory: the file is not needed once they are read
            if archive is not None:
                archive.close()
        self._check_graph_ops()
        self.input_ops = [op for op in self.operators if op.type == INPUT]
        outputs = [op for op in self.operators if op.type == OUTPUT]
        if not self.input_ops or not outputs:
            raise GraphError(f"{self.param_path}: a model needs at least one pnnx.Input and one "
                             f"pnnx.Output (found {len(self.input_ops)} and {len(outputs)})")
        self.output_operands = [o for op in outputs for i in op.inputs for o in self._flatten(i)]
        self.state = GraphState.NEED_BUILD
        return self

    def _link(self, model, archive: WeightArchive | None) -> None:
        """One RuntimeOperator per operator line, with its weights read (and verified) from
        `archive`, linked to its operands; dangling operands refused, tuples unpacked."""
        for d in model.operators:
            params = {**self.params.get(d.type, {}), **d.params}  # the file's own values win
            op = RuntimeOperator(d.name, d.type, params, line=d.line, source=d,
                                 input_names=list(d.input_names))
            for key, decl in d.attributes.items():
                op.attributes[key] = archive.read(f"{d.name}.{key}", decl.shape, decl.dtype)
            for i, name in enumerate(d.inputs):
                operand = self._operand(name, d.input_shapes[i] if i < len(d.input_shapes)
                                        else None)
                op.inputs.append(operand)
                # Once per consumer. `op in consumers` would scan the list: quadratic when a
                # file feeds one operand to 100,000 operators; op, if there, is the last one.
                if not operand.consumers or operand.consumers[-1] is not op:
                    operand.consumers.append(op)
            for i, name in enumerate(d.outputs):
                operand = self._operand(name, d.output_shapes[i] if i < len(d.output_shapes)
                                        else None)
                if operand.producer is not None:
                    raise GraphError(f"{self.param_path}, line {d.line}: operand '{name}' is "
                                     f"produced by both '{operand.producer.name}' and "
                                     f"'{d.name}'")
                operand.producer = op
                op.outputs.append(operand)
            self.operators.append(op)

        for operand in self.operands.values():
            if operand.producer is None and operand.consumers:
                user = operand.consumers[0]
                raise GraphError(f"{self.param_path}, line {user.line}: operand '{operand.name}'"
                                 f" consumed by '{user.name}' is produced by no operator "
                                 "(dangling operand)")
        splice_tuple_unpacks(self.operators, self.operands, self.param_path)  # no tuple operands

    def _check_params_match(self, model) -> None:
        """params= for a type the model lacks is a typo, whose parameter would silently not
        apply: refuse it, with the closest types of the model."""
        types = {d.type for d in model.operators}
        for op_type in self.params:
            if op_type not in types:
                close = difflib.get_close_matches(op_type, sorted(types), n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise KuiperError(f"params for '{op_type}': {self.param_path} has no operator "
                                  f"of that type{hint}")

    def _operand(self, name: str, declared) -> RuntimeOperand:
        operand = self.operands.get(name)
        if operand is None:
            operand = self.operands[name] = RuntimeOperand(name)
        if declared is not None and operand.shape is None:
            operand.shape, operand.dtype = tuple(declared[0]), declared[1]
        return operand

    def _check_graph_ops(self) -> None:
        """The operators the graph handles itself must have the operands it expects: a
        damaged file would otherwise fail later with an IndexError or a KeyError."""
        expected = {INPUT: ("no inputs and 1 output", lambda i, o: i == 0 and o == 1),
                    OUTPUT: ("at least 1 input and no outputs", lambda i, o: i >= 1 and o == 0),
                    TUPLE: ("1 output", lambda i, o: o == 1)}
        for op in self.operators:
            if op.type in expected:
                what, ok = expected[op.type]
                if not ok(len(op.inputs), len(op.outputs)):
                    raise GraphError(f"{self.param_path}, line {op.line}: operator '{op.name}' "
                                     f"({op.type}) has {len(op.inputs)} input(s) and "
                                     f"{len(op.outputs)} output(s); expected {what}")

    def _flatten(self, operand: RuntimeOperand) -> list[RuntimeOperand]:
        """Graph outputs: look through prim::TupleConstruct to the tensors it packs.

        Iterative (a file may chain thousands of tuples). Each tuple is opened once: reaching
        one again means a cycle, or a tuple packed twice, which doubles the work per level."""
        out: list[RuntimeOperand] = []
        opened: set[str] = set()
        stack = [operand]
        while stack:
            current = stack.pop()
            producer = current.producer
            if producer is None or producer.type != TUPLE:
                out.append(current)
                continue
            if producer.name in opened:
                raise GraphError(f"{self.param_path}, line {producer.line}: prim::TupleConstruct "
                                 f"'{producer.name}' is reached twice from one output (a cycle "
                                 "of tuples, or a tuple packed twice)")
            opened.add(producer.name)
            stack.extend(reversed(producer.inputs))
        return out

    # --- build ----------------------------------------------------------------------------------
    def build(self, input_shapes: Sequence[Sequence[int]] | None = None) -> RuntimeGraph:
        if self.state == GraphState.NEED_INIT:
            raise GraphError("build() called before init(): call init() first "
                             "(kuiper.load() does both)")
        with self._lock:
            if self.state == GraphState.CLOSED:
                raise self._not_ready("build()")
            if self.state == GraphState.NEED_BUILD:
                self.order = topo.dfs_iterative(self.operators)
                self._create_layers()
            # Until this build succeeds, no input size counts as built: a failed rebuild may
            # have left layers half-way to a new size, and the next forward must build again.
            self._built_shapes = None
            specs = self._input_specs(arguments.input_shapes(input_shapes))
            with kuiper_limits.using(self.limits):
                self._infer(specs)
            self._plans = {}
            self.plan = self.plan_for(self.passes)
            if self.executor is None:
                self.executor = executor_class(self.backend)(self, **self.backend_options)
            else:  # a new input size: the executor keeps its runtime, rebinds for the new shapes
                self.executor.rebuild()
            self._built_shapes = [s.shape for s in specs]
            self.state = GraphState.COMPLETE
            return self

    def plan_for(self, names: Sequence[str]) -> Plan:
        """The plan of the passes `names` for the current shapes (made once per build)."""
        key = pipeline.checked_names(names)
        if key not in self._plans:
            self._plans[key] = pipeline.run(self, key)
        return self._plans[key]

    @property
    def default_memory_strategy(self) -> str:
        """How the executor shares memory when `memory=` names no strategy: its own default
        for the device (greedy_in_order on an OpenCL GPU, kuiper/opencl/execution/
        device_memory.py), else greedy_by_size. The plan_memory pass reports with it."""
        from kuiper.memory import DEFAULT_STRATEGY

        default = getattr(executor_class(self.backend), "default_memory", None)
        return default(self.backend_options) if default is not None else DEFAULT_STRATEGY

    @property
    def unoptimized_plan(self) -> Plan:
        """Constant folding only: every other operator runs on its own, with its own output
        (what an observer must see, and what `outputs=` of a fused value needs). The precision
        decision stays: it changes values, not which operators run."""
        kept = ("fold_constants", "plan_precision")
        return self.plan_for(tuple(name for name in kept if name in self.passes))

    def _create_layers(self) -> None:
        found, missing = [], []
        for op in self.operators:
            if op.type in GRAPH_OPS:
                if op.type == TUPLE and any(c.type != OUTPUT for o in op.outputs
                                            for c in o.consumers):
                    raise GraphError(f"operator '{op.name}': prim::TupleConstruct is supported "
                                     "only as a model output")
                continue
            # The backend's own layer, or the registry's fallback (the CPU layer, for OpenCL)
            try:
                found.append((op, registry.layer_for(op.type, self.backend)))
            except UnsupportedOperatorError:
                missing.append(op)
        if missing:  # all of them in one error, not one per load (kuiper/graph/unsupported.py)
            raise unsupported_error(self.param_path, self.backend, missing)
        for op, cls in found:
            try:
                op.layer = kuiper_plugins.call(op, cls, "from_operator", cls.from_operator, op)
            except MALFORMED as e:
                raise operator_failure(op, "reading its parameters", e, path=self.param_path,
                                       hint=_pnnx_hint(op)) from e

    def _input_specs(self, shapes) -> list[TensorSpec]:
        declared = [(op.outputs[0].shape, op.outputs[0].dtype) for op in self.input_ops]
        if shapes is None:
            shapes = []
            for op, (shape, _) in zip(self.input_ops, declared):
                if shape is None or any(d is None for d in shape):
                    raise InputError(f"input '{op.outputs[0].name}' has no static shape in "
                                     f"{self.param_path}: pass input_shapes to build()")
                shapes.append(shape)
        if len(shapes) != len(self.input_ops):
            raise InputError(f"the model has {len(self.input_ops)} input(s), got "
                             f"{len(shapes)} shape(s)")
        specs = [TensorSpec.of(s, _np_dtype(dt)) for s, (_, dt) in zip(shapes, declared)]
        for op, spec in zip(self.input_ops, specs):
            self.limits.check_tensor(spec.shape, spec.dtype.itemsize,
                                     f"{self.param_path}: input '{op.outputs[0].name}'")
        return specs

    def _infer(self, input_specs: list[TensorSpec]) -> None:
        specs: dict[str, TensorSpec] = {}
        for op, spec in zip(self.input_ops, input_specs):
            specs[op.outputs[0].name] = spec
        resized = [s.shape for s in input_specs] != [op.outputs[0].shape for op in self.input_ops]
        # At the exported size, each operand's shape is also written in the file: the first
        # place where Kuiper's inference and pnnx's annotation part (`_contradiction`)
        contradiction = ""
        for op in self.order:
            if op.layer is None:
                continue
            ins = [specs[o.name] for o in op.inputs]
            try:
                outs = kuiper_plugins.results(op, op.layer, kuiper_plugins.call(
                    op, op.layer, "infer", op.layer.infer, ins), "infer")
            except ShapeError as e:
                if resized:
                    raise ShapeError(op.name, op.type, f"{e.message} -- "
                                     f"{self._resize_hint(input_specs)}") from None
                if contradiction:
                    raise ShapeError(op.name, op.type, f"{e.message} -- {contradiction}"
                                     ) from None
                raise
            except MALFORMED as e:  # a layer tripped over a damaged file: say whose operator
                hint = _pnnx_hint(op) + (f" -- {contradiction}" if contradiction else "")
                raise operator_failure(op, "inferring shapes", e, specs, self.param_path,
                                       hint) from e
            if not resized and not contradiction:
                contradiction = _contradiction(op, outs)
            if len(outs) < len(op.outputs):
                raise op.error(f"layer {type(op.layer).__name__} produced {len(outs)} "
                               f"output spec(s) for {len(op.outputs)} output operand(s)")
            if any(s.dynamic for s in ins):  # data-dependent sizes flow downstream
                outs = [replace(s, dynamic=True) for s in outs]
            for operand, spec in zip(op.outputs, outs):
                self.limits.check_tensor(spec.shape, spec.dtype.itemsize,
                                         f"operator '{op.name}' ({op.type}), output "
                                         f"'{operand.name}'")
                specs[operand.name] = spec
        # The CPU executor frees each value after its last use, and an OpenCL memory plan
        # (kuiper/memory/) reuses bytes the same way; OpenCL with memory="naive" (or an
        # out-of-order queue) keeps them all.
        opts = self.backend_options
        reuses = self.backend == "cpu" or (opts.get("memory") != "naive"
                                           and not opts.get("out_of_order"))
        planned = kuiper_limits.planned_bytes(self.order, specs, self.output_operands,
                                              frees_after_last_use=reuses)
        self.limits.check_total(planned, self.param_path)
        self.specs = specs

    def _resize_hint(self, input_specs: list[TensorSpec]) -> str:
        """What to do when an operator refuses a new input size. A re-export at the new size
        helps when only sizes the export baked in changed (batch, height, width); it cannot
        when the rank or the channel count (dim 1 of an image or volume) changed: the weights
        fix those, so say what the model expects instead."""
        exported = self._declared_inputs()
        for op, spec in zip(self.input_ops, input_specs):
            old = op.outputs[0].shape
            if old is None:
                continue
            if len(spec.shape) != len(old) or (len(old) in (4, 5) and spec.shape[1] != old[1]):
                what = (f"with {old[1]} channel(s) in dimension 1" if len(old) in (4, 5)
                        else f"like {'x'.join(map(str, old))}")
                return (f"the model was exported at {exported}: input '{op.outputs[0].name}' "
                        f"must be {len(old)}-D {what}, fixed by its weights (a re-export at "
                        "another input size cannot change that)")
        return (f"the model was exported at {exported} and this operator fixes that size; "
                "re-export the model at the new input size")

    def _declared_inputs(self) -> str:
        return ", ".join("x".join(str(d) for d in (op.outputs[0].shape or ()))
                         for op in self.input_ops)

    # --- run ------------------------------------------------------------------------------------
    def forward(self, *inputs: Any, observer: Observer | None = None,
                outputs: str | Sequence[str] | None = None,
                return_dict: bool = False,
                device_outputs: bool | None = None) -> list[Any] | dict[str, Any]:
        """Run the model; returns a list with one NumPy array per graph output.

        `inputs`: arrays in the order of `graph.inputs`, or one dict keyed by input name or
        alias, `{"in0": x}`. On the opencl backend an input may also be a pyopencl array of the
        graph's context (`graph.executor.runtime`): it is copied on the device, never through
        the host. `outputs`: names to return instead, in that order: graph outputs by name or
        alias ("out0"), or any operand inside the graph (ncnn's extract). `return_dict=True`
        returns {name: array}, keyed by the names asked for (default: the graph outputs'
        names). `device_outputs=True` (opencl only; None: what `kuiper.load(...,
        device_outputs=...)` chose) returns pyopencl arrays instead, without waiting for the
        device: a pipeline of models passes them on with no host copy. See
        kuiper/graph/named_io.py."""
        asked = arguments.outputs(outputs)  # the names, as given
        observer = arguments.observer(observer)
        return_dict = arguments.flag("return_dict", return_dict)
        with self._lock:  # one call at a time per graph (see the class docstring)
            if self.state != GraphState.COMPLETE:
                raise self._not_ready("forward()")
            arrays = self._check_inputs(named_io.ordered_inputs(self, inputs))
            names = None if asked is None else named_io.output_operands(self, asked)
            shapes = [a.shape for a in arrays]
            if shapes != self._built_shapes:
                self.build(shapes)  # a new input size: infer shapes (and rebind kernels) again
            extra = {}
            if device_outputs is not None:
                if device_outputs and self.backend != "opencl":
                    raise InputError(f"device_outputs=True returns OpenCL arrays: load the model "
                                     f"with backend='opencl' (this graph runs on "
                                     f"{self.backend})")
                extra["device_outputs"] = bool(device_outputs)
            if names is not None:  # executors of plugins may not take outputs=
                extra["outputs"] = names
            values = self.executor.run(arrays, observer, **extra)
            operands = names if names is not None else [o.name for o in self.output_operands]
            values = [self._as_declared(n, v) for n, v in zip(operands, values)]
            if not return_dict:
                return values
            keys = asked if asked is not None else [o.name for o in self.output_operands]
            return dict(zip(keys, values))

    def _as_declared(self, name: str, value: Any) -> Any:
        """`value` of operand `name` as the NumPy array its spec declares (the dtype and, but
        for a data-dependent size, the shape that `graph.outputs` promises). An executor may
        hold a Python value: a folded constant, or a list expression (`expr=[2.0,@0]`), which
        the CPU backend returned as a list although the port said float32 of shape (2,)."""
        spec = self.specs.get(name)
        if spec is None or spec.dtype == object:  # `expr=None`: no tensor to make
            return value
        if is_device_array(value):   # device_outputs=True: the executor made it as declared
            return value
        if isinstance(value, np.ndarray) and value.dtype == spec.dtype and (
                spec.dynamic or value.shape == spec.shape):
            return value
        try:
            array = np.asarray(value, dtype=spec.dtype)
        except (ValueError, TypeError, OverflowError):
            array = None
        if array is None or (not spec.dynamic and array.shape != spec.shape):
            message = (f"output '{name}' is declared {spec.dtype.name} of shape {spec.shape}, "
                       f"but the value computed is {_described(value)}")
            producer = self.operands[name].producer
            if producer is None:
                raise GraphError(f"{self.param_path}: {message}")
            raise producer.error(message)
        return array

    def __call__(self, *inputs: Any, outputs: str | Sequence[str] | None = None,
                 return_dict: bool = False, device_outputs: bool | None = None) -> Any:
        """`y = g(x)` for one output, a tuple for several (or a dict with return_dict)."""
        return_dict = arguments.flag("return_dict", return_dict)
        result = self.forward(*inputs, outputs=outputs, return_dict=return_dict,
                              device_outputs=device_outputs)
        if return_dict:
            return result
        return result[0] if len(result) == 1 else tuple(result)

    def _not_ready(self, what: str) -> GraphError:
        if self.state == GraphState.CLOSED:
            return GraphError(f"{what} called on a closed graph ({Path(self.param_path).name}):"
                              " close() released its weights and buffers; load the model again")
        return GraphError(f"{what} called in state {self.state.name}: the graph must be "
                          "initialised and built first (call init() and build(), or use "
                          "kuiper.load())")

    # --- resources ------------------------------------------------------------------------------
    def close(self) -> None:
        """Release what the model holds: its weights (read from the .pnnx.bin at init, which
        was closed then), and the executor's buffers (on OpenCL, the device memory).
        Afterwards the graph cannot run (a GraphError); its ports stay readable. Closing twice
        does nothing.
        `with kuiper.load(...) as g:` closes on leaving the block."""
        with self._lock:  # not while another thread runs the graph
            if self.state == GraphState.CLOSED:
                return
            if self.executor is not None and hasattr(self.executor, "close"):
                self.executor.close()
            for op in self.operators:  # layers and attributes hold the weights
                op.layer, op.attributes = None, {}
            self.state = GraphState.CLOSED

    def __enter__(self) -> RuntimeGraph:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        if len(inputs) != len(self.input_ops):
            raise InputError(f"the model takes {len(self.input_ops)} input(s) "
                             f"({', '.join(str(p) for p in self.inputs)}), got {len(inputs)}")
        arrays = []
        for port, x in zip(self.inputs, inputs):
            if is_device_array(x):
                if self.backend == "opencl":
                    arrays.append(self._check_device_input(port, x))
                    continue
                x = x.get()   # the cpu backend computes on the host: one download
            arrays.append(arguments.input_array(port, x, self.limits))
            self._warn_integer_cast(port, x)
        return arrays

    def _check_device_input(self, port: Port, x: Any) -> Any:
        """A pyopencl array given as input `port`: of its rank and dtype, contiguous, and in
        the graph's OpenCL context (another context's buffers mean nothing here)."""
        if len(x.shape) != len(port.shape):
            raise InputError(f"input '{port.name}' should be {len(port.shape)}-D like {port}, "
                             f"got a device array of shape {x.shape}")
        if x.dtype != port.dtype:
            raise InputError(f"input '{port.name}' should be {port.dtype.name}, got a device "
                             f"array of {x.dtype.name}: convert it on the device first "
                             f"(x.astype(np.{port.dtype.name}))")
        if not x.flags.c_contiguous:
            raise InputError(f"input '{port.name}': a non-contiguous device array (a strided "
                             "view); pass a contiguous one (x.copy())")
        runtime = getattr(self.executor, "runtime", None)
        if runtime is not None and x.context != runtime.context:
            raise InputError(f"input '{port.name}': a device array of another OpenCL context "
                             f"than this graph's ({runtime.name}); create it with the graph's "
                             "runtime (graph.executor.runtime.queue), or load both models with "
                             "the same `runtime=`")
        return x

    def _warn_integer_cast(self, port: Port, x: Any) -> None:
        """Integers fed to a float input are cast as they are: a raw 0..255 uint8 image then
        gives a confident answer to a question the model was never trained on. Say so, once
        per input of this graph (a KuiperWarning at the caller's line); casting the array
        yourself says you meant it. (`x` as given: arguments.input_array has checked it.)"""
        if port.dtype.kind != "f" or port.name in self._cast_warned:
            return
        a = x if isinstance(x, np.ndarray) else np.asarray(x)
        if a.dtype.kind not in "biu":
            return
        self._cast_warned.add(port.name)
        values = f" (values {a.min()}..{a.max()})" if a.size else ""
        warn(f"input '{port.name}' of {os.path.basename(self.param_path)} is {port.dtype.name} "
             f"and got {a.dtype.name}{values}, cast to {port.dtype.name} unscaled: if these are "
             "pixels, scale them (x / 255) and normalise them as the model was trained first; "
             f"cast the array yourself (x.astype(np.{port.dtype.name})) to silence this")

    # --- introspection --------------------------------------------------------------------------
    @property
    def inputs(self) -> list[Port]:
        out = []
        for i, op in enumerate(self.input_ops):
            operand = op.outputs[0]
            spec = self.specs.get(operand.name)
            shape = spec.shape if spec else tuple(operand.shape or ())
            alias = named_io.alias_for("in", i, operand.name, self.operands)
            out.append(Port(operand.name, shape, _np_dtype(operand.dtype), alias))
        return out

    @property
    def outputs(self) -> list[Port]:
        out = []
        for i, operand in enumerate(self.output_operands):
            alias = named_io.alias_for("out", i, operand.name, self.operands)
            spec = self.specs.get(operand.name)
            if spec is not None:
                out.append(Port(operand.name, spec.shape, spec.dtype, alias))
            else:
                out.append(Port(operand.name, tuple(operand.shape or ()),
                                _np_dtype(operand.dtype), alias))
        return out

    @property
    def fallbacks(self) -> list[RuntimeOperator]:
        """Operators without a layer of this backend, run by the executor on the host."""
        return list(getattr(self.executor, "fallbacks", ()))

    def summary(self) -> str:
        """Operators, shapes, parameters, FLOPs, and which operators may run concurrently."""
        if self.state == GraphState.CLOSED:  # close() dropped the layers the table reads
            raise self._not_ready("summary()")
        return summarize(self)

    def __repr__(self) -> str:
        return (f"RuntimeGraph({Path(self.param_path).name!r}, backend={self.backend!r}, "
                f"{len(self.operators)} operators, state={self.state.name})")


def _described(value: Any) -> str:
    """`a list of 2 items (float, a 1 tensor)`: a value for a message."""
    if isinstance(value, np.ndarray):
        return f"a {'x'.join(map(str, value.shape)) or '0-dim'} tensor of {value.dtype}"
    if isinstance(value, (list, tuple)):
        items = ", ".join(_described(v) if isinstance(v, np.ndarray) else type(v).__name__
                          for v in value[:4])
        return f"a list of {len(value)} items ({items}{', ...' if len(value) > 4 else ''})"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def bin_beside(param_path: str) -> str:
    if param_path.endswith(".param"):
        return param_path[: -len(".param")] + ".bin"
    return param_path + ".bin"


def _contradiction(op: RuntimeOperator, outs: Sequence[TensorSpec]) -> str:
    """'' when `op`'s inferred output shapes are those the file annotates (at the exported input
    size), else a sentence saying where they part: an error further down then names the first
    operator whose shape differs, the operator type as pnnx wrote it. The file contradicting
    itself there is a converter bug (MobileViTv2's patch folding, written by pnnx as an
    nn.PixelShuffle whose annotated output no pixel shuffle of its input gives), not the
    failing operator's."""
    for operand, spec in zip(op.outputs, outs):
        annotated = operand.shape
        if (annotated is None or any(d is None or d < 0 for d in annotated) or spec.dynamic
                or tuple(annotated) == tuple(spec.shape)):
            continue
        shown = "x".join(map(str, spec.shape)) or "a scalar"
        return (f"upstream, operator '{op.name}' ({op.type}, line {op.line}) gives "
                f"{shown} for '{operand.name}' where the file annotates "
                f"{'x'.join(map(str, annotated)) or 'a scalar'}: the file's own shape "
                f"annotations disagree with what a {op.type} computes, which points at the "
                "converter (pnnx) that wrote it rather than at this operator")
    return ""
