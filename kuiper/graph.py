"""RuntimeGraph: from a parsed PNNX model to something you can call.

States, as in KuiperInfer:

    NEED_INIT  --init()-->  NEED_BUILD  --build()-->  COMPLETE  --forward()...

init():  read .param/.bin, make one RuntimeOperand per operand and one RuntimeOperator per
         operator, link producers and consumers *by operand*, check for dangling operands.
build(): order the operators (topological sort), create one layer per operator from the
         registry, infer every operand's shape for the given input shapes, then hand the
         ordered, shape-checked graph to the backend's executor (NumPy or OpenCL).

The graph is backend-neutral: it names its backend, and the registry says which layer class
serves each operator there (including the OpenCL -> CPU fallback) and which executor runs it.
Everything a backend keeps for itself (an OpenCL context, device buffers, which operators fall
back to the host) lives in that executor, `graph.executor`.
"""

from __future__ import annotations

import difflib
import enum
import inspect
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kuiper import plugins as kuiper_plugins
from kuiper import registry, topo
from kuiper.errors import GraphError, InputError, KuiperError, ShapeError, UnsupportedOperatorError
from kuiper.ir import Observer, RuntimeOperand, RuntimeOperator
from kuiper.parser.binfile import WeightArchive
from kuiper.parser.param import read_param
from kuiper.parser.values import DTYPES
from kuiper.summary import summarize
from kuiper.tensor_spec import TensorSpec

# Operators the graph handles itself instead of a layer.
INPUT, OUTPUT, TUPLE = "pnnx.Input", "pnnx.Output", "prim::TupleConstruct"
GRAPH_OPS = (INPUT, OUTPUT, TUPLE)


class GraphState(enum.Enum):
    NEED_INIT = "need_init"
    NEED_BUILD = "need_build"
    COMPLETE = "complete"


@dataclass(frozen=True)
class Port:
    """A graph input or output as the user sees it."""

    name: str
    shape: tuple[int | None, ...]
    dtype: np.dtype

    def __str__(self) -> str:
        dims = "x".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {dims} {self.dtype.name}"


def _np_dtype(suffix: str | None) -> np.dtype:
    dt = DTYPES.get(suffix or "f32")
    return np.dtype(np.float32) if dt is None or suffix == "bf16" else dt


