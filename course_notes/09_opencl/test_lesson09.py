"""Lesson 9: build, launch and check a ReLU kernel with pyopencl."""

import numpy as np
import pytest

from kuiper.course.lessons import check_array, implementation, require_opencl
from kuiper.layers.opencl_base import round_up

REFERENCE = {"relu_source": "clkernels/relu.cl"}
ex = implementation(__file__, REFERENCE)
# What `kuiper course check` says before it starts (2-core laptop CPU, PoCL): most of it
# builds a kernel per test and runs the demo model.
CHECK_TIME = "about 20 seconds"


@pytest.fixture(scope="module")
def runtime():
    require_opencl()
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime()


@pytest.fixture(scope="module")
def source():
    return ex.relu_source()  # called first: an untouched stub fails even without an OpenCL device


@pytest.fixture(scope="module")
def program(source, runtime):
    # KernelBuildError, if it does not compile, carries the compiler's log
    return runtime.build_source(source, [], "relu_source() of lesson 9")


def run_relu(runtime, program, x, spare):
    """y of `x` by the kernel, with `spare` marker elements after y that it must not touch."""
    import pyopencl as cl
    import pyopencl.array as cla

    queue = runtime.queue
    n = len(x)
    x_dev = cla.to_device(queue, x)
    y_dev = cla.to_device(queue, np.full(n + spare, 7.0, np.float32))
    kernel = cl.Kernel(program, "relu")
    kernel.set_args(x_dev.data, y_dev.data, np.int32(n))
    cl.enqueue_nd_range_kernel(queue, kernel, (round_up(n, 64),), None)
    return y_dev.get(queue)


@pytest.mark.parametrize("n", [1, 13, 64, 1000, 4097])
def test_relu_kernel(runtime, program, n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    spare = 64  # a margin after y, filled with a marker that no work-item may overwrite
    y = run_relu(runtime, program, x, spare)
    check_array(y[:n], np.maximum(x, 0), f"relu of {n} elements")
    check_array(y[n:], np.full(spare, 7.0, np.float32),
                f"y after element {n} (work-items with i >= n must not write)")


def test_relu_keeps_nan_and_infinities_as_pytorch_does(runtime, program):
    """torch.relu(NaN) is NaN: a NaN must not become 0 (OpenCL's fmax(NaN, 0.0f) is 0)."""
    import torch

    x = np.array([np.nan, -1.0, np.inf, -np.inf, 2.5, -0.0, np.nan, 0.0, 3.0], np.float32)
    y = run_relu(runtime, program, x, spare=0)
    check_array(y, torch.relu(torch.from_numpy(x)).numpy(), "relu of NaN, +-inf, +-0")


def test_relu_kernel_inside_a_model(runtime, program, monkeypatch):
    """Your kernel, bound by the real ReLU layer, running the demo model on OpenCL.

    With every graph pass, each ReLU of the demo is fused into the convolution or linear layer
    before it (lesson 13) and no relu kernel runs at all: this graph leaves fuse_epilogues
    out, and checks that every ReLU layer built its kernel from YOUR source."""
    import kuiper
    from kuiper.demo import DIGITS_PARAM, DIGITS_TEST
    from kuiper.graph.pipeline import PASS_NAMES
    from kuiper.opencl.device.runtime import OpenCLRuntime

    original = OpenCLRuntime.program
    yours = []   # one program per ReLU layer that asked for clkernels/relu.cl

    def program_with_yours(self, stem, options=()):
        if stem == "relu":
            yours.append(self.build_source(ex.relu_source(), list(options), "relu_source()"))
            return yours[-1]
        return original(self, stem, options)

    monkeypatch.setattr(OpenCLRuntime, "program", program_with_yours)
    images = np.load(DIGITS_TEST)["images"][:16]
    unfused = [name for name in PASS_NAMES if name != "fuse_epilogues"]
    cpu = kuiper.load(DIGITS_PARAM, input_shapes=[images.shape])(images)
    gpu = kuiper.load(DIGITS_PARAM, backend="opencl", input_shapes=[images.shape],
                      passes=unfused)
    relus = [op.name for op in gpu.plan.steps if op.type == "nn.ReLU"]
    assert len(relus) == 3 and len(yours) == len(relus), \
        f"the ReLU layers {relus} built {len(yours)} programs from relu_source()"
    check_array(gpu(images), cpu, "demo model logits on OpenCL with your relu", rtol=1e-4)
