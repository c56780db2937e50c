"""PixelShuffle, PixelUnshuffle and ChannelShuffle against torch, on both backends."""

import zipfile

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator


@pytest.mark.parametrize("op_type", ["nn.PixelShuffle", "F.pixel_shuffle"])
@pytest.mark.parametrize("shape, r", [((2, 12, 5, 7), 2), ((1, 27, 3, 2), 3), ((3, 4, 1, 1), 2),
                                      ((2, 5, 3, 4), 1), ((2, 3, 8, 5, 2), 2), ((16, 3, 2), 4)])
def test_pixel_shuffle(backend, rng, op_type, shape, r):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"upscale_factor": r}, backend=backend)
    assert_close(y, F.pixel_shuffle(torch.from_numpy(x), r).numpy(), rtol=0)


@pytest.mark.parametrize("op_type", ["nn.PixelUnshuffle", "F.pixel_unshuffle"])
@pytest.mark.parametrize("shape, r", [((2, 3, 10, 14), 2), ((1, 13, 9, 6), 3), ((3, 4, 1, 1), 1),
                                      ((2, 3, 2, 4, 8), 2), ((5, 4, 4), 4)])
def test_pixel_unshuffle(backend, rng, op_type, shape, r):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"downscale_factor": r}, backend=backend)
    assert_close(y, F.pixel_unshuffle(torch.from_numpy(x), r).numpy(), rtol=0)


@pytest.mark.parametrize("op_type", ["nn.ChannelShuffle", "F.channel_shuffle"])
@pytest.mark.parametrize("shape, groups", [((2, 12, 5, 7), 3), ((1, 13, 3, 2), 13),
                                           ((3, 8, 5), 2), ((2, 6, 2, 3, 2), 6), ((2, 5, 3), 1)])
def test_channel_shuffle(backend, rng, op_type, shape, groups):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], params={"groups": groups}, backend=backend)
    assert_close(y, F.channel_shuffle(torch.from_numpy(x), groups).numpy(), rtol=0)


def test_channel_shuffle_groups_as_input(backend, rng, tmp_path):
    # F.channel_shuffle(x, 2) exports as aten::channel_shuffle with groups a constant input.
    x = rng.standard_normal((2, 6, 3, 5)).astype(np.float32)
    lines = ["7767517", "4 3",
             "pnnx.Input in0 0 1 0 #0=(2,6,3,5)f32",
             "pnnx.Attribute groups 0 1 1 @data=(1)i64",
             "aten::channel_shuffle op0 2 1 0 1 2 #0=(2,6,3,5)f32 #2=(2,6,3,5)f32",
             "pnnx.Output out0 1 0 2"]
    (tmp_path / "model.pnnx.param").write_text("\n".join(lines) + "\n")
    with zipfile.ZipFile(tmp_path / "model.pnnx.bin", "w", zipfile.ZIP_STORED) as z:
        z.writestr("groups.data", np.array([2], np.int64).tobytes())
    graph = kuiper.load(tmp_path / "model.pnnx.param", backend=backend)
    assert "aten::channel_shuffle" not in {op.type for op in graph.fallbacks}
    (y,) = graph.forward(x)
    assert_close(y, F.channel_shuffle(torch.from_numpy(x), 2).numpy(), rtol=0)


@pytest.mark.parametrize("op_type, params, shape, error, message", [
    ("nn.PixelShuffle", {"upscale_factor": 2}, (1, 7, 5, 5), ShapeError, r"upscale_factor\^2 = 4"),
    ("nn.PixelShuffle", {"upscale_factor": 0}, (1, 4, 5, 5), OperatorError, "positive"),
    ("nn.PixelShuffle", {"upscale_factor": 2}, (8, 5), ShapeError, "at least a 3-D input"),
    ("nn.PixelUnshuffle", {"downscale_factor": 2}, (1, 4, 5, 6), ShapeError,
     "by downscale_factor=2"),
    ("nn.PixelUnshuffle", {}, (1, 4, 4, 4), OperatorError, "'downscale_factor' is missing"),
    ("nn.ChannelShuffle", {"groups": 3}, (1, 4, 5), ShapeError, "divisible by groups=3"),
    ("nn.ChannelShuffle", {"groups": 2}, (4, 6), ShapeError, "at least a 3-D input"),
])
def test_shuffle_bad_params(backend, op_type, params, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.ones(shape, np.float32)], params=params, backend=backend)


class Shuffles(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.shuffle, self.unshuffle = torch.nn.PixelShuffle(2), torch.nn.PixelUnshuffle(2)
        self.channels = torch.nn.ChannelShuffle(3)

    def forward(self, x):
        return (self.shuffle(x), self.unshuffle(x), self.channels(x), F.pixel_shuffle(x, 2),
                F.pixel_unshuffle(x, 2))


@pytest.mark.slow
def test_shuffle_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 12, 4, 6)).astype(np.float32))
    module = Shuffles().eval()
    graph = kuiper.load(export_model("shuffles", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy(), rtol=0)
