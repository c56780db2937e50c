"""Gathers by index tensors: torch.index_select, torch.gather, Tensor.index (aten::index), and
ONNX Gather, which pnnx's ONNX route sometimes leaves as it is.

Unlike slicing, which elements move depends on the *values* of an index tensor, so the output
is a copy. The output *shape* must still be known before running (every buffer is sized at
build time): it depends only on the index tensor's shape, except for a boolean mask, which is
accepted only when its value is known at build time (then it becomes integer indices).

Tensor.index is `x[i]`, `x[:, i]`, `x[:, [0, 2]]`. pnnx writes the index list either as a
parameter (`expr=[None,[0,2]]`: constants) or as a second input built by a pnnx.Expression
(`expr=[None,@0]`, one `None` per `:`). A list holding a tensor cannot live on a device, so this
layer reads the *pattern* of that list from the expression and takes the index tensors as its
own inputs (see `absorb_index_list`).
"""

from __future__ import annotations

import ast
import re

import numpy as np

from kuiper.core.ir import RuntimeOperator
from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.common.datamove import DataMovementLayer, normalize_dim


def _check_index_dtype(layer, spec: TensorSpec, what: str) -> None:
    if spec.dtype.kind not in "iu":
        raise layer.op.error(f"{what} should be an integer tensor, got {spec.dtype.name}")


class _IndexAlongDim(DataMovementLayer):
    """Shared by index_select and gather: an input, an integer index tensor and one `dim`."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("dim")
        return layer

    def operands(self, inputs: list[TensorSpec]) -> tuple[TensorSpec, TensorSpec]:
        """Check the input count and the index dtype; return (x, index)."""
        self.expect_inputs(inputs, 2)
        x, index = inputs
        _check_index_dtype(self, index, "index")
        return x, index


@register("torch.index_select", "Tensor.index_select", backend="cpu")
class IndexSelect(_IndexAlongDim):
    """Whole slices along `dim`, picked by a 1-D index: out = x[:, ..., index, ...]."""

    def infer_specs(self, inputs):
        x, index = self.operands(inputs)
        if len(index.shape) > 1:
            raise self.shape_error(f"index should be 0-D or 1-D, got shape {index.shape}")
        self.axis = normalize_dim(self, self.dim, len(x.shape))
        shape = x.shape[:self.axis] + (index.numel,) + x.shape[self.axis + 1:]
        return [TensorSpec(shape, x.dtype)]

    def forward(self, inputs):
        x, index = inputs
        if x.ndim == 0:
            return [np.take(x.reshape(1), np.reshape(index, -1))]
        return [np.take(x, np.reshape(index, -1), axis=self.axis)]


@register("torch.gather", "Tensor.gather", backend="cpu")
class Gather(_IndexAlongDim):
    """out[i, j, k] = x[i, index[i, j, k], k] for dim=1: the index has the output's shape."""

    def infer_specs(self, inputs):
        x, index = self.operands(inputs)
        if len(index.shape) != len(x.shape):
            raise self.shape_error(f"index {index.shape} should have as many dims as input "
                                   f"{x.shape}")
        self.axis = normalize_dim(self, self.dim, len(x.shape))
        for d, (a, b) in enumerate(zip(index.shape, x.shape)):
            if d != self.axis and a > b:
                raise self.shape_error(f"index {index.shape} is larger than input {x.shape} "
                                       f"in dim {d}")
        return [TensorSpec(index.shape, x.dtype)]

    def forward(self, inputs):
        x, index = inputs
        # torch lets the index be smaller than x outside `dim`; take_along_axis wants equal.
        crop = tuple(slice(None) if d == self.axis else slice(0, n)
                     for d, n in enumerate(index.shape))
        return [np.take_along_axis(x[crop], np.asarray(index, dtype=np.int64), axis=self.axis)]


