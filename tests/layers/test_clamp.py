"""torch.clamp / torch.clip (and aten::clamp_min / clamp_max) against torch, on both backends."""

import zipfile

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

# (params as pnnx writes them, the same bounds for torch)
BOUNDS = [
    ({"min": -1, "max": 1}, (-1, 1)),               # ints where floats are meant
    ({"min": -0.5, "max": 0.25}, (-0.5, 0.25)),
    ({"min": 0.5, "max": None}, (0.5, None)),
    ({"min": None, "max": 0.2}, (None, 0.2)),
    ({"min": 0.1}, (0.1, None)),                   # a bound left out entirely
    ({"max": -2}, (None, -2)),
    ({"min": 0.7, "max": 0.2}, (0.7, 0.2)),         # min > max: everything becomes max
    ({"min": "-inf", "max": "inf"}, (-float("inf"), float("inf"))),
]


@pytest.mark.parametrize("op_type", ["torch.clamp", "torch.clip"])
@pytest.mark.parametrize("params, bounds", BOUNDS, ids=[str(b[1]) for b in BOUNDS])
def test_clamp_matches_torch(backend, rng, op_type, params, bounds):
    x = (rng.standard_normal((2, 13, 3, 7)) * 2).astype(np.float32)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]  # NaN stays NaN, as in torch
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, torch.clamp(torch.from_numpy(x), *bounds).numpy())


@pytest.mark.parametrize("shape", [(1,), (3, 17), (4, 3, 1, 129)])
def test_clamp_any_shape(backend, rng, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator("torch.clamp", [x], params={"min": -0.3, "max": 0.4}, backend=backend)
    assert_close(y, np.clip(x, -0.3, 0.4))


def _bound_input_model(folder, op_type, x_shape, bound):
    """x.clamp_min(b): pnnx feeds the bound as a second input (a constant operand)."""
    shape = ",".join(str(d) for d in x_shape)
    text = "\n".join([
        "7767517", "4 3",
        f"pnnx.Input in0 0 1 0 #0=({shape})f32",
        "pnnx.Attribute bound 0 1 1 @data=(1)f32 #1=(1)f32",
        f"{op_type} op0 2 1 0 1 2 #0=({shape})f32 #1=(1)f32 #2=({shape})f32",
        "pnnx.Output out0 1 0 2", ""])
    (folder / "model.pnnx.param").write_text(text)
    with zipfile.ZipFile(folder / "model.pnnx.bin", "w", zipfile.ZIP_STORED) as z:
        z.writestr("bound.data", np.array([bound], np.float32).tobytes())
    return folder / "model.pnnx.param"


@pytest.mark.parametrize("op_type, torch_fn", [("aten::clamp_min", torch.clamp_min),
                                               ("aten::clamp_max", torch.clamp_max)])
def test_clamp_bound_as_input(backend, rng, tmp_path, op_type, torch_fn):
    x = rng.standard_normal((2, 5, 3, 4)).astype(np.float32)
    graph = kuiper.load(_bound_input_model(tmp_path, op_type, x.shape, 0.25), backend=backend)
    assert op_type not in {op.type for op in graph.fallbacks}
    (y,) = graph.forward(x)
    assert_close(y, torch_fn(torch.from_numpy(x), 0.25).numpy())


@pytest.mark.parametrize("params, message", [
    ({"min": "low"}, "parameter 'min' should be a number"),
    ({"max": True}, "parameter 'max' should be a number"),
])
def test_clamp_bad_params(backend, params, message):
    with pytest.raises(OperatorError, match=message):
        run_operator("torch.clamp", [np.ones((2, 3), np.float32)], params=params,
                     backend=backend)


class Clamps(torch.nn.Module):
    def forward(self, x):
        return (torch.clamp(x, -1, 1), torch.clip(x, max=0.2), x.clamp(min=0.5),
                torch.clamp(x, -0.5, 0.25))


@pytest.mark.slow
def test_clamp_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 5, 4, 6)).astype(np.float32))
    module = Clamps().eval()
    graph = kuiper.load(export_model("clamps", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy(), rtol=0)
