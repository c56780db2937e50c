"""F.pad in every mode and the nn.*Pad modules against torch, on both backends."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator

# Pads of 2, 4 and 6 values, with crops (negative), zeros and asymmetric amounts.
PADS = [(1, 2), (0, 3), (-1, 2), (2, -3), (1, 2, 2, 1), (0, 0, 3, 0), (-1, 2, 1, -2),
        (2, 1, -1, 0), (1, 1, 1, 1, 1, 1), (0, 1, 2, 0, 1, 0), (1, -1, 0, 2, -1, 1)]
SHAPES = {2: (2, 13, 5, 7), 4: (2, 13, 5, 7), 6: (2, 3, 4, 5, 6)}


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", PADS, ids=str)
def test_pad_modes(backend, rng, mode, pad):
    shape = SHAPES[len(pad)]
    if mode != "constant" and len(pad) == 2:
        shape = (2, 13, 7)  # torch pads one dim of a 2-D or 3-D input only
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"mode": mode, "pad": pad, "value": None}
    (y,) = run_operator("F.pad", [x], params=params, backend=backend)
    assert_close(y, F.pad(torch.from_numpy(x), pad, mode=mode).numpy(), rtol=0)


@pytest.mark.parametrize("shape, pad, value", [
    ((2, 13, 5, 7), (1, 2, 0, 3), 1.5), ((3, 4), (2, 2), -2), ((5,), (3, 0), 0.25),
    ((2, 3, 4, 5), (1, 1, 1, 1, 1, 1, 1, 1), 7.0),   # constant pads every dim, batch too
    ((2, 3, 4, 5), (-2, -3, 0, 0), 1.0),             # cropped to nothing
    ((1, 1, 1, 1), (3, 4, 5, 6), 3.0)])
def test_pad_constant_value(backend, rng, shape, pad, value):
    x = rng.standard_normal(shape).astype(np.float32)
    params = {"mode": "constant", "pad": pad, "value": value}
    (y,) = run_operator("F.pad", [x], params=params, backend=backend)
    assert_close(y, F.pad(torch.from_numpy(x), pad, value=value).numpy(), rtol=0)


def test_pad_defaults_and_edges(backend, rng):
    # No mode, no value: constant zeros. Reflect by size-1 on a length-2 dim, replicate a
    # length-1 dim, wrap around by the whole length.
    x = rng.standard_normal((2, 3, 2, 1)).astype(np.float32)
    (y,) = run_operator("F.pad", [x], params={"pad": (1, 1)}, backend=backend)
    assert_close(y, F.pad(torch.from_numpy(x), (1, 1)).numpy(), rtol=0)
    for mode, pad in [("reflect", (0, 0, 1, 1)), ("replicate", (3, 2, 2, 0)),
                      ("circular", (1, 1, 2, 2))]:
        (y,) = run_operator("F.pad", [x], params={"pad": pad, "mode": mode}, backend=backend)
        assert_close(y, F.pad(torch.from_numpy(x), pad, mode=mode).numpy(), rtol=0)


def test_pad_integer_tensor(backend, rng):
    x = rng.integers(-50, 50, (2, 3, 4)).astype(np.int64)
    (y,) = run_operator("F.pad", [x], params={"pad": (1, 2, 2, 1), "value": 3},
                        backend=backend)
    assert_close(y, F.pad(torch.from_numpy(x), (1, 2, 2, 1), value=3).numpy(), rtol=0)


# (module, padding as pnnx writes it, torch module)
MODULES = [
    ("nn.ZeroPad1d", {"padding": (2, 1)}, torch.nn.ZeroPad1d((2, 1)), (2, 5, 7)),
    ("nn.ZeroPad2d", {"padding": (1, 2, 3, 0)}, torch.nn.ZeroPad2d((1, 2, 3, 0)), (2, 5, 4, 7)),
    ("nn.ZeroPad2d", {"padding": 2}, torch.nn.ZeroPad2d(2), (2, 5, 4, 7)),
    ("nn.ZeroPad3d", {"padding": (1, 0, 0, 1, 2, 1)}, torch.nn.ZeroPad3d((1, 0, 0, 1, 2, 1)),
     (2, 3, 4, 5, 3)),
    ("nn.ConstantPad1d", {"padding": (2, 2), "value": 0.5}, torch.nn.ConstantPad1d(2, 0.5),
     (3, 6, 8)),
    ("nn.ConstantPad2d", {"padding": (1, 1, 1, 1), "value": 3.5},
     torch.nn.ConstantPad2d(1, 3.5), (2, 5, 4, 7)),
    ("nn.ConstantPad3d", {"padding": (1, 1, 1, 1, 1, 1), "value": 2.0},
     torch.nn.ConstantPad3d(1, 2.0), (1, 4, 6, 8)),
    ("nn.ReflectionPad1d", {"padding": (2, 3)}, torch.nn.ReflectionPad1d((2, 3)), (3, 6, 8)),
    ("nn.ReflectionPad2d", {"padding": (2, 2, 2, 2)}, torch.nn.ReflectionPad2d(2), (2, 5, 4, 7)),
    ("nn.ReflectionPad3d", {"padding": (1, 2, 0, 1, 1, 1)},
     torch.nn.ReflectionPad3d((1, 2, 0, 1, 1, 1)), (2, 3, 4, 5, 3)),
    ("nn.ReplicationPad1d", {"padding": (1, 3)}, torch.nn.ReplicationPad1d((1, 3)), (3, 6, 8)),
    ("nn.ReplicationPad2d", {"padding": (1, 0, 2, 1)},
     torch.nn.ReplicationPad2d((1, 0, 2, 1)), (2, 5, 4, 7)),
    ("nn.ReplicationPad3d", {"padding": (1, 1, 2, 0, 0, 3)},
     torch.nn.ReplicationPad3d((1, 1, 2, 0, 0, 3)), (2, 3, 4, 5)),
    ("nn.CircularPad1d", {"padding": (2, 1)}, torch.nn.CircularPad1d((2, 1)), (3, 6, 8)),
    ("nn.CircularPad2d", {"padding": (1, 1, 1, 1)}, torch.nn.CircularPad2d(1), (2, 5, 4, 7)),
    ("nn.CircularPad3d", {"padding": (1, 0, 2, 1, 0, 1)},
     torch.nn.CircularPad3d((1, 0, 2, 1, 0, 1)), (1, 2, 3, 4, 5)),
]


@pytest.mark.parametrize("op_type, params, module, shape", MODULES,
                         ids=[f"{m[0]}{m[1]['padding']}" for m in MODULES])
def test_pad_modules(backend, rng, op_type, params, module, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, module(torch.from_numpy(x)).numpy(), rtol=0)


@pytest.mark.parametrize("op_type, params, shape, error, message", [
    ("F.pad", {"pad": (1, 2, 3)}, (2, 3, 4), OperatorError, "even length"),
    ("F.pad", {"pad": (1, 1), "mode": "mirror"}, (2, 3, 4), OperatorError,
     "expected one of constant, reflect, replicate, circular"),
    ("F.pad", {"pad": (3, 0), "mode": "reflect"}, (2, 3, 3), ShapeError, "smaller than"),
    ("F.pad", {"pad": (4, 0), "mode": "circular"}, (2, 3, 3), ShapeError, "at most"),
    ("F.pad", {"pad": (1, 1), "mode": "reflect"}, (2, 3, 4, 5), ShapeError,
     "needs a 2-D or 3-D input"),
    ("F.pad", {"pad": (-3, -2)}, (2, 3, 4), ShapeError, "cropping more than the whole"),
    ("F.pad", {"pad": (1, 1, 1, 1, 1, 1)}, (2, 3), ShapeError, "pads 3 dims"),
    ("nn.ReflectionPad2d", {"padding": (1, 1, 1)}, (2, 3, 4, 5), OperatorError,
     "should have 4 values"),
    ("F.pad", {"pad": (1, 1), "value": "big"}, (2, 3), OperatorError, "'value' should be a number"),
])
def test_pad_bad_params(backend, op_type, params, shape, error, message):
    with pytest.raises(error, match=message):
        run_operator(op_type, [np.ones(shape, np.float32)], params=params, backend=backend)


class Pads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.mods = nn.ModuleList([nn.ZeroPad2d((1, 2, 3, 0)), nn.ConstantPad2d(1, 3.5),
                                   nn.ReflectionPad2d(2), nn.ReplicationPad2d((1, 0, 2, 1)),
                                   nn.CircularPad2d(1), nn.ConstantPad3d(1, 2.0)])

    def forward(self, x):
        return tuple(m(x) for m in self.mods) + (
            F.pad(x, (1, 2)), F.pad(x, (1, 2, 0, 3), value=1.5),
            F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (1, -2, 2, -1)),
            F.pad(x, (2, 1, 1, 2), mode="replicate"), F.pad(x, (1, 2, 2, 1), mode="circular"))


@pytest.mark.slow
def test_pad_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.standard_normal((2, 3, 6, 8)).astype(np.float32))
    module = Pads().eval()
    graph = kuiper.load(export_model("pads", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy(), rtol=0)