@register("Gather", backend="cpu")
class OnnxGather(DataMovementLayer):
    """ONNX Gather(data, indices, axis) as pnnx leaves it (onnx/test_convnext_tiny with the
    dynamo exporter writes `Gather axis=0` of a (768) tensor by a (1,768,1,1) index): whole
    slices along `axis`, picked by an index of any shape, which replaces that dim:
    out.shape = x.shape[:axis] + indices.shape + x.shape[axis+1:] (np.take). Negative indices
    count from the end, as in ONNX."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.dim = op.int_param("axis", 0)
        return layer

    def infer_specs(self, inputs):
        self.expect_inputs(inputs, 2)
        x, index = inputs
        _check_index_dtype(self, index, "indices")
        if not x.shape:
            raise self.shape_error("data should have at least one dim, got a 0-D tensor")
        self.axis = normalize_dim(self, self.dim, len(x.shape))
        shape = x.shape[:self.axis] + tuple(index.shape) + x.shape[self.axis + 1:]
        return [TensorSpec(shape, x.dtype)]

    def forward(self, inputs):
        x, index = inputs
        index = np.asarray(index, dtype=np.int64)
        n = x.shape[self.axis]
        if index.size and (index.min() < -n or index.max() >= n):
            raise self.shape_error(f"index value out of range for axis {self.axis} of size {n}")
        return [np.take(x, index, axis=self.axis)]


def parse_index_literal(text: str):
    """`[None,[0,2]]` -> [None, [0, 2]]. literal_eval only accepts Python literals: no code
    from the model file is ever run."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return value if isinstance(value, list) else None


def absorb_index_list(op: RuntimeOperator) -> list[int | None] | None:
    """Take the index tensors of `[None,@0]` (a pnnx.Expression feeding input 1) as inputs.

    Returns the pattern, one entry per list item: None for `:`, else the position of that
    index tensor in `op.inputs`; None when input 1 is not such an expression.
    """
    if len(op.inputs) != 2 or op.inputs[1].producer is None:
        return None
    producer = op.inputs[1].producer
    expr = producer.params.get("expr") if producer.type == "pnnx.Expression" else None
    if not isinstance(expr, str):
        return None
    if not re.fullmatch(r"\[(None|@\d+)(,(None|@\d+))*\]", expr):
        return computed_index_item(op, producer, expr)
    items = expr[1:-1].split(",")
    refs = [int(item[1:]) for item in items if item != "None"]
    if any(k >= len(producer.inputs) for k in refs):
        return None
    listed = op.inputs[1]
    if op in listed.consumers:
        listed.consumers.remove(op)
    op.inputs = [op.inputs[0]] + [producer.inputs[k] for k in refs]
    op.input_names = op.input_names[:1] + [None] * len(refs)
    for operand in op.inputs[1:]:
        if op not in operand.consumers:
            operand.consumers.append(op)
    if not any(out.consumers for out in producer.outputs):
        # Nobody reads the list any more (a graph output would still have its pnnx.Output
        # consumer): drop the expression's layer, so that no backend evaluates a list holding
        # a tensor. Its layer exists already: pnnx writes operators in topological order and
        # layers are created in file order.
        producer.layer = None
    positions = iter(range(1, len(op.inputs)))
    return [None if item == "None" else next(positions) for item in items]


def list_items(expr: str) -> list[str] | None:
    """The top-level items of a list expression `[a,f(b,c),None]`, or None if not a list."""
    if not (expr.startswith("[") and expr.endswith("]")):
        return None
    items, depth, start = [], 0, 1
    for i, ch in enumerate(expr[1:-1], start=1):
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(expr[start:i])
            start = i + 1
    items.append(expr[start:-1])
    return items


def computed_index_item(op: RuntimeOperator, producer, expr: str) -> list[int | None] | None:
    """An index list with one computed item, `[floor_divide(@0,2)]` or `[None,add(@1,1)]`
    (Mixtral's router, Hugging Face transformers 5): the producer computes that item alone,
    a tensor, and the list around it becomes the pattern. Evaluated as a list, the tensor
    inside it would index as one more dim. Several computed items are refused by name."""
    items = list_items(expr)
    if items is None or not any("@" in item for item in items):
        return None   # a tensor, or a list of constants (folded: the index reads its value)
    computed = [k for k, item in enumerate(items) if item != "None"]
    listed = op.inputs[1]
    if (len(computed) != 1 or "@" not in items[computed[0]] or listed.consumers != [op]
            or producer.layer is None):
        raise op.error(f"the index list {expr} has {len(computed)} items that are not ':' "
                       f"(None) and {len(listed.consumers)} reader(s): only a list with one "
                       "computed item, the others ':', read by this index alone, is supported")
    producer.params["expr"] = items[computed[0]]   # the item alone, computed as a tensor
    producer.layer = type(producer.layer).from_operator(producer)
    return [1 if k == computed[0] else None for k in range(len(items))]


