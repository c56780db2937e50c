"""Tensor.fill and torch.arange against torch, on both backends: constants, run-time values
(arange's length then depends on the data) and the parameters pnnx writes."""

import numpy as np
import pytest
import torch

import kuiper
from kuiper import OperatorError, ShapeError
from kuiper.testing import assert_close, run_operator
from tests.layers.test_scatter import write_model


@pytest.mark.parametrize("shape", [(6, 16), (3, 1, 7), (5,)])
@pytest.mark.parametrize("dtype, value", [(np.float32, 0.22), (np.float32, 7), (np.int64, 3),
                                          (np.int32, -2)])
def test_fill_value_parameter(backend, rng, shape, dtype, value):
    x = rng.standard_normal(shape).astype(dtype)
    (y,) = run_operator("Tensor.fill", [x], params={"value": value}, backend=backend)
    want = torch.from_numpy(x).fill_(value).numpy()
    assert y.dtype == want.dtype
    assert_close(y, want)


@pytest.mark.parametrize("value_dtype", [np.float32, np.int64])
def test_fill_value_from_a_tensor(backend, rng, value_dtype):
    x = rng.standard_normal((4, 13)).astype(np.float32)
    v = (rng.standard_normal((1,)) * 5).astype(value_dtype)
    (y,) = run_operator("Tensor.fill", [x, v], backend=backend)
    assert_close(y, torch.from_numpy(x).fill_(torch.from_numpy(v)[0]).numpy())


def test_fill_value_must_be_one_element(backend):
    with pytest.raises(ShapeError, match="fill value should be one element"):
        run_operator("Tensor.fill", [np.ones((2, 3), np.float32), np.ones(2, np.float32)],
                     backend=backend)


@pytest.mark.parametrize("args, params", [
    ([np.array(7)], {}),
    ([np.array(3, np.int32)], {"end": 33}),      # torch.arange(x[1], 33): start is the input
    ([np.array(3), np.array(12, np.int32), np.array(0.65, np.float32)],
     {"dtype": "torch.float"}),
    ([np.array(9.5, np.float32)], {}),
    ([np.array(20)], {"start": 2, "step": 3}),
    ([np.array(-5)], {"start": 4, "step": -2}),
])
def test_arange_with_run_time_values(backend, args, params):
    names = {"end": ["start"]}.get("end" if "end" in params else "", None)
    (y,) = run_operator("torch.arange", args, params=params, backend=backend)
    values = [a.item() for a in args]
    if names:  # the one input is start
        want = torch.arange(values[0], params["end"])
    elif len(values) == 3:
        want = torch.arange(*values, dtype=torch.float)
    else:
        want = torch.arange(params.get("start", 0), values[0], params.get("step", 1))
    assert y.dtype == want.numpy().dtype
    assert_close(y, want.numpy())


def test_arange_of_constants_is_folded(backend, tmp_path):
    """arange(1, n) with n a constant: the output is known at build time and never runs."""
    path = write_model(tmp_path, ["pnnx.Input in0 0 1 x #x=(5)f32",
                                  "pnnx.Attribute n 0 1 n @data=()i64",
                                  "torch.arange op0 1 1 n r start=1 $end=n",
                                  "pnnx.Expression add 2 1 x r y expr=add(@0,@1)",
                                  "pnnx.Output out 1 0 y"],
                       {"n.data": np.array(6, np.int64)})
    graph = kuiper.load(path, backend=backend)
    assert graph.specs["r"].known and not graph.specs["r"].dynamic
    assert_close(graph.specs["r"].value, np.arange(1, 6))


def test_arange_errors(backend):
    with pytest.raises(OperatorError, match="step must not be 0"):
        run_operator("torch.arange", [np.array(5)], params={"step": 0}, backend=backend)
    with pytest.raises(OperatorError, match="cannot be reached"):
        run_operator("torch.arange", [np.array(-5)], params={"start": 2}, backend=backend)
    with pytest.raises(OperatorError, match="dtype=torch.complex7"):
        run_operator("torch.arange", [np.array(5)], params={"dtype": "torch.complex7"},
                     backend=backend)


class Aranges(torch.nn.Module):
    """pnnx's test_torch_arange, plus what follows an arange of run-time length."""

    def forward(self, x):
        out0 = torch.arange(x[0])
        out1 = torch.arange(x[1], 33, dtype=None)
        out2 = torch.arange(x[3], x[4] + 12, x[6] * 0.1 + 0.05, dtype=torch.float)
        return out0, out1, out2 * 2


class Fills(torch.nn.Module):
    """pnnx's test_Tensor_fill."""

    def forward(self, x, y, z):
        x[:2, :].fill_(z[0])
        y[:1, :].fill_(0.22)
        return x + y.fill_(7)


@pytest.mark.slow
def test_arange_pnnx_export(backend, export_model):
    x = torch.tensor([5, 4, 0, 3, 2, 0, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1], dtype=torch.int32)
    module = Aranges().eval()
    graph = kuiper.load(export_model("aranges", module, (x,)), backend=backend)
    for other in (x, torch.tensor([2, 9, 0, 1, 8, 0, 3] + [1] * 9, dtype=torch.int32)):
        for got, want in zip(graph.forward(other.numpy()), module(other)):
            assert_close(got, want.numpy())


@pytest.mark.slow
def test_fill_pnnx_export(backend, rng, export_model):
    inputs = [torch.from_numpy(rng.random(s).astype(np.float32)) for s in [(6, 16), (6, 16), (1,)]]
    module = Fills().eval()
    graph = kuiper.load(export_model("fills", module, [t.clone() for t in inputs]),
                        backend=backend)
    assert not graph.fallbacks
    got = graph.forward(*[t.numpy() for t in inputs])
    assert_close(got[0], module(*[t.clone() for t in inputs]).numpy())
