"""implicit_gemm (layers/opencl_conv/implicit_gemm.py), forced, against PyTorch.

Through the real OpenCL layer (the selector forced or pinned, tests/opencl/conv_forced.py):
1-D, 2-D and 3-D convolutions of awkward shapes (odd channels, 1x1 outputs, K not a multiple
of any tile, batch > 1, groups 2 and 3, stride 2, dilation 2, every padding mode, with and
without bias), each parameter set of `parameter_sets()` on its own; the fused epilogue through
the algorithm's own bind (tests/opencl/conv_harness.py); the refusals and the cost model.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn

from kuiper.core.errors import OperatorError
from kuiper.layers.opencl_conv import implicit_gemm as conv_implicit_gemm
from kuiper.layers.opencl_conv.algorithms import ALGORITHMS, ConvProblem
from kuiper.testing import assert_close
from tests.conftest import opencl_available
from tests.opencl.conv_forced import ConvCase, problem_of, run_forced, torch_conv

pytestmark = pytest.mark.skipif(not opencl_available(), reason="needs an OpenCL device")

NAME = "implicit_gemm"
ALL_SETS = conv_implicit_gemm.TILED_SETS + conv_implicit_gemm.BLOCKED_SETS

CASES = {
    "2d batch 2, K=45": ConvCase((2, 5, 9, 11), 7, (3, 3), padding=(1, 1)),
    "2d groups 2 stride 2 dilation 2 reflect": ConvCase(
        (1, 6, 10, 13), 10, (3, 2), stride=(2, 2), padding=(2, 1), dilation=(2, 2), groups=2,
        bias=False, mode="reflect"),
    "2d groups 3 5x5 circular batch 3": ConvCase((3, 9, 6, 5), 6, (5, 5), padding=(2, 2),
                                                 groups=3, mode="circular"),
    "2d 1x1 output replicate": ConvCase((2, 7, 3, 3), 5, (3, 3), mode="replicate"),
    "2d 1x1 kernel stride 2": ConvCase((1, 13, 8, 9), 17, (1, 1), stride=(2, 2)),
    "2d wide rows (vector loads and edges)": ConvCase((1, 3, 5, 37), 9, (3, 3), padding=(1, 1)),
    # stride 2 on rows of 38 outputs: whole runs inside (two loads, even lanes), a run at the
    # left edge, a short run at the right
    "2d stride 2 wide rows (even-lane loads)": ConvCase((2, 3, 6, 75), 5, (3, 3), stride=(2, 2),
                                                        padding=(1, 1)),
    # rows of 32 outputs: the last whole run ends at the row's last input column (the bound)
    "2d stride 2 runs to the row's end reflect": ConvCase((1, 3, 5, 64), 5, (3, 3),
                                                          stride=(2, 2), padding=(1, 1),
                                                          mode="reflect"),
    "2d 7x7 stride 2 (ResNet's stem)": ConvCase((1, 3, 11, 70), 8, (7, 7), stride=(2, 2),
                                                padding=(3, 3)),
    "2d K=576 7x7": ConvCase((1, 64, 7, 7), 33, (3, 3), padding=(1, 1)),
    "1d stride 2 dilation 2 reflect": ConvCase((2, 7, 23), 9, (3,), stride=(2,), padding=(2,),
                                               dilation=(2,), mode="reflect"),
    "3d groups 2 replicate": ConvCase((2, 4, 5, 6, 7), 6, (2, 3, 3), stride=(1, 2, 1),
                                      padding=(1, 1, 0), groups=2, mode="replicate"),
    "3d zeros stride 2": ConvCase((1, 3, 5, 5, 6), 5, (3, 3, 3), stride=(2, 2, 2),
                                  padding=(1, 1, 1), bias=False),
}
# the shapes every parameter set runs: rows shorter and longer than a run, groups, 1-D
SET_CASES = ["2d batch 2, K=45", "2d groups 2 stride 2 dilation 2 reflect",
             "2d wide rows (vector loads and edges)", "2d stride 2 wide rows (even-lane loads)",
             "2d stride 2 runs to the row's end reflect", "1d stride 2 dilation 2 reflect"]


def check(case: ConvCase, params: dict | None, rng) -> None:
    x, w, b = case.tensors(rng)
    y, layer = run_forced(case, x, w, b, NAME, params)
    assert (layer.algorithm, layer.algorithm_reason) == (NAME, "forced"), (
        f"the selector bound {layer.algorithm} ({layer.algorithm_reason})")
    assert_close(y, torch_conv(case, x, w, b))


@pytest.mark.parametrize("case", list(CASES))
def test_forced_matches_torch(case, rng):
    check(CASES[case], None, rng)


@pytest.mark.parametrize("params", ALL_SETS, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("case", SET_CASES)
def test_every_parameter_set(case, params, rng):
    check(CASES[case], params, rng)


@pytest.mark.parametrize("params", [conv_implicit_gemm.TILED_SETS[0],
                                    conv_implicit_gemm.BLOCKED_SETS[0]],
                         ids=lambda p: p["kernel"])
@pytest.mark.parametrize("activation, residual_first", [
    ("nn.LeakyReLU", True), ("nn.SiLU", False), ("nn.Hardswish", None)])
def test_fused_epilogue(params, activation, residual_first, rng):
    """Bias, then the residual and the activation in the store, in both orders."""
    from tests.opencl.conv_harness import activation_epilogue, run_algorithm, torch_reference

    x = rng.standard_normal((2, 5, 9, 19)).astype(np.float32)
    w = (rng.standard_normal((7, 5, 3, 3)) / 6).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    residual = None
    if residual_first is not None:
        residual = rng.standard_normal((2, 7, 9, 19)).astype(np.float32)
    options = {"negative_slope": 0.1} if activation == "nn.LeakyReLU" else {}
    epilogue = activation_epilogue(activation, residual is not None, bool(residual_first),
                                   **options)
    torch_activation = {"nn.LeakyReLU": nn.LeakyReLU(0.1), "nn.SiLU": nn.SiLU(),
                        "nn.Hardswish": nn.Hardswish()}[activation]
    y = run_algorithm(NAME, x, w, b, params=params, epilogue=epilogue, residual=residual,
                      padding=1)
    expected = torch_reference(x, w, b, padding=1, activation=torch_activation,
                               residual=residual, residual_first=bool(residual_first))
    assert_close(y, expected)


def test_refuses_depthwise():
    depthwise = problem_of(ConvCase((1, 8, 6, 6), 16, (3, 3), groups=8))
    why = ALGORITHMS[NAME].unsupported(depthwise, None)
    assert why is not None and "depthwise" in why


def test_k_table_offsets():
    """k = ((c*KD + a)*KH + i)*KW + j -> (c*D*H*W, a*DD, i*DH, j*DW), without divisions."""
    problem = ConvProblem(n=1, c=4, cout=2, groups=2, size=(3, 5, 7), kernel=(2, 3, 2),
                          out=(2, 3, 6), stride=(1, 1, 1), dilation=(1, 2, 1),
                          pads=((0, 0), (0, 0), (0, 0)))
    table = conv_implicit_gemm.k_table(problem)
    assert table.shape == (2 * 12, 4)
    k = ((1 * 2 + 1) * 3 + 2) * 2 + 1
    assert table[k].tolist() == [3 * 5 * 7, 1, 2 * 2, 1]


@pytest.mark.parametrize("bad", [{"kernel": "tiled", "tile_m": 64}, {"kernel": "fast"},
                                 {"kernel": "blocked", "block_m": 8, "vec_n": 12}])
def test_bad_parameter_set_is_a_clear_error(bad, rng):
    case = CASES["2d batch 2, K=45"]
    x, w, b = case.tensors(rng)
    with pytest.raises(OperatorError, match=r"'implicit_gemm'.*invalid.*expected kernel"):
        run_forced(case, x, w, b, NAME, bad)


def test_cost_model_orders_parameter_sets():
    """The first parameter set is the cheapest by the model, and made for the device kind."""
    algorithm = ALGORITHMS[NAME]
    problem = problem_of(ConvCase((1, 256, 14, 14), 256, (3, 3), padding=(1, 1)))
    sets = algorithm.parameter_sets(problem, None)     # None: a small CPU
    costs = [conv_implicit_gemm.estimate(problem, None, p) for p in sets]
    assert costs == sorted(costs) and sets[0]["kernel"] == "blocked"
    assert algorithm.cost(problem, None) == pytest.approx(costs[0])
    assert 1e-4 < costs[0] < 1.0    # 0.46 GFLOP on a 2-core CPU: milliseconds


class SmallNet(nn.Module):
    """conv -> relu -> grouped, strided conv with reflect padding."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 10, 3, padding=1)
        self.conv2 = nn.Conv2d(10, 6, 3, stride=2, padding=1, groups=2, padding_mode="reflect")

    def forward(self, x):
        return self.conv2(torch.relu(self.conv1(x)))


@pytest.mark.slow
def test_pnnx_export_forced(export_model, rng):
    """A small exported model, every convolution forced to implicit_gemm."""
    torch.manual_seed(0)
    net = SmallNet().eval()
    x = torch.randn(2, 3, 13, 17)
    with torch.no_grad():
        expected = net(x).numpy()
    path = export_model("implicit_gemm_net", net, (x,))
    import kuiper
    from kuiper.layers.opencl_conv import algorithms as conv_algorithms

    with conv_algorithms.forced(NAME):
        graph = kuiper.load(path, backend="opencl")
        (y,) = graph.forward(x.numpy())
    chosen = {op.layer.algorithm for op in graph.operators if op.type == "nn.Conv2d"}
    assert chosen == {NAME}
    assert_close(y, expected)
