"""BatchNorm at inference: a fixed per-channel scale and shift.

In eval mode BatchNorm does not look at the batch at all: it uses the running statistics it
stored during training,

    y = (x - running_mean) / sqrt(running_var + eps) * weight + bias
      = x * scale + shift,  scale = weight / sqrt(running_var + eps),  shift = bias - mean * scale

so `nn.BatchNorm*` is folded into (scale, shift) once, at load time. `F.batch_norm` may take its
statistics and affine from tensors computed in the graph, so it folds at run time (on OpenCL
with a tiny kernel). Channels are dim 1: (N, C), (N, C, L), (N, C, H, W), (N, C, D, H, W).
pnnx usually fuses a BatchNorm that follows a convolution into the convolution's weights, so
the ones that remain here follow something else (a Linear, an add, the input).
"""

from __future__ import annotations

import numpy as np

from kuiper.core.registry import register
from kuiper.core.tensor_spec import TensorSpec
from kuiper.layers.base import Layer
from kuiper.layers.common.input_dtypes import expect_floats
from kuiper.layers.common.norm import channel_affine, fold_stats, tensor_inputs

RANKS = {"nn.BatchNorm1d": (2, 3), "nn.BatchNorm2d": (4,), "nn.BatchNorm3d": (5,)}
ARGUMENTS = ("input", "running_mean", "running_var", "weight", "bias")


@register("nn.BatchNorm1d", "nn.BatchNorm2d", "nn.BatchNorm3d", "F.batch_norm", backend="cpu")
class BatchNorm(Layer):
    scale: np.ndarray | None = None  # folded at load time (nn.*), else None (F.batch_norm)
    shift: np.ndarray | None = None

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        layer.eps = op.float_param("eps", 1e-5)
        if op.type == "F.batch_norm":
            if op.bool_param("training", False):
                raise op.error("training=True normalises with the batch's own statistics; "
                               "export the model in eval mode")
            layer.slots = tensor_inputs(op, ARGUMENTS)
            missing = [n for n in ("running_mean", "running_var") if n not in layer.slots]
            if missing:
                raise op.error(f"needs the {' and '.join(missing)} input(s): inference batch "
                               "norm uses running statistics")
            return layer
        layer.expect_inputs(op.inputs, 1)
        channels = op.int_param("num_features") if op.has("num_features") else None
        mean = op.weight("running_mean", (channels,) if channels else None)
        var = op.weight("running_var", mean.shape)
        affine = op.bool_param("affine", True)
        weight = op.weight("weight", mean.shape, optional=not affine)
        bias = op.weight("bias", mean.shape, optional=not affine)
        layer.scale, layer.shift = fold_stats(mean, var, layer.eps, weight, bias)
        return layer

    def infer(self, inputs):
        expect_floats(self, inputs)  # the input, and an F.batch_norm's statistics and affine
        shape = inputs[0].shape
        ranks = RANKS.get(self.type)
        if (ranks and len(shape) not in ranks) or len(shape) < 2:
            want = " or ".join(f"{r}-D" for r in ranks or (2,))
            raise self.shape_error(f"input should be {want} (N, C, ...), got shape {shape}")
        if self.scale is not None:
            self.expect_inputs(inputs, 1)
            stats = {"running_mean": self.scale}
        else:
            self.expect_inputs(inputs, *range(3, len(ARGUMENTS) + 1))
            stats = {name: inputs[i] for name, i in self.slots.items() if name != "input"}
        for name, value in stats.items():
            if tuple(value.shape) != (shape[1],):
                raise self.shape_error(f"{name} has shape {tuple(value.shape)}, expected "
                                       f"({shape[1]},) for input shape {shape} (channels are "
                                       "dim 1)")
        return [TensorSpec(shape, inputs[0].dtype)]

    def scale_shift(self, inputs) -> tuple[np.ndarray, np.ndarray]:
        if self.scale is not None:
            return self.scale, self.shift
        arg = {name: inputs[i] for name, i in self.slots.items()}
        return fold_stats(arg["running_mean"], arg["running_var"], self.eps, arg.get("weight"),
                          arg.get("bias"))

    def forward(self, inputs):
        return [channel_affine(inputs[0], *self.scale_shift(inputs))]

    def flops(self, inputs, outputs):
        return 2 * outputs[0].numel
