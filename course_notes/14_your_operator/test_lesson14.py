"""Lesson 14: LayerNorm2d as a plugin, against PyTorch on both backends.

The layers are loaded as a plugin, as a user of Kuiper loads theirs: the example plugin
(kuiper/examples/layernorm2d/layers.py) in the project's own test run, and under
`kuiper course check 14` a one-file plugin that registers YOUR classes in its place.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import kuiper
from kuiper.course.lessons import (
    check_array,
    implementation,
    quiet_output,
    require_opencl,
    student_mode,
)
from kuiper.examples.layernorm2d.modules import LayerNorm2d as TorchLayerNorm2d
from kuiper.testing import run_operator, write_operator_model

REFERENCE = {
    "LayerNorm2d": "kuiper.examples.layernorm2d.layers:LayerNorm2d",
    "LayerNorm2dOpenCL": "kuiper.examples.layernorm2d.layers:LayerNorm2dOpenCL",
}
ex = implementation(__file__, REFERENCE)
# What `kuiper course check` says before it starts (2-core laptop CPU, PoCL): most of it
# exports models with pnnx and runs `kuiper compare`.
CHECK_TIME = "about a minute"

TYPE = "kuiper.examples.layernorm2d.modules.LayerNorm2d"  # what pnnx writes for the module
EXAMPLE_PLUGIN = "kuiper.examples.layernorm2d.layers"
EXERCISES = Path(__file__).resolve().with_name("exercises.py")
CHECKOUT = Path(kuiper.__file__).resolve().parents[1]  # `import kuiper` works from there
RTOL = 1e-5

# Your exercises.py, made a plugin: it registers your classes for TYPE, replacing the example's
# (which the exercises import, so they are registered first). Loading it is what `plugins=`
# and `--plugin` do with any plugin of yours.
STUDENT_PLUGIN = '''"""Lesson 14's exercises.py as a plugin (written by test_lesson14.py)."""
import importlib.util
import sys

import kuiper