class RuntimeGraph:
    """A model as Kuiper runs it. `kuiper.load()` makes one and takes it through both states.

    `plugins`: modules or files that register layers for types Kuiper does not know (see
    kuiper/plugins.py); installed plugins (entry points) are loaded anyway. `params`: per PNNX
    type, parameters the file does not carry, `{"mymods.Swish2": {"beta": 2}}` (pnnx writes a
    kept module's tensors, not its plain Python attributes); the file's own values win.
    `backend_options` are the executor's keyword arguments, checked by name.
    """

    def __init__(self, param_path: str | os.PathLike, bin_path: str | os.PathLike | None = None,
                 backend: str = "cpu", plugins: Sequence[str | os.PathLike] = (),
                 params: Mapping[str, Mapping[str, Any]] | None = None, **backend_options: Any):
        self.param_path = str(param_path)
        self.bin_path = str(bin_path) if bin_path else bin_beside(self.param_path)
        if backend not in registry.BACKENDS:
            raise KuiperError(f"unknown backend '{backend}', expected one of "
                              f"{', '.join(registry.BACKENDS)}")
        self.backend = backend
        self.backend_options = _checked_options(backend, backend_options)
        self.params = _checked_params(params)
        kuiper_plugins.load_all(plugins)
        self.state = GraphState.NEED_INIT
        self.operators: list[RuntimeOperator] = []
        self.operands: dict[str, RuntimeOperand] = {}
        self.order: list[RuntimeOperator] = []
        self.specs: dict[str, TensorSpec] = {}
        self.input_ops: list[RuntimeOperator] = []
        self.output_operands: list[RuntimeOperand] = []
        self.executor: Any = None  # the backend's executor, made by build()
        self._archive: WeightArchive | None = None  # kept open: the weight arrays map into it

    # --- init -----------------------------------------------------------------------------------
    def init(self) -> RuntimeGraph:
        model = read_param(self.param_path)
        self._check_params_match(model)
        needs_weights = any(d.attributes for d in model.operators)
        archive = WeightArchive(self.bin_path) if needs_weights else None
        self._archive = archive
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
                if op not in operand.consumers:
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
        self.input_ops = [op for op in self.operators if op.type == INPUT]
        outputs = [op for op in self.operators if op.type == OUTPUT]
        if not self.input_ops or not outputs:
            raise GraphError(f"{self.param_path}: a model needs at least one pnnx.Input and one "
                             f"pnnx.Output (found {len(self.input_ops)} and {len(outputs)})")
        self.output_operands = [o for op in outputs for i in op.inputs for o in self._flatten(i)]
        self.state = GraphState.NEED_BUILD
        return self

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

    def _flatten(self, operand: RuntimeOperand) -> list[RuntimeOperand]:
        """Graph outputs: look through prim::TupleConstruct to the tensors it packs."""
        if operand.producer is not None and operand.producer.type == TUPLE:
            return [o for i in operand.producer.inputs for o in self._flatten(i)]
        return [operand]

    # --- build ----------------------------------------------------------------------------------
    def build(self, input_shapes: Sequence[Sequence[int]] | None = None) -> RuntimeGraph:
        if self.state == GraphState.NEED_INIT:
            raise GraphError("build() called before init(): call init() first "
                             "(kuiper.load() does both)")
        if self.state == GraphState.NEED_BUILD:
            self.order = topo.dfs_iterative(self.operators)
            self._create_layers()
        specs = self._input_specs(input_shapes)
        self._infer(specs)
        if self.executor is None:
            self.executor = registry.executor_class(self.backend)(self, **self.backend_options)
        else:  # a new input size: the executor keeps its runtime and rebinds for the new shapes
            self.executor.rebuild()
        self.state = GraphState.COMPLETE
        return self

    def _create_layers(self) -> None:
        for op in self.operators:
            if op.type in GRAPH_OPS:
                if op.type == TUPLE and any(c.type != OUTPUT for o in op.outputs
                                            for c in o.consumers):
                    raise GraphError(f"operator '{op.name}': prim::TupleConstruct is supported "
                                     "only as a model output")
                continue
            # The backend's own layer, or the registry's fallback (the CPU layer, for OpenCL)
            try:
                cls = registry.layer_for(op.type, self.backend)
            except UnsupportedOperatorError as e:
                raise UnsupportedOperatorError(
                    f"{self.param_path}, line {op.line}: operator '{op.name}': {e}"
                    f"{kuiper_plugins.missing_type_hint(op.type)}") from None
            op.layer = kuiper_plugins.call(op, cls, "from_operator", cls.from_operator, op)

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
        return [TensorSpec.of(s, _np_dtype(dt)) for s, (_, dt) in zip(shapes, declared)]

    def _infer(self, input_specs: list[TensorSpec]) -> None:
        specs: dict[str, TensorSpec] = {}
        for op, spec in zip(self.input_ops, input_specs):
            specs[op.outputs[0].name] = spec
        resized = [s.shape for s in input_specs] != [op.outputs[0].shape for op in self.input_ops]
        for op in self.order:
            if op.layer is None:
                continue
            ins = [specs[o.name] for o in op.inputs]
            try:
                outs = kuiper_plugins.call(op, op.layer, "infer", op.layer.infer, ins)
            except ShapeError as e:
                if resized:
                    raise ShapeError(op.name, op.type, f"{e.message} -- the model was exported at "
                                     f"{self._declared_inputs()} and this operator fixes that "
                                     "size; re-export the model at the new input size") from None
                raise
            if len(outs) < len(op.outputs):
                raise op.error(f"layer {type(op.layer).__name__} produced {len(outs)} "
                               f"output spec(s) for {len(op.outputs)} output operand(s)")
            for operand, spec in zip(op.outputs, outs):
                specs[operand.name] = spec
        self.specs = specs

    def _declared_inputs(self) -> str:
        return ", ".join("x".join(str(d) for d in (op.outputs[0].shape or ()))
                         for op in self.input_ops)

    # --- run ------------------------------------------------------------------------------------
    def forward(self, *inputs: Any, observer: Observer | None = None) -> list[np.ndarray]:
        """Run the model; returns a list with one NumPy array per graph output."""
        if self.state != GraphState.COMPLETE:
            raise GraphError(f"forward() called in state {self.state.name}: the graph must be "
                             "initialised and built first (call init() and build(), or use "
                             "kuiper.load())")
        arrays = self._check_inputs(inputs)
        shapes = [a.shape for a in arrays]
        if shapes != [self.specs[op.outputs[0].name].shape for op in self.input_ops]:
            self.build(shapes)  # a new input size: infer shapes (and rebind kernels) again
        return self.executor.run(arrays, observer)

    def __call__(self, *inputs: Any) -> Any:
        """`y = g(x)` for one output, a tuple for several."""
        outputs = self.forward(*inputs)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _check_inputs(self, inputs: Sequence[Any]) -> list[np.ndarray]:
        if len(inputs) != len(self.input_ops):
            raise InputError(f"the model takes {len(self.input_ops)} input(s) "
                             f"({', '.join(str(p) for p in self.inputs)}), got {len(inputs)}")
        arrays = []
        for port, x in zip(self.inputs, inputs):
            a = np.asarray(x)
            declared = port.shape
            if len(a.shape) != len(declared):
                raise InputError(f"input '{port.name}' should be {len(declared)}-D like "
                                 f"{port}, got shape {a.shape}")
            if a.dtype != port.dtype:
                if not np.can_cast(a.dtype, port.dtype, casting="same_kind"):
                    raise InputError(f"input '{port.name}' should be {port.dtype.name}, got "
                                     f"{a.dtype.name}")
                a = a.astype(port.dtype)
            arrays.append(np.ascontiguousarray(a).reshape(a.shape))  # keeps 0-dim inputs 0-dim
        return arrays

    # --- introspection --------------------------------------------------------------------------
    @property
    def inputs(self) -> list[Port]:
        out = []
        for op in self.input_ops:
            operand = op.outputs[0]
            spec = self.specs.get(operand.name)
            shape = spec.shape if spec else tuple(operand.shape or ())
            out.append(Port(operand.name, shape, _np_dtype(operand.dtype)))
        return out

    @property
    def outputs(self) -> list[Port]:
        out = []
        for operand in self.output_operands:
            spec = self.specs.get(operand.name)
            if spec is not None:
                out.append(Port(operand.name, spec.shape, spec.dtype))
            else:
                out.append(Port(operand.name, tuple(operand.shape or ()),
                                _np_dtype(operand.dtype)))
        return out

    @property
    def fallbacks(self) -> list[RuntimeOperator]:
        """Operators without a layer of this backend, run by the executor on the host."""
        return list(getattr(self.executor, "fallbacks", ()))

    def summary(self) -> str:
        """Operators, shapes, parameters, FLOPs, and which operators may run concurrently."""
        return summarize(self)

    def __repr__(self) -> str:
        return (f"RuntimeGraph({Path(self.param_path).name!r}, backend={self.backend!r}, "
                f"{len(self.operators)} operators, state={self.state.name})")


