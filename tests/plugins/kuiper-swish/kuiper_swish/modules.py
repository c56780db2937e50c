"""The PyTorch side: a module that pnnx keeps as one operator when exported with

    pnnx.export(model, "model.pt", (x,), moduleop=["kuiper_swish.modules.Swish2"])

pnnx then writes one operator of type `kuiper_swish.modules.Swish2` with the module's tensors
(`alpha`) as weights, but not its plain Python attributes (`beta`): see layers.py for how the
layer gets those.
"""

import torch


class Swish2(torch.nn.Module):
    """y = beta * x * sigmoid(alpha * x), with a learnt alpha per channel."""

    def __init__(self, channels: int, beta: float = 1.0):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.ones(1, channels, 1, 1))
        self.beta = beta  # a plain attribute: pnnx does not write it

    def forward(self, x):
        return self.beta * x * torch.sigmoid(self.alpha * x)