spec = importlib.util.spec_from_file_location("lesson14_exercises", {exercises!r})
exercises = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = exercises
spec.loader.exec_module(exercises)
kuiper.register({type!r}, override=True)(exercises.LayerNorm2d)
kuiper.register(backend="opencl", override=True)(exercises.LayerNorm2dOpenCL)
'''


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """What `plugins=[...]` and `--plugin` are given: your plugin, or the example."""
    if not student_mode():
        return EXAMPLE_PLUGIN
    path = tmp_path_factory.mktemp("plugin") / "lesson14_plugin.py"
    path.write_text(STUDENT_PLUGIN.format(exercises=str(EXERCISES), type=TYPE))
    return str(path)


def weights(channels: int, eps: float, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"weight": rng.standard_normal(channels).astype(np.float32),
            "bias": rng.standard_normal(channels).astype(np.float32),
            "eps": np.array([eps], np.float32)}


def torch_layernorm2d(x: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """What PyTorch's module answers with these weights: the reference of every test."""
    module = TorchLayerNorm2d(w["weight"].size, eps=float(w["eps"][0]))
    module.weight.data = torch.from_numpy(w["weight"])
    module.bias.data = torch.from_numpy(w["bias"])
    with torch.no_grad():
        return module(torch.from_numpy(x)).numpy()


# (N, C, H, W, eps): one channel (the variance is 0: y is the bias), pixel counts that are not
# multiples of 64, a 1-pixel plane, and an eps large enough that ignoring it shows.
CASES = [(1, 1, 3, 5, 1e-5), (2, 5, 7, 3, 1e-6), (3, 13, 1, 17, 0.5), (1, 32, 9, 11, 1e-3)]
IDS = [f"{n}x{c}x{h}x{w}-eps{eps:g}" for n, c, h, w, eps in CASES]


def run_layernorm2d(plugin, backend, x, w):
    (y,) = run_operator(TYPE, [x], weights=w, backend=backend, plugins=[plugin])
    assert y.dtype == np.float32, f"LayerNorm2d on {backend}: dtype {y.dtype}, expected float32"
    return y


@pytest.mark.parametrize("n, c, h, w, eps", CASES, ids=IDS)
def test_cpu_layer_matches_pytorch(plugin, n, c, h, w, eps):
    x = np.random.default_rng(14).standard_normal((n, c, h, w)).astype(np.float32) * 3 + 1
    wts = weights(c, eps, seed=c)
    y = run_layernorm2d(plugin, "cpu", x, wts)
    check_array(y, torch_layernorm2d(x, wts), f"LayerNorm2d on the CPU, input {x.shape}, "
                f"eps {eps:g} (self.eps: the model's own)", rtol=RTOL)


@pytest.mark.parametrize("shape, dtype, why", [
    ((2, 6, 5, 5), np.float32, "5 channels, the input has 6"),
    ((5, 5, 5), np.float32, "a 3-D input"),
    ((2, 5, 4, 4), np.float64, "a float64 input"),
], ids=["channels", "3d", "float64"])
def test_infer_refuses_what_the_layer_cannot_compute(plugin, shape, dtype, why):
    x = np.ones(shape, dtype)
    with pytest.raises(kuiper.ShapeError) as caught:  # raised by infer, when the graph is built
        run_layernorm2d(plugin, "cpu", x, weights(5, 1e-5, seed=0))
    assert "op0" in str(caught.value), f"the error should name the operator: {caught.value}"
    assert "expected" in str(caught.value), (
        f"{why}: the message should say what was expected: {caught.value}")


# --- your OpenCL twin -----------------------------------------------------------------------------

SPARE = 1024  # floats after the output: more than a kernel without its guard writes there


@pytest.fixture(scope="module")
def by_hand(plugin, tmp_path_factory):
    """Your twin bound by hand, before any graph runs it: 70 pixels (not a multiple of 64) into
    a buffer with SPARE floats after the output. On a CPU device a kernel that writes past its
    buffer can crash the whole test run, so the OpenCL tests below stop here if it does."""
    require_opencl()
    import pyopencl.array as cla

    from kuiper.opencl.device.runtime import OpenCLRuntime

    x = np.random.default_rng(16).standard_normal((2, 3, 5, 7)).astype(np.float32)
    wts = weights(3, 1e-5, seed=1)
    folder = tmp_path_factory.mktemp("by_hand")
    graph = kuiper.load(write_operator_model(folder, TYPE, [x], weights=wts), plugins=[plugin])
    (op,) = [o for o in graph.operators if o.type == TYPE]
    layer = ex.LayerNorm2dOpenCL.from_operator(op)
    runtime = OpenCLRuntime()
    layer.attach(runtime)
    in_specs = [kuiper.TensorSpec(x.shape, np.float32)]
    out_specs = layer.infer(in_specs)
    x_dev = cla.to_device(runtime.queue, x)
    y_dev = cla.to_device(runtime.queue, np.full(x.size + SPARE, 7.0, np.float32))
    layer.bind([x_dev], [y_dev], in_specs, out_specs)
    assert layer.launches, "bind() should list a launch in self.launches"
    layer.enqueue(runtime.queue, [])
    y = y_dev.get(runtime.queue)
    if not np.all(y[x.size:] == 7.0):
        pytest.fail(f"your kernel wrote {int(np.sum(y[x.size:] != 7.0))} floats past the end "
                    "of the output: work-items past the last pixel (the global size is rounded "
                    "up) must do nothing. The other OpenCL tests would write past real buffers: "
                    "fix this first.")
    return x, wts, y[:x.size].reshape(x.shape), x_dev.get(runtime.queue)


def test_the_kernel_writes_only_the_output(by_hand):
    """Your bind and kernel on their own: right values, nothing written past the output (the
    fixture checks that), and the input left as it was."""
    x, wts, y, x_after = by_hand
    check_array(y, torch_layernorm2d(x, wts), "LayerNorm2d on OpenCL, bound by hand", rtol=RTOL)
    check_array(x_after, x, "the input (the kernel must not write it)")


@pytest.mark.parametrize("n, c, h, w, eps", CASES, ids=IDS)
def test_opencl_layer_matches_pytorch(plugin, by_hand, n, c, h, w, eps):
    x = np.random.default_rng(14).standard_normal((n, c, h, w)).astype(np.float32) * 3 + 1
    wts = weights(c, eps, seed=c)
    y = run_layernorm2d(plugin, "opencl", x, wts)  # an error if it fell back to the CPU layer
    check_array(y, torch_layernorm2d(x, wts), f"LayerNorm2d on OpenCL, input {x.shape}, "
                f"eps {eps:g}", rtol=RTOL)


@pytest.mark.parametrize("backend", ["cpu", "opencl"])
def test_a_large_mean_needs_two_passes(plugin, request, backend):
    """Mean 1000, spread 0.1: in float32, E[x^2] - E[x]^2 is all rounding error."""
    if backend == "opencl":
        request.getfixturevalue("by_hand")  # the kernel stays in its buffers
    rng = np.random.default_rng(15)
    x = (1000 + 0.1 * rng.standard_normal((2, 24, 5, 9))).astype(np.float32)
    wts = weights(24, 1e-6, seed=3)
    expected = torch_layernorm2d(x.astype(np.float64), {k: v.astype(np.float64)
                                                        for k, v in wts.items()})
    y = run_layernorm2d(plugin, backend, x, wts)
    # Against the exact answer (float64): float32 sums of numbers near 1000 are off by ~1e-4,
    # so two passes are good to ~1e-3 of the result here; one pass is off by 1 or is NaN.
    check_array(y, expected.astype(np.float32), f"LayerNorm2d on {backend} of values near 1000 "
                "(compute the variance in two passes)", rtol=1e-2)


# --- a whole model, exported with pnnx ------------------------------------------------------------

class Block(torch.nn.Module):
    """A ConvNeXt-style stem: two LayerNorm2d of different sizes and eps, around a GELU."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 12, 3, padding=1)
        self.norm1 = TorchLayerNorm2d(12, eps=1e-3)
        self.act = torch.nn.GELU()
        self.conv2 = torch.nn.Conv2d(12, 7, 2, stride=2)
        self.norm2 = TorchLayerNorm2d(7, eps=0.25)

    def forward(self, x):
        return self.norm2(self.conv2(self.act(self.norm1(self.conv1(x)))))


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    import pnnx

    torch.manual_seed(14)
    net = Block().eval()
    with torch.no_grad():
        for norm in (net.norm1, net.norm2):
            norm.weight.normal_()
            norm.bias.normal_()
    folder = tmp_path_factory.mktemp("block")
    cwd = os.getcwd()
    os.chdir(folder)  # pnnx writes its side files into the working directory
    try:
        with quiet_output(), torch.no_grad():
            pnnx.export(net, "model.pt", (torch.rand(1, 3, 18, 14),), moduleop=[TYPE])
    finally:
        os.chdir(cwd)
    return net, folder / "model.pnnx.param"


@pytest.mark.slow
def test_pnnx_keeps_each_module_as_one_operator(model):
    lines = [line for line in model[1].read_text().splitlines() if line.startswith(TYPE)]
    assert len(lines) == 2, "\n".join(lines)
    assert all("@eps=(1)f32" in line and "@weight=" in line for line in lines), lines


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["cpu", "opencl"])
@pytest.mark.parametrize("shape", [(1, 3, 18, 14), (2, 3, 21, 31)], ids=["export", "resized"])
def test_the_model_runs_like_pytorch(plugin, model, request, backend, shape):
    if backend == "opencl":
        request.getfixturevalue("by_hand")
    net, param = model
    x = np.random.default_rng(17).random(shape, dtype=np.float32)
    graph = kuiper.load(param, backend=backend, plugins=[plugin])
    assert graph.fallbacks == [], f"operators fell back to the CPU: {graph.fallbacks}"
    with torch.no_grad():
        expected = net(torch.from_numpy(x)).numpy()
    check_array(graph(x), expected, f"the exported block on {backend}, input {shape}",
                rtol=1e-4)


@pytest.mark.slow
def test_kuiper_compare_against_torch(plugin, model, request):
    """The command line: `kuiper compare MODEL --against torch --plugin YOURS`."""
    backends = "cpu"
    try:
        request.getfixturevalue("by_hand")
        backends = "cpu,opencl"
    except pytest.skip.Exception:
        pass  # without an OpenCL device: the CPU layer against PyTorch
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(CHECKOUT), env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "kuiper", "compare", str(model[1]), "--against",
                           "torch", "--backends", backends, "--plugin", plugin, "--json"],
                          capture_output=True, text=True, timeout=600, env=env,
                          cwd=model[1].parent)
    assert proc.stdout.strip(), f"kuiper compare printed nothing: {proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"], (
        f"kuiper compare found a difference (first at {report.get('first_bad')}):\n"
        f"{json.dumps(report.get('outputs'), indent=1)[:3000]}")
    assert {o["against"] for o in report["outputs"]} == set(backends.split(",")[1:]) | {"torch"}
