"""The 3-D operators and ConvTranspose1d through the ONNX route (torch.onnx.export, then the
pnnx command line): there pnnx writes nn.Conv3d / nn.ConvTranspose3d / nn.ConvTranspose1d with
per-axis padding, and the pools as F.avg_pool3d / F.max_pool3d (an adaptive pool whose output
size divides the input becomes a plain one)."""

from __future__ import annotations

import pytest
import torch

import kuiper
from kuiper.testing import assert_close

pytestmark = pytest.mark.slow


class Volumes(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(4, 6, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2),
                                    dilation=(1, 1, 2), groups=2)
        self.up = torch.nn.ConvTranspose3d(6, 4, (2, 3, 3), stride=(2, 1, 2), padding=(0, 1, 1),
                                           output_padding=(1, 0, 1), groups=2)
        self.avg = torch.nn.AvgPool3d(3, stride=2, padding=1, ceil_mode=True,
                                      count_include_pad=False)
        self.max = torch.nn.MaxPool3d(2, stride=1, ceil_mode=True)
        self.adaptive = torch.nn.AdaptiveAvgPool3d((1, 3, 4))
        self.up1 = torch.nn.ConvTranspose1d(4, 6, 3, stride=2, output_padding=1, groups=2)

    def forward(self, x, v):
        y = self.up(torch.relu(self.conv(x)))
        return self.avg(y), self.max(y), self.adaptive(y), self.up1(v)


def test_volumes_through_onnx(backend, export_onnx_model):
    torch.manual_seed(0)  # the same weights for both backends (the export is cached by name)
    module = Volumes().eval()
    g = torch.Generator().manual_seed(0)
    x, v = torch.randn(1, 4, 6, 7, 8, generator=g), torch.randn(2, 4, 9, generator=g)
    param = export_onnx_model("onnx_volumes", module, (x, v))
    types = {line.split()[0] for line in param.read_text().splitlines()[2:] if line.strip()}
    assert {"nn.Conv3d", "nn.ConvTranspose3d", "nn.ConvTranspose1d", "F.avg_pool3d",
            "F.max_pool3d"} <= types
    outs = kuiper.load(param, backend=backend).forward(x.numpy(), v.numpy())
    with torch.no_grad():
        refs = module(x, v)
    assert len(outs) == len(refs)
    for got, ref in zip(outs, refs):
        assert_close(got, ref.numpy())
