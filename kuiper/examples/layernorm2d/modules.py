"""The PyTorch side: a module that pnnx keeps as one operator when exported with

    TYPE = "kuiper.examples.layernorm2d.modules.LayerNorm2d"
    pnnx.export(model, "model.pt", (x,), moduleop=[TYPE])

pnnx then writes one operator of that type (the module's import path), with the module's
tensors as weights: `@weight`, `@bias` and `@eps` (layers.py reads them).
"""

import torch


class LayerNorm2d(torch.nn.Module):
    """Layer normalisation over the channels of an NCHW tensor, at every pixel:

        y[n, c, h, w] = (x[n, c, h, w] - mean) / sqrt(var + eps) * weight[c] + bias[c]

    where mean and var (the biased variance) are taken over the C values x[n, :, h, w].
    ConvNeXt-style networks normalise this way; torch.nn.LayerNorm normalises the *last*
    dimensions, so on NCHW it would need a permute on each side.
    """

    def __init__(self, channels: int, eps: float = 1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(channels))
        self.bias = torch.nn.Parameter(torch.zeros(channels))
        # A buffer, not a plain float: pnnx writes a kept module's tensors into the .bin but not
        # its Python attributes, and the layer needs the eps this model was built with.
        self.register_buffer("eps", torch.tensor([float(eps)]))

    def forward(self, x):
        mean = x.mean(1, keepdim=True)
        var = (x - mean).square().mean(1, keepdim=True)
        scale = self.weight[:, None, None] / torch.sqrt(var + self.eps)
        return (x - mean) * scale + self.bias[:, None, None]
