"""NaN and infinities through every activation, clamp, min/max, max pooling and expression
function, on both backends, against PyTorch.

OpenCL's fmax/fmin return the other operand when one is NaN (`fmax(NaN, 0) == 0`) and
`clamp` is built on them, while PyTorch propagates NaN through relu, clamp, max ... A kernel
written with them turns a NaN into a number without any error: these tests feed NaN, +inf and
-inf (next to ordinary numbers) to each operator and compare element by element, NaN equal to
NaN (kuiper.testing.assert_close).
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper.testing import assert_close, run_operator
from tests.conftest import opencl_available
from tests.layers.test_activation import CASES as ACTIVATIONS

# Every special value, and ordinary ones around the kinks, in an awkward shape (3 x 7).
SPECIALS = np.array([np.nan, np.inf, -np.inf, -1e30, 1e30, -7.5, -3.0, -1.0, -0.25, 0.0, 0.25,
                     1.0, 3.0, 6.5, np.nan, -np.inf, np.inf, 0.5, -0.5, 2.0, -2.0],
                    np.float32).reshape(3, 7)


def torch_of(fn, x: np.ndarray) -> np.ndarray:
    """PyTorch's answer, computed in float64 and rounded to float32.

    Why float64: PyTorch's float32 GELU disagrees with itself at +inf (its vectorised loop
    gives NaN, its scalar loop and float64 give inf, the mathematical limit); in float64 every
    activation takes its one, mathematical, value at the special points.
    """
    with np.errstate(all="ignore"):
        return fn(torch.from_numpy(x).double()).numpy().astype(x.dtype)


@pytest.mark.parametrize("op_type,params,fn", ACTIVATIONS,
                         ids=[f"{t}-{i}" for i, (t, _, _) in enumerate(ACTIVATIONS)])
def test_activation_nan_inf(backend, op_type, params, fn):
    (y,) = run_operator(op_type, [SPECIALS], params, backend=backend)
    assert_close(y, torch_of(fn, SPECIALS), what=f"{op_type} {params}")


@pytest.mark.parametrize("op_type", ["nn.ReLU", "F.relu"])
def test_relu_nan_inf(backend, op_type):
    (y,) = run_operator(op_type, [SPECIALS], backend=backend)
    assert_close(y, torch_of(F.relu, SPECIALS))


CLAMPS = [({"min": -1.5, "max": 2.5}, lambda x: torch.clamp(x, -1.5, 2.5)),
          ({"min": None, "max": 0.0}, lambda x: torch.clamp(x, max=0.0)),
          ({"min": 1.0, "max": None}, lambda x: torch.clamp(x, min=1.0)),
          ({"min": 2.0, "max": -1.0}, lambda x: torch.clamp(x, 2.0, -1.0))]


@pytest.mark.parametrize("params,fn", CLAMPS)
def test_clamp_nan_inf(backend, params, fn):
    (y,) = run_operator("torch.clamp", [SPECIALS], params, backend=backend)
    assert_close(y, torch_of(fn, SPECIALS))


@pytest.mark.parametrize("op_type,fn", [("aten::clamp_min", torch.clamp_min),
                                        ("aten::clamp_max", torch.clamp_max)])
def test_clamp_bound_input_nan_inf(backend, op_type, fn):
    bound = np.array(0.5, np.float32)
    (y,) = run_operator(op_type, [SPECIALS, bound], backend=backend, constants=[1])
    assert_close(y, torch_of(lambda t: fn(t, 0.5), SPECIALS))


# Every expression function that takes floats, with the special values in every operand.
UNARY = ["abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "erf",
         "exp", "expm1", "floor", "log", "log10", "log1p", "neg", "reciprocal", "round",
         "rsqrt", "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc"]
BINARY = ["add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2", "max",
          "maximum", "min", "minimum", "logaddexp"]
TORCH_NAMES = {"neg": torch.neg, "square": torch.square, "max": torch.maximum,
               "min": torch.minimum, "round": torch.round}


def torch_function(name):
    return TORCH_NAMES.get(name) or getattr(torch, name)


@pytest.mark.parametrize("name", UNARY)
def test_expression_unary_nan_inf(backend, name):
    (y,) = run_operator("pnnx.Expression", [SPECIALS], {"expr": f"{name}(@0)"},
                        backend=backend)
    assert_close(y, torch_of(torch_function(name), SPECIALS), what=name)


@pytest.mark.parametrize("name", BINARY)
def test_expression_binary_nan_inf(backend, name):
    # Every special value against every other: a 21 x 21 grid by broadcasting.
    a, b = SPECIALS.reshape(-1, 1), SPECIALS.reshape(1, -1)
    (y,) = run_operator("pnnx.Expression", [a, b], {"expr": f"{name}(@0,@1)"}, backend=backend)
    want = torch_function(name)(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    assert_close(y, want, what=name)


@pytest.mark.parametrize("literal", ["1e39", "-1e39", "3.5e38"])
def test_expression_literal_beyond_float32(backend, literal):
    """`mul(@0,1e39)`: the literal rounds to inf in float32 (the generator wrote `inf.0f`)."""
    (y,) = run_operator("pnnx.Expression", [SPECIALS], {"expr": f"mul(@0,{literal})"},
                        backend=backend)
    # In float32, as PyTorch multiplies a float32 tensor by a Python float: 0 * 1e39 is NaN.
    want = (torch.from_numpy(SPECIALS) * float(literal)).numpy()
    assert np.isnan(want[1, 2]) and np.isinf(want[1, 4])  # 0 * inf, 1 * inf
    assert_close(y, want)


@pytest.mark.parametrize("op_type,params,fn", [
    ("nn.MaxPool2d", {"kernel_size": 2}, lambda t: F.max_pool2d(t, 2)),
    ("nn.MaxPool1d", {"kernel_size": 3, "stride": 2}, lambda t: F.max_pool1d(t, 3, 2)),
    ("nn.AdaptiveMaxPool2d", {"output_size": (2, 3)},
     lambda t: F.adaptive_max_pool2d(t, (2, 3))),
])
def test_max_pooling_nan_inf(backend, op_type, params, fn):
    x = np.stack([SPECIALS, SPECIALS[:, ::-1]])[None] if "2d" in op_type else SPECIALS[None]
    x = np.ascontiguousarray(x)
    (y,) = run_operator(op_type, [x], params, backend=backend)
    assert_close(y, torch_of(fn, x))


class SpecialValuesNet(torch.nn.Module):
    """relu, relu6, hardtanh, clamp, max/min expressions and max pooling, as pnnx writes them."""

    def forward(self, x):
        pooled = F.max_pool2d(x, 2)
        return (F.relu(x), F.relu6(x), F.hardtanh(x, -2.0, 2.0), torch.clamp(x, -1.0, 1.0),
                torch.maximum(x, x * 0.5) - torch.minimum(x, x * 2.0), pooled, x * 1e39)


@pytest.mark.slow
def test_special_values_pnnx_export(backend, export_model):
    x = torch.from_numpy(np.stack([SPECIALS[:, :6], SPECIALS[:, 1:]])[None])  # 1x2x3x6
    module = SpecialValuesNet()
    graph = kuiper.load(export_model("special_values", module, (x,)), backend=backend)
    for got, want in zip(graph.forward(x.numpy()), module(x)):
        assert_close(got, want.numpy())


# --- inputs at float32's maximum (issue 31) ---------------------------------------------------
# A transformer block fed float32's maximum: PyTorch and OpenCL gave NaN (a LayerNorm row's sum
# overflows), the CPU finite values (0.03125), because its norms computed in float64. Both
# backends now compute the statistics in float32 in two passes (layers/common/norm.py).
FLOAT32_MAX = float(np.finfo(np.float32).max)


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.up, self.down = torch.nn.Linear(8, 16), torch.nn.Linear(16, 8)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


@pytest.mark.slow
def test_a_transformer_block_at_float32s_maximum(backend, export_model):
    torch.manual_seed(0)
    module = Block().eval()
    path = export_model("block_at_max", module, (torch.rand(1, 5, 8),))
    x = np.full((1, 5, 8), FLOAT32_MAX, np.float32)
    with torch.no_grad():
        expected = module(torch.from_numpy(x)).numpy()
    assert np.isnan(expected).all()
    assert_close(kuiper.load(path, backend=backend)(x), expected)  # NaN equal to NaN


@pytest.mark.parametrize("op_type, params, fn", [
    ("nn.LayerNorm", {"normalized_shape": (6,), "eps": 1e-5, "elementwise_affine": False},
     lambda x: F.layer_norm(x, (6,))),
    ("nn.RMSNorm", {"normalized_shape": (6,), "eps": 1e-5, "elementwise_affine": False},
     lambda x: F.rms_norm(x, (6,), eps=1e-5)),
])
def test_norms_at_float32s_maximum_agree_with_pytorch(backend, op_type, params, fn):
    x = np.full((2, 4, 3, 6), FLOAT32_MAX, np.float32)
    x[0, 0, 0] = [-FLOAT32_MAX, 1.0, np.nan, np.inf, 0.0, -0.0]
    (y,) = run_operator(op_type, [x], params, backend=backend)
    with np.errstate(all="ignore"):
        expected = fn(torch.from_numpy(x)).numpy()
    assert_close(y, expected)


def test_group_and_instance_norm_agree_across_backends_at_float32s_maximum():
    """PyTorch's GroupNorm and InstanceNorm use Welford's update and give 0.0 for a row whose
    sum overflows, its LayerNorm NaN: no one answer. Kuiper's two backends give the same one."""
    x = np.full((2, 4, 3, 6), FLOAT32_MAX, np.float32)
    x[1] = np.linspace(-3, 3, 72, dtype=np.float32).reshape(4, 3, 6)
    params = {"num_groups": 2, "num_channels": 4, "eps": 1e-5, "affine": False}
    backends = ["cpu"] + (["opencl"] if opencl_available() else [])
    (cpu, *others) = [run_operator("nn.GroupNorm", [x], params, backend=b)[0] for b in backends]
    assert np.isnan(cpu[0]).all() and np.isfinite(cpu[1]).all()
    for other in others:
        assert_close(other, cpu)
