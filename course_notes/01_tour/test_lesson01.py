"""Lesson 1: the set-up works, and `layer_file` maps operator types to files."""

from pathlib import Path

import numpy as np
import pytest

import kuiper
from kuiper.course.lessons import implementation

REFERENCE = {"layer_file": "kuiper.core.registry:layer_file"}
ex = implementation(__file__, REFERENCE)
ROOT = Path(kuiper.__file__).resolve().parents[1]  # the checkout kuiper runs from


def test_the_demo_model_loads_and_classifies_digits():
    from kuiper.demo import DIGITS_PARAM, DIGITS_TEST

    data = np.load(DIGITS_TEST)
    graph = kuiper.load(DIGITS_PARAM, input_shapes=[data["images"].shape])
    predictions = graph(data["images"]).argmax(axis=1)
    assert (predictions == data["labels"]).mean() > 0.9


@pytest.mark.parametrize("op_type, backend, expected", [
    ("nn.Conv2d", "cpu", "layers/cpu/conv2d.py"),
    ("F.conv2d", "cpu", "layers/cpu/conv2d.py"),
    ("nn.ReLU", "opencl", "layers/opencl/relu.py"),
    ("nn.Sigmoid", "cpu", "layers/cpu/activation.py"),
    ("pnnx.Expression", "cpu", "layers/cpu/expression.py"),
    ("torch.flatten", "opencl", "layers/opencl/reshape.py"),
])
def test_layer_file(op_type, backend, expected):
    got = ex.layer_file(op_type, backend)
    assert got == expected, f"layer_file({op_type!r}, {backend!r}) = {got!r}, expected {expected!r}"
    assert (ROOT / got).is_file()


def test_layer_file_defaults_to_the_cpu_backend():
    assert ex.layer_file("nn.MaxPool2d") == "layers/cpu/maxpool.py"


def test_layer_file_of_an_unknown_type_raises():
    with pytest.raises(kuiper.UnsupportedOperatorError, match="nn.Conv9d"):
        ex.layer_file("nn.Conv9d")
