"""Lesson 5: a layer class, registered under its PNNX names, run through the real loader."""

import numpy as np
import pytest
import torch

from kuiper.core import registry
from kuiper.course.lessons import check_array, implementation
from kuiper.layers.base import Layer
from kuiper.testing import run_operator

REFERENCE = {"Sigmoid": "kuiper.layers.cpu.activation:Sigmoid"}
ex = implementation(__file__, REFERENCE)


def sigmoid_via_kuiper(op_type, x):
    """Load and run a one-operator model whose operator is `op_type`, with your class."""
    with registry.override(ex.Sigmoid, op_type):
        (y,) = run_operator(op_type, [x])
    return y


@pytest.mark.parametrize("name", ["nn.Sigmoid", "F.sigmoid"])
def test_the_pnnx_names_are_listed(name):
    assert name in ex.Sigmoid.op_types, (
        f"lesson 5: list {name!r} in Sigmoid.op_types (it has {ex.Sigmoid.op_types!r})")


def test_it_is_a_layer():
    assert issubclass(ex.Sigmoid, Layer)


@pytest.mark.parametrize("shape", [(2, 13, 7, 5), (3, 17), (1,), (2, 3, 1, 129)])
def test_sigmoid_matches_torch_under_every_name(shape):
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32) * 4
    expected = torch.sigmoid(torch.from_numpy(x)).numpy()
    assert ex.Sigmoid.op_types, "lesson 5: Sigmoid.op_types is empty"
    for op_type in ex.Sigmoid.op_types:
        y = sigmoid_via_kuiper(op_type, x)
        check_array(y, expected, f"Sigmoid as {op_type} on shape {shape}", rtol=1e-6)
        assert y.dtype == np.float32, f"output dtype {y.dtype}, expected float32"


def test_sigmoid_is_stable_at_the_extremes():
    x = np.array([-1e4, -100.0, -88.8, -20.0, 0.0, 20.0, 88.8, 100.0, 1e4], np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        y = sigmoid_via_kuiper("nn.Sigmoid", x.reshape(1, -1))
    check_array(y[0], torch.sigmoid(torch.from_numpy(x)).numpy(), "sigmoid of extreme values",
                rtol=1e-6)


def test_the_override_is_gone_after_the_test():
    assert registry.lookup("nn.Sigmoid").__module__ == "kuiper.layers.cpu.activation"
