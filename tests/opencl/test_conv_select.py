"""The convolution kernel selector and the built-in algorithms (conv_im2col_gemm.py).

Each built-in algorithm is forced on awkward convolutions and checked against PyTorch: odd
channel counts, 1x1 outputs, groups, batches, stride 2, dilation, every padding mode, 1-D and
3-D. Then the selector's three rules (forced, tuned, cost model), the tuned choice of a
linear layer, and the fused epilogue in each algorithm's store.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.layers.opencl_conv import selector as conv_select
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, forced
from kuiper.layers.opencl_gemm import parameter_sets as gemm_params
from kuiper.opencl.device import tuning_cache as tuning
from kuiper.passes.epilogue import Epilogue
from kuiper.testing import assert_close, write_operator_model
from tests.conftest import opencl_available
from tests.opencl.conv_harness import activation_operator, skip_where_it_cannot_run

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")


def triple(v, ndim):
    return tuple(v) if isinstance(v, tuple) else (v,) * ndim


# (input shape, cout, kernel, stride, padding, dilation, groups, padding_mode)
GENERAL = [
    ((2, 13, 9, 11), 7, (3, 2), 1, (1, 2), 1, 1, "zeros"),     # odd channels, batch 2
    ((1, 15, 8, 8), 9, 3, 2, 1, 1, 3, "reflect"),               # groups, stride 2
    ((3, 5, 7, 9), 6, 3, 1, 2, 2, 1, "circular"),               # dilation, batch 3
    ((1, 4, 3, 3), 5, 3, 1, 0, 1, 1, "zeros"),                  # a 1x1 output
    ((2, 6, 5, 7), 4, 3, (2, 1), 1, 1, 2, "replicate"),
]
ONE_BY_ONE = [
    ((2, 13, 5, 7), 9, 1, 1, 0, 1, 1, "zeros"),
    ((1, 12, 4, 6), 8, 1, 1, 0, 1, 4, "zeros"),                 # grouped 1x1
    ((3, 7, 1, 1), 5, 1, 1, 0, 1, 1, "zeros"),                  # 1x1 everything
]
DEPTHWISE = [
    ((2, 6, 9, 7), 12, 3, 2, 1, 1, 6, "zeros"),                 # channel multiplier 2
    ((1, 5, 6, 6), 5, 3, 1, 2, 2, 5, "reflect"),
]


def conv_model(folder, case, rng, with_bias=True):
    """A one-Conv model (1-D, 2-D or 3-D by the input's rank); returns (path, x, w, b)."""
    shape, cout, kernel, stride, padding, dilation, groups, mode = case
    nd = len(shape) - 2
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((cout, shape[1] // groups, *triple(kernel, nd))).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32) if with_bias else None
    params = {"in_channels": shape[1], "out_channels": cout, "kernel_size": triple(kernel, nd),
              "stride": triple(stride, nd), "padding": triple(padding, nd),
              "dilation": triple(dilation, nd), "groups": groups, "bias": with_bias,
              "padding_mode": mode}
    weights = {"weight": w} if b is None else {"weight": w, "bias": b}
    path = write_operator_model(folder, f"nn.Conv{nd}d", [x], params=params, weights=weights)
    return path, x, w, b


def torch_conv(case, x, w, b):
    shape, cout, kernel, stride, padding, dilation, groups, mode = case
    nd = len(shape) - 2
    module = getattr(torch.nn, f"Conv{nd}d")(shape[1], cout, w.shape[2:],
                                            stride=triple(stride, nd),
                                            padding=triple(padding, nd),
                                            dilation=triple(dilation, nd), groups=groups,
                                            bias=b is not None, padding_mode=mode)
    with torch.no_grad():
        module.weight.copy_(torch.from_numpy(w))
        if b is not None:
            module.bias.copy_(torch.from_numpy(b))
        return module(torch.from_numpy(x)).numpy()


def conv_layer(graph):
    return next(op.layer for op in graph.order if op.type.startswith("nn.Conv"))


def run_forced(tmp_path, rng, name, case, with_bias=True):
    path, x, w, b = conv_model(tmp_path, case, rng, with_bias)
    with forced(name):
        graph = kuiper.load(path, backend="opencl")
    layer = conv_layer(graph)
    assert (layer.algorithm, layer.algorithm_reason) == (name, conv_select.FORCED)
    assert_close(graph(x), torch_conv(case, x, w, b))


@pytest.mark.parametrize("case", GENERAL + ONE_BY_ONE + DEPTHWISE, ids=str)
def test_im2col_gemm_forced(tmp_path, rng, case):
    run_forced(tmp_path, rng, "im2col_gemm", case)


# More pixels than one strip of 32 and not a whole number of strips (9 x 11 = 99 and 3 x 37 =
# 111 output pixels), with groups and a batch: the packed column matrix's edges.
PACKED_EDGES = [
    ((2, 6, 9, 11), 10, 3, 1, 1, 1, 2, "zeros"),
    ((1, 3, 7, 74), 5, (3, 2), 2, (1, 0), 1, 1, "reflect"),
]


@pytest.mark.parametrize("case", GENERAL[:3] + PACKED_EDGES, ids=str)
@pytest.mark.parametrize("params", gemm_params.CPU_PARAMETER_SETS, ids=gemm_params.describe_params)
def test_im2col_gemm_with_each_blocked_set(tmp_path, rng, case, params):
    """im2col_gemm with each gemm_blocked set, on any device: the column matrix is packed in
    strips of the set's BLOCK_N (8, 16 or 32: im2col_packed and PACKED_B), so each strip width
    and its zero-filled tail is checked on its own."""
    skip_where_it_cannot_run("im2col_gemm", params)
    path, x, w, b = conv_model(tmp_path, case, rng)
    with conv_select.pinned("im2col_gemm", params):
        graph = kuiper.load(path, backend="opencl")
    layer = conv_layer(graph)
    assert (layer.algorithm, layer.algorithm_params) == ("im2col_gemm", params)
    assert_close(graph(x), torch_conv(case, x, w, b))


@pytest.mark.parametrize("case", ONE_BY_ONE, ids=str)
def test_gemm_1x1_forced(tmp_path, rng, case):
    run_forced(tmp_path, rng, "gemm_1x1", case, with_bias=False)


@pytest.mark.parametrize("case", DEPTHWISE, ids=str)
def test_depthwise_direct_forced(tmp_path, rng, case):
    run_forced(tmp_path, rng, "depthwise_direct", case)


CONV1D = ((2, 5, 13), 7, 3, 2, 1, 2, 1, "reflect")
CONV3D = ((1, 4, 5, 6, 7), 6, (3, 1, 2), 1, (1, 0, 1), 1, 2, "zeros")    # groups
CONV3D_1X1 = ((2, 6, 3, 4, 5), 3, 1, 1, 0, 1, 1, "zeros")


@pytest.mark.parametrize("name,case", [("im2col_gemm", CONV1D), ("im2col_gemm", CONV3D),
                                       ("im2col_gemm", CONV3D_1X1), ("gemm_1x1", CONV3D_1X1)],
                         ids=str)
def test_1d_and_3d_convolutions(tmp_path, rng, name, case):
    run_forced(tmp_path, rng, name, case)


# Conv3d with kernels of depth 1: 2-D kernels over several planes, or over one plane padded
# in depth. An algorithm made for 2-D must refuse them (Winograd took them and returned
# garbage), and whatever runs must be right.
FLAT_KERNEL_3D = [
    ((1, 4, 3, 6, 6), 16, (1, 3, 3), 1, (0, 1, 1), 1, 1, "zeros"),
    ((1, 4, 1, 6, 6), 16, (1, 3, 3), 1, 1, 1, 1, "zeros"),          # depth padded: 3 planes
    ((2, 4, 5, 6, 7), 16, (1, 3, 3), (2, 1, 1), 1, 1, 1, "zeros"),
    ((1, 8, 3, 6, 6), 8, (1, 3, 3), 1, (0, 1, 1), 1, 8, "zeros"),   # depthwise
    ((1, 4, 3, 6, 6), 16, 1, 1, (1, 0, 0), 1, 1, "zeros"),
]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("case", FLAT_KERNEL_3D, ids=str)
def test_every_algorithm_refuses_or_computes_a_flat_3d_kernel(tmp_path, rng, name, case):
    path, x, w, b = conv_model(tmp_path, case, rng)
    with forced(name):
        graph = kuiper.load(path, backend="opencl")
    layer = conv_layer(graph)
    if name in ("winograd_f4x4", "winograd_f2x2", "direct"):   # one plane each, by design
        assert layer.algorithm != name
    assert_close(graph(x), torch_conv(case, x, w, b))


@pytest.mark.parametrize("name", ["im2col_gemm", "depthwise_direct"])
def test_f_conv2d_with_the_weight_as_an_input(tmp_path, rng, name):
    """F.conv2d: no host weight at bind time (ConvOperands.weight_host is None)."""
    x = rng.standard_normal((2, 6, 7, 5)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    path = write_operator_model(tmp_path, "F.conv2d", [x, w, b],
                                params={"stride": (2, 1), "padding": (1, 1), "dilation": (1, 1),
                                        "groups": 6})
    with forced(name):
        graph = kuiper.load(path, backend="opencl")
    layer = next(op.layer for op in graph.order if op.type == "F.conv2d")
    assert layer.algorithm == name
    expected = F.conv2d(*map(torch.from_numpy, (x, w, b)), stride=(2, 1), padding=1, groups=6)
    assert_close(graph(x, w, b), expected.numpy())


@pytest.mark.parametrize("name", ["gemm_1x1", "depthwise_direct", "no_such_algorithm"])
def test_a_forced_algorithm_that_cannot_run_the_problem_falls_back(tmp_path, rng, name):
    case = GENERAL[0]
    path, x, w, b = conv_model(tmp_path, case, rng)
    with forced(name):
        graph = kuiper.load(path, backend="opencl")
    layer = conv_layer(graph)
    assert layer.algorithm != name and layer.algorithm_reason == conv_select.COST_MODEL
    assert_close(graph(x), torch_conv(case, x, w, b))
    assert "no algorithm" in conv_select.why_not("no_such_algorithm", layer.conv_problem, None)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KUIPER_CACHE_DIR", str(folder))
    return folder


def test_cost_model_then_tuned_choice(tmp_path, rng, cache_dir):
    """Without a cache entry the cost model decides; with one (for this device and driver),
    the stored algorithm and parameter set are used, and stale parameters are ignored."""
    case = GENERAL[1]
    path, x, w, b = conv_model(tmp_path, case, rng)
    graph = kuiper.load(path, backend="opencl")
    layer = conv_layer(graph)
    assert layer.algorithm_reason == conv_select.COST_MODEL
    problem, device = layer.conv_problem, graph.executor.runtime.device
    algo = ALGORITHMS["im2col_gemm"]
    params = algo.parameter_sets(problem, device)[-1]     # not the cost model's favourite
    key = tuning.conv_key(problem)
    tuning.store(device, {key: {"algorithm": "im2col_gemm", "params": params, "seconds": 1e-3}})
    graph = kuiper.load(path, backend="opencl")
    layer = conv_layer(graph)
    assert (layer.algorithm, layer.algorithm_params, layer.algorithm_reason) == (
        "im2col_gemm", params, conv_select.TUNED)
    assert_close(graph(x), torch_conv(case, x, w, b))
    # a parameter set this version does not have (an old cache): the cost model again
    tuning.store(device, {key: {"algorithm": "im2col_gemm", "params": {"kernel": "gone"}}})
    assert conv_layer(kuiper.load(path, backend="opencl")).algorithm_reason == \
        conv_select.COST_MODEL


def test_cost_model_prefers_no_im2col_for_1x1(rng):
    """The roofline counts im2col's traffic: on a 1x1 convolution gemm_1x1 costs less."""
    from kuiper.layers.opencl_conv.algorithms import ConvProblem
    from kuiper.opencl.device.runtime import OpenCLRuntime

    device = OpenCLRuntime.shared().device
    problem = ConvProblem(1, 64, 128, 1, (1, 28, 28), (1, 1, 1), (1, 28, 28), (1, 1, 1),
                          (1, 1, 1), ((0, 0), (0, 0), (0, 0)))
    costs = {algo.name: cost for cost, algo in conv_select.by_cost(problem, device)}
    assert costs["gemm_1x1"] < costs["im2col_gemm"]
    assert "depthwise_direct" not in costs   # it cannot run a dense convolution


def test_linear_takes_the_tuned_parameter_set(tmp_path, rng, cache_dir):
    x = rng.standard_normal((5, 70)).astype(np.float32)
    w = rng.standard_normal((33, 70)).astype(np.float32)
    path = write_operator_model(tmp_path, "nn.Linear", [x], weights={"weight": w},
                                params={"in_features": 70, "out_features": 33, "bias": False})
    graph = kuiper.load(path, backend="opencl")
    layer = next(op.layer for op in graph.order if op.type == "nn.Linear")
    assert (layer.algorithm, layer.algorithm_reason) == ("gemm", conv_select.COST_MODEL)
    device = graph.executor.runtime.device
    from kuiper.layers.opencl_gemm.parameter_sets import gemm_parameter_sets

    params = gemm_parameter_sets(device)[-1]
    # the key names the weight's layout, which the layer picks for the device (linear.py)
    in_specs = [graph.specs[o.name] for o in layer.op.inputs]
    out_specs = [graph.specs[o.name] for o in layer.op.outputs]
    tuning.store(device, {tuning.gemm_key(*layer.gemm_problem(in_specs, out_specs)):
                          {"algorithm": "gemm", "params": params, "seconds": 1e-4}})
    graph = kuiper.load(path, backend="opencl")
    layer = next(op.layer for op in graph.order if op.type == "nn.Linear")
    assert (layer.algorithm_params, layer.algorithm_reason) == (params, conv_select.TUNED)
    assert_close(graph(x), x @ w.T)


# --- the fused epilogue, in each algorithm's own store -----------------------------------------
@pytest.fixture(scope="module")
def relu6_operator():
    """A real ReLU6 operator with its OpenCL layer: the activation an epilogue carries."""
    return activation_operator("nn.ReLU6")


def bind_alone(graph, op, x, epilogue, residual):
    """Bind a fresh copy of `op`'s layer with `epilogue` on buffers of its own and run it: the
    layer's side of the contract, without the graph pass that decides what fuses."""
    runtime = graph.executor.runtime
    in_specs = [graph.specs[o.name] for o in op.inputs]
    out_specs = [graph.specs[o.name] for o in op.outputs]
    layer = type(op.layer).from_operator(op)
    layer.infer(in_specs)
    layer.attach(runtime)
    inputs, outputs = [runtime.to_device(x)], [runtime.empty(s.shape, s.dtype) for s in
                                               out_specs]
    # what the executor passes a layer whose kernels store through an epilogue
    extras = {"epilogue": epilogue,
              "residual": None if residual is None else runtime.to_device(residual)}
    scratch = layer.own_workspaces(in_specs, out_specs)
    if scratch:
        extras["workspaces"] = scratch
    layer.bind(inputs, outputs, in_specs, out_specs, **extras)
    layer.enqueue(runtime.queue, [])
    return layer, outputs[0].get()


@pytest.mark.parametrize("name,case", [("im2col_gemm", GENERAL[1]), ("gemm_1x1", ONE_BY_ONE[1]),
                                       ("depthwise_direct", DEPTHWISE[0])])
@pytest.mark.parametrize("residual_first", [True, False, None])
def test_epilogue_in_each_algorithms_store(tmp_path, rng, relu6_operator, name, case,
                                           residual_first):
    """relu6(conv + r), relu6(conv) + r, or relu6(conv) alone (None), in the conv's store."""
    path, x, w, b = conv_model(tmp_path, case, rng)
    graph = kuiper.load(path, backend="opencl")
    op = next(op for op in graph.order if op.type.startswith("nn.Conv"))
    plain = torch_conv(case, x, w, b)
    r = rng.standard_normal(plain.shape).astype(np.float32) * 3
    epilogue = Epilogue.around(activation=relu6_operator, residual=None if residual_first is None
                        else "r", residual_first=bool(residual_first))
    with forced(name):
        layer, y = bind_alone(graph, op, x, epilogue, None if residual_first is None else r)
    assert layer.algorithm == name and layer.epilogue_in_kernel
    relu6 = lambda v: np.clip(v, 0, 6)  # noqa: E731
    expected = (relu6(plain) if residual_first is None else
                relu6(plain + r) if residual_first else relu6(plain) + r)
    assert_close(y, expected)


def test_epilogue_in_the_linear_store(tmp_path, rng, relu6_operator):
    x = rng.standard_normal((3, 4, 21)).astype(np.float32) * 3
    w = rng.standard_normal((17, 21)).astype(np.float32)
    b = rng.standard_normal(17).astype(np.float32)
    path = write_operator_model(tmp_path, "nn.Linear", [x], weights={"weight": w, "bias": b},
                                params={"in_features": 21, "out_features": 17, "bias": True})
    graph = kuiper.load(path, backend="opencl")
    op = next(op for op in graph.order if op.type == "nn.Linear")
    r = rng.standard_normal((3, 4, 17)).astype(np.float32)
    epilogue = Epilogue.around(activation=relu6_operator, residual="r", residual_first=True)
    layer, y = bind_alone(graph, op, x, epilogue, r)
    assert layer.epilogue_in_kernel
    assert_close(y, np.clip(F.linear(*map(torch.from_numpy, (x, w, b))).numpy() + r, 0, 6))
