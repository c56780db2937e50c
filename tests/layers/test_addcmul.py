"""torch.addcmul (pnnx's `aten::addcmul`, and `torch.addcmul` with a `value` parameter) against
torch on both backends, on awkward broadcast shapes."""

import numpy as np
import pytest
import torch

from kuiper.testing import assert_close, run_operator

T = torch.from_numpy


@pytest.mark.parametrize("shapes", [
    ((2, 3, 5, 7), (2, 3, 5, 7), (2, 3, 5, 7)),     # no broadcasting: the flat kernel path
    ((1, 13, 1, 1), (3, 13, 7, 5), (13, 1, 1)),      # ConvNeXtV2's GRN: gamma * (x * nx) + x
    ((3, 1, 17), (1, 1), (1, 4, 1)),                 # every operand broadcast
    ((), (1, 129), (5, 1)),
])
@pytest.mark.parametrize("value", [0.5, -2.25, 1.0])
def test_addcmul_matches_torch(backend, rng, shapes, value):
    x, t1, t2 = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    v = np.asarray(value, np.float32)
    # pnnx's form: value is a fourth operand, a folded constant
    (y,) = run_operator("aten::addcmul", [x, t1, t2, v], constants=[3], backend=backend)
    expected = torch.addcmul(T(x), T(t1), T(t2), value=value).numpy()
    assert y.shape == expected.shape and y.dtype == expected.dtype
    assert_close(y, expected)
    # the same with `value` as a parameter
    (y,) = run_operator("torch.addcmul", [x, t1, t2], params={"value": value},
                        backend=backend)
    assert_close(y, expected)


def test_addcmul_value_as_a_graph_input(backend, rng):
    """A value computed at run time (not folded) is read on the device."""
    x, t1, t2 = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (6,), (4, 1)))
    v = np.asarray(3.0, np.float32)
    (y,) = run_operator("aten::addcmul", [x, t1, t2, v], backend=backend)
    assert_close(y, torch.addcmul(T(x), T(t1), T(t2), value=3.0).numpy())


def test_addcmul_default_value_and_integers(backend, rng):
    x, t1, t2 = (rng.integers(-9, 9, s).astype(np.int32) for s in ((3, 4), (3, 4), (1, 4)))
    (y,) = run_operator("torch.addcmul", [x, t1, t2], backend=backend)
    expected = torch.addcmul(T(x), T(t1), T(t2)).numpy()
    assert y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def test_addcmul_shapes_that_do_not_broadcast_are_named(backend, rng):
    x, t1, t2 = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (4,), (2, 3)))
    with pytest.raises(Exception, match="do not broadcast together"):
        run_operator("torch.addcmul", [x, t1, t2], params={"value": 1.0}, backend=backend)


class GlobalResponseNorm(torch.nn.Module):
    """ConvNeXtV2's GRN as timm writes it, channels last: torch.addcmul(bias, weight, x * nx)
    + x, which pnnx exports as `aten::addcmul` (ResMLP's affine layers are the same call)."""

    def __init__(self, channels: int):
        super().__init__()
        generator = torch.Generator().manual_seed(3)
        self.weight = torch.nn.Parameter(torch.randn(channels, generator=generator))
        self.bias = torch.nn.Parameter(torch.randn(channels, generator=generator))

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return torch.addcmul(self.bias, self.weight, x * nx) + x


@pytest.mark.slow
def test_a_pnnx_export_with_addcmul_runs_on_both_backends(backend, tmp_path):
    """pnnx writes its PyTorch rebuild of this model with `aten::addcmul(...)` in it (a
    syntax error there): kuiper.export checks the model against the module instead."""
    import kuiper

    x = torch.randn(1, 7, 5, 13, generator=torch.Generator().manual_seed(4))
    module = GlobalResponseNorm(13).eval()
    path = kuiper.export(module, (x,), tmp_path / "grn")  # checked on the CPU backend
    assert "aten::addcmul" in path.read_text()  # the type that had no layer
    with torch.no_grad():
        expected = module(x).numpy()
    assert_close(kuiper.load(path, backend=backend)(x.numpy()), expected)
