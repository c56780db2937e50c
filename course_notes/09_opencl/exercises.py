"""Lesson 9 exercise: your first OpenCL kernel, ReLU.

Fill in the function, then run `kuiper course check 9`. The test builds your source with
pyopencl, launches it and compares the result with NumPy. The answer is the engine's own
kernel, clkernels/relu.cl: try first, read it after.
"""

from __future__ import annotations


def relu_source() -> str:
    """The OpenCL C source of a kernel with exactly this signature:

        __kernel void relu(__global const float *x, __global float *y, const int n)

    Work-item i (get_global_id(0)) writes y[i] = max(x[i], 0) for i < n, as torch.relu does:
    NaN stays NaN (careful: OpenCL's fmax(NaN, 0.0f) is 0, not NaN). The launch rounds the
    global size up to a multiple of 64, so work-items with i >= n exist too: they must neither
    read nor write anything.
    """
    raise NotImplementedError("lesson 9: return the ReLU kernel's source from relu_source()")
