"""Every activation of the activation stem against torch, on both backends.

Inputs mix a wide normal spread with the values where naive formulas break: large |x| (exp
overflows above 88), tiny |x| (exp(x) - 1 cancels) and the kinks of the piecewise functions.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import OperatorError
from kuiper.testing import assert_close, run_operator

# (pnnx type, params as pnnx writes them, the same activation in torch)
CASES = [
    ("nn.ReLU6", {}, F.relu6),
    ("F.relu6", {}, F.relu6),
    ("nn.LeakyReLU", {"negative_slope": 0.2}, lambda x: F.leaky_relu(x, 0.2)),
    ("F.leaky_relu", {}, F.leaky_relu),
    ("nn.Sigmoid", {}, torch.sigmoid),
    ("F.sigmoid", {}, torch.sigmoid),
    ("torch.sigmoid", {}, torch.sigmoid),
    ("nn.SiLU", {}, F.silu),
    ("F.silu", {}, F.silu),
    ("nn.Hardswish", {}, F.hardswish),
    ("F.hardswish", {}, F.hardswish),
    ("nn.Hardsigmoid", {}, F.hardsigmoid),
    ("F.hardsigmoid", {}, F.hardsigmoid),
    ("nn.GELU", {}, F.gelu),
    ("nn.GELU", {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
    ("F.gelu", {"approximate": "none"}, F.gelu),
    ("F.gelu", {"approximate": "tanh"}, lambda x: F.gelu(x, approximate="tanh")),
    ("nn.Tanh", {}, torch.tanh),
    ("F.tanh", {}, torch.tanh),
    ("torch.tanh", {}, torch.tanh),
    ("nn.ELU", {"alpha": 0.5}, lambda x: F.elu(x, 0.5)),
    ("F.elu", {}, F.elu),
    ("nn.CELU", {"alpha": 0.5}, lambda x: F.celu(x, 0.5)),
    ("F.celu", {"alpha": 1.5}, lambda x: F.celu(x, 1.5)),
    ("nn.SELU", {}, F.selu),
    ("F.selu", {}, F.selu),
    ("nn.Mish", {}, F.mish),
    ("F.mish", {}, F.mish),
    ("nn.Softplus", {"beta": 2, "threshold": 10}, lambda x: F.softplus(x, 2, 10)),
    ("F.softplus", {"beta": 0.5, "threshold": 15}, lambda x: F.softplus(x, 0.5, 15)),
    ("nn.Softplus", {}, F.softplus),
    ("nn.Hardtanh", {"min_val": -2, "max_val": 3}, lambda x: F.hardtanh(x, -2, 3)),
    ("F.hardtanh", {"min_val": -0.5, "max_val": 0.5}, lambda x: F.hardtanh(x, -0.5, 0.5)),
    ("nn.Hardtanh", {}, F.hardtanh),
    ("nn.Softsign", {}, F.softsign),
    ("F.softsign", {}, F.softsign),
    ("nn.LogSigmoid", {}, F.logsigmoid),
    ("F.logsigmoid", {}, F.logsigmoid),
    ("nn.Threshold", {"threshold": 0.1, "value": 20}, lambda x: F.threshold(x, 0.1, 20.0)),
    ("F.threshold", {"threshold": -0.2, "value": -1.0}, lambda x: F.threshold(x, -0.2, -1.0)),
    ("nn.Tanhshrink", {}, F.tanhshrink),
    ("F.tanhshrink", {}, F.tanhshrink),
    ("nn.Hardshrink", {"lambd": 0.3}, lambda x: F.hardshrink(x, 0.3)),
    ("F.hardshrink", {}, F.hardshrink),
    ("nn.Softshrink", {"lambd": 0.3}, lambda x: F.softshrink(x, 0.3)),
    ("F.softshrink", {"lambd": 0.0}, lambda x: F.softshrink(x, 0.0)),
    # RReLU at inference (training=False): a leaky ReLU with slope (lower + upper) / 2
    ("nn.RReLU", {"lower": 0.1, "upper": 0.42}, lambda x: F.rrelu(x, 0.1, 0.42)),
    ("nn.RReLU", {}, F.rrelu),
    ("F.rrelu", {"lower": 0.125, "upper": 0.3333}, lambda x: F.rrelu(x, 0.125, 0.3333)),
    ("F.rrelu", {"lower": 0.4, "upper": 0.4}, lambda x: F.rrelu(x, 0.4, 0.4)),
]

SPECIAL = [-100.0, -88.5, -30.0, -20.0, -6.0, -3.0, -1.0, -0.5, -1e-4, -1e-7, 0.0, 1e-7, 1e-4,
           0.3, 0.5, 1.0, 3.0, 6.0, 10.0, 15.0, 20.0, 30.0, 88.5, 100.0]


def _input(rng, shape):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    flat[:len(SPECIAL)] = np.array(SPECIAL, dtype=np.float32)[:flat.size]
    return x


@pytest.mark.parametrize("op_type, params, reference", CASES,
                         ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}"
                              for c in CASES])
def test_activation_matches_torch(backend, rng, op_type, params, reference):
    x = _input(rng, (2, 13, 5, 7))
    (y,) = run_operator(op_type, [x], params=params, backend=backend)
    assert_close(y, reference(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("op_type, params, reference", CASES,
                         ids=[f"{c[0]}-{'-'.join(f'{k}={v}' for k, v in c[1].items())}"
                              for c in CASES])
def test_activation_of_a_0d_input(backend, op_type, params, reference):
    # fuzz seed 8675309, case 15236: a GELU after a torch.var of the whole tensor (a 0-D
    # value) failed with a bare TypeError: NumPy makes a 0-D array a scalar after one
    # operation, and sigmoid, SiLU and GELU write into their temporaries
    for value in (0.7, -2.5):
        x = np.array(value, np.float32)
        (y,) = run_operator(op_type, [x], params=params, backend=backend)
        assert np.shape(y) == ()
        assert_close(y, reference(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("shape", [(1,), (3, 17), (1, 1, 1, 1), (2, 3, 1, 129), (5, 4, 3, 2, 3),
                                   (2, 197, 171)])  # the last: the CPU's GELU in blocks
@pytest.mark.parametrize("op_type, reference", [("nn.SiLU", F.silu), ("nn.GELU", F.gelu),
                                                ("F.softplus", F.softplus)])
def test_activation_any_shape(backend, rng, op_type, reference, shape):
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    (y,) = run_operator(op_type, [x], backend=backend)
    assert_close(y, reference(torch.from_numpy(x)).numpy())


@pytest.mark.parametrize("op_type, params, message", [
    ("nn.GELU", {"approximate": "fast"}, "expected one of none, tanh"),
    ("nn.LeakyReLU", {"negative_slope": "steep"}, "negative_slope"),
    ("nn.Threshold", {"threshold": 0.5}, "parameter 'value' is missing"),
    ("nn.CELU", {"alpha": 0.0}, "alpha=0"),
    ("nn.Softshrink", {"lambd": -0.5}, "should be >= 0"),
])
def test_activation_bad_params(backend, op_type, params, message):
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OperatorError, match=message):
        run_operator(op_type, [x], params=params, backend=backend)


class AllActivations(torch.nn.Module):
    """Module and functional spellings, as a real pnnx export writes them."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.mods = nn.ModuleList([
            nn.ReLU6(), nn.LeakyReLU(0.2), nn.Sigmoid(), nn.SiLU(), nn.Hardswish(),
            nn.Hardsigmoid(), nn.GELU(), nn.GELU(approximate="tanh"), nn.Tanh(), nn.ELU(0.5),
            nn.CELU(0.5), nn.SELU(), nn.Mish(), nn.Softplus(2, 10), nn.Hardtanh(-2, 3),
            nn.Softsign(), nn.LogSigmoid(), nn.Threshold(0.1, 20), nn.Tanhshrink(),
            nn.Hardshrink(0.3), nn.Softshrink(0.3)])

    def forward(self, x):
        return tuple(m(x) for m in self.mods) + (
            F.relu6(x), F.leaky_relu(x, 0.3), torch.sigmoid(x), F.silu(x), F.gelu(x),
            torch.tanh(x), F.elu(x, 0.7), F.celu(x, 1.5), F.selu(x), F.mish(x),
            F.softplus(x, 0.5, 15), F.hardtanh(x, -0.5, 0.5), F.logsigmoid(x),
            F.threshold(x, 0.2, -1.0), F.hardswish(x), F.hardsigmoid(x))