def _checked_options(backend: str, options: dict[str, Any]) -> dict[str, Any]:
    """The backend options, refused by name if the backend's executor does not take them.

    The options are the executor's keyword arguments (CPUExecutor: fuse; OpenCLExecutor:
    device, out_of_order, profiling, runtime), so its signature is the one list of them.
    """
    executor = registry.executor_class(backend)
    accepted = [name for name in inspect.signature(executor).parameters if name != "graph"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise KuiperError(f"unknown option(s) for the {backend} backend: {', '.join(unknown)} "
                          f"(it takes: {', '.join(accepted) or 'none'})")
    return options


def _checked_params(params) -> dict[str, dict[str, Any]]:
    """`params` as {type: {key: value}}, or a KuiperError saying what shape it must have."""
    if params is None:
        return {}
    if not isinstance(params, Mapping) or not all(
            isinstance(t, str) and isinstance(p, Mapping) and all(isinstance(k, str) for k in p)
            for t, p in params.items()):
        raise KuiperError("params must map a PNNX type to its parameters, e.g. "
                          "{'mymods.Swish2': {'beta': 2}}")
    return {t: dict(p) for t, p in params.items()}


def bin_beside(param_path: str) -> str:
    if param_path.endswith(".param"):
        return param_path[: -len(".param")] + ".bin"
    return param_path + ".bin"