@register("Tensor.index", backend="cpu")
class Index(DataMovementLayer):
    """aten::index: entries of the index list are `:` (None) or index tensors.

    With one index tensor at position p the output is x.shape[:p] + index.shape + the rest.
    With several, they broadcast together; NumPy's advanced indexing has the same rules
    (including "non-adjacent index tensors put their dims first"), so the CPU forward is just
    `x[tuple]`.
    """

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.constants = None
        layer.pattern = None
        if op.has("expr"):
            value = parse_index_literal(str(op.param("expr")))
            if value is None:
                raise op.error(f"expr={op.param('expr')} is not a list of None and integer "
                               "lists")
            layer.constants = [None if v is None else np.asarray(v) for v in value]
        else:
            # absorbing rewrites the operator: a second layer of it (the CPU layer an OpenCL
            # twin falls back to) takes the pattern the first one found
            if not hasattr(op, "index_pattern"):
                op.index_pattern = absorb_index_list(op)
            layer.pattern = op.index_pattern
        return layer

    def entries(self, inputs) -> list[tuple[TensorSpec, int | None] | None]:
        """The index list, whichever way pnnx wrote it: None for `:`, else (spec, the input
        that carries it at run time, or None for a constant)."""
        def const(v):
            v = np.asarray(v)
            return TensorSpec.of(v.shape, v.dtype, v), None

        if self.constants is not None:
            self.expect_inputs(inputs, 1)
            return [None if c is None else const(c) for c in self.constants]
        if self.pattern is not None:
            return [None if k is None else (inputs[k], k) for k in self.pattern]
        self.expect_inputs(inputs, 2)
        spec = inputs[1]
        if isinstance(spec.value, (list, tuple)):  # a known list, e.g. folded constants
            return [None if v is None else const(v) for v in spec.value]
        if spec.dtype.kind in "iub":  # an index tensor given directly: x[index]
            return [(spec, 1)]
        raise self.op.error("the index input should be a list built by a pnnx.Expression "
                            "like [None,@0], a known list, or an integer tensor")

    def infer_specs(self, inputs):
        listed = self.entries(inputs)   # checks the number of inputs first
        x = inputs[0]
        entries: list[tuple[TensorSpec, int | None] | None] = []
        for entry in listed:
            if entry is not None and entry[0].dtype == np.dtype(np.bool_):
                if not entry[0].known:
                    raise self.shape_error("a boolean mask index gives an output whose size "
                                           "depends on the mask's values; only masks known "
                                           "when the model is built are supported")
                # A known mask selects the same elements as its nonzero() coordinates.
                entries += [(TensorSpec.of(c.shape, np.int64, c.astype(np.int64)), None)
                            for c in np.nonzero(entry[0].value)]
            else:
                if entry is not None:
                    _check_index_dtype(self, entry[0], "an index tensor")
                entries.append(entry)
        if len(entries) > len(x.shape):
            raise self.shape_error(f"{len(entries)} indices for a {len(x.shape)}-D input "
                                   f"{x.shape}")
        self.resolved = entries
        positions = [p for p, e in enumerate(entries) if e is not None]
        if not positions:
            return [TensorSpec(x.shape, x.dtype)]
        shapes = [entries[p][0].shape for p in positions]
        try:
            joint = tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise self.shape_error(f"index tensors of shapes {shapes} do not broadcast "
                                   "together") from None
        if positions == list(range(positions[0], positions[-1] + 1)):
            shape = x.shape[:positions[0]] + joint + x.shape[positions[-1] + 1:]
        else:  # separated index tensors: their dims go first (NumPy and PyTorch agree)
            shape = joint + tuple(x.shape[d] for d in range(len(x.shape)) if d not in positions)
        return [TensorSpec(tuple(shape), x.dtype)]

    def forward(self, inputs):
        x, index = inputs[0], []
        for p, entry in enumerate(self.resolved):
            if entry is None:
                index.append(slice(None))
                continue
            spec, source = entry
            item = np.asarray(spec.value if source is None else inputs[source])
            if item.size and (item.min() < -x.shape[p] or item.max() >= x.shape[p]):
                raise self.shape_error(f"index value out of range for dim {p} of size "
                                       f"{x.shape[p]}")
            index.append(item)
        return [x[tuple(index)]]