@pytest.mark.slow
def test_activation_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy((rng.standard_normal((2, 5, 4, 6)) * 4).astype(np.float32))
    module = AllActivations().eval()
    graph = kuiper.load(export_model("activations", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())


class RReLUs(torch.nn.Module):
    """nn.RReLU and F.rrelu as pnnx writes them (both in eval mode: no random slopes)."""

    def __init__(self):
        super().__init__()
        self.default, self.narrow = torch.nn.RReLU(), torch.nn.RReLU(lower=0.1, upper=0.42)

    def forward(self, x):
        return (self.default(x), self.narrow(x), F.rrelu(x), F.rrelu(x, 0.01),
                F.rrelu(x, 0.125, 0.3333))


@pytest.mark.slow
def test_rrelu_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy((rng.standard_normal((2, 5, 4, 7)) * 4).astype(np.float32))
    module = RReLUs().eval()
    graph = kuiper.load(export_model("rrelus", module, (x,)), backend=backend)
    assert not graph.fallbacks
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())


def test_gelu_erf_accuracy(backend, rng):
    """GELU's erf (clkernels/activation.h's kuiper_erf on OpenCL: two fitted polynomials and an
    exp; layers/cpu/activation.py's gelu_exact on NumPy: one polynomial and an exp, no clamp)
    against float64 math.erf on a dense sweep of [-12, 12], the OpenCL seam at x / sqrt(2) = 1
    and the infinities: within 3e-7 of erf (1.2e-7 and 2.6e-7 measured), plus float32 rounding
    of the product."""
    from math import erf

    sweep = np.linspace(-12.0, 12.0, 400_001, dtype=np.float32)
    seam = (np.float32(np.sqrt(2.0)) + np.arange(-64, 65, dtype=np.float32) * 1e-6)
    x = np.concatenate([sweep, seam, -seam, rng.standard_normal(10_000).astype(np.float32)])
    (y,) = run_operator("nn.GELU", [x], backend=backend)
    x64 = x.astype(np.float64)
    erf64 = np.array([erf(v / np.sqrt(2.0)) for v in x64])
    exact = 0.5 * x64 * (1.0 + erf64)
    bound = 0.5 * np.abs(x64) * 3e-7 + np.abs(exact) * 2 ** -23
    worst = np.max(np.abs(y.astype(np.float64) - exact) - bound)
    assert worst <= 0.0, f"GELU off its erf bound by {worst:.3g}"
    # the ends: x^2 overflowing (e^-inf = 0), 0.5 x + 0.5 |x| erf not overflowing at 3e38,
    # GELU(-inf) = -inf * 0 = NaN. Against the formula in float64: PyTorch's own float32 GELU
    # is not a reference there (torch 2.11's vectorised loop gives NaN at +inf, inf at 3e38).
    ends = np.float32([np.inf, -np.inf, np.nan, 3e38, -3e38, 1e20, -1e20, 0.0, -0.0])
    (y,) = run_operator("nn.GELU", [ends], backend=backend)
    with np.errstate(invalid="ignore"):
        want = [0.5 * v * (1.0 + (erf(v / np.sqrt(2.0)) if np.isfinite(v) else np.sign(v)))
                for v in ends.astype(np.float64)]
    np.testing.assert_array_equal(y, np.float32(want))


def test_cpu_gelu_in_blocks_is_the_whole_formula(rng):
    """The NumPy GELU evaluates large inputs block by block (activation.in_blocks): the same
    values, bit for bit, as one pass over the whole array, on a strided (transposed) input
    whose size is not a multiple of the block, and float64 stays float64."""
    from kuiper.layers.cpu.activation import BLOCK, gelu_exact, in_blocks

    x = (rng.standard_normal((3 * BLOCK // 100 + 7, 100)) * 4).astype(np.float32).T
    assert not x.flags.c_contiguous and x.size > 2 * BLOCK
    y = in_blocks(gelu_exact, x)
    assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_array_equal(y, gelu_exact(np.ascontiguousarray(x)))
    x64 = x.astype(np.float64)
    assert in_blocks(gelu_exact, x64).dtype == np.float64
