"""Reductions: sum, mean, prod, amax/amin, max/min (values + indices), argmax/argmin,
logsumexp, var/std and norm, over one dim, a list of dims, or everything.

pnnx writes `dim` as an int, a list, or None (= all dims) and omits `keepdim` when it is False.
torch.max / torch.min with a dim return (values, indices); pnnx keeps only the outputs that are
used, so with one output the declared dtype (i64 or not) tells which one it is.
var/std arrive with `correction=k`, or `unbiased=True/False`, or `unbiased=k` (pnnx writes an
integer correction into `unbiased`); all three mean "divide by N - k".
ONNX ReduceMax / ReduceMin, which pnnx's ONNX route sometimes leaves as they are, are `OnnxReduce`
(ONNX's `axes`, `keepdims`, `noop_with_empty_axes`).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.reduce_axes import kept_outputs, normalize_axes, reduced_shape

# Reductions that only make sense on floating-point data (torch refuses integers for them).
FLOAT_ONLY = {"mean", "logsumexp", "var", "std", "norm"}
# Reductions whose `dim` is a single int and that return the position of the winner.
WITH_INDEX = {"max", "min", "argmax", "argmin"}


@register("torch.sum", "torch.mean", "torch.prod", "torch.amax", "torch.amin", "torch.max",
          "torch.min", "torch.argmax", "torch.argmin", "torch.logsumexp", "torch.var",
          "torch.std", "torch.norm", backend="cpu")
class Reduce(Layer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.kind = op.type.split(".", 1)[1]
        dim = op.param("dim", None)
        if isinstance(dim, (int, np.integer)) and not isinstance(dim, bool):
            dim = [int(dim)]
        elif dim is not None:
            dim = op.ints_param("dim")
        # torch.prod takes one dim, but pnnx's ONNX route writes ReduceProd over several
        # (`dim=(0,1,2)`), which is the product over all of them, as for sum.
        if layer.kind in WITH_INDEX and dim is not None and len(dim) != 1:
            raise op.error(f"parameter 'dim' should be a single dim for {op.type}, got {dim}")
        if layer.kind == "logsumexp" and dim is None:
            raise op.error("parameter 'dim' is missing: torch.logsumexp needs the dims to reduce")
        layer.dims = dim
        layer.keepdim = op.bool_param("keepdim", False)
        layer.correction = _correction(op) if layer.kind in ("var", "std") else 0.0
        layer.p = _norm_p(op) if layer.kind == "norm" else 2.0
        dtype = op.param("dtype", None)
        if dtype not in (None, "torch.float", "torch.float32"):
            raise op.error(f"parameter 'dtype' is {dtype}; only torch.float is supported")
        # max/min with a dim: (values, indices), or whichever one pnnx kept.
        layer.outputs = ["values"]
        if layer.kind in ("argmax", "argmin"):
            layer.outputs = ["indices"]
        elif layer.kind in ("max", "min") and dim is not None:
            layer.outputs = kept_outputs(op)
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        x = inputs[0]
        if x.dtype.kind not in "biufc":   # e.g. an expression's bare word ("bilinear")
            raise self.op.error(f"{self.type} needs a tensor of numbers, got {x.dtype} "
                                f"(input {self.op.inputs[0].name})")
        if self.kind in FLOAT_ONLY and not np.issubdtype(x.dtype, np.floating):
            raise self.op.error(f"{self.type} needs a floating-point input, got {x.dtype.name}")
        try:
            axes = normalize_axes(self.dims, len(x.shape))
        except ValueError as e:
            raise self.shape_error(str(e)) from None
        self.full = axes is None
        self.axes = tuple(range(len(x.shape))) if axes is None else axes
        if self.full and self.kind in ("argmax", "argmin"):
            shape = (1,) * len(x.shape) if self.keepdim else ()  # index into the flat input
        elif self.full and self.kind in ("max", "min"):
            # torch.max(x) has no keepdim: a 0-D result, unless pnnx declared (1,...,1).
            shape = reduced_shape(x.shape, self.axes, self._declares_kept_dims(len(x.shape)))
        else:
            shape = reduced_shape(x.shape, self.axes, self.keepdim)
        if self.kind in WITH_INDEX | {"amax", "amin", "logsumexp", "norm"} and any(
                x.shape[a] == 0 for a in self.axes):
            raise self.shape_error(f"{self.type} of an empty dim: input shape {x.shape}")
        values_dtype = x.dtype
        if self.kind in ("sum", "prod") and not np.issubdtype(x.dtype, np.floating):
            values_dtype = np.dtype(np.int64)  # torch sums bool/int tensors into int64
        dtypes = {"values": values_dtype, "indices": np.dtype(np.int64)}
        self.out_specs = [TensorSpec.of(shape, dtypes[o]) for o in self.outputs]
        return self.out_specs

    def _declares_kept_dims(self, rank: int) -> bool:
        """pnnx's ONNX route writes ONNX `ReduceMax(x)` / `ReduceMin(x)` (no axes, keepdims=1)
        as `torch.max` / `torch.min` with neither dim nor keepdim, but declares the output ONNX
        gives, (1,...,1) of the input's rank (onnx/test_onnx_reduce_ops): follow the
        declaration there. A traced torch.max(x) is declared 0-D."""
        source = self.op.source
        declared = source.output_shapes if source is not None else []
        if rank == 0 or not declared or not declared[0]:
            return False
        shape = declared[0][0]
        return len(shape) == rank and all(d == 1 for d in shape)

    def forward(self, inputs):
        if isinstance(inputs[0], list):   # a pnnx list expression of tensors (index lists)
            raise self.op.error(f"{self.type} got a list of tensors (input "
                                f"{self.op.inputs[0].name}), not a tensor")
        x = np.asarray(inputs[0])   # an expression may hand a plain number (its 0-d result)
        axis = None if self.full else self.axes
        keep = self.keepdim
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            results = self._compute(x, axis, keep)
        return [np.asarray(r, dtype=s.dtype).reshape(s.shape)
                for r, s in zip(results, self.out_specs)]

    def _compute(self, x, axis, keep):
        kind = self.kind
        if kind in WITH_INDEX:
            if self.full and kind in ("max", "min"):
                return [x.max() if kind == "max" else x.min()]
            pick = np.argmax if kind in ("max", "argmax") else np.argmin
            # np.argmax/argmin return the first winner (NaN counts as the winner), like torch.
            if axis is None:
                return [pick(x)]
            index = np.expand_dims(pick(x, axis=axis[0]), axis[0])
            values = np.take_along_axis(x, index, axis[0])
            by_name = {"values": values, "indices": index}
            return [by_name[o] for o in self.outputs]
        if kind == "sum":
            return [np.sum(x, axis=axis, keepdims=keep)]
        if kind == "prod":
            return [np.prod(x, axis=axis, keepdims=keep)]
        if kind == "mean":
            return [np.mean(x, axis=axis, keepdims=keep)]
        if kind == "amax":
            return [np.max(x, axis=axis, keepdims=keep)]
        if kind == "amin":
            return [np.min(x, axis=axis, keepdims=keep)]
        if kind == "logsumexp":
            m = np.max(x, axis=axis, keepdims=True)
            m = np.where(np.isinf(m), 0, m)  # all -inf (or +inf) rows: no shift
            s = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
            return [s if keep else np.squeeze(s, axis=axis)]
        if kind in ("var", "std"):
            n = x.size if axis is None else int(np.prod([x.shape[a] for a in axis]))
            mean = np.mean(x, axis=axis, keepdims=True)
            sq = np.sum((x - mean) ** 2, axis=axis, keepdims=keep)
            var = sq / x.dtype.type(max(n - self.correction, 0))
            return [np.sqrt(var) if kind == "std" else var]
        return [norm(x, self.p, axis, keep)]

    def flops(self, inputs, outputs):
        return inputs[0].numel


@register("ReduceMax", "ReduceMin", backend="cpu")
class OnnxReduce(Reduce):
    """ONNX ReduceMax / ReduceMin, which pnnx leaves as they are when it does not rewrite them
    into torch.amax / torch.amin (the adaptive max pools from torch.onnx's dynamo exporter:
    `ReduceMax axes=(-2,-1) keepdims=1`).

    ONNX semantics: `axes` (an attribute, or from opset 18 a constant second input) lists the
    axes; `keepdims` defaults to 1; no axes (missing or `axes=()`) reduce every axis, unless
    `noop_with_empty_axes=1`, which makes the operator the identity. The result keeps the
    input's dtype.
    """

    KINDS = {"ReduceMax": "amax", "ReduceMin": "amin"}

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.kind = cls.KINDS[op.type]
        layer.axes_param = None if op.param("axes", None) is None else op.ints_param("axes")
        layer.keepdim = op.bool_param("keepdims", True)
        layer.noop_with_empty_axes = op.bool_param("noop_with_empty_axes", False)
        layer.correction, layer.p = 0.0, 2.0
        layer.outputs = ["values"]
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1, 2)
        axes = self.axes_param
        if len(inputs) == 2:  # opset 18: the axes are an input, known when the model is built
            if not inputs[1].known:
                raise self.op.error("the axes input should be a constant")
            if axes is not None:
                raise self.op.error("axes given both as a parameter and as an input")
            axes = [int(a) for a in np.asarray(inputs[1].value).reshape(-1)]
        if not axes:
            axes = [] if self.noop_with_empty_axes else None
        self.dims = axes
        return super().infer(inputs[:1])


def norm(x: np.ndarray, p: float, axis, keep: bool) -> np.ndarray:
    """Vector p-norm over `axis` as torch.norm computes it (p = 2 is also 'fro')."""
    a = np.abs(x)
    if p == np.inf:
        return np.max(a, axis=axis, keepdims=keep)
    if p == -np.inf:
        return np.min(a, axis=axis, keepdims=keep)
    if p == 0:
        return np.sum(a != 0, axis=axis, keepdims=keep).astype(x.dtype)
    if p == 1:
        return np.sum(a, axis=axis, keepdims=keep)
    if p == 2:
        return np.sqrt(np.sum(a * a, axis=axis, keepdims=keep))
    return np.sum(a ** x.dtype.type(p), axis=axis, keepdims=keep) ** x.dtype.type(1.0 / p)


def _correction(op) -> float:
    if op.has("correction"):
        return op.float_param("correction")
    unbiased = op.param("unbiased", True)
    if isinstance(unbiased, bool):
        return 1.0 if unbiased else 0.0
    if isinstance(unbiased, (int, float)):
        return float(unbiased)  # pnnx writes correction=k as unbiased=k
    raise op.error(f"parameter 'unbiased' should be True, False or a number, got {unbiased!r}")


def _norm_p(op) -> float:
    p = op.param("p", 2)
    if p == "fro" or p is None:
        return 2.0
    if p == "nuc":
        raise op.error("p='nuc' (nuclear norm) is not supported; only vector p-norms are")
    return op.float_param("p")
