"""Activation fusion (the fuse_epilogues pass, carried out by the CPU executor): a ReLU folded
into the operator before it. (tests/models/test_fusion_matrix.py pairs every producer with every
activation and residual add through real pnnx exports, on both backends.)

Fusion must never change a result: every graph here runs fused and unfused and is checked
against PyTorch, and the inputs must come back untouched. The pairs that must *not* fuse (the
raw output is also a model output, or read by someone else) are checked too.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from tests.unit.test_graph import write_model

CONV = ("bias=True dilation=(1,1) groups=1 in_channels={cin} kernel_size=(3,3) "
        "out_channels={cout} padding=(1,1) padding_mode=zeros stride=(1,1) "
        "@weight=({cout},{cin},3,3)f32 @bias=({cout})f32")

LINES = [
    "pnnx.Input in_x 0 1 x #x=(2,4,9,7)f32",
    "pnnx.Input in_v 0 1 v #v=(3,6)f32",
    "nn.Conv2d conv_a 1 1 x a " + CONV.format(cin=4, cout=5),
    "nn.ReLU relu_a 1 1 a ra",                      # fuses into conv_a
    "nn.Conv2d conv_b 1 1 ra b " + CONV.format(cin=5, cout=3),
    "nn.ReLU6 relu6_b 1 1 b rb",                    # fuses into conv_b
    "nn.Conv2d conv_c 1 1 rb c " + CONV.format(cin=3, cout=3),
    "F.relu relu_c 1 1 c rc",                       # no: c is also a model output
    "pnnx.Expression same_x 1 1 x sx expr=@0",      # returns its input itself
    "F.relu relu_sx 1 1 sx rsx",                    # fuses, but must not write into x
    "pnnx.Expression add_ab 2 1 ra ra2 s expr=add(@0,@1)",
    "nn.ReLU relu_s 1 1 s rs",                      # fuses (s is a fresh sum)
    "nn.Conv2d conv_d 1 1 rb d " + CONV.format(cin=3, cout=3),
    "nn.ReLU relu_d1 1 1 d rd1",                    # no: d has two readers
    "nn.ReLU relu_d2 1 1 d rd2",
    "nn.Linear fc 1 1 v f bias=True in_features=6 out_features=4 @weight=(4,6)f32 @bias=(4)f32",
    "F.relu relu_f 1 1 f rf",                        # fuses into fc
    "nn.ReLU relu_ra2 1 1 ra ra2",
    "pnnx.Output out 8 0 rc c rsx rs rd1 rd2 rf ra2",
]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    rng = np.random.default_rng(7)
    shapes = {"conv_a": (5, 4), "conv_b": (3, 5), "conv_c": (3, 3), "conv_d": (3, 3)}
    weights = {}
    for name, (cout, cin) in shapes.items():
        weights[f"{name}.weight"] = rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)
        weights[f"{name}.bias"] = rng.standard_normal(cout).astype(np.float32)
    weights["fc.weight"] = rng.standard_normal((4, 6)).astype(np.float32)
    weights["fc.bias"] = rng.standard_normal(4).astype(np.float32)
    path = write_model(tmp_path_factory.mktemp("fusion"), LINES, weights)
    return path, weights


def expected(weights, x, v):
    t = {k: torch.from_numpy(w) for k, w in weights.items()}

    def conv(name, y):
        return F.conv2d(y, t[f"{name}.weight"], t[f"{name}.bias"], padding=1)

    x_t = torch.from_numpy(x)
    ra = F.relu(conv("conv_a", x_t))
    rb = F.relu6(conv("conv_b", ra))
    c = conv("conv_c", rb)
    d = conv("conv_d", rb)
    rf = F.relu(F.linear(torch.from_numpy(v), t["fc.weight"], t["fc.bias"]))
    outs = [F.relu(c), c, F.relu(x_t), F.relu(ra + F.relu(ra)), F.relu(d), F.relu(d), rf,
            F.relu(ra)]
    return [o.numpy() for o in outs]


def test_the_right_pairs_fuse(model):
    graph = kuiper.load(model[0])
    fused = {producer: e.activation.name for producer, e in graph.plan.epilogues.items()}
    assert all(e.residual is None for e in graph.plan.epilogues.values())
    assert fused == {"conv_a": "relu_a", "conv_b": "relu6_b", "same_x": "relu_sx",
                     "add_ab": "relu_s", "fc": "relu_f"}


def test_fused_results_match_torch_and_inputs_stay_untouched(model):
    path, weights = model
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 4, 9, 7)).astype(np.float32)
    v = rng.standard_normal((3, 6)).astype(np.float32)
    x0, v0 = x.copy(), v.copy()
    want = expected(weights, x, v)
    for fuse in (True, False):
        outs = kuiper.load(path, fuse=fuse).forward(x, v)
        for got, ref in zip(outs, want, strict=True):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(x, x0)
        np.testing.assert_array_equal(v, v0)


def test_an_observer_sees_every_operator_on_its_own(model):
    """`kuiper compare` checks each operator's output: with an observer nothing is fused, so
    the convolution reports its raw output (with negatives) and the ReLU its own."""
    graph = kuiper.load(model[0])
    x = np.random.default_rng(9).standard_normal((2, 4, 9, 7)).astype(np.float32)
    v = np.zeros((3, 6), np.float32)
    seen = {}
    graph.forward(x, v, observer=lambda op, outs, seconds: seen.setdefault(op.name, outs[0]))
    assert seen["conv_a"].min() < 0
    np.testing.assert_array_equal(seen["relu_a"], np.maximum(seen["conv_a"], 0))
    np.testing.assert_array_equal(graph.forward(x, v)[0], kuiper.load(
        model[0], fuse=False).forward(x, v)[0])


# --- every producer that takes a fused activation x every fusable activation -------------------
# (a ConvTranspose2d followed by a ReLU once crashed the CPU backend: the producer claimed it
# could take an activation and did not; these tests pair every such producer with every one)
PRODUCERS = {
    "nn.Conv1d": ((2, 4, 11), "bias=True dilation=(1) groups=1 in_channels=4 kernel_size=(3) "
                  "out_channels=5 padding=(1) padding_mode=zeros stride=(1) "
                  "@weight=(5,4,3)f32 @bias=(5)f32",
                  {"weight": (5, 4, 3), "bias": (5,)},
                  lambda x, w: F.conv1d(x, w["weight"], w["bias"], padding=1)),
    "nn.Conv2d": ((2, 4, 9, 7), CONV.format(cin=4, cout=5),
                  {"weight": (5, 4, 3, 3), "bias": (5,)},
                  lambda x, w: F.conv2d(x, w["weight"], w["bias"], padding=1)),
    "nn.ConvTranspose2d": ((2, 4, 5, 6), "bias=True dilation=(1,1) groups=1 in_channels=4 "
                           "kernel_size=(3,3) out_channels=5 output_padding=(1,0) "
                           "padding=(1,1) padding_mode=zeros stride=(2,2) "
                           "@weight=(4,5,3,3)f32 @bias=(5)f32",
                           {"weight": (4, 5, 3, 3), "bias": (5,)},
                           lambda x, w: F.conv_transpose2d(x, w["weight"], w["bias"], stride=2,
                                                           padding=1, output_padding=(1, 0))),
    "nn.Conv3d": ((2, 4, 5, 4, 6), "bias=True dilation=(1,1,1) groups=1 in_channels=4 "
                  "kernel_size=(3,2,3) out_channels=5 padding=(1,0,1) padding_mode=zeros "
                  "stride=(1,1,1) @weight=(5,4,3,2,3)f32 @bias=(5)f32",
                  {"weight": (5, 4, 3, 2, 3), "bias": (5,)},
                  lambda x, w: F.conv3d(x, w["weight"], w["bias"], padding=(1, 0, 1))),
    "nn.ConvTranspose1d": ((2, 4, 7), "bias=True dilation=(1) groups=2 in_channels=4 "
                           "kernel_size=(3) out_channels=6 output_padding=(1) padding=(1) "
                           "padding_mode=zeros stride=(2) @weight=(4,3,3)f32 @bias=(6)f32",
                           {"weight": (4, 3, 3), "bias": (6,)},
                           lambda x, w: F.conv_transpose1d(x, w["weight"], w["bias"], stride=2,
                                                           padding=1, output_padding=1,
                                                           groups=2)),
    "nn.ConvTranspose3d": ((2, 4, 3, 4, 3), "bias=True dilation=(1,1,1) groups=1 in_channels=4 "
                           "kernel_size=(2,3,2) out_channels=5 output_padding=(1,0,0) "
                           "padding=(0,1,1) padding_mode=zeros stride=(2,1,2) "
                           "@weight=(4,5,2,3,2)f32 @bias=(5)f32",
                           {"weight": (4, 5, 2, 3, 2), "bias": (5,)},
                           lambda x, w: F.conv_transpose3d(x, w["weight"], w["bias"],
                                                           stride=(2, 1, 2), padding=(0, 1, 1),
                                                           output_padding=(1, 0, 0))),
    "nn.Linear": ((3, 6), "bias=True in_features=6 out_features=4 @weight=(4,6)f32 "
                  "@bias=(4)f32", {"weight": (4, 6), "bias": (4,)},
                  lambda x, w: F.linear(x, w["weight"], w["bias"])),
    "pnnx.Expression": ((2, 3, 5), "expr=sub(mul(@0,3),1)", {}, lambda x, w: x * 3 - 1),
    # the activation goes into the output projection (self-attention, the output alone)
    "nn.MultiheadAttention": ((2, 7, 8), "add_bias_kv=False add_zero_attn=False batch_first=True "
                              "bias=True embed_dim=8 kdim=8 num_heads=2 vdim=8 "
                              "@in_proj_bias=(24)f32 @in_proj_weight=(24,8)f32 "
                              "@out_proj.bias=(8)f32 @out_proj.weight=(8,8)f32",
                              {"in_proj_weight": (24, 8), "in_proj_bias": (24,),
                               "out_proj.weight": (8, 8), "out_proj.bias": (8,)},
                              lambda x, w: self_attention(x, w, heads=2)),
}


def self_attention(x, w, heads: int):
    """nn.MultiheadAttention(batch_first=True)(x, x, x)[0] with the weights in `w`."""
    seq_first = x.transpose(0, 1)
    y, _ = F.multi_head_attention_forward(
        seq_first, seq_first, seq_first, x.shape[-1], heads, w["in_proj_weight"],
        w["in_proj_bias"], None, None, False, 0.0, w["out_proj.weight"], w["out_proj.bias"],
        training=False, need_weights=False)
    return y.transpose(0, 1)
ACTIVATIONS = {"nn.ReLU": F.relu, "F.relu": F.relu, "nn.ReLU6": F.relu6, "F.relu6": F.relu6}


def test_every_layer_that_accepts_an_epilogue_takes_one():
    """`accepts_epilogue` is a promise that forward(inputs, epilogue=e, residual=r) works (and
    `writes_into` that forward(inputs, out=y) does): a subclass that overrides forward must
    keep the arguments."""
    import inspect

    from kuiper.core import registry

    for op_type, cls in registry.supported("cpu").items():
        parameters = inspect.signature(cls.forward).parameters
        if cls.accepts_epilogue:
            assert {"epilogue", "residual"} <= set(parameters), (op_type, cls)
        if cls.writes_into:
            assert "out" in parameters, (op_type, cls)


def test_the_pairs_cover_every_fusable_type():
    from kuiper.core import registry

    producers = {cls for t, cls in registry.supported("cpu").items() if cls.accepts_epilogue}
    # torch.matmul reads two operands: tests/models/test_fusion_matrix.py exports it
    assert producers == {registry.lookup(t) for t in PRODUCERS} | {registry.lookup(
        "torch.matmul")}


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_every_producer_fuses_every_activation(tmp_path, backend, producer, activation):
    shape, params, weight_shapes, reference = PRODUCERS[producer]
    rng = np.random.default_rng(3)
    weights = {f"p.{k}": (3 * rng.standard_normal(s)).astype(np.float32)
               for k, s in weight_shapes.items()}
    dims = ",".join(map(str, shape))
    path = write_model(tmp_path, [
        f"pnnx.Input in_x 0 1 x #x=({dims})f32",
        f"{producer} p 1 1 x y {params}",
        f"{activation} act 1 1 y z",
        "pnnx.Output out 1 0 z"], weights if weights else None)
    graph = kuiper.load(path, backend=backend)
    assert list(graph.plan.epilogues) == ["p"], graph.plan.describe()
    x = (3 * rng.standard_normal(shape)).astype(np.float32)
    t = {k.split(".", 1)[1]: torch.from_numpy(v) for k, v in weights.items()}
    want = ACTIVATIONS[activation](reference(torch.from_numpy(x), t)).numpy()
    got = graph(x)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert (got == 0).any()  # the inputs reach the clipped ranges: the test means something
    assert (got == 6).any() if activation.endswith("6") else got.max() > 6
