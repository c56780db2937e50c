"""Shared by the normalisation layers (batch, layer, group, instance norm) and PReLU.

Two shapes of computation cover all of them:

* **Per-channel affine** `y = x * scale[c] + shift[c]` (BatchNorm at inference, InstanceNorm
  with running stats, PReLU's slope is the same indexing): channel `c` of element `i` of an
  (N, C, *rest) tensor is `(i // inner) % C` with `inner = prod(rest)`.
* **Row normalisation** (LayerNorm, GroupNorm, InstanceNorm): view the input as `rows` rows of
  `length` contiguous values, subtract each row's mean and divide by its standard deviation,
  then apply a learnt affine whose index depends on the operator. One sample holds `groups`
  rows; the affine parameter of position `j` of row `r` is

      p = ((r % groups) * length + j) // inner

  LayerNorm:    groups=1, inner=1          -> p = j           (one weight per position)
  GroupNorm:    groups=G, inner=prod(S)    -> p = channel     (C/G channels per row)
  InstanceNorm: groups=C, inner=prod(S)    -> p = channel     (one channel per row)

The variance is the biased one (divide by `length`), as PyTorch uses for normalising. Both
backends compute it in float32 in two passes, so they agree with each other, and with
PyTorch's LayerNorm, even where a row's sum overflows (NaN). PyTorch's GroupNorm and
InstanceNorm use Welford's running update instead and give 0.0 for a row at float32's maximum,
where Kuiper gives NaN: a sum that overflows float32 has no answer independent of how it is
summed (a convolution's gives inf, -inf or NaN by the order of its terms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kuiper.core.ir import RuntimeOperator
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.input_dtypes import expect_floats


def tensor_inputs(op: RuntimeOperator, order: Sequence[str]) -> dict[str, int]:
    """Input position of each tensor argument of an `F.*` call (e.g. F.layer_norm's weight).

    pnnx names inputs with `$name=operand` when it can; an argument that was not a tensor is
    written as a plain parameter instead (`weight=None`), so it cannot be an input. Unnamed
    inputs take the remaining arguments in PyTorch's order.
    """
    if len(op.inputs) > len(order):
        raise op.error(f"expected at most {len(order)} inputs ({', '.join(order)}), "
                       f"got {len(op.inputs)}")
    names = list(op.input_names) + [None] * (len(op.inputs) - len(op.input_names))
    slots: dict[str, int] = {}
    for i, name in enumerate(names):
        if name is not None:
            if name not in order:
                raise op.error(f"unexpected input '${name}', expected one of {', '.join(order)}")
            slots[name] = i
    free = [n for n in order if n not in slots and n not in op.params]
    for i, name in enumerate(names):
        if name is None:
            slots[free.pop(0)] = i
    if slots.get("input") != 0:
        raise op.error("the first input must be the tensor to normalise")
    return slots


def channel_layout(shape: Sequence[int], axis: int = 1) -> tuple[int, int]:
    """(C, inner) of a tensor whose channel dim is `axis`: C = shape[axis], inner = rest."""
    if len(shape) <= axis:
        return 1, 1
    return int(shape[axis]), int(np.prod(shape[axis + 1:], dtype=np.int64))


def channel_affine(x: np.ndarray, scale: np.ndarray, shift: np.ndarray | None,
                   axis: int = 1) -> np.ndarray:
    """x * scale[c] + shift[c] along channel dim `axis` (NumPy broadcasting does the indexing)."""
    view = (-1,) + (1,) * (x.ndim - axis - 1)
    y = x * scale.reshape(view)
    if shift is not None:
        y += shift.reshape(view)
    return y.astype(x.dtype, copy=False)


def fold_stats(mean: np.ndarray, var: np.ndarray, eps: float, weight: np.ndarray | None,
               bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(x - mean) / sqrt(var + eps) * weight + bias  ==  x * scale + shift: return both."""
    scale = 1.0 / np.sqrt(var.astype(np.float64) + eps)
    if weight is not None:
        scale = scale * weight
    shift = -mean * scale
    if bias is not None:
        shift = shift + bias
    return scale.astype(np.float32), shift.astype(np.float32)


@dataclass(frozen=True)
class RowLayout:
    """How a norm views its input: see the module docstring."""

    rows: int
    length: int
    groups: int
    inner: int
    n_params: int  # how many affine parameters the input shape calls for


class RowNorm(Layer):
    """Base of LayerNorm, GroupNorm and InstanceNorm: subclasses give `layout` and weights.

    The affine parameters are either weights of the operator (`self.gamma`, `self.beta`) or,
    for `F.*` calls with tensors computed in the graph, inputs (`self.slots`).
    """

    eps: float = 1e-5
    gamma: np.ndarray | None = None
    beta: np.ndarray | None = None

    def __init__(self, op: RuntimeOperator):
        super().__init__(op)
        self.slots: dict[str, int] = {"input": 0}  # argument name -> input position

    def layout(self, shape: Sequence[int]) -> RowLayout:
        raise NotImplementedError

    def read_affine(self, op: RuntimeOperator, affine: bool, shape: tuple[int, ...] | None,
                    functional_args: Sequence[str] = ("input", "weight", "bias")) -> None:
        """Weights `@weight`/`@bias` of an nn.* module, or the weight/bias inputs of an F.*."""
        self.eps = op.float_param("eps", 1e-5)
        if op.type.startswith("F."):
            self.slots = tensor_inputs(op, functional_args)
            return
        self.expect_inputs(op.inputs, 1)
        self.gamma = op.weight("weight", shape, optional=not affine)
        self.beta = op.weight("bias", shape, optional=True)

    def affine_params(self, inputs: Sequence) -> tuple:
        """(gamma, beta), each an operator weight, an input value or None."""
        def pick(name, own):
            return inputs[self.slots[name]] if name in self.slots else own
        return pick("weight", self.gamma), pick("bias", self.beta)

    def infer(self, inputs):
        self.expect_inputs(inputs, *range(1, len(self.slots) + 1))
        expect_floats(self, inputs)  # the input, and an F.*_norm's weight and bias
        lay = self.layout(inputs[0].shape)
        for name, own in zip(("weight", "bias"), (self.gamma, self.beta)):
            spec = inputs[self.slots[name]] if name in self.slots else own
            if spec is not None and int(np.prod(spec.shape, dtype=np.int64)) != lay.n_params:
                raise self.shape_error(f"{name} has shape {tuple(spec.shape)}, expected "
                                       f"{lay.n_params} values for input shape "
                                       f"{inputs[0].shape}")
        return [TensorSpec(inputs[0].shape, inputs[0].dtype)]

    def forward(self, inputs):
        x = inputs[0]
        if x.size == 0:   # a 0 in the shape: nothing to normalise, an empty output (PyTorch's)
            return [np.empty(x.shape, x.dtype)]
        lay = self.layout(x.shape)
        # float32, two passes (the mean, then the squared deviations from it), as the OpenCL
        # kernel (clkernels/norm_rows.h) and PyTorch's LayerNorm do: in float64 the CPU gave
        # finite values where both give NaN (a row at float32's maximum overflows its sum)
        dtype = np.result_type(x.dtype, np.float32)  # (float16 in float32, float64 as is)
        rows = x.reshape(lay.rows, lay.length).astype(dtype, copy=False)
        # In place after the first subtraction: one new array, not one per step (a ViT's
        # LayerNorm of 197 x 384 values: 0.26 -> 0.20 ms on the 2-core VM).
        # np.add.reduce is np.mean's own (pairwise) sum, without mean's Python wrapper (a
        # ViT-S LayerNorm spent 0.06 ms outside its arithmetic, which takes 0.14)
        inv_length = dtype.type(1.0 / lay.length)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            mean = np.add.reduce(rows, axis=1, keepdims=True)
            mean *= inv_length
            y = rows - mean
            scale = np.add.reduce(np.square(y), axis=1, keepdims=True)
            scale *= inv_length
            scale += dtype.type(self.eps)
            np.sqrt(scale, out=scale)
            np.reciprocal(scale, out=scale)
            y *= scale
        gamma, beta = self.affine_params(inputs)
        y = y.reshape(-1, lay.groups * lay.length)  # one sample per row
        for param, apply in ((gamma, np.multiply), (beta, np.add)):
            if param is not None:
                values = np.ravel(param).astype(dtype, copy=False)
                apply(y, values if lay.inner == 1 else np.repeat(values, lay.inner), out=y)
        return [y.reshape(x.shape).astype(x.dtype, copy=False)]

    def flops(self, inputs, outputs):
        return 7 * inputs[0].numel  # mean, variance, normalise, affine


