"""Kuiper's side of Swish2: a CPU layer, its OpenCL twin, and how to rebuild it in PyTorch.

Written exactly like Kuiper's own layers (kuiper/DESIGN.md, "Adding an operator"), with what
Kuiper exports for plugins: `kuiper.Layer` and friends, and `kuiper.register`.
"""

from __future__ import annotations

import numpy as np

import kuiper

TYPE = "kuiper_swish.modules.Swish2"  # what pnnx writes: the module's import path


@kuiper.register(TYPE)
class Swish2(kuiper.ElementwiseLayer):
    @classmethod
    def from_operator(cls, op):
        layer = cls(op)
        alpha = op.attributes.get("alpha")
        if alpha is None or alpha.ndim != 4 or alpha.shape[0] != 1:
            raise op.error("expected the weight @alpha of shape (1, C, 1, 1)")
        layer.alpha = np.asarray(alpha, np.float32)
        # pnnx does not write plain attributes: `beta` is the module's default unless the model
        # is loaded with params={TYPE: {"beta": ...}} (or the module keeps it as a buffer).
        layer.beta = op.float_param("beta", 1.0)
        return layer

    def infer(self, inputs):
        (x,) = inputs
        if len(x.shape) != 4 or x.shape[1] != self.alpha.shape[1]:
            raise self.shape_error(f"expected an (N, {self.alpha.shape[1]}, H, W) input, got "
                                   f"{x.shape}")
        return super().infer(inputs)

    def forward(self, inputs):
        x = inputs[0]
        z = self.alpha * x
        # sigmoid(z) = (1 + tanh(z / 2)) / 2: no overflow for large |z|
        return [(self.beta * x * (0.5 + 0.5 * np.tanh(0.5 * z))).astype(np.float32)]

    def flops(self, inputs, outputs):
        return 5 * outputs[0].numel

    @classmethod
    def torch_module(cls, op):
        """The PyTorch module this operator was exported from, with its weights: what
        `kuiper compare --against torch` runs for it (pnnx's rebuild only calls it)."""
        import torch

        from kuiper_swish.modules import Swish2 as TorchSwish2

        layer = cls.from_operator(op)
        module = TorchSwish2(layer.alpha.shape[1], beta=layer.beta)
        module.alpha.data = torch.from_numpy(layer.alpha.copy())
        return module


@kuiper.register(backend="opencl")  # the types of its CPU layer, Swish2
class Swish2OpenCL(kuiper.OpenCLLayer, Swish2):
    kernel_path = "swish2.cl"  # beside this file; built and cached by Kuiper's runtime

    def bind(self, inputs, outputs, in_specs, out_specs):
        shape = in_specs[0].shape
        n = int(np.prod(shape))
        self._alpha = self.upload(self.alpha.reshape(-1))  # kept alive with the layer
        kernel = self.kernel("swish2")
        kernel.set_args(inputs[0].data, outputs[0].data, self._alpha.data, np.float32(self.beta),
                        np.int32(n), np.int32(shape[1]), np.int32(np.prod(shape[2:])))
        self.launches = [kuiper.Launch(kernel, (kuiper.round_up(n, 64),))] if n else []
