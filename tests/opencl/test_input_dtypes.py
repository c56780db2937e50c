"""Every input dtype on the OpenCL backend: computed as the CPU backend computes it, or refused
with a KuiperError naming the operator; never a float kernel run on another dtype's buffer.

The fuzzed case: `pnnx.Input in0 0 1 0 #0=(1,3,8,8)u8` followed by nn.ReLU. The ReLU kernel
reads 4-byte floats, so on the 1-byte buffer it read and wrote past the end (SIGSEGV), and an
int32 or float64 input came out silently wrong. Now the executor compares what every kernel
reads (OpenCL's argument types) with the dtypes bound to it (kuiper/opencl/device/element_types.py),
and a twin whose kernels cannot take a dtype runs its CPU layer (graph.fallbacks).
"""

import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import kuiper
from kuiper import KuiperError, OperatorError
from kuiper.opencl.device.element_types import INT_MAX, reads_correctly
from kuiper.testing import run_operator, write_operator_model, write_param
from tests.conftest import opencl_available

pytestmark = pytest.mark.skipif(not opencl_available(), reason="no OpenCL device")

DTYPES = [np.uint8, np.int8, np.int16, np.float16, np.bool_, np.float64, np.int64, np.int32,
          np.complex64]
# Float layers of several families: the guard is in the executor, so it covers them all.
OPERATORS = [("nn.ReLU", {}), ("F.relu", {}), ("nn.ReLU6", {}), ("nn.Sigmoid", {}),
             ("nn.Hardtanh", {"min_val": -2, "max_val": 3}), ("torch.clamp", {"min": -1, "max": 4}),
             ("nn.LeakyReLU", {"negative_slope": 0.2}), ("F.softmax", {"dim": 1}),
             ("nn.MaxPool2d", {"kernel_size": 2}), ("nn.AvgPool2d", {"kernel_size": 2}),
             ("pnnx.Expression", {"expr": "add(@0,@0)"}),
             ("pnnx.Expression", {"expr": "max(@0,2)"})]


def sample(dtype, rng) -> np.ndarray:
    """Values every dtype can hold, negative ones included (they wrap for uint8, as in torch)."""
    values = rng.integers(-9, 10, size=(1, 3, 8, 7))
    if dtype == np.complex64:
        return (values + 0.5j * values[..., ::-1]).astype(dtype)
    return values.astype(dtype) if dtype != np.bool_ else values > 0


def outcome(op_type, params, x, backend):
    """(dtype, values) of the output, or the exception the backend raised."""
    try:
        (y,) = run_operator(op_type, [x], params, backend=backend, allow_fallback=True)
    except Exception as e:  # noqa: BLE001 - the CPU backend's own errors are compared below
        return e
    return np.asarray(y)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op_type,params", OPERATORS,
                         ids=[f"{t}-{p.get('expr', '')}" for t, p in OPERATORS])
def test_every_dtype_matches_the_cpu_backend(rng, dtype, op_type, params):
    x = sample(dtype, rng)
    cpu, ocl = outcome(op_type, params, x, "cpu"), outcome(op_type, params, x, "opencl")
    if isinstance(cpu, Exception):  # e.g. relu of bools, which PyTorch refuses too
        assert isinstance(ocl, KuiperError) and "'op0'" in str(ocl), f"OpenCL raised {ocl!r}"
        # The activation families refuse by name on the CPU as well (input_dtypes.py); the
        # other families' CPU layers are outside this test (softmax of bools, avgpool of
        # complex numbers still fail inside NumPy there).
        if op_type not in ("F.softmax", "nn.MaxPool2d", "nn.AvgPool2d"):
            assert isinstance(cpu, KuiperError) and "'op0'" in str(cpu), f"CPU raised {cpu!r}"
        return
    assert not isinstance(ocl, Exception), f"OpenCL failed where the CPU did not: {ocl!r}"
    assert ocl.dtype == cpu.dtype and ocl.shape == cpu.shape
    np.testing.assert_array_equal(ocl, cpu) if cpu.dtype.kind != "f" else \
        np.testing.assert_allclose(ocl, cpu, rtol=1e-3 if cpu.dtype == np.float16 else 1e-5,
                                   atol=1e-3 if cpu.dtype == np.float16 else 1e-6)


def test_uint8_input_into_relu_runs_the_cpu_layer_with_the_reason(rng):
    """The minimal fuzzed model: a uint8 input straight into nn.ReLU."""
    x = sample(np.uint8, rng)
    with tempfile.TemporaryDirectory() as folder:
        graph = kuiper.load(write_operator_model(folder, "nn.ReLU", [x]), backend="opencl")
        np.testing.assert_array_equal(graph(x), x)  # relu of unsigned bytes: themselves
        (op,) = graph.fallbacks
        assert op.name == "op0" and "uint8" in op.layer.fallback_reason


def test_guard_catches_a_float_kernel_on_a_uint8_buffer(rng):
    """A twin that checks nothing (avgpool) is still caught by the executor's guard: the
    reason names the operand, its dtype, the kernel and what that kernel reads."""
    x = sample(np.uint8, rng)
    with tempfile.TemporaryDirectory() as folder:
        path = write_operator_model(folder, "nn.AvgPool2d", [x], {"kernel_size": 2})
        graph = kuiper.load(path, backend="opencl")
        reason = graph.fallbacks[0].layer.fallback_reason
    assert "input 0" in reason and "uint8" in reason and "reads float" in reason


