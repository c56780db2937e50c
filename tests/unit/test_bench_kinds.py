"""`kuiper bench`'s time by kind of operator (kuiper/bench/kinds.py): Kuiper's operators and
onnxruntime's nodes sorted into the same kinds, and onnxruntime's own profile read back."""

from __future__ import annotations

import types

import numpy as np
import onnxruntime as ort  # a test dependency (pyproject's [test])
import pytest
import torch
import torch.nn as nn

from kuiper.bench.kinds import (
    CONV,
    CONV_1X1,
    CONV_DEPTHWISE,
    kind_of_type,
    kinds_table,
    kuiper_kind,
    onnx_node_kind,
    onnxruntime_kinds,
    profile_onnxruntime,
)
from kuiper.bench.timing import Column


def operator(op_type, params=None, inputs=()):
    return types.SimpleNamespace(type=op_type, params=params or {},
                                 inputs=[types.SimpleNamespace(name=n) for n in inputs])


@pytest.mark.parametrize("params,kind", [
    ({"groups": 32, "in_channels": 32, "kernel_size": [3, 3]}, CONV_DEPTHWISE),
    ({"groups": 1, "in_channels": 32, "kernel_size": [1, 1]}, CONV_1X1),
    ({"groups": 1, "in_channels": 3, "kernel_size": [3, 3]}, CONV),
    ({"groups": 4, "in_channels": 32, "kernel_size": [3, 3]}, CONV),   # grouped, not depthwise
])
def test_kuiper_convolutions_by_kind(params, kind):
    assert kuiper_kind(operator("nn.Conv2d", params), {}) == kind


def test_a_functional_convolution_takes_its_kernel_from_the_weight_input():
    weight = types.SimpleNamespace(shape=(16, 1, 5, 5))
    op = operator("F.conv2d", {"groups": 16}, inputs=["x", "w"])
    assert kuiper_kind(op, {"w": weight}) == CONV_DEPTHWISE


@pytest.mark.parametrize("op_type,shapes,kind", [
    ("Conv", [[1, 32, 56, 56], [32, 1, 3, 3], [32]], CONV_DEPTHWISE),
    ("FusedConv", [[1, 32, 56, 56], [64, 32, 1, 1]], CONV_1X1),
    ("Conv", [[1, 3, 224, 224], [32, 3, 3, 3]], CONV),
    ("Conv", [[1, 1, 28, 28], [16, 1, 3, 3]], CONV),     # one input channel: not depthwise
    ("MatMul", [[1, 197, 384], [384, 1152]], "matmul / linear"),
    ("Relu", [[1, 8]], "elementwise / activation"),
    ("LayerNormalization", [[1, 8]], "normalization"),
    ("Transpose", [[1, 8]], "data movement"),
    ("SomethingNew", [], "other"),
])
def test_onnxruntime_nodes_by_kind(op_type, shapes, kind):
    assert onnx_node_kind(op_type, shapes) == kind


@pytest.mark.parametrize("op_type,kind", [
    ("nn.Linear", "matmul / linear"), ("torch.matmul", "matmul / linear"),
    ("nn.MultiheadAttention", "attention"), ("F.scaled_dot_product_attention", "attention"),
    ("nn.ReLU6", "elementwise / activation"), ("pnnx.Expression", "elementwise / activation"),
    ("nn.AdaptiveAvgPool2d", "pooling"), ("nn.LayerNorm", "normalization"),
    ("Tensor.permute", "data movement"), ("nn.ConvTranspose2d", CONV),
])
def test_kuiper_types_by_kind(op_type, kind):
    assert kind_of_type(op_type) == kind


class Blocks(nn.Module):
    """A depthwise, a 1x1 and a 3x3 convolution, and a linear layer."""

    def __init__(self):
        super().__init__()
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pw = nn.Conv2d(8, 16, 1)
        self.full = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        y = self.full(torch.relu(self.pw(torch.relu(self.dw(x)))))
        return self.fc(y.mean((2, 3)))


def test_onnxruntime_profile_read_back_by_kind(tmp_path):
    """A real onnxruntime profile of an exported model: every kind the model has shows up,
    each a positive time, and the folder the profile went to is removed."""
    path = tmp_path / "blocks.onnx"
    x = torch.randn(1, 8, 19, 23)
    torch.onnx.export(Blocks().eval(), (x,), str(path), dynamo=False)
    options = ort.SessionOptions()
    options.enable_profiling = True
    folder = tmp_path / "profile"
    folder.mkdir()
    options.profile_file_prefix = str(folder / "p")
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    kinds = profile_onnxruntime(session, str(folder), {session.get_inputs()[0].name: x.numpy()},
                                runs=3)
    for kind in (CONV_DEPTHWISE, CONV_1X1, CONV, "matmul / linear"):
        assert kinds.get(kind, 0.0) > 0, kinds
    assert not folder.exists()


def test_profile_events_other_than_kernel_times_are_ignored(tmp_path):
    """Each node's median over its runs; fences and session events do not count."""
    import json

    events = [
        {"cat": "Session", "name": "model_run", "dur": 9999},
        {"cat": "Node", "name": "/dw/Conv_fence_before", "dur": 500,
         "args": {"op_name": "Conv"}},
        *[{"cat": "Node", "name": "/dw/Conv_kernel_time", "dur": d,
           "args": {"op_name": "Conv", "input_type_shape": [{"float": [1, 8, 5, 5]},
                                                             {"float": [8, 1, 3, 3]}]}}
          for d in (100, 300, 200)],
        {"cat": "Node", "name": "/fc/Gemm_kernel_time", "dur": 50,
         "args": {"op_name": "Gemm", "input_type_shape": [{"float": [1, 16]}]}},
    ]
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(events))
    kinds = onnxruntime_kinds(str(path))
    assert kinds == pytest.approx({CONV_DEPTHWISE: 200e-6, "matmul / linear": 50e-6})


def test_the_table_has_a_row_per_kind_present_and_a_total():
    a, b = Column("kuiper cpu (NumPy)"), Column("onnxruntime 1.32.0 (2 threads)")
    a.kinds = {CONV_1X1: 0.002, "other": 0.001}
    b.kinds = {CONV_1X1: 0.001}
    rows = kinds_table([a, b, Column("torch")])
    assert rows[0] == ("kind", "kuiper cpu", "onnxruntime 1.32.0")
    assert [r[0] for r in rows[1:]] == [CONV_1X1, "other", "total"]
    assert rows[-1][1:] == ("3.000", "1.000") and np.isclose(float(rows[1][2]), 1.0)
    assert kinds_table([Column("x")]) is None
