"""Kuiper's side of LayerNorm2d: a CPU layer, its OpenCL twin, and its PyTorch rebuild.

Written exactly like Kuiper's own layers (kuiper/DESIGN.md, "Adding an operator") with what
Kuiper exports for plugins (kuiper/PLUGINS.md): `kuiper.Layer`, `kuiper.OpenCLLayer`,
`kuiper.register` and friends. Course lesson 14 builds this file.
"""

from __future__ import annotations

import numpy as np

import kuiper

TYPE = "kuiper.examples.layernorm2d.modules.LayerNorm2d"  # what pnnx writes: the import path


@kuiper.register(TYPE)
class LayerNorm2d(kuiper.Layer):
    """y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c], mean and var over the channels
    of each pixel of an (N, C, H, W) float32 tensor (modules.py says it in PyTorch)."""

    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        weight = op.weight("weight")
        if weight.ndim != 1 or weight.size == 0:
            raise op.error(f"weight '@weight' has shape {weight.shape}, expected (C,) with C > 0")
        channels = weight.shape[0]
        layer.weight = np.asarray(weight, np.float32)
        layer.bias = np.asarray(op.weight("bias", shape=(channels,)), np.float32)
        # eps is a buffer of the module, so pnnx wrote it with the weights (a plain float
        # attribute would not be in the file at all: kuiper/PLUGINS.md, section 4).
        layer.eps = float(op.weight("eps", shape=(1,))[0])
        if not np.isfinite(layer.eps) or layer.eps < 0:
            raise op.error(f"weight '@eps' is {layer.eps}, expected a finite number >= 0")
        return layer

    def infer(self, inputs):
        self.expect_inputs(inputs, 1)
        (x,) = inputs
        channels = self.weight.shape[0]
        if len(x.shape) != 4 or x.shape[1] != channels:
            raise self.shape_error(f"expected an (N, {channels}, H, W) input, got {x.shape}")
        if x.dtype != np.float32:  # the kernel reads floats
            raise self.shape_error(f"expected a float32 input, got {x.dtype}")
        return [kuiper.TensorSpec(x.shape, x.dtype)]

    def forward(self, inputs):
        x = inputs[0]
        mean = x.mean(axis=1, keepdims=True)
        centred = x - mean
        # Two passes, the mean first and then the squares of what is left: the one-pass
        # E[x^2] - E[x]^2 cancels away every digit when the mean is large against the spread.
        var = (centred * centred).mean(axis=1, keepdims=True)
        scale = self.weight.reshape(1, -1, 1, 1) / np.sqrt(var + np.float32(self.eps))
        return [(centred * scale + self.bias.reshape(1, -1, 1, 1)).astype(np.float32)]

    def flops(self, inputs, outputs):
        return 8 * outputs[0].numel  # mean, centring, square, variance, scale, shift

    @classmethod
    def torch_module(cls, op):
        """The PyTorch module this operator was exported from, with its weights: what
        `kuiper compare --against torch` runs for it (pnnx's rebuild only calls it)."""
        import torch  # here, not at the top: Kuiper runs without PyTorch

        from kuiper.examples.layernorm2d.modules import LayerNorm2d as TorchLayerNorm2d

        layer = cls.from_operator(op)
        module = TorchLayerNorm2d(layer.weight.shape[0], eps=layer.eps)
        module.weight.data = torch.from_numpy(layer.weight.copy())
        module.bias.data = torch.from_numpy(layer.bias.copy())
        return module


@kuiper.register(backend="opencl")  # the types of its CPU layer, LayerNorm2d
class LayerNorm2dOpenCL(kuiper.OpenCLLayer, LayerNorm2d):
    kernel_path = "layernorm2d.cl"  # beside this file; built and cached by Kuiper's runtime

    def bind(self, inputs, outputs, in_specs, out_specs):
        n, channels, height, width = in_specs[0].shape
        pixels = n * height * width  # one work-item each
        # Uploaded once, here; kept on the layer, or the device buffers would be freed.
        self._weight = self.upload(self.weight)
        self._bias = self.upload(self.bias)
        kernel = self.kernel("layernorm2d")
        kernel.set_args(inputs[0].data, outputs[0].data, self._weight.data, self._bias.data,
                        np.float32(self.eps), np.int32(pixels), np.int32(channels),
                        np.int32(height * width))
        self.launches = [kuiper.Launch(kernel, (kuiper.round_up(pixels, 64),))] if pixels else []
