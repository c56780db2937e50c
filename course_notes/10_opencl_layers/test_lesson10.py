"""Lesson 10: a max-pooling kernel against PyTorch, then inside the real OpenCL layer."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from kuiper.course.lessons import check_array, implementation, require_opencl
from kuiper.layers.common.pooling import Window
from kuiper.layers.opencl_base import round_up
from kuiper.layers.opencl_helpers.pooling_args import window_params

REFERENCE = {"maxpool_source": "clkernels/maxpool.cl"}
ex = implementation(__file__, REFERENCE)


@pytest.fixture(scope="module")
def runtime():
    require_opencl()
    from kuiper.opencl.device.runtime import OpenCLRuntime

    return OpenCLRuntime()


@pytest.fixture(scope="module")
def source():
    # called first: an untouched stub fails even without an OpenCL device
    return ex.maxpool_source()


@pytest.fixture(scope="module")
def program(source, runtime):
    # KernelBuildError, if it does not compile, carries the compiler's log
    return runtime.build_source(source, [], "maxpool_source() of lesson 10")


# (kernel, stride, padding, dilation, ceil_mode) as (h, w) pairs
CONFIGS = [
    ((2, 2), (2, 2), (0, 0), (1, 1), False),
    ((3, 3), (2, 2), (1, 1), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (1, 1), False),
    ((3, 2), (2, 1), (1, 0), (1, 1), False),
    ((3, 3), (1, 1), (1, 1), (2, 2), False),
    ((3, 3), (2, 2), (0, 1), (1, 1), True),
    ((2, 2), (3, 3), (1, 1), (2, 1), True),
    ((5, 5), (1, 1), (2, 2), (1, 1), False),
]
IDS = [f"k{k[0]}x{k[1]}-s{s[0]}x{s[1]}-p{p[0]}x{p[1]}-d{d[0]}x{d[1]}" + ("-ceil" if c else "")
       for k, s, p, d, c in CONFIGS]


@pytest.mark.parametrize("kernel, stride, padding, dilation, ceil_mode", CONFIGS, ids=IDS)
def test_maxpool_kernel_matches_torch(runtime, program, kernel, stride, padding, dilation,
                                      ceil_mode):
    import pyopencl as cl
    import pyopencl.array as cla

    n_, c, h, w = 2, 5, 11, 9
    x = np.random.default_rng(10).standard_normal((n_, c, h, w)).astype(np.float32)
    windows = tuple(Window(k, s, p, d, ceil_mode)
                    for k, s, p, d in zip(kernel, stride, padding, dilation))
    oh, ow = windows[0].out_size(h), windows[1].out_size(w)
    n = n_ * c * oh * ow
    queue = runtime.queue
    x_dev = cla.to_device(queue, x)
    y_dev = cla.to_device(queue, np.full(n + 64, 7.0, np.float32))  # + a margin to keep
    k = cl.Kernel(program, "maxpool")
    k.set_args(x_dev.data, y_dev.data, *(np.int32(v) for v in (n, h, w, oh, ow)),
               *window_params(windows))
    cl.enqueue_nd_range_kernel(queue, k, (round_up(n, 64),), None)
    y = y_dev.get(queue)
    expected = F.max_pool2d(torch.from_numpy(x), kernel, stride, padding, dilation,
                            ceil_mode=ceil_mode).numpy()
    check_array(y[:n].reshape(expected.shape), expected,
                f"max pool (kernel {kernel}, stride {stride}, padding {padding}, dilation "
                f"{dilation}, ceil_mode {ceil_mode})", exact=True)
    check_array(y[n:], np.full(64, 7.0, np.float32), "y past the last output (must not write)")


def test_maxpool_kernel_inside_the_real_layer(runtime, program, monkeypatch):
    """layers/opencl/maxpool.py binds YOUR kernel; the demo model must still be right.

    On a CPU device (PoCL) the layer would bind another kernel of maxpool.cl, `maxpool_runs`
    (8 outputs per work-item): forcing `maxpool.KERNEL` makes every device bind `maxpool`,
    and the test checks that the demo's MaxPool built it from YOUR source."""
    import kuiper
    from kuiper.demo import DIGITS_PARAM, DIGITS_TEST
    from kuiper.layers.opencl import maxpool
    from kuiper.opencl.device.runtime import OpenCLRuntime

    original = OpenCLRuntime.program
    yours = []   # one program per MaxPool layer that asked for maxpool.cl's `maxpool`

    def program_with_yours(self, stem, options=()):
        if stem == "maxpool" and not options:
            yours.append(self.build_source(ex.maxpool_source(), [], "maxpool_source()"))
            return yours[-1]
        return original(self, stem, options)

    monkeypatch.setattr(OpenCLRuntime, "program", program_with_yours)
    monkeypatch.setattr(maxpool, "KERNEL", "maxpool")
    images = np.load(DIGITS_TEST)["images"][:16]
    cpu = kuiper.load(DIGITS_PARAM, input_shapes=[images.shape])(images)
    gpu = kuiper.load(DIGITS_PARAM, backend="opencl", input_shapes=[images.shape])
    pools = [op.name for op in gpu.plan.steps if op.type == "nn.MaxPool2d"]
    assert len(pools) == 1 and len(yours) == len(pools), \
        f"the MaxPool layers {pools} built {len(yours)} programs from maxpool_source()"
    check_array(gpu(images), cpu, "demo model logits on OpenCL with your maxpool", rtol=1e-4)