@pytest.mark.parametrize("type_name,dtype,ok", [
    ("float*", "float32", True), ("float4*", "float32", True), ("uint*", "float32", True),
    ("int*", "float32", False), ("float*", "uint8", False), ("uchar*", "bool", True),
    ("float*", "int32", False), ("float*", "float64", False), ("half*", "float16", True),
    ("float*", "float16", False), ("char*", "int8", True), ("long*", "int64", True),
    ("float2*", "complex64", True), ("ulong*", "complex64", True), ("float*", "complex64", False),
    ("int", "float32", True),  # a scalar argument: nothing to compare
])
def test_element_type_rules(type_name, dtype, ok):
    assert reads_correctly(type_name, np.dtype(dtype)) == ok


def test_a_layer_may_declare_complex64_read_as_float_pairs():
    """An FFT kernel reading complex64 as interleaved floats says so (element_types)."""
    assert reads_correctly("float*", np.dtype(np.complex64), declared=("float",))


def write_model(folder: str, lines: list[str]) -> str:
    return write_param(folder, lines, {})   # no weights: an empty .bin


def test_a_string_expression_into_softmax_is_an_operator_error():
    """`expr=abc` is the string 'abc': pyopencl's AssertionError became an OperatorError."""
    with tempfile.TemporaryDirectory() as folder:
        path = write_model(folder, ["pnnx.Input in0 0 1 0 #0=(2,3)f32",
                                    "pnnx.Expression e0 1 1 0 1 expr=abc",
                                    "F.softmax sm 1 1 1 2 dim=0", "pnnx.Output out 1 0 2"])
        with pytest.raises(OperatorError, match=r"'sm'.*not a tensor but 'abc'"):
            kuiper.load(path, backend="opencl")


def test_a_list_of_tensors_is_an_operator_error():
    """`expr=[@0]` is a Python list holding a tensor (pyopencl's LogicError before)."""
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OperatorError, match=r"'op0'.*list of tensors"):
        run_operator("pnnx.Expression", [x], {"expr": "[@0]"}, backend="opencl")


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
@pytest.mark.parametrize("op_line", ["nn.ReLU r 1 1 e y", "nn.Hardtanh r 1 1 e y",
                                     "torch.clamp r 1 1 e y min=0.5 max=None"])
def test_a_constant_into_an_activation(backend, op_line):
    """`expr=erf(0)` is folded to the number 0.0: the CPU layers got a Python float (and failed
    on its missing .dtype); both backends now compute on it as a float32 scalar."""
    with tempfile.TemporaryDirectory() as folder:
        path = write_model(folder, ["pnnx.Input in0 0 1 0 #0=(2,3)f32",
                                    "pnnx.Expression ex 1 1 0 e expr=erf(0)", op_line,
                                    "pnnx.Output out 1 0 y"])
        y = kuiper.load(path, backend=backend)(np.ones((2, 3), np.float32))
    want = 0.5 if "clamp" in op_line else 0.0
    assert np.asarray(y).dtype == np.float32 and np.asarray(y).shape == () and y == want


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
@pytest.mark.parametrize("expr,want", [("add(1,2)", 3), ("mul(2.5,3)", 7.5)])
def test_constant_expression_is_a_python_number_on_both_backends(backend, expr, want):
    """What pnnx's generated module computes for `v = (1 + 2)`: a Python number, whose type
    decides the dtype; as a graph output, an array of that dtype (issue 31: the CPU returned
    the number itself, though the port declared an array)."""
    x = np.ones((2, 3), np.float32)
    (y,) = run_operator("pnnx.Expression", [x], {"expr": expr}, backend=backend)
    assert isinstance(y, np.ndarray) and y.shape == () and y == want
    assert y.dtype == (np.int64 if isinstance(want, int) else np.float32)


def test_more_elements_than_int32_indices_are_refused_by_name():
    """A 2**31 + 2 element bool tensor: the kernels' int indices would overflow (np.int32(n)
    raised a bare OverflowError in bind). Refused before the 2 GiB output is allocated."""
    with tempfile.TemporaryDirectory() as folder:
        path = write_model(folder, ["pnnx.Input in0 0 1 0 #0=(1,1)bool",
                                    "Tensor.expand ex 1 1 0 1 sizes=(2,1073741825)",
                                    "pnnx.Output out 1 0 1"])
        with pytest.raises(OperatorError, match=rf"'ex'.*2147483650 elements.*{INT_MAX}"):
            kuiper.load(path, backend="opencl")


class ByteImageNet(torch.nn.Module):
    """A model fed raw uint8 pixels, as the fuzzed one: relu and clamp keep the bytes."""

    def forward(self, x):
        return F.relu(x), torch.clamp(x, 2, 200), F.relu6(x)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_uint8_input_pnnx_export(backend, rng, export_model):
    x = torch.from_numpy(rng.integers(0, 256, size=(1, 3, 8, 8)).astype(np.uint8))
    path = export_model("byte_image", ByteImageNet(), (x,))
    assert "#0=(1,3,8,8)u8" in Path(path).read_text()
    graph = kuiper.load(path, backend=backend)
    for got, want in zip(graph.forward(x.numpy()), ByteImageNet()(x)):
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, want.numpy())
