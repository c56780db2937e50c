"""Small models for the OpenCL executor tests, exported once per session."""

import pytest
import torch
import torch.nn as nn

from tests.conftest import skip_without_opencl


class TwoBranchNet(nn.Module):
    """Two inputs, two outputs, and branches that an out-of-order queue may overlap."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 12, 3, padding=1), nn.BatchNorm2d(12), nn.ReLU())
        self.left = nn.Sequential(nn.Conv2d(12, 8, 1), nn.ReLU())
        self.right = nn.Sequential(nn.Conv2d(12, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(1))
        self.head = nn.Linear(16, 5)

    def forward(self, x, z):
        y = self.stem(x)
        a, b = self.left(y), self.right(y)
        merged = torch.cat((a, b), dim=1)
        pooled = torch.flatten(nn.functional.adaptive_avg_pool2d(merged, 1), 1)
        return self.head(pooled) + z, merged


@pytest.fixture(scope="session")
def two_branch_model(export_model):
    skip_without_opencl()
    torch.manual_seed(0)
    net = TwoBranchNet()
    for m in net.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 2.0)
    x, z = torch.randn(2, 3, 11, 9), torch.randn(2, 5)
    with torch.no_grad():
        expected = [t.numpy() for t in net.eval()(x, z)]
    path = export_model("two_branch", net, (x, z))
    return path, [x.numpy(), z.numpy()], expected


@pytest.fixture
def fresh_probe(monkeypatch, tmp_path):
    """forget(probe): no answer of the probe module (tensor_cores, vector_width) in this
    process, the environment or the cache folder (a fresh one, this test's tmp_path)."""
    def forget(probe):
        monkeypatch.setattr(probe, "_known", {})
        # set, then deleted: monkeypatch then restores the variable (or its absence) at the
        # end, whatever the probe writes into os.environ meanwhile
        monkeypatch.setenv(probe.ENV, "")
        monkeypatch.delenv(probe.ENV)
        monkeypatch.setenv("KUIPER_CACHE_DIR", str(tmp_path))

    return forget
